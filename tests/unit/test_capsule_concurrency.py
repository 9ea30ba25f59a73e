"""A Capsule's `concurrency.maxRunningPlans`, checked without a cluster: several Plans on one
Capsule reconciled against the in-memory API (fakekube.FakeKube), in whatever order, by one
Reconciler or by a new one (a restarted operator, a new leader). The rule is
reconciler.queue.slots'; the e2e test (tests/faults/test_capsule_concurrency.py) runs it on the real
cluster."""

from __future__ import annotations

import argparse
import asyncio
import copy
from typing import Any

import pytest

from planops.api import names
from planops.api.documents import parse_document
from planops.cli import steer
from planops.cli.exit_codes import EXIT_INPUT
from planops.kube.cache import WatchCache
from planops.reconciler import slot_waiters
from planops.reconciler.queue import slots
from planops.reconciler.queue.slots import NAMES_LISTED
from planops.reconciler.run.status import rfc3339

from .fakekube import FakeKube
from .harness import Cluster

NOW = 1_800_000_000.0
SLEEP = [{"id": "a", "shell": "sleep 100"}]


def capsule_spec(limit: int | None = 1, **more: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"image": "busybox:1", "shell": {"allow": ["sleep", "true"]}, **more}
    if limit is not None:
        spec["concurrency"] = {"maxRunningPlans": limit}
    return spec


def cluster(limit: int | None = 1, kube: FakeKube | None = None) -> Cluster:
    """One namespace `ns` whose default Capsule has `limit`, Plans created at chosen seconds,
    and a reconciler (tests.unit.harness)."""
    return Cluster({"default": capsule_spec(limit)}, kube=kube, steps=SLEEP)


def test_plans_beyond_the_limit_wait_pending_naming_the_plans_ahead_in_creation_order():
    c = cluster(limit=1)
    c.new_plan("c-first", 1)
    c.new_plan("b-second", 2)
    c.new_plan("a-third", 3)
    c.reconcile("a-third", "b-second", "c-first")  # reconciled in the opposite order of creation
    assert c.running() == {"c-first"}
    third = c.status("a-third")
    assert third["phase"] == "Pending"
    assert third["queue"]["ahead"] == ["c-first", "b-second"]  # first was still waiting then
    (cond,) = third["conditions"]
    assert cond["reason"] == "WaitingForSlot" and cond["status"] == "Unknown"
    assert "ahead in the queue: c-first, b-second" in cond["message"]
    c.reconcile("a-third")
    third = c.status("a-third")
    assert third["queue"]["running"] == ["c-first"] and third["queue"]["ahead"] == ["b-second"]
    assert third["queue"]["position"] == 2
    assert "running: c-first; ahead in the queue: b-second" in third["conditions"][0]["message"]
    assert "startedAt" not in third and "startedAt" not in third["run"]
    assert [e["reason"] for e in c.kube.events if e["involvedObject"]["name"] == "a-third"] == [
        "Queued"
    ]  # once, when it started waiting


def test_a_later_plan_never_overtakes_an_earlier_waiting_one():
    c = cluster(limit=1)
    c.new_plan("first", 1)
    c.new_plan("second", 2)
    c.new_plan("third", 3)
    c.reconcile("first", "second", "third")
    c.set_phase("first")
    c.reconcile("third")  # reconciled before second, which is ahead of it
    assert c.status("third")["phase"] == "Pending" and c.jobs("third") == []
    c.reconcile("second")
    assert c.jobs("second") and c.status("second")["phase"] == "Running"
    assert "queue" not in c.status("second")


def test_the_creation_order_ties_on_the_same_second_by_name():
    c = cluster(limit=1)
    c.new_plan("zulu", 5)
    c.new_plan("alpha", 5)
    c.reconcile("zulu", "alpha")
    assert c.running() == {"alpha"}
    assert c.status("zulu")["queue"]["ahead"] == ["alpha"]


