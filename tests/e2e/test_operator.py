"""Seed 1 through the running operator, with real Jobs on a real node.

Every behaviour is judged from what the cluster records: the Plan's report, its Events, the Jobs
(one per attempt) and their pods' start and finish times.
"""

from __future__ import annotations

import json
import time
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Kube
from tests.e2e.conftest import (
    Operator,
    capsule,
    cli,
    events,
    plan,
    start_operator,
    steps,
    wait_plan,
)

pytestmark = [pytest.mark.cluster, pytest.mark.node]


def jobs_of(kube: Kube, ns: str, name: str) -> list[dict[str, Any]]:
    return kube.get("jobs", "-n", ns, "-l", f"planops.dev/plan={name}")["items"]  # type: ignore[no-any-return]


def container_interval(kube: Kube, ns: str, job: str) -> tuple[datetime, datetime]:
    (pod,) = kube.get("pods", "-n", ns, "-l", f"job-name={job}")["items"]
    term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    parse = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))  # noqa: E731
    return parse(term["startedAt"]), parse(term["finishedAt"])


def test_a_plan_runs_to_success_with_output_conditions_and_events(kube: Kube, ns: str):
    kube.apply(plan("hello", {"id": "greet", "shell": "echo hello from planops"}), "-n", ns)
    obj = wait_plan(kube, ns, "hello")
    st = obj["status"]
    assert st["phase"] == "Succeeded" and st["progress"] == "1/1"
    assert st["report"]["completed"] is True and st["report"]["failedStep"] is None
    assert st["report"]["generation"] == 1
    assert steps(obj)["greet"]["output"] == "hello from planops"
    (cond,) = st["conditions"]
    assert (cond["type"], cond["status"]) == ("Succeeded", "True")
    assert events(kube, ns, "hello") == [
        "PlanStarted",
        "StepStarted",
        "StepSucceeded",
        "PlanSucceeded",
    ]
    # kubectl habits: printer columns and the short name
    row = kube.run("get", "pl", "hello", "-n", ns, "--no-headers").stdout.split()
    assert row[:3] == ["hello", "Succeeded", "1/1"]
    # no kopf bookkeeping on the user's object (it would show as drift in Argo CD), no finalizer
    meta = kube.get("plan", "hello", "-n", ns)["metadata"]
    assert not any("kopf" in k for k in (meta.get("annotations") or {}))
    assert not meta.get("finalizers")


def test_shell_steps_overlap_in_time_and_tool_steps_never_do(kube: Kube, ns: str):
    kube.apply(
        plan(
            "conc",
            {"id": "s1", "shell": "sleep 3"},
            {"id": "s2", "shell": "sleep 3"},
            {"id": "t1", "tool": "nap"},
            {"id": "t2", "tool": "nap"},
        ),
        "-n",
        ns,
    )
    obj = wait_plan(kube, ns, "conc", timeout=180)
    assert obj["status"]["phase"] == "Succeeded"
    by_step = {
        j["metadata"]["labels"]["planops.dev/step"]: j["metadata"]["name"]
        for j in jobs_of(kube, ns, "conc")
    }
    (a0, a1), (b0, b1) = (container_interval(kube, ns, by_step[s]) for s in ("s1", "s2"))
    assert a0 < b1 and b0 < a1, "the two shell steps did not run at the same time"
    (t10, t11), (t20, t21) = (container_interval(kube, ns, by_step[s]) for s in ("t1", "t2"))
    assert t20 >= t11 or t10 >= t21, "two tool steps of one plan overlapped"
    rep = steps(obj)
    first, second = sorted(("t1", "t2"), key=lambda s: rep[s]["startedAt"])
    assert rep[second]["startedAt"] >= rep[first]["finishedAt"]  # dispatched after it settled


