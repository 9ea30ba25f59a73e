"""Capsule steps into a Capsule with `maxRunningPlans: 1` from a Capsule without a limit, on the
real test cluster: the children (and a Plan on the limited Capsule itself) are counted, so they
never run at once, and all succeed. Before, a child was never counted, so an author who may use
the unlimited Capsule ran any number of Plans on the limited one (reconciler/queue/slots.py)."""

from __future__ import annotations

import itertools
import json
import time
from datetime import datetime
from typing import Any

import pytest

from tests.conftest import Kube
from tests.e2e.conftest import capsule, plan, wait_plan

pytestmark = [pytest.mark.cluster, pytest.mark.node]

SHIP = {"id": "ship", "capsule": "deploy", "input": "go"}
NAP = [{"id": "nap", "shell": "sleep 3"}]


def _time(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _on_deploy(kube: Kube, ns: str) -> list[dict[str, Any]]:
    items = kube.get("plans", "-n", ns)["items"]
    return [p for p in items if p["spec"].get("capsule") == "deploy"]


def test_children_of_an_unlimited_capsule_never_run_at_once_on_a_one_slot_capsule(
    kube: Kube, ns: str, busybox: str
):
    kube.apply(
        capsule(busybox, name="deploy", plan={"steps": NAP}, concurrency={"maxRunningPlans": 1}),
        "-n",
        ns,
    )
    kube.apply(capsule(busybox, name="ci", spawn={"allow": ["deploy"]}), "-n", ns)
    for name in ("build-1", "build-2"):
        kube.apply(plan(name, SHIP, capsule="ci"), "-n", ns)
    kube.apply(plan("direct", *NAP, capsule="deploy"), "-n", ns)
    # while they run: a Plan on deploy waits, naming who runs; a waiting child's parent runs
    seen_waiting: dict[str, dict[str, Any]] = {}
    parents_running = set()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        on_deploy = _on_deploy(kube, ns)
        for p in on_deploy:
            status = p.get("status") or {}
            if "queue" in status:
                seen_waiting[p["metadata"]["name"]] = status
                parent = (p["metadata"].get("labels") or {}).get("planops.dev/parent")
                if parent:
                    phase = (kube.get("plan", parent, "-n", ns).get("status") or {}).get("phase")
                    if phase == "Running":
                        parents_running.add(parent)
        phases = [(p.get("status") or {}).get("phase") for p in on_deploy]
        if len(on_deploy) == 3 and all(ph in ("Succeeded", "Failed") for ph in phases):
            break
        time.sleep(0.3)
    ended = [wait_plan(kube, ns, p["metadata"]["name"], timeout=60) for p in _on_deploy(kube, ns)]
    children = [p for p in ended if "planops.dev/parent" in p["metadata"].get("labels", {})]
    assert len(ended) == 3 and len(children) == 2, [p["metadata"]["name"] for p in ended]
    for name in ("build-1", "build-2"):
        assert wait_plan(kube, ns, name, timeout=60)["status"]["phase"] == "Succeeded"
    spans = []
    for obj in ended:
        status = obj["status"]
        assert status["phase"] == "Succeeded", json.dumps(status)[:2000]
        (record,) = status["report"]["steps"]
        spans.append(
            (
                _time(status["startedAt"]),
                _time(record["startedAt"]),
                _time(record["finishedAt"]),
                _time(status["finishedAt"]),
                obj["metadata"]["name"],
            )
        )
    spans.sort()
    for (_, _, last, done, _), (start, first, _, _, _) in itertools.pairwise(spans):
        # one after another: a run starts after the one before it ended as the operator saw
        # it, and its step after that (step times are whole seconds)
        assert last <= done <= start and int(start) <= first, spans
    print("on deploy, one after another:", [(s[4], s[0], s[3]) for s in spans])
    assert seen_waiting, "with one slot and three Plans, some Plan waited"
    for name, status in seen_waiting.items():
        assert status["conditions"][0]["reason"] == "WaitingForSlot", (name, status)
        assert status["queue"]["capsule"] == "deploy" and status["queue"]["running"], status
    assert set(seen_waiting) - {"direct"}, f"a child waited: {sorted(seen_waiting)}"
    assert parents_running, "the parent of a waiting child stays Running"
