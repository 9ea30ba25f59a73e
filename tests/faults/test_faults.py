"""Every fault has a defined outcome (docs/operations.md, "Faults"), injected on the real test
cluster: the leader killed, the API server or etcd stopped, the kubelet or containerd restarted,
a step's pod or Job deleted by hand, the operator cut off from the API server, the admission
webhook unreachable. The plan is seed 1's mix (chains, a fan-out, tool steps, a retry, a skip);
each run must end with the report an undisturbed run gives, and no step attempt with two Jobs.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from typing import Any

import pytest

from tests.conftest import Kube
from tests.e2e.conftest import capsule, plan, steps, wait_plan
from tests.e2e.test_restart import EXPECTED, STEPS
from tests.faults.conftest import Cluster, Pair, StandInNode, in_background, jobs_per_attempt

pytestmark = [pytest.mark.cluster, pytest.mark.node, pytest.mark.faults]


def exact(kube: Kube, ns: str, name: str, timeout: float = 240) -> dict[str, Any]:
    """The plan ends Succeeded with exactly the undisturbed report, one Job per attempt."""
    obj = wait_plan(kube, ns, name, phases=("Succeeded", "Failed"), timeout=timeout)
    assert obj["status"]["phase"] == "Succeeded", json.dumps(obj["status"], indent=1)[:3000]
    got = {}
    for sid, rec in steps(obj).items():
        out = rec["output"]
        got[sid] = (rec["status"], json.loads(out) if sid.startswith("t") else out, rec["attempts"])
    assert got == EXPECTED
    per_attempt = jobs_per_attempt(kube, ns, name)
    assert all(n == 1 for n in per_attempt.values()), per_attempt
    assert sorted(per_attempt) == sorted(
        (sid, str(a)) for sid, (_, _, n) in EXPECTED.items() for a in range(1, n + 1)
    )
    return obj


def started(kube: Kube, ns: str, name: str, step: str, timeout: float = 60) -> None:
    """Wait until `step` has a Job (the plan is under way)."""
    deadline = time.monotonic() + timeout
    while not any(s == step for s, _ in jobs_per_attempt(kube, ns, name)):
        assert time.monotonic() < deadline, f"step {step} never started"
        time.sleep(0.2)


def test_the_standby_finishes_the_plan_when_the_leader_is_killed(kube: Kube, pair: Pair, fns: str):
    leader = pair.leader()
    kube.apply(plan("survivor", *STEPS), "-n", fns)
    started(kube, fns, "survivor", "b")
    killed_at = pair.kill(leader)
    standby = pair.standby() if pair.holder() != leader.name else None
    obj = exact(kube, fns, "survivor")
    taken = pair.leader()
    assert taken is not leader and (standby is None or taken is standby)
    lease = kube.get("lease", pair.lease, "-n", pair.lease_ns)["spec"]
    assert lease["leaseTransitions"] >= 1
    taken_at = datetime.fromisoformat(lease["acquireTime"].replace("Z", "+00:00")).timestamp()
    print(f"failover: the standby took the Lease {taken_at - killed_at:.1f}s after the kill")
    assert obj["status"]["phase"] == "Succeeded"


@pytest.mark.parametrize("component", ["kube-apiserver", "etcd"])
def test_the_plan_finishes_exactly_when_the_api_server_or_etcd_is_down_for_10s(
    kube: Kube, pair: Pair, fns: str, cluster: Cluster, component: str
):
    pair.leader()
    kube.apply(plan("outage", *STEPS), "-n", fns)
    started(kube, fns, "outage", "a")
    cluster.restart(component, "--down", "10")
    exact(kube, fns, "outage")


@pytest.mark.parametrize("component", ["kubelet", "containerd"])
def test_a_step_running_while_the_kubelet_or_containerd_restarts_ends_defined(
    kube: Kube, pair: Pair, fns: str, cluster: Cluster, component: str
):
    pair.leader()
    work = "sh -c 'sleep 6; echo done-$PLANOPS_ATTEMPT'"
    kube.apply(plan("node", {"id": "long", "shell": work, "retries": 1}), "-n", fns)
    deadline = time.monotonic() + 60
    while not kube.get("pods", "-n", fns, "-l", "planops.dev/plan=node,planops.dev/step=long")[
        "items"
    ] or not any(
        (p.get("status") or {}).get("phase") == "Running"
        for p in kube.get("pods", "-n", fns, "-l", "planops.dev/plan=node")["items"]
    ):
        assert time.monotonic() < deadline, "the step's pod never ran"
        time.sleep(0.2)
    cluster.restart(component, "--down", "2")
    obj = wait_plan(kube, fns, "node", phases=("Succeeded", "Failed"), timeout=180)
    rec = steps(obj)["long"]
    # defined: the attempt survives the restart, or fails with a reason and is retried once
    assert rec["status"] == "success", rec
    assert rec["output"] == f"done-{rec['attempts']}"
    per_attempt = jobs_per_attempt(kube, fns, "node")
    assert all(n == 1 for n in per_attempt.values()) and len(per_attempt) == rec["attempts"]


def test_a_deleted_pod_or_job_fails_its_attempt_saying_so_and_a_retry_runs(
    kube: Kube, pair: Pair, fns: str
):
    pair.leader()
    once = "sh -c '[ \"$PLANOPS_ATTEMPT\" = 1 ] && sleep 120; echo attempt-$PLANOPS_ATTEMPT'"
    kube.apply(
        plan(
            "handled",
            {"id": "pod-retried", "shell": once, "retries": 1},
            {"id": "pod-lost", "shell": "sleep 120", "onError": "continue"},
            {"id": "job-lost", "shell": "sleep 120", "onError": "continue"},
        ),
        "-n",
        fns,
    )
    deadline = time.monotonic() + 60
    while True:
        pods = kube.get("pods", "-n", fns, "-l", "planops.dev/plan=handled")["items"]
        running = {
            p["metadata"]["labels"]["planops.dev/step"]
            for p in pods
            if (p.get("status") or {}).get("phase") == "Running"
        }
        if {"pod-retried", "pod-lost", "job-lost"} <= running:
            break
        assert time.monotonic() < deadline, f"steps never ran: {running}"
        time.sleep(0.3)
    sel = "planops.dev/plan=handled,planops.dev/step="
    kube.run("delete", "pods", "-n", fns, "-l", sel + "pod-retried", "--wait=false")
    kube.run("delete", "pods", "-n", fns, "-l", sel + "pod-lost", "--wait=false")
    kube.run("delete", "jobs", "-n", fns, "-l", sel + "job-lost", "--wait=false")
    obj = wait_plan(kube, fns, "handled", phases=("Succeeded", "Failed"), timeout=180)
    rep = steps(obj)
    assert rep["pod-retried"]["status"] == "success" and rep["pod-retried"]["attempts"] == 2
    assert rep["pod-retried"]["output"] == "attempt-2"
    lost = rep["pod-lost"]
    assert lost["status"] == "failed" and lost["attempts"] == 1
    assert lost["error"].startswith("its pod "), lost["error"]
    job = rep["job-lost"]
    assert job["status"] == "failed" and job["attempts"] == 1
    assert job["error"] == "its Job (or child Plan) was deleted before the attempt finished"
    assert jobs_per_attempt(kube, fns, "handled")[("job-lost", "1")] == 0  # not made again


def test_the_operator_cut_off_from_the_api_server_for_30s_reconnects_and_finishes(
    kube: Kube, pair: Pair, fns: str
):
    leader = pair.leader()
    kube.apply(plan("partition", *STEPS), "-n", fns)
    started(kube, fns, "partition", "a")
    cuts = [in_background(r.relay.cut, 30) for r in pair.replicas.values()]
    for t in cuts:
        t.join()
    exact(kube, fns, "partition", timeout=300)
    assert leader.op.proc.poll() is None  # nobody crashed: they reconnected


def test_with_the_admission_webhook_unreachable_nothing_unsafe_runs(
    kube: Kube, pair: Pair, fns: str
):
    pair.leader()
    name = f"planops-faults-{fns}"
    hook = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": name},
        "webhooks": [
            {
                "name": "plans.planops.dev",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Ignore",
                "timeoutSeconds": 3,
                "clientConfig": {"url": "https://127.0.0.1:1/plans"},  # nothing listens
                "rules": [
                    {
                        "apiGroups": ["planops.dev"],
                        "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["plans"],
                    }
                ],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": fns}},
            }
        ],
    }
    try:
        kube.apply(hook)
        bad = plan("bad", {"id": "x", "shell": "rm -rf /"}, {"id": "y", "tool": "nope"})
        kube.apply(bad, "-n", fns)  # Ignore: admitted while the webhook is down
        obj = wait_plan(kube, fns, "bad", phases=("Invalid",))
        assert {e["code"] for e in obj["status"]["errors"]} == {
            "shell-not-allowed",
            "unknown-tool",
        }
        assert kube.get("jobs", "-n", fns)["items"] == []  # the reconciler ran nothing
        hook["webhooks"][0]["failurePolicy"] = "Fail"
        kube.apply(hook)
        refused = kube.run(
            "apply",
            "-n",
            fns,
            "-f",
            "-",
            input=json.dumps(plan("later", {"id": "a", "shell": "echo"})),
            check=False,
        )
        assert refused.returncode != 0 and "failed calling webhook" in refused.stderr
    finally:
        kube.run("delete", "validatingwebhookconfiguration", name, check=False)


def test_steps_on_a_lost_node_fail_naming_it_and_are_retried_when_it_returns(
    kube: Kube, pair: Pair, fns: str, busybox: str, cluster: Cluster
):
    """The kubelet stops (the node is lost): past the node monitor's grace period the node is
    NotReady, past the Capsule's nodeFailureTolerationSeconds its pods are evicted, and each
    attempt fails naming the node; a retry waits for a node and runs when the node is back."""
    kube.apply(capsule(busybox, nodeFailureTolerationSeconds=5), "-n", fns)
    pair.leader()
    stand_in = StandInNode(kube)  # so that losing the real node is not "every node lost"
    stand_in.start()
    once = "sh -c '[ \"$PLANOPS_ATTEMPT\" = 1 ] && sleep 600; echo back-$PLANOPS_ATTEMPT'"
    kube.apply(
        plan(
            "lost",
            {"id": "retried", "shell": once, "retries": 1},
            {"id": "given-up", "shell": "sleep 600", "onError": "continue"},
        ),
        "-n",
        fns,
    )
    deadline = time.monotonic() + 60
    while (
        len(
            [
                p
                for p in kube.get("pods", "-n", fns, "-l", "planops.dev/plan=lost")["items"]
                if (p.get("status") or {}).get("phase") == "Running"
            ]
        )
        < 2
    ):
        assert time.monotonic() < deadline, "the steps never ran"
        time.sleep(0.3)
    cluster.restart("kubelet", "--stop")
    try:
        obj = wait_plan(
            kube,
            fns,
            "lost",
            phases=("Running",),
            timeout=180,
            until=lambda o: (
                "given-up" in steps(o) if (o.get("status") or {}).get("report") else False
            ),
        )
        given_up = steps(obj)["given-up"]
        assert given_up["status"] == "failed"
        assert "its pod was deleted while the step ran on node planops-node" in given_up["error"]
        assert "DeletionByTaintManager" in given_up["error"]
    finally:
        cluster.restart("kubelet", "--start")
    try:
        obj = wait_plan(kube, fns, "lost", phases=("Succeeded", "Failed"), timeout=240)
    finally:
        stand_in.stop()
    rec = steps(obj)["retried"]
    assert (rec["status"], rec["attempts"], rec["output"]) == ("success", 2, "back-2")
    assert obj["status"]["phase"] == "Succeeded"  # given-up failed with onError: continue