def test_references_conditions_and_on_error(kube: Kube, ns: str):
    kube.apply(
        plan(
            "flow",
            {"id": "a", "shell": "echo hello"},
            {
                "id": "b",
                "tool": "echo-input",
                "dependsOn": ["a"],
                "input": {"x": "$a.output", "deep": ["$a.status"]},
            },
            {"id": "c", "shell": "sh -c 'echo broken; exit 3'", "onError": "continue"},
            {"id": "d", "shell": "echo ran", "dependsOn": ["c"], "if": "$c.status == 'failed'"},
            {"id": "e", "shell": "echo never", "dependsOn": ["c"], "if": "$c.status == 'success'"},
            {"id": "f", "shell": "false", "onError": "skip"},
        ),
        "-n",
        ns,
    )
    obj = wait_plan(kube, ns, "flow", timeout=180)
    rep = steps(obj)
    assert obj["status"]["phase"] == "Succeeded" and obj["status"]["report"]["completed"] is True
    assert json.loads(rep["b"]["output"]) == {"x": "hello", "deep": ["success"]}
    assert (rep["c"]["status"], rep["c"]["error"], rep["c"]["output"]) == (
        "failed",
        "exit code 3",
        "broken",
    )
    assert rep["d"]["status"] == "success"
    assert (rep["e"]["status"], rep["e"]["attempts"]) == ("skipped", 0)
    assert (rep["f"]["status"], rep["f"]["error"]) == ("skipped", "exit code 1")
    assert "e" not in {
        j["metadata"]["labels"]["planops.dev/step"] for j in jobs_of(kube, ns, "flow")
    }


def test_retries_run_as_new_jobs_one_per_attempt(kube: Kube, ns: str):
    flaky = "sh -c '[ \"$PLANOPS_ATTEMPT\" -ge 3 ] && echo third || { echo no; exit 1; }'"
    kube.apply(plan("retry", {"id": "flaky", "shell": flaky, "retries": 2}), "-n", ns)
    obj = wait_plan(kube, ns, "retry", timeout=180)
    rec = steps(obj)["flaky"]
    assert (rec["status"], rec["attempts"], rec["output"]) == ("success", 3, "third")
    attempts = sorted(
        int(j["metadata"]["labels"]["planops.dev/attempt"]) for j in jobs_of(kube, ns, "retry")
    )
    assert attempts == [1, 2, 3]


def test_on_error_fail_stops_the_plan_and_undispatched_steps_are_absent(kube: Kube, ns: str):
    kube.apply(
        plan(
            "stop",
            {"id": "a", "shell": "false"},
            {"id": "b", "shell": "echo b", "dependsOn": ["a"]},
        ),
        "-n",
        ns,
    )
    obj = wait_plan(kube, ns, "stop")
    st = obj["status"]
    assert st["phase"] == "Failed" and st["report"]["failedStep"] == "a"
    assert list(steps(obj)) == ["a"]
    assert st["conditions"][0]["status"] == "False"
    assert "PlanFailed" in events(kube, ns, "stop")


def test_a_refused_plan_creates_nothing_and_reads_invalid_with_every_error(kube: Kube, ns: str):
    kube.apply(
        plan(
            "bad",
            {"id": "a", "shell": "rm -rf /"},
            {"id": "a", "tool": "submit-plan"},
            {"id": "b", "tool": "nope", "dependsOn": ["ghost"]},
            {"id": "c", "shell": "echo x", "dependsOn": ["d"]},
            {"id": "d", "shell": "echo y", "dependsOn": ["c"]},
            {"id": "e", "capsule": "other", "input": {"not": "an objective"}},
        ),
        "-n",
        ns,
    )
    obj = wait_plan(kube, ns, "bad")
    st = obj["status"]
    assert st["phase"] == "Invalid"
    codes = sorted({e["code"] for e in st["errors"]})
    assert codes == [
        "capsule-input",
        "cycle",
        "duplicate-id",
        "plan-in-plan",
        "shell-not-allowed",
        "unknown-step",
        "unknown-tool",
    ]
    assert all({"code", "step", "path", "message"} <= set(e) for e in st["errors"])
    assert st["conditions"][0]["reason"] == "ValidationFailed"
    assert jobs_of(kube, ns, "bad") == []
    assert "ValidationFailed" in events(kube, ns, "bad")


