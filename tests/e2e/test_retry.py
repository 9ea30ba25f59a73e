"""Retry from the failure on the real cluster: a Plan whose tool step fails (the Capsule's tool
exits 1) is retried with `kubectl plan retry` once the Capsule's owner fixed the tool; the new
run creates Jobs only for the failed step and what it stopped, and its report keeps the earlier
records of the steps before it. With `--as`: a retry is an author's act, refused by the API
server to a user without `use` on the Capsule (unlike a re-run), and whoever retries becomes the
recorded author."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.conftest import Kube
from tests.e2e.conftest import capsule, cli, events, plan, steps, wait_plan
from tests.e2e.test_tenancy import (  # noqa: F401 - policies and tenant: pytest fixtures
    AUTHOR,
    AUTHOR_KEY,
    apply_as_author,
    as_author,
    policies,
)
from tests.e2e.test_tenancy import tenant as tenant  # noqa: PLC0414 - a fixture, used by name

pytestmark = [pytest.mark.cluster, pytest.mark.node]
RETRY = "planops.dev/retry"


def gate_capsule(busybox: str, command: list[str], name: str = "default") -> dict[str, Any]:
    doc = capsule(busybox, name=name)
    doc["spec"]["tools"].append({"name": "gate", "image": busybox, "command": command})
    return doc


GATED = (
    {"id": "prepare", "shell": "echo prepared"},
    {"id": "gate", "tool": "gate", "dependsOn": ["prepare"]},
    {"id": "after", "shell": "echo after", "dependsOn": ["gate"]},
    {"id": "side", "shell": "echo side"},
)


def run_jobs(kube: Kube, ns: str, name: str, run: str) -> list[str]:
    """The steps of the Jobs of run `run` of Plan `name`."""
    got = kube.get("jobs", "-n", ns, "-l", f"planops.dev/plan={name},planops.dev/run={run}")
    return sorted(j["metadata"]["labels"]["planops.dev/step"] for j in got["items"])


def test_kubectl_plan_retry_runs_the_failed_step_and_what_it_stopped_only(
    kube: Kube, kubeconfig: str, ns: str, busybox: str
):
    kube.apply(gate_capsule(busybox, ["sh", "-c", "echo closed >&2; exit 1"]), "-n", ns)
    kube.apply(plan("gated", *GATED), "-n", ns)
    first = wait_plan(kube, ns, "gated")
    assert first["status"]["phase"] == "Failed", first["status"]
    old_run = first["status"]["run"]["id"]
    assert run_jobs(kube, ns, "gated", old_run) == ["gate", "prepare", "side"]
    r = cli(kubeconfig, "retry", "gated", "-n", ns)
    assert r.returncode == 0, r.stderr  # refused by nobody: but the tool still fails
    again = wait_plan(
        kube, ns, "gated", until=lambda o: o["status"]["run"].get("retryOf") == old_run
    )
    assert again["status"]["phase"] == "Failed"
    assert run_jobs(kube, ns, "gated", again["status"]["run"]["id"]) == ["gate"]

    # the Capsule's owner fixes the tool; a retry of the retry succeeds
    kube.apply(gate_capsule(busybox, ["sh", "-c", "echo open"]), "-n", ns)
    second_run = again["status"]["run"]["id"]
    r = cli(kubeconfig, "retry", "gated", "-n", ns)
    assert r.returncode == 0, r.stderr
    done = wait_plan(
        kube, ns, "gated", until=lambda o: o["status"]["run"].get("retryOf") == second_run
    )
    assert done["status"]["phase"] == "Succeeded", done["status"]
    new_run = done["status"]["run"]["id"]
    assert run_jobs(kube, ns, "gated", new_run) == ["after", "gate"]  # prepare, side: not again
    before, after = steps(first), steps(done)
    assert after["prepare"] == before["prepare"] and after["side"] == before["side"]
    assert after["gate"]["output"].strip() == "open" and after["gate"]["status"] == "success"
    order = [s["stepId"] for s in done["status"]["report"]["steps"]]
    kept = [s["stepId"] for s in first["status"]["report"]["steps"] if s["status"] == "success"]
    assert order == [*kept, "gate", "after"]  # the kept records first, in their order
    assert "RetryStarted" in events(kube, ns, "gated")

    # a Succeeded plan: refused by the CLI without --from, and by the operator
    r = cli(kubeconfig, "retry", "gated", "-n", ns)
    assert r.returncode == 2 and "succeeded: nothing failed to retry" in r.stderr
    kube.run("annotate", "--overwrite", "plan", "gated", "-n", ns, "planops.dev/retry=by-hand")
    wait_plan(kube, ns, "gated", until=lambda o: o["status"]["run"].get("retry") == "by-hand")
    assert "RetryRefused" in events(kube, ns, "gated")
    assert kube.get("plan", "gated", "-n", ns)["status"]["run"]["id"] == new_run

    # --from: a succeeded step again, and what depends on it
    r = cli(kubeconfig, "retry", "gated", "--from", "gate", "-n", ns)
    assert r.returncode == 0, r.stderr
    redo = wait_plan(
        kube, ns, "gated", until=lambda o: o["status"]["run"].get("retryOf") == new_run
    )
    assert redo["status"]["phase"] == "Succeeded"
    assert run_jobs(kube, ns, "gated", redo["status"]["run"]["id"]) == ["after", "gate"]


def test_a_retry_needs_use_on_the_capsule_and_records_who_asked_for_it(
    kube: Kube, tenant: str, busybox: str
):
    kube.apply(gate_capsule(busybox, ["sh", "-c", "exit 1"], name="safe"), "-n", tenant)
    done = apply_as_author(kube, tenant, plan("mine", *GATED, capsule="safe"))
    assert done.returncode == 0, done.stderr
    first = wait_plan(kube, tenant, "mine")
    assert first["status"]["phase"] == "Failed"
    kube.run("delete", "rolebinding", "alice-use-capsules", "-n", tenant)
    # alice may still annotate her Plan (plan-author), but a retry picks what runs again: an
    # author's act, refused by the API server without `use` (a re-run is not one)
    for value in ("t1", "t1:from=prepare"):
        done = as_author(kube, "annotate", "plan", "mine", "-n", tenant, f"{RETRY}={value}")
        assert done.returncode != 0
        assert f"alice may not use Capsule safe in namespace {tenant}" in done.stderr
    obj = kube.get("plan", "mine", "-n", tenant)
    assert RETRY not in obj["metadata"]["annotations"]
    assert obj["status"]["run"] == first["status"]["run"]
    # someone who may use `safe` (the admin) retries it: they become its recorded author, and
    # the operator, asking for them, starts the retried run
    kube.run("annotate", "plan", "mine", "-n", tenant, f"{RETRY}=t2")
    obj = kube.get("plan", "mine", "-n", tenant)
    assert json.loads(obj["metadata"]["annotations"][AUTHOR_KEY])["username"] != AUTHOR
    old_run = first["status"]["run"]["id"]
    obj = wait_plan(
        kube, tenant, "mine", until=lambda o: o["status"]["run"].get("retryOf") == old_run
    )
    assert obj["status"]["phase"] == "Failed"  # the gate still fails, but it ran again
    assert run_jobs(kube, tenant, "mine", obj["status"]["run"]["id"]) == ["gate"]
    assert "RetryStarted" in events(kube, tenant, "mine")
