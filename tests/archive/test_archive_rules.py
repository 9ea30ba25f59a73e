"""The archive's rules with a real PostgreSQL (the archive's writer, its Store, the operator's
schedule reconciler; the Kubernetes API in memory, tests/unit/fakekube.py):

- a ScheduledPlan's `successfulRunsHistoryLimit: 0` keeps its run until the writer has written
  its row and marked it; then the limit deletes it, and the row is in the table;
- the row's `capsule` is the Capsule the run ran under (its status.run, its history entry),
  not the Plan's Capsule when the row is written.
"""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import psycopg
import pytest

from planops.archive.queue import Archiver
from planops.archive.row import archived
from planops.archive.store import Store
from planops.kube.cache import WatchCache
from planops.reconciler import ScheduleReconciler
from tests.unit.fakekube import FakeKube
from tests.unit.test_archive_row import plan
from tests.unit.test_retention import NOW
from tests.unit.test_retention_archive import _run, _schedule

pytestmark = [pytest.mark.cluster, pytest.mark.archive]


async def _write(dsn: str, kube: FakeKube, p: dict[str, Any]) -> None:
    """The archive's writer, fed the Plan `p` (as the watch feeds it), until it is written."""
    cache = WatchCache()
    cache.seen("ADDED", copy.deepcopy(p))
    archiver = Archiver(lambda: Store.connect(dsn), kube, cache, dsn=dsn)
    assert archiver.offer(p)
    archiver.start()
    try:
        assert await archiver.drained(30)
    finally:
        await archiver.stop()


def _rows(dsn: str) -> list[tuple[str, str, str | None]]:
    with psycopg.connect(dsn) as conn:
        got = conn.execute("SELECT name, run_id, capsule FROM planops_runs ORDER BY run_id")
        return [(str(n), str(r), c) for n, r, c in got.fetchall()]


def test_a_history_limit_of_zero_deletes_a_run_only_once_the_archive_holds_it(dsn: str):
    kube = FakeKube()
    _schedule(kube, successfulRunsHistoryLimit=0)
    _run(kube, 1)
    schedules = ScheduleReconciler(kube, clock=lambda: NOW, budget=None, archived=archived)

    def reconcile() -> list[str]:
        asyncio.run(schedules.reconcile("scheduledplans", "ns", "nightly"))
        return [p["metadata"]["name"] for p in kube.of("plan")]

    assert reconcile() == ["nightly-001"]  # not archived yet: kept past the limit
    run = kube.get("plan", "ns", "nightly-001")
    assert run is not None
    asyncio.run(_write(dsn, kube, run))
    assert _rows(dsn) == [("nightly-001", "r1", "default")]
    marked = kube.get("plan", "ns", "nightly-001")
    assert marked is not None and marked["status"]["archived"] == "r1"
    assert reconcile() == []  # the mark's event: the limit deletes it now


def test_the_rows_capsule_is_the_one_each_run_ran_under(dsn: str):
    """A run on `builders`, then the Plan switched to `other` (generation 2) and re-run before
    the archive wrote anything (its database was down): both runs' rows name their own."""
    p = plan(generation=2, run_generation=2)
    p["spec"]["capsule"] = "other"
    p["status"]["run"]["capsule"] = "other"
    p["status"]["history"] = [
        {
            "id": "old1",
            "generation": 1,
            "capsule": "builders",
            "phase": "Failed",
            "startedAt": "2026-12-02T10:00:00Z",
            "finishedAt": "2026-12-02T10:00:05Z",
            "archived": False,
        }
    ]
    kube = FakeKube()
    kube.put("plan", copy.deepcopy(p))
    asyncio.run(_write(dsn, kube, p))
    assert _rows(dsn) == [("p", "abc123", "other"), ("p", "old1", "builders")]