def test_a_finished_or_failed_plan_frees_its_slot_and_the_next_starts_with_its_own_start_time():
    c = cluster(limit=1)
    c.new_plan("first", 1)
    c.new_plan("second", 2)
    c.reconcile("first", "second")
    c.now += 120  # second waited two minutes
    c.set_phase("first", "Failed")
    c.reconcile("second")
    second = c.status("second")
    assert c.jobs("second") and second["phase"] == "Running"
    assert second["startedAt"] == second["run"]["startedAt"] == rfc3339(NOW + 120)
    assert second["conditions"][0]["reason"] == "Running"
    reasons = [e["reason"] for e in c.kube.events if e["involvedObject"]["name"] == "second"]
    assert reasons[:2] == ["Queued", "PlanStarted"]


@pytest.mark.parametrize("how", ["deleted", "being deleted"])
def test_a_deleted_plan_frees_its_slot(how: str):
    c = cluster(limit=1)
    c.new_plan("first", 1)
    c.new_plan("second", 2)
    c.reconcile("first", "second")
    if how == "deleted":
        c.kube.objects.pop(("plan", "ns", "first"))
    else:  # a finalizer of someone else's keeps it a while
        c.kube.objects[("plan", "ns", "first")]["metadata"]["deletionTimestamp"] = (
            "2027-01-15T08:01:00Z"
        )
    c.reconcile("second")
    assert c.jobs("second")


def test_max_running_plans_two_runs_two_at_once():
    c = cluster(limit=2)
    for k, name in enumerate(("a", "b", "c", "d"), start=1):
        c.new_plan(name, k)
    c.reconcile("d", "c", "b", "a", "d", "c")
    assert c.running() == {"a", "b"}
    assert c.status("c")["queue"]["running"] == ["a", "b"]
    assert c.status("d")["queue"]["ahead"] == ["c"]


def test_the_count_is_read_from_the_cluster_so_a_new_leader_admits_nothing_more():
    c = cluster(limit=1)
    c.new_plan("first", 1)
    c.new_plan("second", 2)
    c.reconcile("first", "second")
    c.reconciler = c.operator()  # a restarted operator, or the other replica leading
    c.reconcile("second", "first", "second")
    assert c.running() == {"first"}
    assert [n for m, _, n in c.kube.calls if m == "create_job"] == c.jobs("first")  # once


def test_the_slot_is_recorded_in_the_status_before_anything_is_created():
    c = cluster(limit=1)
    c.new_plan("first", 1)
    c.reconcile("first")
    calls = [m for m, _, n in c.kube.calls if n == "first" or m == "create_job"]
    assert calls.index("patch_plan_status") < calls.index("create_job")


def test_two_plans_decided_in_the_same_instant_do_not_both_take_the_one_slot():
    """`late` is created (with the same second, sorting first) while `early`'s decision is under
    way, and reconciled at once: without one decision at a time per Capsule, each would have
    seen a free slot (early's list does not hold late; late's list shows early not started)."""
    c = cluster(limit=1)
    c.new_plan("early", 7)
    late: list[asyncio.Task[Any]] = []

    async def racing(*_: Any) -> None:  # early's list answered: late comes now
        c.new_plan("a-late", 7)
        late.append(asyncio.ensure_future(c.reconciler.reconcile("ns", "a-late")))
        await asyncio.sleep(0.3)  # the other decision would fit in here

    c.kube.on("list_plans", racing, after=True, times=1)

    async def both() -> None:
        await c.reconciler.reconcile("ns", "early")
        await late[0]

    asyncio.run(both())
    assert c.running() == {"early"}
    assert c.status("a-late")["queue"]["running"] == ["early"]


def test_a_waiting_plan_is_decided_from_the_watch_cache_without_a_list():
    plans = WatchCache()
    c = cluster(limit=1)
    c.reconciler = c.operator(plans=plans)
    for name, second in (("first", 1), ("second", 2)):
        plans.seen("ADDED", c.new_plan(name, second))
    c.reconcile("first")
    c.kube.calls.clear()
    c.reconcile("second")
    assert c.status("second")["phase"] == "Pending"
    assert "list_plans" not in [m for m, _, _ in c.kube.calls]


def test_a_stale_cache_showing_a_free_slot_is_checked_against_a_list():
    plans = WatchCache()
    c = cluster(limit=1)
    c.new_plan("first", 1)
    c.reconcile("first")  # by another replica: this one's cache never saw first
    c.reconciler = c.operator(plans=plans)
    plans.seen("ADDED", c.new_plan("second", 2))
    c.reconcile("second")
    assert c.running() == {"first"}
    assert c.status("second")["queue"]["running"] == ["first"]


