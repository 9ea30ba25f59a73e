"""Nothing is deleted before the archive holds it, when the archive is on: a ScheduledPlan's
history limits (`successfulRunsHistoryLimit: 0` kept an author's runs out of the archive
entirely), a parent's re-run deleting its earlier run's finished child Plans, and a parent's TTL
(its children go with it) wait for the archive's mark, as a Plan's own TTL already did; with the
archive off, each deletes as before. While the database is down the runs a schedule keeps pile
up to KEPT_FOR_ARCHIVE per schedule and namespace, counted by a gauge; past it, the oldest go,
with a Warning Event. Against the in-memory API (fakekube); with a real PostgreSQL:
tests/archive/test_archive_rules.py; on the cluster: tests/e2e/test_retention_archive.py."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from planops import metrics
from planops.api import names
from planops.archive.row import archived
from planops.reconciler import ScheduleReconciler
from planops.reconciler.history import retention
from planops.reconciler.run.status import rfc3339
from planops.reconciler.schedules.decide import KEPT_FOR_ARCHIVE

from .fakekube import FakeKube
from .harness import Cluster
from .test_retention import NOW

OWNER = {"apiVersion": "planops.dev/v1alpha1", "kind": "ScheduledPlan", "uid": "u-sched"}


def _schedule(kube: FakeKube, **limits: int) -> None:
    kube.put(
        "scheduledplan",
        {
            "apiVersion": "planops.dev/v1alpha1",
            "kind": "ScheduledPlan",
            "metadata": {
                "name": "nightly",
                "namespace": "ns",
                "uid": "u-sched",
                "generation": 1,
                "creationTimestamp": rfc3339(NOW - 30),
            },
            "spec": {
                "schedule": "0 3 * * *",  # not due: only the history limits act
                "planTemplate": {"spec": {"steps": [{"id": "a", "shell": "true"}]}},
                **limits,
            },
        },
    )
    capsule = {"image": "busybox:1", "shell": {"allow": ["true"]}}
    kube.put("capsule", {"metadata": {"name": "default", "namespace": "ns"}, "spec": capsule})


def _run(kube: FakeKube, k: int, phase: str = "Succeeded", archived_: bool = False) -> None:
    """Run k of the schedule, finished (scheduled k minutes after the first)."""
    run = f"r{k}"
    kube.put(
        "plan",
        {
            "metadata": {
                "name": f"nightly-{k:03d}",
                "namespace": "ns",
                "uid": f"u-run-{k}",
                "labels": {names.LABEL_SCHEDULED_BY: "nightly"},
                "annotations": {names.ANNOTATION_SCHEDULED_TIME: rfc3339(NOW + 60 * k)},
                "ownerReferences": [{**OWNER, "name": "nightly", "controller": True}],
            },
            "status": {
                "phase": phase,
                "run": {"id": run},
                "finishedAt": rfc3339(NOW),
                **({"archived": run} if archived_ else {}),
            },
        },
    )


def _reconcile(kube: FakeKube, archive: bool) -> list[str]:
    """One reconcile of the schedule; the runs left."""
    schedules = ScheduleReconciler(
        kube, clock=lambda: NOW, budget=None, archived=archived if archive else None
    )
    asyncio.run(schedules.reconcile("scheduledplans", "ns", "nightly"))
    status = (kube.get("scheduledplan", "ns", "nightly") or {}).get("status") or {}
    assert not status.get("errors"), status  # judged valid: its history limits act
    return sorted(p["metadata"]["name"] for p in kube.of("plan"))


def test_a_history_limit_of_zero_keeps_a_run_until_the_archive_holds_it():
    kube = FakeKube()
    _schedule(kube, successfulRunsHistoryLimit=0)
    _run(kube, 1)
    assert _reconcile(kube, archive=True) == ["nightly-001"]  # not archived: kept
    assert metrics.scheduled_runs_kept_for_archive._value.get() == 1
    run = kube.get("plan", "ns", "nightly-001")
    assert run is not None
    run["status"]["archived"] = "r1"  # the archive's mark (its event wakes the schedule)
    assert _reconcile(kube, archive=True) == []
    assert metrics.scheduled_runs_kept_for_archive._value.get() == 0


def test_without_the_archive_the_history_limits_delete_as_before():
    kube = FakeKube()
    _schedule(kube, successfulRunsHistoryLimit=0, failedRunsHistoryLimit=1)
    _run(kube, 1)
    _run(kube, 2, "Failed")
    _run(kube, 3, "Failed")
    assert _reconcile(kube, archive=False) == ["nightly-003"]


def test_the_limits_count_as_before_and_only_runs_past_them_wait():
    kube = FakeKube()
    _schedule(kube, successfulRunsHistoryLimit=1, failedRunsHistoryLimit=1)
    _run(kube, 1, archived_=True)  # past the limit, archived: deleted
    _run(kube, 2)  # past the limit, not archived: kept
    _run(kube, 3)  # the newest success: within the limit
    _run(kube, 4, "Invalid")  # past the failed limit: an Invalid run is none of the archive's
    _run(kube, 5, "Failed")
    assert _reconcile(kube, archive=True) == ["nightly-002", "nightly-003", "nightly-005"]


def test_past_the_bound_the_oldest_runs_go_unarchived_and_a_warning_says_so():
    """The database down for long: a schedule keeps KEPT_FOR_ARCHIVE finished runs waiting, no
    more (each is a Plan in etcd); the oldest past it are deleted, each with a Warning Event."""
    kube = FakeKube()
    _schedule(kube, successfulRunsHistoryLimit=0)
    for k in range(KEPT_FOR_ARCHIVE + 3):
        _run(kube, k)
    before = metrics.runs_deleted_unarchived._value.get()
    left = _reconcile(kube, archive=True)
    assert left == [f"nightly-{k:03d}" for k in range(3, KEPT_FOR_ARCHIVE + 3)]  # the newest
    assert metrics.runs_deleted_unarchived._value.get() - before == 3
    told = [e for e in kube.events if e["reason"] == "RunNotArchived"]
    assert len(told) == 3 and all(e["type"] == "Warning" for e in told)
    named = {e["message"].split()[1] for e in told}
    assert named == {"nightly-000", "nightly-001", "nightly-002"}
    assert all("before the archive held it" in e["message"] for e in told)
    assert metrics.scheduled_runs_kept_for_archive._value.get() == KEPT_FOR_ARCHIVE


@pytest.mark.parametrize(
    ("phase", "mark", "waits"),
    [
        ("Succeeded", None, True),
        ("Failed", None, True),
        ("Succeeded", "r", False),
        ("Invalid", None, False),
        ("Running", None, False),
    ],
)
def test_what_waits_for_the_archive(phase: str, mark: str | None, waits: bool):
    plan: dict[str, Any] = {"status": {"phase": phase, "run": {"id": "r"}, "archived": mark}}
    assert retention.waits_for_archive(plan, archived) is waits
    assert retention.waits_for_archive(plan, None) is False  # the archive is off


# -- a parent's re-run, and its TTL --------------------------------------------------------------

SHIP = [{"id": "ship", "capsule": "deploy", "input": "go"}]
WHERE = {"value": "{{item}}", "op": "gt", "to": 1}
FILTER = {"id": "x", "filter": {"over": [1, 2], "where": WHERE}}
CAPSULES = {
    "default": {"image": "busybox:1", "spawn": {"allow": ["deploy"]}},
    "deploy": {"image": "busybox:1", "plan": {"steps": [FILTER]}},
}


def parent(archive: bool, **spec: Any) -> Cluster:
    """A Plan `p` whose capsule step makes a child Plan (tests.unit.harness)."""
    w = Cluster(CAPSULES, archived=archived if archive else None)
    w.new_plan("p", steps=SHIP, uid="uid-p", **spec)
    return w


def child(w: Cluster) -> str:
    (name,) = [n for n in w.plans() if n != "p"]
    return name


def finish(w: Cluster) -> str:
    """The run: its child made and finished, then the parent's step settled."""
    w.reconcile()
    made = child(w)
    assert w.reconciled(made)["phase"] == "Succeeded"
    assert w.reconciled()["phase"] == "Succeeded"
    return made


