"""`finally` steps through the running operator, with real Jobs: the release example (a failed
deploy, then a notification and a cleanup that run anyway), a finally step that fails the plan,
and a cancel, after which no finally step runs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import Kube
from tests.e2e.conftest import cli, events, plan, steps, wait_plan

pytestmark = [pytest.mark.cluster, pytest.mark.node]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "release-finally.yaml"


def test_the_release_example_reports_its_finally_steps_after_the_failed_deploy(kube: Kube, ns: str):
    doc = yaml.safe_load(EXAMPLE.read_text())
    kube.apply(doc, "-n", ns)
    obj = wait_plan(kube, ns, "release-finally", timeout=180)
    st = obj["status"]
    assert st["phase"] == "Failed", st
    report = st["report"]
    assert (report["completed"], report["failedStep"]) == (False, "deploy")
    order = [s["stepId"] for s in report["steps"]]
    assert order[:2] == ["build", "deploy"] and sorted(order[2:]) == ["cleanup", "notify"]
    assert st["progress"] == "4/5"  # smoke never ran: the plan stopped at deploy
    rep = steps(obj)
    note = json.loads(rep["notify"]["output"].removeprefix("note - "), strict=False)
    assert (note["outcome"], note["failedStep"], note["deploy"]) == ("failed", "deploy", "failed")
    assert rep["cleanup"]["output"] == "removing the preview environment"
    # each finally step ran as a Job of its own, after the deploy settled
    jobs = kube.get("jobs", "-n", ns, "-l", "planops.dev/plan=release-finally")["items"]
    assert {j["metadata"]["labels"]["planops.dev/step"] for j in jobs} == {
        "build",
        "deploy",
        "notify",
        "cleanup",
    }
    assert rep["notify"]["startedAt"] >= rep["deploy"]["finishedAt"]
    reasons = events(kube, ns, "release-finally")
    assert reasons[0] == "PlanStarted" and reasons[-1] == "PlanFailed"


def test_a_failing_finally_step_fails_a_plan_whose_main_steps_completed(kube: Kube, ns: str):
    final = [
        {"id": "tidy", "shell": "ls /nothing-to-tidy"},
        {"id": "tell", "shell": "echo {{plan.status}}", "onError": "continue"},
    ]
    kube.apply(
        plan("cleanup-fails", {"id": "work", "shell": "echo done"}, **{"finally": final}), "-n", ns
    )
    obj = wait_plan(kube, ns, "cleanup-fails", timeout=180)
    report = obj["status"]["report"]
    assert obj["status"]["phase"] == "Failed"
    assert (report["completed"], report["failedStep"]) == (False, "tidy")
    assert report["steps"][0]["stepId"] == "work"
    assert steps(obj)["tell"]["output"] == "success"  # the main steps completed


def test_a_cancelled_plan_runs_no_finally_step(kube: Kube, kubeconfig: str, ns: str):
    final = [{"id": "notify", "shell": "echo never"}]
    kube.apply(
        plan("stopped", {"id": "slow", "shell": "sleep 120"}, **{"finally": final}), "-n", ns
    )
    wait_plan(
        kube,
        ns,
        "stopped",
        phases=("Running",),
        until=lambda o: bool(kube.get("jobs", "-n", ns, "-l", "planops.dev/plan=stopped")["items"]),
    )
    assert cli(kubeconfig, "cancel", "stopped", "-n", ns).returncode == 0
    obj = wait_plan(kube, ns, "stopped", phases=("Failed",), timeout=60)
    assert obj["status"]["conditions"][0]["reason"] == "Cancelled"
    assert [s["stepId"] for s in obj["status"]["report"]["steps"]] == ["slow"]
    jobs = kube.get("jobs", "-n", ns, "-l", "planops.dev/plan=stopped")["items"]
    assert "notify" not in {j["metadata"]["labels"]["planops.dev/step"] for j in jobs}