def test_plans_of_other_capsules_and_namespaces_do_not_count():
    c = cluster(limit=1)
    c.capsule("other", capsule_spec(None))
    c.capsule("default", capsule_spec(1), namespace="elsewhere")
    c.new_plan("mine", 2)
    c.new_plan("other", 1, capsule="other")
    c.new_plan("far", 1, namespace="elsewhere")
    c.reconcile("other", "mine")
    c.reconcile("far", namespace="elsewhere")
    assert c.running() == {"other", "mine", "far"}


def test_a_plan_already_running_when_the_limit_was_set_holds_a_slot():
    c = cluster(limit=None)
    c.new_plan("before", 1)
    c.reconcile("before")
    c.capsule("default", capsule_spec(1))
    c.new_plan("after", 2)
    c.reconcile("after", "before")
    assert c.running() == {"before"}
    assert c.status("after")["queue"]["running"] == ["before"]
    assert c.status("before")["phase"] == "Running"


def test_capsule_steps_into_each_others_capsules_run_inside_their_parents_slots():
    """Two one-slot Capsules, each plan delegating to the other's: counted like other Plans,
    each child would wait for the slot the other parent holds while it waits for its child, a
    deadlock. A child runs within its parent's slot and takes none. (A child on its parent's
    own Capsule cannot happen: the cycle rule refuses it.)"""
    c = cluster(limit=1)
    for mine, other in (("default", "deploy"), ("deploy", "default")):
        c.capsule(mine, capsule_spec(1, spawn={"allow": [other]}, plan={"steps": SLEEP}))
    c.new_plan("build", 1, steps=[{"id": "ship", "capsule": "deploy", "input": "go"}])
    c.new_plan(
        "deployer", 2, capsule="deploy", steps=[{"id": "b", "capsule": "default", "input": "x"}]
    )
    c.new_plan("waiter", 3)
    c.reconcile("build", "deployer", "waiter")
    children = [p["metadata"]["name"] for p in c.kube.of("plan") if slots.is_child(p)]
    assert len(children) == 2
    c.reconcile(*children)
    for name in children:
        assert c.jobs(name), c.status(name)
        assert "queue" not in c.status(name)
    c.reconcile("waiter")
    assert c.status("waiter")["queue"]["running"] == ["build"]  # the children are not counted
    assert c.jobs("waiter") == []


@pytest.mark.parametrize("annotation", [names.ANNOTATION_RERUN, names.ANNOTATION_RETRY])
def test_a_childs_rerun_or_retry_is_refused_and_starts_nothing(annotation: str):
    """A child's runs are its parent's (reconciler.run.retrying.child_requests): a re-run or retry
    written on it starts no run, in a slot or out of one; a RerunRefused event says so, once,
    and names the parent to re-run instead."""
    c = cluster(limit=1)
    c.capsule("deploy", capsule_spec(1, plan={"steps": SLEEP}))
    c.capsule("default", capsule_spec(1, spawn={"allow": ["deploy"]}))
    c.new_plan("build", 1, steps=[{"id": "ship", "capsule": "deploy", "input": "go"}])
    c.new_plan("holder", 2, capsule="deploy")
    c.reconcile("build")  # it holds default's slot
    (child,) = [p for p in c.kube.of("plan") if slots.is_child(p)]
    name = child["metadata"]["name"]
    c.reconcile(name, "holder")  # the child, exempt, runs; holder holds deploy's slot
    assert c.jobs(name) and c.jobs("holder")
    c.set_phase(name)
    before = c.status(name)
    child["metadata"]["annotations"] = {annotation: "again"}
    c.now += 60
    c.reconcile(name)
    c.reconcile(name)
    status = c.status(name)
    assert status["phase"] == "Succeeded" and status["run"]["id"] == before["run"]["id"]
    assert "queue" not in status and status["run"]["ignored"] == f"{annotation}=again"
    refused = [e for e in c.kube.events if e["reason"] == "RerunRefused"]
    assert (
        len(refused) == 1
        and "re-run Plan build, or retry it with --from ship" in (refused[0]["message"])
    )