def test_a_plan_whose_capsule_is_missing_is_invalid_until_the_capsule_exists(
    kube: Kube, ns: str, busybox: str
):
    kube.apply(plan("later", {"id": "a", "shell": "echo ok"}, capsule="late"), "-n", ns)
    obj = wait_plan(kube, ns, "later", phases=("Invalid",))
    assert [e["code"] for e in obj["status"]["errors"]] == ["no-capsule"]
    kube.apply(capsule(busybox, name="late"), "-n", ns)
    done = wait_plan(kube, ns, "later", phases=("Succeeded", "Failed"), timeout=60)
    assert done["status"]["phase"] == "Succeeded"


def test_events_alone_drive_a_plan_and_a_new_capsule_starts_the_plan_waiting_for_it(
    kube: Kube, kubeconfig: str, busybox: str, tmp_path: Path
):
    """With no resync to fall back on (an hour), every wake-up must come from an event: the
    Capsule's creation starts the Invalid plan, each step's pod ending dispatches the next."""
    ns = f"wake-{uuid.uuid4().hex[:8]}"  # not e2e-*: only this test's operator watches it
    kube.run("create", "namespace", ns)
    op = start_operator(kubeconfig, [ns], tmp_path / "op.log", "--resync-seconds", "3600")
    try:
        chain = [
            {"id": "a", "shell": "echo one"},
            {"id": "b", "shell": "echo two", "dependsOn": ["a"]},
        ]
        kube.apply(plan("later", *chain, capsule="late"), "-n", ns)
        wait_plan(kube, ns, "later", phases=("Invalid",))
        time.sleep(3)
        created = int(time.time())  # RFC 3339 times here are whole seconds
        kube.apply(capsule(busybox, name="late"), "-n", ns)
        done = wait_plan(kube, ns, "later", phases=("Succeeded", "Failed"), timeout=90)
        assert done["status"]["phase"] == "Succeeded", op.logs()[-3000:]
        # the run started when it could: its time as Invalid is not part of its duration
        started = datetime.fromisoformat(done["status"]["run"]["startedAt"].replace("Z", "+00:00"))
        assert started.timestamp() >= created
        assert [steps(done)[s]["output"] for s in "ab"] == ["one", "two"]
        # in time order, a step starts after the settlement that made it ready (describe agrees)
        assert events(kube, ns, "later")[-5:] == [
            "StepStarted",
            "StepSucceeded",
            "StepStarted",
            "StepSucceeded",
            "PlanSucceeded",
        ]
    finally:
        op.stop()
        kube.run("delete", "namespace", ns, "--wait=false", check=False)


def test_a_capsule_step_runs_a_child_plan_whose_result_becomes_the_steps(
    kube: Kube, ns: str, busybox: str
):
    kube.apply(
        capsule(
            busybox, name="helper", plan={"steps": [{"id": "work", "shell": "echo delegated"}]}
        ),
        "-n",
        ns,
    )
    kube.apply(capsule(busybox, name="default", spawn={"allow": ["helper"]}), "-n", ns)
    kube.apply(
        plan(
            "parent",
            {"id": "ask", "capsule": "helper", "input": "do the work"},
            {
                "id": "after",
                "tool": "echo-input",
                "dependsOn": ["ask"],
                "input": {"got": "$ask.output"},
            },
        ),
        "-n",
        ns,
    )
    obj = wait_plan(kube, ns, "parent", timeout=180)
    rep = steps(obj)
    assert (rep["ask"]["status"], rep["ask"]["output"]) == ("success", "delegated")
    assert json.loads(rep["after"]["output"]) == {"got": "delegated"}
    (child,) = kube.get("plans", "-n", ns, "-l", "planops.dev/parent=parent")["items"]
    meta = child["metadata"]
    assert (
        meta["ownerReferences"][0]["name"] == "parent" and meta["ownerReferences"][0]["controller"]
    )
    assert meta["labels"]["planops.dev/depth"] == "1"
    assert meta["annotations"]["planops.dev/objective"] == "do the work"
    assert (
        meta["annotations"]["planops.dev/spawned-by"]
        == kube.get("plan", "parent", "-n", ns)["metadata"]["uid"]
    )
    assert child["spec"]["capsule"] == "helper" and child["status"]["phase"] == "Succeeded"
    assert {"DelegationStarted", "DelegationFinished"} <= set(events(kube, ns, "parent"))


