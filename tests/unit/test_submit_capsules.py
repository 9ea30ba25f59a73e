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

from .fakekube import FakeKube

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
FILES = [str(EXAMPLES / "capsule.yaml"), str(EXAMPLES / "fan-out-fan-in.yaml")]


def api(*capsules: dict[str, Any]) -> FakeKube:
    """The API server holding `capsules` in team-a."""
    kube = FakeKube()
    for c in capsules:
        kube.put("capsule", {**c, "metadata": {**c["metadata"], "namespace": "team-a"}})
    return kube


def created(kube: FakeKube) -> list[tuple[str, str, dict[str, Any]]]:
    """What submit created, in order: (kind, namespace, the object)."""
    return [
        (method.removeprefix("create_"), ns, kube.objects[(method[7:], ns, name)])
        for method, ns, name in kube.calls
        if method in ("create_capsule", "create_plan") and (method[7:], ns, name) in kube.objects
    ]


def submit(kube: FakeKube, files: list[str] = FILES) -> tuple[int, str, str]:
    from planops.cli.submit import cmd_submit  # noqa: PLC0415

    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        rc = asyncio.run(cmd_submit(kube, Namespace(files=files, wait=False, timeout=0), "team-a"))
    return rc, out.getvalue(), err.getvalue()


def given_capsule() -> dict[str, Any]:
    return yaml.safe_load((EXAMPLES / "capsule.yaml").read_text())


def test_a_missing_capsule_is_created_before_the_plan():
    kube = api()
    rc, out, err = submit(kube)
    assert (rc, err) == (0, "")
    assert out == "capsule.planops.dev/default created\nplan.planops.dev/fan-out-fan-in created\n"
    (what, ns, capsule), (then, _, plan) = created(kube)
    assert (what, then, ns) == ("capsule", "plan", "team-a")
    meta = capsule["metadata"]
    assert capsule["kind"] == "Capsule" and (meta["name"], meta["namespace"]) == (
        "default",
        "team-a",
    )
    assert set(meta) == {"name", "namespace", "uid", "resourceVersion"}  # the server's own
    assert capsule["spec"]["shell"]["allow"] == given_capsule()["spec"]["shell"]["allow"]
    assert plan["spec"]["capsule"] == "default"


def test_a_capsule_that_is_there_unchanged_is_left_alone():
    kube = api(given_capsule())
    rc, out, _ = submit(kube)
    assert rc == 0 and out.startswith("capsule.planops.dev/default unchanged\n")
    assert [c[0] for c in created(kube)] == ["plan"]


def test_a_capsule_that_is_there_with_another_spec_is_refused_and_nothing_is_created():
    other = given_capsule()
    other["spec"]["shell"]["allow"] = ["echo"]
    kube = api(other)
    rc, out, err = submit(kube)
    assert rc == 2 and out == "" and created(kube) == []
    assert "already exists in team-a with another spec" in err and "kubectl apply -f" in err


def test_a_user_who_may_not_create_capsules_is_told_how_and_no_plan_is_created():
    kube = api()
    kube.refuse("create_capsule", 403, 'capsules.planops.dev is forbidden: User "u"')
    rc, out, err = submit(kube)
    assert rc == 2 and created(kube) == [] and out == ""
    assert "refused capsule 'default' in team-a (403 Forbidden" in err
    assert "no plan was submitted" in err and "admin applies them" in err


def test_a_plan_naming_no_capsule_runs_under_the_only_capsule_given(tmp_path):
    cap = given_capsule()
    cap["metadata"]["name"] = "tools"
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(cap))
    (tmp_path / "p.yaml").write_text("id: solo\nsteps: [{id: a, shell: echo}]\n")
    kube = api()
    rc, _, _ = submit(kube, [str(tmp_path / "c.yaml"), str(tmp_path / "p.yaml")])
    assert rc == 0 and created(kube)[1][2]["spec"]["capsule"] == "tools"
