"""A capsule step's child Plan on a Capsule with `maxRunningPlans`, checked without a cluster
(fakekube.FakeKube): it rides a slot only when a Capsule above it has a limit (an ancestor holds
a slot there); under unlimited Capsules alone it is counted and waits like any Plan, so an author
who may use an unlimited Capsule cannot run more Plans on a limited one than its limit. The rule
is reconciler.queue.slots'."""

from __future__ import annotations

import copy

from planops.api import names
from planops.kube.cache import WatchCache
from planops.reconciler.queue import slots, standing
from planops.reconciler.reconcile import Reconciler

from .harness import Cluster
from .test_capsule_concurrency import SLEEP, capsule_spec, cluster

SHIP = [{"id": "ship", "capsule": "deploy", "input": "go"}]


def _ci_and_deploy(ci_limit: int | None) -> Cluster:
    """`deploy` with one slot; `ci` (limit `ci_limit`) whose plans may spawn into it."""
    c = cluster(limit=None)
    c.capsule("deploy", capsule_spec(1, plan={"steps": SLEEP}))
    c.capsule("ci", capsule_spec(ci_limit, spawn={"allow": ["deploy"]}))
    return c


def _child_of(c: Cluster, parent: str) -> str:
    (name,) = [
        p["metadata"]["name"]
        for p in c.kube.of("plan")
        if slots.is_child(p) and p["metadata"]["ownerReferences"][0]["name"] == parent
    ]
    return name


def _events(c: Cluster, name: str) -> list[str]:
    return [e["reason"] for e in c.kube.events if e["involvedObject"]["name"] == name]


def test_children_of_unlimited_parents_never_run_at_once_on_a_one_slot_capsule():
    c = _ci_and_deploy(ci_limit=None)
    c.new_plan("build-1", 1, steps=SHIP, capsule="ci")
    c.new_plan("build-2", 2, steps=SHIP, capsule="ci")
    c.reconcile("build-1", "build-2")  # both parents run: ci has no limit
    first, second = _child_of(c, "build-1"), _child_of(c, "build-2")
    c.now += 1
    c.reconcile(second, first)
    assert len([n for n in (first, second) if c.jobs(n)]) == 1
    waiting = second if c.jobs(first) else first
    c.reconcile(waiting)  # (it may have been judged before the other child took the slot)
    status = c.status(waiting)
    assert status["phase"] == "Pending" and status["queue"]["capsule"] == "deploy"
    assert status["conditions"][0]["reason"] == "WaitingForSlot"
    running = first if waiting == second else second
    assert status["queue"]["running"] == [running], status
    # the parent waits for its step as for any child: Running, the step in flight
    parent = c.status("build-2" if waiting == second else "build-1")
    assert parent["phase"] == "Running"
    assert [f["stepId"] for f in parent["inFlight"]] == ["ship"]
    c.set_phase(running)
    c.reconcile(waiting)
    assert c.jobs(waiting) and "queue" not in c.status(waiting)


def test_a_direct_plan_waits_behind_a_child_of_an_unlimited_parent():
    c = _ci_and_deploy(ci_limit=None)
    c.new_plan("build", 1, steps=SHIP, capsule="ci")
    c.reconcile("build")
    child = _child_of(c, "build")
    c.reconcile(child)
    c.new_plan("direct", 2, capsule="deploy")
    c.reconcile("direct")
    assert c.jobs(child) and not c.jobs("direct")
    assert c.status("direct")["queue"]["running"] == [child]


def test_a_child_under_a_limited_ancestor_rides_its_slot():
    c = _ci_and_deploy(ci_limit=1)
    c.new_plan("holder", 1, capsule="deploy")
    c.new_plan("build", 2, steps=SHIP, capsule="ci")
    c.reconcile("holder", "build")  # build holds ci's slot, holder deploy's
    child = _child_of(c, "build")
    c.reconcile(child)
    assert c.jobs(child) and "queue" not in c.status(child)  # exempt: neither counts nor waits
    c.new_plan("direct", 3, capsule="deploy")
    c.reconcile("direct")
    assert c.status("direct")["queue"]["running"] == ["holder"]


def test_a_waiting_child_starts_when_its_parents_capsule_gets_a_limit():
    c = _ci_and_deploy(ci_limit=None)
    c.new_plan("holder", 1, capsule="deploy")
    c.new_plan("build", 2, steps=SHIP, capsule="ci")
    c.reconcile("holder", "build")
    child = _child_of(c, "build")
    c.reconcile(child)
    assert c.status(child)["phase"] == "Pending" and not c.jobs(child)
    c.capsule("ci", capsule_spec(1, spawn={"allow": ["deploy"]}))  # build now holds ci's slot
    c.now += 5
    c.reconcile(child)
    status = c.status(child)
    assert c.jobs(child) and "queue" not in status, status
    assert status["run"]["startedAt"] == "2027-01-15T08:00:05.000Z"  # it starts now
    assert "PlanStarted" in _events(c, child)