def test_readable_errors_for_oom_and_deadline(kube: Kube, ns: str, busybox: str):
    allow = ["sleep", "dd"]
    kube.apply(capsule(busybox, shell={"allow": allow}), "-n", ns)
    kube.apply(
        plan(
            "limits",
            {
                "id": "hog",
                "shell": "dd if=/dev/zero of=/dev/null bs=256M count=1",
                "resources": {"limits": {"memory": "32Mi"}},
                "onError": "continue",
            },
            {"id": "slow", "shell": "sleep 60", "timeoutSeconds": 2, "onError": "continue"},
        ),
        "-n",
        ns,
    )
    rep = steps(wait_plan(kube, ns, "limits", timeout=180))
    # containerd reports OOMKilled only when its OOM event beats the exit event: either reading
    assert rep["hog"]["error"] in (
        "OOMKilled: the container exceeded its memory limit (32Mi)",
        "exit code 137: killed (SIGKILL), most likely for exceeding its memory limit (32Mi); "
        "raise resources.limits.memory if the step needs more",
    )
    assert rep["slow"]["error"] == "deadline exceeded: the attempt ran longer than 2s"


def test_an_image_outside_the_allowlist_is_refused_before_anything_runs(kube: Kube, ns: str):
    kube.apply(plan("img", {"id": "x", "shell": "echo hi", "image": "evil/miner:1"}), "-n", ns)
    obj = wait_plan(kube, ns, "img")
    assert [e["code"] for e in obj["status"]["errors"]] == ["image-not-allowed"]
    assert jobs_of(kube, ns, "img") == []


def test_a_pod_that_cannot_start_fails_its_step_at_once_not_at_the_deadline(kube: Kube, ns: str):
    # allowed by the Capsule's pattern local/busybox:*, but not on the node: the pull goes to
    # loopback only (tests/cluster/node.sh) and fails; the step must not wait for its deadline
    kube.apply(
        plan("pull", {"id": "x", "shell": "echo hi", "image": "local/busybox:absent"}), "-n", ns
    )
    obj = wait_plan(kube, ns, "pull", timeout=60)
    rec = steps(obj)["x"]
    assert rec["status"] == "failed" and rec["error"].startswith("cannot start: ErrImagePull")
    assert "127.0.0.1:9" in rec["error"]
    assert jobs_of(kube, ns, "pull") == []  # the stuck Job was removed


def test_step_pods_are_admitted_under_the_restricted_pod_security_level(kube: Kube, ns: str):
    kube.run(
        "label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted", "--overwrite"
    )
    kube.apply(
        plan("psa", {"id": "a", "shell": "echo restricted"}, {"id": "b", "tool": "notes"}), "-n", ns
    )
    obj = wait_plan(kube, ns, "psa", timeout=120)
    assert obj["status"]["phase"] == "Succeeded", obj["status"]


