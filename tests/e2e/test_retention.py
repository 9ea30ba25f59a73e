"""Retention on the real cluster, by the session's operator: a finished Plan deleted by its
ttlSecondsAfterFinished (not before), and podGC OnStepCompletion deleting each step's Job (and so
its pod, by the cluster's garbage collector) once the step settled, while `kubectl plan get` and
`logs` still show every step's recorded output."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from planops.engine.report import parse_rfc3339
from tests.conftest import Kube
from tests.e2e.conftest import Operator, cli, plan, steps, wait_plan

pytestmark = [pytest.mark.cluster]

FILTER = {
    "id": "f",
    "filter": {"over": [1, 2, 3], "where": {"value": "{{item}}", "op": "gt", "to": 1}},
}


def _until(what: str, check: Callable[[], Any], timeout: float, op: Operator) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if got := check():
            return got
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}\n{op.logs()[-4000:]}")


def _names(kube: Kube, kind: str, ns: str, selector: str) -> list[str]:
    return [o["metadata"]["name"] for o in kube.get(kind, "-n", ns, "-l", selector)["items"]]


def test_a_plan_with_a_ttl_of_3s_is_deleted_3s_after_it_finished(
    kube: Kube, ns: str, operator: Operator
):
    kube.apply(plan("short", FILTER, ttlSecondsAfterFinished=3), "-n", ns)
    done = wait_plan(kube, ns, "short", ("Succeeded",), timeout=60)
    finished = parse_rfc3339(done["status"]["finishedAt"])
    assert finished is not None
    _until(
        "the Plan deleted",
        lambda: kube.run("get", "plan", "short", "-n", ns, check=False).returncode != 0,
        60,
        operator,
    )
    gone = time.time()
    assert gone - finished >= 3 - 0.01, f"deleted {gone - finished:.2f}s after it finished"
    print(json.dumps({"deleted_after_seconds": round(gone - finished, 2)}))
    # its PlanReports (if any) and everything else it owned go with it
    _until(
        "its PlanReports gone",
        lambda: not _names(kube, "planreports", ns, "planops.dev/plan=short"),
        60,
        operator,
    )


@pytest.mark.node
def test_pod_gc_on_step_completion_collects_each_settled_steps_job_and_keeps_the_outputs(
    kube: Kube, ns: str, kubeconfig: str, operator: Operator
):
    kube.apply(
        plan(
            "gc",
            {"id": "a", "shell": "echo out-a"},
            {"id": "b", "shell": "sh -c 'sleep 6; echo out-b'", "dependsOn": ["a"]},
            podGC="OnStepCompletion",
        ),
        "-n",
        ns,
    )
    wait_plan(kube, ns, "gc", ("Running",), timeout=120, until=lambda o: "a" in steps(o))
    # a settled: its Job goes while b still runs (b sleeps 6 s), b's stays
    _until(
        "a's Job collected",
        lambda: not _names(kube, "jobs", ns, "planops.dev/plan=gc,planops.dev/step=a"),
        20,
        operator,
    )
    running = kube.get("plan", "gc", "-n", ns)
    assert running["status"]["phase"] == "Running", running["status"]
    assert _names(kube, "jobs", ns, "planops.dev/plan=gc,planops.dev/step=b")
    done = wait_plan(kube, ns, "gc", ("Succeeded", "Failed"), timeout=120)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    _until(
        "every Job collected",
        lambda: not _names(kube, "jobs", ns, "planops.dev/plan=gc"),
        30,
        operator,
    )
    _until(
        "every pod gone", lambda: not _names(kube, "pods", ns, "planops.dev/plan=gc"), 90, operator
    )
    # nothing was taken for a vanished attempt: each step ran once, and succeeded
    assert [
        (s["stepId"], s["status"], s.get("attempts", 1)) for s in done["status"]["report"]["steps"]
    ] == [
        ("a", "success", 1),
        ("b", "success", 1),
    ]
    got = cli(kubeconfig, "get", "gc", "-n", ns, "-o", "json")
    assert got.returncode == 0, got.stderr
    outputs = {
        s["stepId"]: s["output"] for s in json.loads(got.stdout)["status"]["report"]["steps"]
    }
    assert outputs == {"a": "out-a", "b": "out-b"}
    logs = cli(kubeconfig, "logs", "gc", "a", "-n", ns)
    assert logs.returncode == 0 and logs.stdout == "out-a\n", logs
    assert "recorded in the report" in logs.stderr
    follow = cli(kubeconfig, "logs", "-f", "gc", "-n", ns, timeout=60)
    assert follow.returncode == 0, follow
    assert "out-a" in follow.stdout and "out-b" in follow.stdout
    assert 'planops_jobs_collected_total{policy="OnStepCompletion"}' in operator.metrics()
