"""Plans on simulated nodes (KWOK): the operator, the API server, the scheduler and the Job
controller are real; only the containers are not (tests/cluster/kwok.py says what a simulated
step does). A Capsule sends its steps there with nodeSelector and tolerations; a step `false`
fails with exit code 1; what a step prints is its namespace's ClusterLogs text, read by the
operator through the API server as from a kubelet, and handed to the next step.

The simulated nodes are the cluster's own when `tests/cluster/up --kwok-nodes N` started them;
otherwise (CI) the fixture starts a kwok process with two nodes of its own (named
sim-e2e-<random>: after the real node in name order) for this module only, on whatever cluster
the tests use, and removes them afterwards.

    .venv/bin/pytest -m kwok tests/e2e/test_kwok.py
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.cluster import kwok
from tests.conftest import Kube
from tests.e2e.conftest import (
    NS_PREFIX,
    STATUS_BOUND,
    Operator,
    capsule,
    cli,
    dense,
    plan,
    report_records,
    steps,
    wait_plan,
)

IMAGE = "local/busybox:1.35.0"  # never pulled: a simulated node runs nothing
# pytest -n: one worker runs this module (tests/xdist_groups.py)


@pytest.fixture(scope="module")
def simulated(kubeconfig: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[kwok.Kwok]:
    """kwok nodes to run on: the cluster's own (up --kwok-nodes), else two of our own."""
    name = f"sim-e2e-{uuid.uuid4().hex[:6]}"
    with kwok.simulated_nodes(kubeconfig, tmp_path_factory.mktemp("kwok"), name, 2, 300) as k:
        yield k


@pytest.fixture
def sim_ns(
    kube: Kube, operator: Operator, simulated: kwok.Kwok, request: pytest.FixtureRequest
) -> Iterator[str]:
    """A namespace the session operator watches, whose Capsule runs steps on simulated nodes
    only, and whose steps print GREETING."""
    name = f"{NS_PREFIX}kwok-{uuid.uuid4().hex[:8]}"  # the session operator watches it
    kube.run("create", "namespace", name)
    kube.apply(capsule(IMAGE, **kwok.PLACEMENT), "-n", name)
    simulated.output(name, GREETING)
    try:
        yield name
    finally:
        if request.node.rep_call.failed if hasattr(request.node, "rep_call") else False:
            print(f"--- operator log (last 6000 chars) ---\n{operator.logs()[-6000:]}")
        simulated.forget_output(name)
        kube.run("delete", "namespace", name, "--wait=false", check=False)


GREETING = '{"greeting": "hi from a simulated node"}'


def pods_by_step(kube: Kube, ns: str) -> dict[str, dict[str, Any]]:
    return {
        p["metadata"]["labels"]["planops.dev/step"]: p for p in kube.get("pods", "-n", ns)["items"]
    }