def test_a_spec_change_starts_a_fresh_run_and_rerun_does_too(kube: Kube, ns: str):
    kube.apply(plan("gitops", {"id": "a", "shell": "echo one"}), "-n", ns)
    first = wait_plan(kube, ns, "gitops")
    assert steps(first)["a"]["output"] == "one"
    kube.apply(plan("gitops", {"id": "a", "shell": "echo two"}), "-n", ns)
    second = wait_plan(kube, ns, "gitops", until=lambda o: o["status"]["report"]["generation"] == 2)
    assert steps(second)["a"]["output"] == "two"
    assert second["status"]["run"]["id"] != first["status"]["run"]["id"]
    kube.run("annotate", "plan", "gitops", "-n", ns, "planops.dev/rerun=again", "--overwrite")
    third = wait_plan(
        kube,
        ns,
        "gitops",
        until=lambda o: (
            o["status"]["run"].get("rerun") == "again" and o["status"]["phase"] == "Succeeded"
        ),
    )
    assert third["status"]["run"]["id"] != second["status"]["run"]["id"]
    runs = {j["metadata"]["labels"]["planops.dev/run"] for j in jobs_of(kube, ns, "gitops")}
    assert third["status"]["run"]["id"] in runs


def test_the_metrics_endpoint_serves_real_values(kube: Kube, ns: str, operator: Operator):
    """Real values: each run and step metric counted under the test's namespace and Capsule
    (the tenant labels: docs/operations.md), and no label holds the Plan's name or its step id."""
    kube.apply(plan("m", {"id": "a-step", "shell": "sleep 4"}), "-n", ns)
    tenant = {"namespace": ns, "capsule": "default"}
    deadline = time.monotonic() + 60
    while (operator.sample("planops_steps_running", **tenant) or 0) < 1:
        assert time.monotonic() < deadline, "planops_steps_running never counted the running step"
        time.sleep(0.2)
    wait_plan(kube, ns, "m")
    while operator.sample("planops_steps_running", **tenant) != 0:
        assert time.monotonic() < deadline + 30, "planops_steps_running did not come back to 0"
        time.sleep(0.2)
    assert operator.sample("planops_plans_total", **tenant, result="succeeded") == 1
    assert operator.sample("planops_steps_total", **tenant, kind="shell", status="success") == 1
    assert operator.sample("planops_step_duration_seconds_count", **tenant, kind="shell") == 1
    assert operator.sample("planops_plan_duration_seconds_count", **tenant) == 1
    assert f'namespace="{ns}"' in operator.metrics()
    assert '"m"' not in operator.metrics() and '"a-step"' not in operator.metrics()
    text = operator.metrics()
    for name in (
        "planops_plans_total",
        "planops_steps_total",
        "planops_step_duration_seconds",
        "planops_dispatch_latency_seconds",
        "planops_reconcile_duration_seconds",
        "planops_status_patches_total",
        "planops_steps_running",
    ):
        assert name in text, name
    assert (operator.sample("planops_plans_total", result="succeeded") or 0) >= 1