def test_a_running_child_whose_parents_capsule_loses_its_limit_holds_a_slot_and_goes_on():
    c = _ci_and_deploy(ci_limit=1)
    c.new_plan("build", 1, steps=SHIP, capsule="ci")
    c.reconcile("build")
    child = _child_of(c, "build")
    c.reconcile(child)
    assert c.jobs(child)
    c.capsule("ci", capsule_spec(None, spawn={"allow": ["deploy"]}))
    c.new_plan("direct", 2, capsule="deploy")
    c.reconcile(child, "direct")
    assert c.jobs(child) and c.status(child)["phase"] == "Running"  # nothing is stopped
    assert c.status("direct")["queue"]["running"] == [child]


class _Caches:
    """The watch's caches the operator keeps (Plans grouped by Capsule, Capsules)."""

    def __init__(self, c: Cluster) -> None:
        self.c = c
        self.plans, self.capsules = WatchCache(index=slots.capsule_key), WatchCache()
        self.counting = slots.Counting()

    def sync(self) -> list[tuple[str, str]]:
        """Every object as the API holds it now, seen by the watch; the Plans woken."""
        for obj in self.c.kube.of("capsule"):
            self.capsules.seen("MODIFIED", copy.deepcopy(obj))
        woken = []
        for obj in self.c.kube.of("plan"):
            obj = copy.deepcopy(obj)
            self.plans.seen("MODIFIED", obj)
            if self.counting.moved_out("MODIFIED", obj):
                woken += standing.to_wake(obj, self.plans, self.capsules)
        return woken

    def reconciler(self) -> Reconciler:
        c = self.c
        return Reconciler(c.kube, clock=lambda: c.now, plans=self.plans, capsules=self.capsules)


def test_the_watch_keeps_no_stale_grouping_when_a_limit_above_a_child_changes():
    """The Plans' cache groups children with the other Plans of their Capsule whatever the
    Capsules above them say: the verdict asks the Capsules' cache as it is then."""
    c = _ci_and_deploy(ci_limit=1)
    caches = _Caches(c)
    caches.sync()
    c.reconciler = caches.reconciler()
    c.new_plan("build", 1, steps=SHIP, capsule="ci")
    caches.sync()
    c.reconcile("build")
    caches.sync()
    child = _child_of(c, "build")
    c.reconcile(child)
    caches.sync()
    assert c.jobs(child)  # exempt
    c.capsule("ci", capsule_spec(None, spawn={"allow": ["deploy"]}))
    c.new_plan("direct", 2, capsule="deploy")
    caches.sync()
    c.reconcile("direct")
    assert c.status("direct")["queue"]["running"] == [child]  # from the group, no regroup
    c.set_phase(child)
    assert caches.sync() == [("ns", "direct")]  # a counted child's end frees the slot
    c.reconcile("direct")
    assert c.jobs("direct")


def test_rerun_annotations_on_two_children_bring_back_no_slot_deadlock():
    """Two one-slot Capsules whose plans each delegate to the other's: each parent holds its
    Capsule's slot and runs its child inside it. Someone who may annotate Plans (a re-run needs
    no `use`) re-runs both children: counted, each would wait for the slot the other parent
    holds while that parent waits for its own child, for ever. A child's runs are its parent's:
    the re-run is refused (a RerunRefused event names the parent), the children run on, and both
    parents finish."""
    c = _ci_and_deploy(ci_limit=1)
    c.capsule("deploy", capsule_spec(1, spawn={"allow": ["ci"]}, plan={"steps": SLEEP}))
    c.capsule("ci", capsule_spec(1, spawn={"allow": ["deploy"]}, plan={"steps": SLEEP}))
    c.new_plan("build", 1, steps=SHIP, capsule="ci")
    c.new_plan(
        "release", 2, steps=[{"id": "back", "capsule": "ci", "input": "x"}], capsule="deploy"
    )
    c.reconcile("build", "release")
    kids = [_child_of(c, "build"), _child_of(c, "release")]
    c.reconcile(*kids)
    assert all(c.jobs(k) for k in kids)  # exempt: each runs inside its parent's slot
    for k in kids:
        child = c.kube.get("plan", "ns", k)
        assert child is not None
        child["metadata"].setdefault("annotations", {})[names.ANNOTATION_RERUN] = "again"
        child["metadata"]["resourceVersion"] += "1"
    c.now += 60
    c.reconcile(*kids)
    for k in kids:
        status = c.status(k)
        assert "queue" not in status and status["phase"] == "Running", status
        assert c.jobs(k), f"{k} stopped and waits for a slot its parent's partner holds"
        assert "RerunRefused" in _events(c, k)
    for k in kids:
        c.set_phase(k)
    c.reconcile("build", "release")
    assert {c.status(p)["phase"] for p in ("build", "release")} != {"Running"}