def test_a_plan_posing_as_a_child_by_its_label_alone_still_waits():
    c = cluster(limit=1)
    c.new_plan("first", 1)
    forged = c.new_plan("forged", 2)
    forged["metadata"]["labels"] = {names.LABEL_PARENT: "first"}
    c.reconcile("first", "forged")
    assert c.running() == {"first"}
    assert c.status("forged")["phase"] == "Pending"


def test_a_waiting_plan_cancelled_fails_without_running_anything():
    c = cluster(limit=1)
    c.new_plan("first", 1)
    c.new_plan("second", 2)
    c.reconcile("first", "second")
    waiting = c.kube.get("plan", "ns", "second")
    assert waiting is not None
    waiting["metadata"]["annotations"] = {names.ANNOTATION_CANCEL: "not today"}
    c.reconcile("second")
    status = c.status("second")
    assert status["phase"] == "Failed"
    assert status["conditions"][0]["reason"] == "Cancelled"
    assert c.running() == {"first"}


def test_the_names_a_waiting_plan_lists_are_bounded():
    c = cluster(limit=1)
    for k in range(NAMES_LISTED + 5):
        c.new_plan(f"p{k:02d}", k)
    last = f"p{NAMES_LISTED + 4:02d}"
    c.reconcile(last)
    queue = c.status(last)["queue"]
    assert len(queue["ahead"]) == NAMES_LISTED and queue["position"] == NAMES_LISTED + 5
    assert queue["message"].endswith("and 4 more")


class _Watch:
    """What the operator's Plan watch handler keeps (the Plans' cache, grouped by Capsule; the
    Plans counted) and does with one event: the Plans it wakes."""

    def __init__(self, c: Cluster) -> None:
        self.plans, self.capsules = WatchCache(index=slots.capsule_key), WatchCache()
        self.counting = slots.Counting()
        for obj in c.kube.of("capsule"):
            self.capsules.seen("ADDED", copy.deepcopy(obj))
        for obj in c.kube.of("plan"):
            self.event(copy.deepcopy(obj), "ADDED")

    def event(self, obj: dict[str, Any], kind: str = "MODIFIED") -> list[tuple[str, str]]:
        self.plans.seen(kind, obj)
        if not self.counting.moved_out(kind, obj):
            return []
        return slot_waiters(obj, self.plans, self.capsules)


def _three_waiting(limit: int = 1) -> Cluster:
    c = cluster(limit=limit)
    c.new_plan("first", 1)
    for k, name in enumerate(["second", "third", "fourth"], start=2):
        c.new_plan(name, k)
    c.new_plan("elsewhere", 9, capsule="x")
    c.capsule("x", capsule_spec(1))
    c.reconcile("first", "second", "third", "fourth", "elsewhere")
    return c


def test_a_plan_moving_into_finished_wakes_only_the_first_waiter_of_its_capsule():
    c = _three_waiting()
    w = _Watch(c)
    done = copy.deepcopy(c.kube.get("plan", "ns", "first"))
    done["status"]["phase"] = "Succeeded"
    done["metadata"]["resourceVersion"] += "1"
    assert w.event(done) == [("ns", "second")]


def test_a_finish_the_leader_wrote_into_the_cache_before_its_event_still_wakes_the_first_waiter():
    c = _three_waiting()
    w = _Watch(c)
    done = copy.deepcopy(c.kube.get("plan", "ns", "first"))
    done["status"]["phase"] = "Succeeded"
    done["metadata"]["resourceVersion"] += "1"
    w.plans.seen("MODIFIED", copy.deepcopy(done))  # the status writer's own update, first
    assert w.event(done) == [("ns", "second")]


def test_a_limit_of_two_wakes_as_many_waiters_as_slots_are_free():
    c = _three_waiting(limit=2)  # first and second run; third and fourth wait
    w = _Watch(c)
    done = copy.deepcopy(c.kube.get("plan", "ns", "first"))
    done["status"]["phase"] = "Failed"
    done["metadata"]["resourceVersion"] += "1"
    assert w.event(done) == [("ns", "third")]