def rerun(w: Cluster) -> None:
    w.annotate(names.ANNOTATION_RERUN, "2")
    w.now += 60
    w.reconcile()


def test_a_parents_rerun_keeps_a_finished_child_until_archived_and_it_then_goes_by_itself():
    w = parent(archive=True)
    first = finish(w)
    rerun(w)
    assert first in w.plans()  # finished, not archived: kept (before, deleted at once)
    assert len(w.plans()) == 3  # the parent, the kept child, the new run's child
    w.reconcile(first)  # its own reconcile: still not archived, still kept
    assert first in w.plans()
    w.mark_archived(first)
    w.reconcile(first)  # the mark's event: now it goes
    assert first not in w.plans()


def test_a_parents_rerun_deletes_an_archived_child_at_once_and_without_the_archive_any():
    for archive in (True, False):
        w = parent(archive=archive)
        first = finish(w)
        if archive:
            w.mark_archived(first)
        rerun(w)
        assert first not in w.plans(), archive


def test_a_parents_ttl_waits_for_its_children_to_be_archived():
    w = parent(archive=True, ttlSecondsAfterFinished=0)
    made = finish(w)
    w.mark_archived("p")  # the parent's own run is archived; its child's is not yet
    w.now += 1
    w.reconcile()
    assert "p" in w.plans()  # deleting it would delete the child (its owner reference)
    w.mark_archived(made)
    w.reconcile()  # the child's mark wakes its parent
    assert "p" not in w.plans()