@pytest.mark.cluster
@pytest.mark.kwok
def test_a_plan_runs_on_simulated_nodes_with_a_failure_and_an_output_passed_on(
    kube: Kube, sim_ns: str
):
    kube.apply(
        plan(
            "sim",
            {"id": "hello", "shell": "echo hello"},
            {
                "id": "relay",
                "tool": "echo-input",
                "dependsOn": ["hello"],
                "input": {"got": "$hello.output"},
            },
            {"id": "broken", "shell": "false", "onError": "continue"},
            {"id": "after", "shell": "true", "dependsOn": ["broken"]},
        ),
        "-n",
        sim_ns,
    )
    obj = wait_plan(kube, sim_ns, "sim", timeout=60)
    rep = steps(obj)
    assert obj["status"]["phase"] == "Succeeded", json.dumps(obj["status"])[:2000]
    # what the node served as the step's log is the step's output
    assert rep["hello"]["output"] == GREETING  # its last line end is not the value's
    # ... and the next step got it, rendered into its Job by the operator
    (job,) = kube.get("jobs", "-n", sim_ns, "-l", "planops.dev/step=relay")["items"]
    env = {
        e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert json.loads(env["PLANOPS_INPUT"]) == {"got": GREETING}
    # a simulated `false` fails as a real one does
    assert (rep["broken"]["status"], rep["broken"]["error"]) == ("failed", "exit code 1")
    assert rep["after"]["status"] == "success"
    # every pod ran on a simulated node, none anywhere else
    sim = {n["metadata"]["name"] for n in kube.get("nodes", "-l", kwok.INSTANCE_LABEL)["items"]}
    placed = {s: p["spec"].get("nodeName") for s, p in pods_by_step(kube, sim_ns).items()}
    assert set(placed) == {"hello", "relay", "broken", "after"}
    assert set(placed.values()) <= sim, placed


@pytest.mark.cluster
@pytest.mark.kwok
def test_a_failing_simulated_step_fails_its_plan_naming_it(kube: Kube, sim_ns: str):
    kube.apply(
        plan(
            "fails",
            {"id": "ok", "shell": "sleep 1"},
            {"id": "no", "shell": "false", "dependsOn": ["ok"]},
        ),
        "-n",
        sim_ns,
    )
    obj = wait_plan(kube, sim_ns, "fails", timeout=60)
    assert obj["status"]["phase"] == "Failed"
    assert obj["status"]["report"]["failedStep"] == "no"
    rep = steps(obj)
    assert (rep["ok"]["status"], rep["no"]["error"]) == ("success", "exit code 1")


@pytest.mark.cluster
@pytest.mark.parametrize(
    ("spec", "why"),
    [
        (
            {"tolerations": [{"key": "a", "operator": "Exists", "value": "x"}]},
            "operator Exists takes no value",
        ),
        (
            {"tolerations": [{"key": "a", "tolerationSeconds": 5}]},
            "tolerationSeconds needs effect NoExecute",
        ),
        ({"tolerations": [{"value": "x"}]}, "without a key, operator is Exists"),
        ({"nodeSelector": {"a b": "x"}}, "every key is a label key"),
        ({"nodeSelector": {"zone": "a/b"}}, "spec.nodeSelector.zone"),
    ],
)
def test_the_api_server_refuses_a_capsule_placement_kubernetes_would_refuse(
    kube: Kube, namespace: str, crds: None, spec: dict[str, Any], why: str
):
    doc = capsule(IMAGE, name="placed", **spec)
    out = kube.run("apply", "-n", namespace, "-f", "-", input=json.dumps(doc), check=False)
    assert out.returncode != 0 and why in out.stderr, out.stderr


#: The large plan's size: 600 steps in CI (two PlanReport chunks, twelve times what the status
#: holds); PLANOPS_KWOK_LARGE_STEPS=N runs more (docs/performance.md). CI's 2,000 once left the
#: Job controller (20 requests/s) deleting 4,000 Jobs and pods while the next tests' Jobs waited.
LARGE_STEPS = int(os.environ.get("PLANOPS_KWOK_LARGE_STEPS", "600"))


@pytest.mark.cluster
@pytest.mark.kwok
def test_a_large_plan_runs_to_succeeded_with_an_exact_report_and_every_object_under_its_bound(
    kube: Kube, kubeconfig: str, sim_ns: str
):
    ids = [f"s{i:05d}" for i in range(LARGE_STEPS)]
    doc = plan("large", *({"id": i, "shell": "true"} for i in ids))
    kube.apply(doc, "-n", sim_ns, "--server-side")  # 20,000 steps: over the annotation bound
    obj = wait_plan(kube, sim_ns, "large", timeout=max(300, LARGE_STEPS / 4))
    st = obj["status"]
    assert st["phase"] == "Succeeded", json.dumps(st)[:3000]
    assert st["counts"] == {"success": LARGE_STEPS, "failed": 0, "skipped": 0}
    assert st["progress"] == f"{LARGE_STEPS}/{LARGE_STEPS}"
    assert st["report"]["records"] == LARGE_STEPS
    assert dense(st) <= STATUS_BOUND and dense(obj) < 1024 * 1024

    # the report objects: continuing one another, each under its bound, every record once
    records = report_records(kube, sim_ns, "large")
    assert sorted(r["stepId"] for r in records) == ids  # none lost, none twice
    assert {r["status"] for r in records} == {"success"}

    # the CLI assembles the whole report from the status and the chunks
    got = cli(kubeconfig, "get", "large", "-n", sim_ns, "-o", "json")
    assert got.returncode == 0, got.stderr
    full = json.loads(got.stdout)["status"]["report"]["steps"]
    assert sorted(s["stepId"] for s in full) == ids

    # its Jobs and pods go now, inside this test: left to the namespace's deletion, the Job
    # controller's rate limit would make the next tests' Jobs wait behind them. Not with
    # kubectl's own wait: it confirms one object at a time, and at 20,000 Jobs it was still
    # confirming after 600 s when every Job and pod had long been gone (about 6 minutes). The
    # deletions themselves are one request a Job, at kubectl's own rate limit.
    patience = max(300.0, LARGE_STEPS / 20)
    deadline = time.monotonic() + patience
    gone = ("delete", "jobs", "--all", "-n", sim_ns, "--cascade=foreground", "--wait=false")
    kube.run(*gone, timeout=patience)
    left = ["?"]
    while left and time.monotonic() < deadline:
        time.sleep(2)
        left = kube.run("get", "jobs,pods", "-n", sim_ns, "-o", "name").stdout.split()
    assert not left, f"{len(left)} Jobs and pods of the large plan not deleted in time"