def test_labels_written_on_a_finished_plan_wake_no_one():
    c = _three_waiting()
    c.set_phase("first")
    w = _Watch(c)  # the cache already shows it finished
    labelled = copy.deepcopy(c.kube.get("plan", "ns", "first"))
    for k in range(3):
        labelled["metadata"]["labels"] = {"n": str(k)}
        labelled["metadata"]["resourceVersion"] += "1"
        assert w.event(copy.deepcopy(labelled)) == []
    assert w.event(labelled, "DELETED") == []  # it held no slot


def test_deleting_a_waiting_or_running_plan_wakes_the_first_waiter():
    c = _three_waiting()
    w = _Watch(c)
    third = c.kube.get("plan", "ns", "third")
    assert third is not None
    assert w.event(copy.deepcopy(third), "DELETED") == [("ns", "second")]
    # (a waiting Plan held no slot, but the queue moved: the first waiter looks again)
    first = c.kube.get("plan", "ns", "first")
    assert first is not None
    assert w.event(copy.deepcopy(first), "DELETED") == [("ns", "second")]


@pytest.mark.parametrize(("above", "woken"), [("x", []), ("free", [("ns", "second")])])
def test_a_finished_child_plan_wakes_the_first_waiter_only_when_it_was_counted(
    above: str, woken: list[tuple[str, str]]
):
    """Under a limited Capsule (x) a child held no slot: it wakes no one. Under an unlimited one
    (free) it was counted like any Plan, and its end frees a slot."""
    c = _three_waiting()
    c.capsule("free", capsule_spec(None))
    w = _Watch(c)
    child = copy.deepcopy(c.kube.get("plan", "ns", "fourth"))
    child["metadata"]["labels"] = {names.LABEL_PARENT: "p"}
    child["metadata"]["annotations"] = {names.ANNOTATION_LINEAGE: f"{above},default"}
    child["metadata"]["ownerReferences"] = [
        {"apiVersion": "planops.dev/v1alpha1", "kind": "Plan", "controller": True, "uid": "u"}
    ]
    w.event(child)
    child = copy.deepcopy(child)
    child["status"] = {"phase": "Succeeded"}
    child["metadata"]["resourceVersion"] += "1"
    assert w.event(child) == woken


def test_the_plans_cache_groups_the_counted_plans_by_namespace_and_capsule():
    c = _three_waiting()
    w = _Watch(c)
    plans = w.plans
    c.set_phase("fourth")  # seen waiting, then finished: it leaves its group
    w.event(copy.deepcopy(c.kube.get("plan", "ns", "fourth")))
    names_ = lambda key: sorted(p["metadata"]["name"] for p in plans.group(key) or [])  # noqa: E731
    assert names_(("ns", "default")) == ["first", "second", "third"]  # fourth finished
    assert names_(("ns", "x")) == ["elsewhere"]


class _NoScan(WatchCache):
    def values(self) -> list[dict[str, Any]]:
        raise AssertionError("the gate scanned every Plan of the cluster")


def test_a_waiting_plan_is_decided_from_its_capsules_group_not_from_every_plan():
    c = _three_waiting()
    plans = _NoScan(index=slots.capsule_key)
    for obj in c.kube.of("plan"):
        plans.seen("ADDED", copy.deepcopy(obj))
    c.reconciler = c.operator(plans=plans)
    c.reconcile("third")
    assert c.status("third")["queue"]["ahead"] == ["second"]


def test_a_waiter_farther_back_than_the_listed_names_is_not_rewritten_as_the_queue_moves():
    c = cluster(limit=1)
    for k in range(NAMES_LISTED + 3):
        c.new_plan(f"p{k:02d}", k)
    everyone = [f"p{k:02d}" for k in range(NAMES_LISTED + 3)]
    c.reconcile(*everyone)
    last, near = everyone[-1], everyone[2]
    before_last, before_near = c.status(last)["queue"], c.status(near)["queue"]
    c.set_phase("p00")
    c.reconcile("p01", near, last)
    assert c.jobs("p01")
    assert c.status(last)["queue"] == before_last  # position an upper bound: no write
    assert c.status(near)["queue"]["position"] == before_near["position"] - 1 == 1


