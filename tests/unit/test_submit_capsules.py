"""`kubectl plan submit capsule.yaml plan.yaml` applies the Capsules it is given, before any Plan
(it used to drop them, and the Plan went Invalid: no-capsule). The requests it builds, against a
fake API; the real API server's answers are tested in tests/e2e."""

from __future__ import annotations

import asyncio
import io
from argparse import Namespace
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import yaml

from planops.kube.client import ApiError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FILES = [str(EXAMPLES / "capsule.yaml"), str(EXAMPLES / "fan-out-fan-in.yaml")]


class FakeKube:
    def __init__(self, capsules: dict[str, Any] | None = None, refuse: ApiError | None = None):
        self.capsules = capsules or {}
        self.refuse = refuse
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    async def get_capsule(self, ns: str, name: str) -> dict[str, Any] | None:
        return self.capsules.get(name)

    async def create_capsule(self, ns: str, body: dict[str, Any]) -> dict[str, Any]:
        if self.refuse is not None:
            raise self.refuse
        self.calls.append(("capsule", ns, body))
        return body

    async def create_plan(self, ns: str, body: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(("plan", ns, body))
        return body


def submit(kube: FakeKube, files: list[str] = FILES) -> tuple[int, str, str]:
    from planops.cli.submit import cmd_submit  # noqa: PLC0415

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = asyncio.run(cmd_submit(kube, Namespace(files=files, wait=False, timeout=0), "team-a"))  # type: ignore[arg-type]
    return rc, out.getvalue(), err.getvalue()


def given_capsule() -> dict[str, Any]:
    return yaml.safe_load((EXAMPLES / "capsule.yaml").read_text())


def test_a_missing_capsule_is_created_before_the_plan():
    kube = FakeKube()
    rc, out, err = submit(kube)
    assert (rc, err) == (0, "")
    assert out == "capsule.planops.dev/default created\nplan.planops.dev/fan-out-fan-in created\n"
    (what, ns, capsule), (then, _, plan) = kube.calls
    assert (what, then, ns) == ("capsule", "plan", "team-a")
    assert capsule["kind"] == "Capsule" and capsule["metadata"] == {
        "name": "default",
        "namespace": "team-a",
    }
    assert capsule["spec"]["shell"]["allow"] == given_capsule()["spec"]["shell"]["allow"]
    assert plan["spec"]["capsule"] == "default"


def test_a_capsule_that_is_there_unchanged_is_left_alone():
    kube = FakeKube({"default": given_capsule()})
    rc, out, _ = submit(kube)
    assert rc == 0 and out.startswith("capsule.planops.dev/default unchanged\n")
    assert [c[0] for c in kube.calls] == ["plan"]


def test_a_capsule_that_is_there_with_another_spec_is_refused_and_nothing_is_created():
    other = given_capsule()
    other["spec"]["shell"]["allow"] = ["echo"]
    kube = FakeKube({"default": other})
    rc, out, err = submit(kube)
    assert rc == 2 and out == "" and kube.calls == []
    assert "already exists in team-a with another spec" in err and "kubectl apply -f" in err


def test_a_user_who_may_not_create_capsules_is_told_how_and_no_plan_is_created():
    kube = FakeKube(
        refuse=ApiError(403, "Forbidden", 'capsules.planops.dev is forbidden: User "u"')
    )
    rc, out, err = submit(kube)
    assert rc == 2 and kube.calls == [] and out == ""
    assert "refused capsule 'default' in team-a (403 Forbidden" in err
    assert "no plan was submitted" in err and "admin applies them" in err


def test_a_plan_naming_no_capsule_runs_under_the_only_capsule_given(tmp_path):
    cap = given_capsule()
    cap["metadata"]["name"] = "tools"
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cap))
    (tmp_path / "p.yaml").write_text("id: solo\nsteps: [{id: a, shell: echo}]\n")
    kube = FakeKube()
    rc, _, _ = submit(kube, [str(tmp_path / "c.yaml"), str(tmp_path / "p.yaml")])
    assert rc == 0 and kube.calls[1][2]["spec"]["capsule"] == "tools"
