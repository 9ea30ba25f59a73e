"""One status writer, many writers: the reconciler's status, the Capsule queue's, retention's
`jobsCollected` and the archive's `archived` marks all replace a Plan's whole status, each with
the resourceVersion it was decided from as a precondition (effects.actuator.StatusWriter). A
writer that finds the Plan changed since it read it (409 Conflict) reads it again and decides
again, so nothing another writer wrote in between is lost. Driven on the in-memory API with the
writers at once (its `delay` lets every call yield) and with one landing exactly between a
reconcile's read and its write (`on`)."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from planops.api import names
from planops.archive.queue import Archiver
from planops.archive.row import archived
from planops.kube.cache import WatchCache

from .harness import Cluster

CAPSULE = {"image": "busybox:1", "shell": {"allow": ["sleep", "true"]}}


class _Store:
    """The archive's database, always up: every row written."""

    def __init__(self) -> None:
        self.rows: list[Any] = []

    async def write(self, row: Any) -> bool:
        self.rows.append(row)
        return True


async def _no_database() -> Any:
    raise AssertionError("the writer is handed its store")


def _archive(w: Cluster, store: _Store) -> Any:
    """The archive's writer of the Plan `p`, reading it as the watch shows it now."""

    async def run() -> None:
        cache = WatchCache()
        cache.seen("MODIFIED", copy.deepcopy(w.plan))
        archiver = Archiver(_no_database, w.kube, cache)
        await archiver._archive(store, ("ns", "p"))  # type: ignore[arg-type]

    return run()


def _replaced_runs(n: int, **spec: Any) -> Cluster:
    """A Plan `p` whose first `n` runs a re-run replaced, each finished and not archived yet
    (kept in status.history for the archive), and whose current run is under way."""
    w = Cluster({"default": CAPSULE}, tick=1, archive=True, archived=archived)
    w.new_plan("p", steps=[{"id": "a", "shell": "sleep 1"}], **spec)
    w.reconcile()
    for k in range(n):
        w.end("a")
        assert w.reconciled()["phase"] == "Succeeded"
        w.annotate(names.ANNOTATION_RERUN, str(k))
        assert w.reconciled()["phase"] == "Running"
    assert [e.get("archived") for e in w.status()["history"]] == [False] * n
    return w


def test_an_archive_mark_between_a_reconciles_read_and_its_write_is_kept():
    w = _replaced_runs(1)
    earlier = w.status()["history"][0]["id"]
    store = _Store()
    w.end("a")  # the current run's step ends: the reconcile writes its run's end
    w.kube.on("patch_plan_status", lambda *_: _archive(w, store), times=1)
    status = w.reconciled()
    assert [r.run_id for r in store.rows] == [earlier]
    assert status["phase"] == "Succeeded"  # the reconcile's status, decided again
    assert status["history"][0]["id"] == earlier and status["history"][0]["archived"] is True
    assert w.kube.methods().count("get_plan") >= 1  # read again from the API


def test_writers_at_once_lose_nothing():
    """The reconcile that ends the run and collects its Jobs, and the archive marking every run
    it holds, at once: every mark and the run's end are in the status at the end."""
    w = _replaced_runs(3, podGC="OnPlanCompletion")
    store = _Store()
    w.end("a")
    w.kube.delay = 0.001  # every request yields: the writers interleave

    async def at_once() -> None:
        await asyncio.gather(w.reconciler.reconcile("ns", "p"), _archive(w, store))
        # the run's end: its retention (collecting) and the archive of the run, at once too
        await asyncio.gather(w.reconciler.reconcile("ns", "p"), _archive(w, store))

    asyncio.run(at_once())
    status = w.status()
    run = status["run"]["id"]
    assert status["phase"] == "Succeeded"
    assert [e["archived"] for e in status["history"]] == [True] * 3
    assert status.get("archived") == run and status.get("jobsCollected") == run
    assert sorted(r.run_id for r in store.rows) == sorted(
        [run, *(e["id"] for e in status["history"])]
    )


def test_a_waiting_plans_queue_and_an_edit_of_it_both_hold():
    """The Capsule queue's write of a waiting Plan, and a user's annotation written as it
    decides: the annotation is the Plan's (not the status'), and the queue's status is decided
    again on the Plan as the user left it."""
    w = Cluster({"default": {**CAPSULE, "concurrency": {"maxRunningPlans": 1}}}, steps=[])
    w.new_plan("holder", 1, steps=[{"id": "a", "shell": "sleep 100"}])
    w.new_plan("p", 2, steps=[{"id": "a", "shell": "sleep 100"}])
    w.reconcile("holder")

    def edit(*_: Any) -> None:
        w.annotate("team", "blue")

    w.kube.on("patch_plan_status", edit, times=1)
    w.kube.calls.clear()
    status = w.reconciled()
    assert status["queue"]["running"] == ["holder"]
    assert w.plan["metadata"]["annotations"] == {"team": "blue"}
    assert w.kube.methods().count("patch_plan_status") == 2  # refused once, then written