def test_a_rerun_of_the_plan_holding_the_slot_waits_behind_the_plans_already_waiting():
    c = cluster(limit=1)
    c.new_plan("holder", 1)
    c.new_plan("waiter", 2)
    c.reconcile("holder", "waiter")
    assert c.jobs("holder")  # it holds the slot when its re-run is asked
    plan = c.kube.get("plan", "ns", "holder")
    assert plan is not None
    plan["metadata"]["annotations"] = {names.ANNOTATION_RERUN: "again"}
    c.now += 60
    c.reconcile("holder")
    status = c.status("holder")
    assert status["phase"] == "Pending" and status["queue"]["ahead"] == ["waiter"]
    c.reconcile("waiter")
    assert c.jobs("waiter") and "queue" not in c.status("waiter")


def test_a_rerun_of_an_old_finished_plan_goes_behind_plans_created_later():
    c = cluster(limit=1)
    c.new_plan("old", 1)
    c.reconcile("old")
    c.set_phase("old")
    c.new_plan("holder", 2)
    c.new_plan("later", 3)
    c.reconcile("holder", "later")
    plan = c.kube.get("plan", "ns", "old")
    assert plan is not None
    plan["metadata"]["annotations"] = {names.ANNOTATION_RERUN: "again"}
    c.now += 60
    c.reconcile("old")
    queue = c.status("old")["queue"]
    assert queue["ahead"] == ["later"] and queue["queuedAt"] == rfc3339(c.now)
    c.set_phase("holder")
    c.reconcile("old", "later")
    assert c.status("old")["phase"] == "Pending" and c.status("later")["phase"] == "Running"


def test_a_first_run_joins_the_queue_at_the_plans_creation():
    c = cluster(limit=1)
    c.new_plan("holder", 1)
    c.new_plan("waiter", 7)
    c.now += 3600  # reconciled an hour later: still in its place of creation
    c.reconcile("holder", "waiter")
    assert c.status("waiter")["queue"]["queuedAt"] == "2027-01-15T08:00:07Z"


def test_a_run_whose_authors_use_was_revoked_while_it_waited_is_refused_as_it_takes_a_slot():
    c = cluster(limit=1)
    c.new_plan("holder", 1)
    waiter = c.new_plan("waiter", 2)
    alice = '{"username": "alice", "groups": []}'
    waiter["metadata"]["annotations"] = {names.ANNOTATION_AUTHOR: alice}
    c.reconcile("holder", "waiter")
    assert c.status("waiter")["queue"]
    c.kube.use_denied.add(("ns", "default", "alice"))  # her `use` of the Capsule revoked
    c.set_phase("holder")
    c.reconcile("waiter")
    status = c.status("waiter")
    assert status["phase"] != "Running" and "queue" not in status, status
    assert "alice may not use capsule default" in status["conditions"][0]["message"]
    assert not c.jobs("waiter")


@pytest.mark.parametrize("limit", [0, -1, "1"])
def test_max_running_plans_below_one_or_not_a_number_is_refused(limit: Any):
    doc = {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Capsule",
        "metadata": {"name": "c"},
        "spec": {"concurrency": {"maxRunningPlans": limit}},
    }
    _, problems = parse_document(doc)
    assert any("maxRunningPlans" in str(p) for p in problems), problems


def _schedule_api(run_status: dict[str, Any]) -> FakeKube:
    """The API server holding a Forbid schedule, due now, whose last run waits for a slot of
    its Capsule."""
    from planops.api.names import LABEL_SCHEDULED_BY  # noqa: PLC0415

    kube = FakeKube()
    meta = {"name": "nightly", "namespace": "ns", "uid": "u-sched", "generation": 1}
    kube.put(
        "scheduledplan",
        {
            "apiVersion": "planops.dev/v1alpha1",
            "kind": "ScheduledPlan",
            "metadata": {**meta, "creationTimestamp": "2027-01-15T07:50:00Z"},
            "spec": {
                "schedule": "* * * * *",
                "concurrencyPolicy": "Forbid",
                "planTemplate": {"spec": {"steps": SLEEP}},
            },
            "status": {"lastScheduleTime": "2027-01-15T07:59:00Z"},
        },
    )
    kube.put("capsule", {"metadata": {"name": "default"}, "spec": capsule_spec(1)})
    owner = {"apiVersion": "planops.dev/v1alpha1", "kind": "ScheduledPlan", "uid": "u-sched"}
    run = {"name": "nightly-29", "uid": "u-run", "labels": {LABEL_SCHEDULED_BY: "nightly"}}
    run["ownerReferences"] = [{**owner, "name": "nightly", "controller": True}]
    kube.put("plan", {"metadata": run, "status": run_status})
    return kube