def test_a_1000_step_plan_with_large_outputs_keeps_its_status_under_one_mib(
    kube: Kube, ns: str, busybox: str, kubeconfig: str
):
    """Every step's result is ~100 kB: 100 shell steps print it (real Jobs, their logs read), 900
    filter steps make it (results the operator computes itself). The status must stay bounded
    (the trimming rule of planops.reconciler.run.status), every PlanReport too, and every step must
    still be reported.
    parallelism keeps the node's 110-pod capacity from making queued Jobs outlive their deadline.
    (Filters keep this test's pod count, and so its time, modest: the node starts ~2 pods/s.)
    Each shell step prints three times its share: the node's containerd (1.6, Debian's) drops up
    to ~96 KiB of a busy container's last output under load (docs/operations.md), and what is
    left must still be more than the share, for the cut to be seen."""
    jobs, filters = 100, 900
    kube.apply(capsule(busybox, shell={"allow": ["sh"]}), "-n", ns)
    line = "planops-" + "p" * 91  # 100 bytes with its newline: few lines, little logging work
    big = [{"id": f"s{i}", "shell": f"sh -c 'yes {line} | head -c 300000'"} for i in range(jobs)]
    keep_all = {"value": "{{item}}", "op": "not_empty"}
    big += [
        {"id": f"f{i}", "filter": {"over": "{{input.words}}", "where": keep_all}}
        for i in range(filters)
    ]
    words = ["planops-" + "x" * 190] * 500  # ~100 kB of items
    kube.apply(plan("big", *big, parallelism=60, input={"words": words}), "-n", ns)
    obj = wait_plan(kube, ns, "big", timeout=900)
    st = obj["status"]
    assert st["phase"] == "Succeeded", st["conditions"]
    assert st["report"]["records"] == jobs + filters  # the status holds a summary of them
    size = len(json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode())
    assert size < 1 << 20, f"the Plan is {size} bytes"
    for chunk in kube.get("planreports", "-n", ns, "-l", "planops.dev/plan=big")["items"]:
        size = len(json.dumps(chunk, separators=(",", ":"), ensure_ascii=False).encode())
        assert size < 600 << 10, f"PlanReport {chunk['metadata']['name']} is {size} bytes"
    got = cli(kubeconfig, "get", "big", "-n", ns, "-o", "json")  # every record, assembled
    assert got.returncode == 0, got.stderr
    rep = {s["stepId"]: s for s in json.loads(got.stdout)["status"]["report"]["steps"]}
    assert len(rep) == jobs + filters
    assert rep["s0"]["output"].startswith(f"{line}\n{line}\n")
    assert " bytes cut here (the report's share)]" in rep["s0"]["output"]
    assert rep["f0"]["output"].startswith('{"count": 500')
    assert " bytes cut here (the report's share)]" in rep["f0"]["output"]


def test_a_job_the_api_server_rejects_fails_the_step_instead_of_retrying_forever(
    kube: Kube, ns: str, busybox: str
):
    # the Capsule's default limit is not a quantity: the API server refuses every Job (422)
    kube.apply(capsule(busybox, resources={"limits": {"memory": "lots"}}), "-n", ns)
    kube.apply(plan("rejected", {"id": "a", "shell": "echo never"}), "-n", ns)
    obj = wait_plan(kube, ns, "rejected", timeout=60)
    rec = steps(obj)["a"]
    assert obj["status"]["phase"] == "Failed"
    assert rec["error"].startswith("the cluster refused the step's Job:")
    assert "quantities must match" in rec["error"]


def test_a_plan_past_its_active_deadline_stops_and_fails_saying_why(kube: Kube, ns: str):
    kube.apply(
        plan(
            "late",
            {"id": "quick", "shell": "echo fast"},
            {"id": "slow", "shell": "sleep 300", "dependsOn": ["quick"]},
            {"id": "never", "shell": "echo never", "dependsOn": ["slow"]},
            # room for `quick` to run first on a loaded machine (the cluster layers run
            # side by side in CI): at 8 s it was stopped before its pod had started
            activeDeadlineSeconds=20,
        ),
        "-n",
        ns,
    )
    obj = wait_plan(kube, ns, "late", timeout=90)
    status = obj["status"]
    assert status["phase"] == "Failed"
    (cond,) = status["conditions"]
    assert cond["reason"] == "DeadlineExceeded" and "activeDeadlineSeconds (20s)" in cond["message"]
    rep = steps(obj)
    assert rep["quick"]["status"] == "success"
    assert rep["slow"]["status"] == "failed" and rep["slow"]["error"].startswith("stopped (")
    assert "never" not in rep
    assert kube.get("jobs", "-n", ns, "-l", "planops.dev/step=slow")["items"] == [] or all(
        j["metadata"].get("deletionTimestamp")
        for j in kube.get("jobs", "-n", ns, "-l", "planops.dev/step=slow")["items"]
    )
