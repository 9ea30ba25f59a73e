"""A Capsule with `maxRunningPlans: 1` (examples/one-deploy-at-a-time.yaml) on the real test
cluster, under two operator replicas: three Plans run strictly one after another, in creation
order, while the leader is killed in the middle; the count comes from the cluster, so the new
leader starts nothing the old one had not. Slots freed are taken at once, not at a resync: the
replicas resync every 300 s here."""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, Kube
from tests.e2e.conftest import EXAMPLE_IMAGE, wait_plan
from tests.faults.conftest import Pair

pytestmark = [pytest.mark.cluster, pytest.mark.node, pytest.mark.faults]

EXAMPLE = ROOT / "examples" / "one-deploy-at-a-time.yaml"
PLANS = ("deploy-1", "deploy-2", "deploy-3")


def _example(busybox: str) -> tuple[dict[str, Any], dict[str, Any]]:
    text = EXAMPLE.read_text().replace(EXAMPLE_IMAGE, busybox)  # image and `images`
    capsule, plan = yaml.safe_load_all(text)
    return capsule, plan


def _time(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


@pytest.fixture
def slow_resync_pair(
    kube: Kube, kubeconfig: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Pair]:
    request.getfixturevalue("crds")
    lease_ns = f"lease-{uuid.uuid4().hex[:8]}"
    kube.run("create", "namespace", lease_ns)
    p = Pair(kube, kubeconfig, tmp_path, lease_ns, "--resync-seconds", "300")
    try:
        yield p
    finally:
        failed = request.node.rep_call.failed if hasattr(request.node, "rep_call") else True
        if failed:
            print(p.logs())
        p.stop()
        kube.run("delete", "namespace", lease_ns, "--wait=false", check=False)


def test_three_plans_on_a_one_slot_capsule_run_one_after_another_across_a_failover(
    kube: Kube, slow_resync_pair: Pair, busybox: str
):
    pair = slow_resync_pair
    ns = f"f-{uuid.uuid4().hex[:10]}"
    kube.run("create", "namespace", ns)
    try:
        capsule, template = _example(busybox)
        kube.apply(capsule, "-n", ns)
        leader = pair.leader()
        for name in PLANS:  # created in this order (names sort the same on a shared second)
            doc = json.loads(json.dumps(template))
            doc["metadata"] = {"name": name}
            kube.apply(doc, "-n", ns)
        waiting = wait_plan(
            kube, ns, "deploy-3", phases=("Pending",), until=lambda o: "queue" in o["status"]
        )
        queue = waiting["status"]["queue"]
        assert queue["capsule"] == "prod" and queue["maxRunningPlans"] == 1
        assert queue["running"] + queue["ahead"] == ["deploy-1", "deploy-2"], queue
        assert waiting["status"]["conditions"][0]["reason"] == "WaitingForSlot"
        wide = kube.run("get", "plan", "deploy-3", "-n", ns, "-o", "wide").stdout
        assert "waiting for one of the 1 slot(s) of Capsule prod" in wide, wide
        wait_plan(kube, ns, "deploy-2", phases=("Running",), timeout=120)
        pair.kill(leader)  # in the middle: deploy-2 runs, deploy-3 waits
        ended = [wait_plan(kube, ns, name, timeout=180) for name in PLANS]
        assert pair.leader() is not leader
        spans = []
        for obj in ended:
            status = obj["status"]
            assert status["phase"] == "Succeeded", json.dumps(status)[:2000]
            records = status["report"]["steps"]
            spans.append(
                (
                    _time(status["startedAt"]),
                    min(_time(r["startedAt"]) for r in records),
                    max(_time(r["finishedAt"]) for r in records),
                    _time(status["finishedAt"]),
                )
            )
        for (_, _, last, done), (start, first, _, _) in itertools.pairwise(spans):
            # strictly one after another, in order: a run starts after the one before it ended
            # as the operator saw it, and its steps after that (their times are whole seconds)
            assert last <= done <= start and int(start) <= first, spans
        handoff = spans[1][0] - spans[0][3]
        print(f"deploy-1 finished -> deploy-2 started: {handoff:.2f}s (no failover between)")
        print(f"deploy-2 finished -> deploy-3 started: {spans[2][0] - spans[1][3]:.2f}s")
        assert handoff < 3, "a freed slot is taken at once, not at a resync"
        jobs = kube.get("jobs", "-n", ns)["items"]
        assert len(jobs) == 6  # two steps each, one Job an attempt: no run started twice
    finally:
        kube.run("delete", "namespace", ns, "--wait=false", check=False)