def test_a_scheduled_run_waiting_for_a_slot_is_active_for_concurrency_policy_forbid():
    from planops.reconciler import ScheduleReconciler  # noqa: PLC0415

    c = cluster(limit=1)
    c.new_plan("holder", 1)
    c.new_plan("nightly-29", 2)
    c.reconcile("holder", "nightly-29")
    waiting = c.status("nightly-29")
    assert waiting["phase"] == "Pending" and waiting["queue"]
    api = _schedule_api(waiting)
    schedules = ScheduleReconciler(api, clock=lambda: NOW + 1, budget=None)
    asyncio.run(schedules.reconcile("scheduledplans", "ns", "nightly"))
    assert [p["metadata"]["name"] for p in api.of("plan")] == ["nightly-29"]  # none created
    assert [e["reason"] for e in api.events] == ["RunSkipped"]


def test_a_rerun_waiting_for_a_slot_keeps_the_earlier_runs_in_its_history():
    c = cluster(limit=1)
    c.new_plan("again", 1)
    c.new_plan("holder", 2)
    c.reconcile("again")  # first in the queue: it runs
    assert c.jobs("again") and "queue" not in c.status("again")
    c.set_phase("again")
    c.reconcile("holder")
    plan = c.kube.get("plan", "ns", "again")
    assert plan is not None
    earlier = plan["status"]["run"]["id"]
    plan["metadata"]["annotations"] = {names.ANNOTATION_RERUN: "r2"}
    c.reconcile("again")
    status = c.status("again")
    assert status["queue"]["running"] == ["holder"]
    assert [h["id"] for h in status["history"]] == [earlier]
    before = len(c.kube.statuses)
    c.set_phase("holder")
    c.reconcile("again")
    written = c.kube.statuses[before:]
    assert c.jobs("again") and c.status("again")["phase"] == "Running"
    assert len(written) == 2  # the slot taken, then the run's own status: both keep it
    assert all([h["id"] for h in w["history"]] == [earlier] for w in written), written


def test_a_run_replaced_while_it_waited_for_a_slot_is_no_run_in_the_history():
    c = cluster(limit=1)
    c.new_plan("holder", 1)
    c.new_plan("edited", 2)
    c.reconcile("holder", "edited")
    plan = c.kube.get("plan", "ns", "edited")
    assert plan is not None and plan["status"]["queue"]
    plan["metadata"]["generation"] = 2  # its spec changed while it waited: a new run
    c.reconcile("edited")
    status = c.status("edited")
    assert status["queue"]["running"] == ["holder"]
    assert status["run"]["generation"] == 2
    assert not status.get("history"), status.get("history")  # the waiting run ran nothing


def test_kubectl_plan_rerun_and_retry_refuse_a_child_before_writing_anything():
    c = cluster(limit=None)
    c.capsule("deploy", capsule_spec(None, plan={"steps": SLEEP}))
    c.capsule("default", capsule_spec(None, spawn={"allow": ["deploy"]}))
    c.new_plan("build", 1, steps=[{"id": "ship", "capsule": "deploy", "input": "go"}])
    c.reconcile("build")
    (child,) = [p for p in c.kube.of("plan") if slots.is_child(p)]
    name = child["metadata"]["name"]
    c.reconcile(name)
    c.set_phase(name, "Failed")
    for verb in (steer.cmd_rerun, steer.cmd_retry):
        args = argparse.Namespace(name=name, from_step=None)
        assert asyncio.run(verb(c.kube, args, "ns")) == EXIT_INPUT
    notes = child["metadata"]["annotations"]
    assert names.ANNOTATION_RERUN not in notes and names.ANNOTATION_RETRY not in notes
    assert steer.child_refusal(child) == (
        f"plan {name} is the child of step ship of plan build: its runs are its parent's "
        "(kubectl plan rerun build, or kubectl plan retry build --from ship)"
    )
    parent = c.kube.get("plan", "ns", "build")
    assert parent is not None and steer.child_refusal(parent) is None
