"""`finally` steps through the running operator, with real Jobs: the release example (a failed
deploy, then a notification and a cleanup that run anyway), a finally step that fails the plan,
a cancel, after which no finally step runs, and the stops after which they do: the plan's
activeDeadlineSeconds and `kubectl plan cancel --run-finally`, within the finally steps' own
budget (finallyTimeoutSeconds), which stops those still running when it ends."""

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


def jobs_by_step(kube: Kube, ns: str, name: str) -> dict[str, dict]:
    found = kube.get("jobs", "-n", ns, "-l", f"planops.dev/plan={name}")["items"]
    return {j["metadata"]["labels"]["planops.dev/step"]: j for j in found}


def test_a_plan_past_its_deadline_stops_its_steps_and_runs_its_finally_step(kube: Kube, ns: str):
    final = [{"id": "notify", "shell": "echo {{plan.status}} {{plan.json.stopped}}"}]
    kube.apply(
        plan(
            "overdue",
            {"id": "slow", "shell": "sleep 300"},
            {"id": "never", "shell": "echo never", "dependsOn": ["slow"]},
            activeDeadlineSeconds=8,
            **{"finally": final},
        ),
        "-n",
        ns,
    )
    obj = wait_plan(kube, ns, "overdue", timeout=150)
    st = obj["status"]
    assert st["phase"] == "Failed", st
    (cond,) = st["conditions"]
    assert cond["reason"] == "DeadlineExceeded" and "activeDeadlineSeconds (8s)" in cond["message"]
    rep = steps(obj)
    assert set(rep) == {"slow", "notify"}  # never did not run
    assert (
        rep["slow"]["error"] == "stopped (the plan ran longer than its activeDeadlineSeconds (8s))"
    )
    assert rep["notify"]["status"] == "success"
    assert rep["notify"]["output"] == "failed DeadlineExceeded"
    # after the stop (a Job's creationTimestamp has whole seconds)
    assert rep["notify"]["startedAt"][:19] >= rep["slow"]["finishedAt"][:19]
    assert (st["report"]["completed"], st["report"]["failedStep"]) == (False, None)
    assert [h["reason"] for h in st["report"]["stopped"]] == ["DeadlineExceeded"]
    jobs = jobs_by_step(kube, ns, "overdue")
    assert "never" not in jobs
    # the finally step's Job got what the budget (600 s from the deadline) left, not an hour
    pod_deadline = jobs["notify"]["spec"]["template"]["spec"]["activeDeadlineSeconds"]
    assert 0 < pod_deadline <= 600
    assert "slow" not in jobs or jobs["slow"]["metadata"].get("deletionTimestamp")
    assert "PlanStopped" in events(kube, ns, "overdue")


def test_cancel_run_finally_runs_the_finally_steps_within_their_budget(
    kube: Kube, kubeconfig: str, ns: str
):
    final = [
        {"id": "tell", "shell": "echo {{plan.json.stopped}}"},
        {"id": "hang", "shell": "sleep 300"},
    ]
    kube.apply(
        plan(
            "tidy",
            {"id": "slow", "shell": "sleep 300"},
            finallyTimeoutSeconds=20,
            **{"finally": final},
        ),
        "-n",
        ns,
    )
    wait_plan(
        kube,
        ns,
        "tidy",
        phases=("Running",),
        until=lambda o: "slow" in jobs_by_step(kube, ns, "tidy"),
    )
    done = cli(kubeconfig, "cancel", "tidy", "--run-finally", "-n", ns)
    assert done.returncode == 0, done.stderr
    assert "its finally steps run" in done.stdout
    obj = wait_plan(kube, ns, "tidy", phases=("Failed",), timeout=150)
    st = obj["status"]
    assert st["conditions"][0]["reason"] == "Cancelled"
    rep = steps(obj)
    assert rep["slow"]["error"].startswith("cancelled (kubectl plan cancel --run-finally at ")
    assert rep["tell"]["output"] == "Cancelled"
    assert rep["hang"]["error"] == (
        "stopped (the finally steps ran longer than their finallyTimeoutSeconds (20s))"
    )
    assert [(h["reason"], h["steps"]) for h in st["report"]["stopped"]] == [
        ("Cancelled", "main"),
        ("DeadlineExceeded", "finally"),
    ]
    hang = jobs_by_step(kube, ns, "tidy").get("hang")
    assert hang is None or hang["metadata"].get("deletionTimestamp")
