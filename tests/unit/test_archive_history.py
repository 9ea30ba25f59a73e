"""The archive keeps the runs a re-run replaced before they were archived: an earlier run the
Plan keeps in status.history (with its PlanReports) is still pending while its entry lacks
`archived: true`, its row is made from its entry and every record of its PlanReports, and the
writer marks the entry once the row is written. Against the real PostgreSQL and cluster:
tests/e2e/test_run_history.py."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

from planops.archive.queue import Archiver, earlier_row
from planops.archive.row import archived, pending_earlier, pending_runs, waits_for_archive
from planops.kube.cache import WatchCache
from planops.kube.manifests import PlanRef
from planops.reconciler.history import chunks as reports
from planops.reconciler.history import run_history
from tests.unit.test_archive_row import plan

from .fakekube import FakeKube

EARLIER = {
    "id": "old1",
    "generation": 1,
    "phase": "Failed",
    "reason": "Failed",
    "startedAt": "2026-12-02T10:00:00.000Z",
    "finishedAt": "2026-12-02T10:00:05.000Z",
    "failedStep": "b",
    "counts": {"success": 1, "failed": 1, "skipped": 0},
    "archived": False,
}
RECORDS = [{"stepId": "a", "status": "success"}, {"stepId": "b", "status": "failed"}]


def with_history(*entries: dict[str, Any], **kw: Any) -> dict[str, Any]:
    p = plan(**kw)
    p["status"]["history"] = [dict(e) for e in entries]
    return p


def test_an_earlier_run_not_archived_is_pending_and_the_plan_not_archived_until_it_is():
    p = with_history(EARLIER, archived_run="abc123")
    assert pending_runs(p) == ["old1"] and not archived(p)
    p["status"]["history"][0]["archived"] = True
    assert pending_runs(p) == [] and archived(p)
    running = with_history({**EARLIER, "phase": "Running"}, archived_run="abc123")
    assert pending_runs(running) == []  # only finished runs are archived
    assert pending_runs(with_history(EARLIER)) == ["abc123", "old1"]


def test_an_earlier_runs_row_is_its_entry_with_every_record():
    r = earlier_row(with_history(EARLIER, generation=2, run_generation=2), EARLIER, RECORDS)
    assert (r.run_id, r.phase, r.failed_step, r.generation) == ("old1", "Failed", "b", 1)
    assert r.report["steps"] == RECORDS and r.report["stepsOmitted"] == 0
    assert r.duration_seconds == 5.0 and r.plan_uid == "uid-p"
    assert r.spec is None  # generation 1's spec is gone from the Plan: none rather than wrong
    same = earlier_row(with_history(EARLIER), EARLIER, RECORDS)
    assert same.spec is not None and same.spec_digest is not None


def _cluster(
    p: dict[str, Any], chunks: list[dict[str, Any]], refuse_mark: bool = False
) -> FakeKube:
    """The API server holding the Plan `p` and its PlanReports; `refuse_mark`: its history moves
    on (a reconcile's write) as the mark is written, so the mark's precondition fails (409): the
    Plan is read again, and its history no longer has the entry."""
    kube = FakeKube()
    kube.put("plan", copy.deepcopy(p))
    for chunk in chunks:
        kube.put("planreport", {**chunk, "metadata": {**chunk["metadata"], "namespace": "team"}})
    if refuse_mark:

        def moved(*_: Any) -> None:
            stored = kube.get("plan", "team", "p")
            assert stored is not None
            stored["status"]["history"] = []
            stored["metadata"]["resourceVersion"] += "1"

        kube.on("patch_plan_status", moved, times=1)
    return kube


def _marked(kube: FakeKube) -> list[tuple[str, str, int | str, Any]]:
    """The marks written: (namespace, name, history index or "current", run)."""
    plan = kube.get("plan", "team", "p")
    assert plan is not None
    return [
        ("team", "p", i, e["id"])
        for i, e in enumerate(plan["status"].get("history") or [])
        if e.get("archived") is True and e["id"] != "done0"
    ]


class _Store:
    def __init__(self) -> None:
        self.rows: list[Any] = []

    async def write(self, row: Any) -> bool:
        self.rows.append(row)
        return True


def _archive(p: dict[str, Any], cluster: FakeKube) -> _Store:
    cache = WatchCache()
    cache.seen("ADDED", copy.deepcopy(cluster.get("plan", "team", "p")))  # as the watch shows it
    store = _Store()

    async def no_database() -> Any:
        raise AssertionError("the writer is handed its store")

    archiver = Archiver(no_database, cluster, cache)
    assert archiver.offer(p)
    asyncio.run(archiver._archive(store, ("team", "p")))  # type: ignore[arg-type]
    return store


def test_the_writer_archives_an_earlier_run_from_its_planreports_and_marks_its_entry():
    ref = PlanRef("team", "p", "uid-p", "old1")
    chunk = reports.body(ref, reports.Chunk(0, 0, 2, 0), RECORDS)
    other = reports.body(PlanRef("team", "p", "uid-p", "zzz"), reports.Chunk(0, 0, 1, 0), [{}])
    p = with_history({**EARLIER, "id": "done0", "archived": True}, EARLIER, archived_run="abc123")
    cluster = _cluster(p, [chunk, other])
    store = _archive(p, cluster)
    [row] = store.rows
    assert row.run_id == "old1" and [s["stepId"] for s in row.report["steps"]] == ["a", "b"]
    assert _marked(cluster) == [("team", "p", 1, "old1")]  # its index in the history


def test_a_mark_the_history_moved_away_from_is_not_written():
    p = with_history(EARLIER, archived_run="abc123")
    cluster = _cluster(p, [], refuse_mark=True)
    store = _archive(p, cluster)
    assert [r.run_id for r in store.rows] == ["old1"] and _marked(cluster) == []
    assert cluster.methods().count("patch_plan_status") == 1  # refused, then nothing to mark
    assert "get_plan" in cluster.methods()  # read again from the API


def test_pending_earlier_gives_each_waiting_entry_its_index():
    p = with_history({**EARLIER, "id": "x", "archived": True}, EARLIER, {"no": "id"})
    assert [(i, e["id"]) for i, e in pending_earlier(p)] == [(1, "old1")]


def test_the_archive_and_the_history_agree_on_which_runs_wait():
    for phase in ("Succeeded", "Failed", "Running", "Pending", None):
        for mark in (True, False, None, "yes"):
            e = {"id": "r", "phase": phase, "archived": mark}
            assert waits_for_archive(e) == run_history.waits_for_archive(e), e
