"""Earlier runs' PlanReports are kept within a byte budget per Plan: newest first while their sum
fits HISTORY_REPORT_BYTES; past it an entry keeps its summary (`recordsKept: false`) and its
PlanReports are deleted, never before the archive (when on) has the run."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from planops.engine import Facts, capsules
from planops.kube import manifests
from planops.reconciler import earlier_run
from planops.reconciler.effects.intents import Told
from planops.reconciler.history import chunks as reports_
from planops.reconciler.history import run_history
from planops.reconciler.run import retrying

from .test_run_history import failing_world, reports_of, rerun
from .test_status_bound import stored_size


def one_runs_bytes() -> int:
    """The bytes one failed run of failing_world(status_records=1) writes to its PlanReport."""
    w = failing_world(status_records=1)
    run = w.reconciled()["run"]["id"]
    return sum(len(json.dumps(r, separators=(",", ":"))) for r in reports_of(w, run))


@pytest.fixture
def budget_of_two_and_a_half_runs(monkeypatch: pytest.MonkeyPatch) -> int:
    size = one_runs_bytes()
    monkeypatch.setattr(run_history, "HISTORY_REPORT_BYTES", size * 5 // 2)
    return size


def reruns(w: Any, n: int) -> list[str]:
    ids = [w.reconciled()["run"]["id"]]
    for value in range(1, n + 1):
        ids.append(rerun(w, str(value), refuse=True)["run"]["id"])
    return ids


def test_past_the_byte_budget_the_oldest_runs_keep_their_summary_but_not_their_planreports(
    budget_of_two_and_a_half_runs: int,
) -> None:
    w = failing_world(status_records=1)
    ids = reruns(w, 4)
    history = w.status()["history"]
    assert [e["id"] for e in history] == ids[3::-1]  # historyLimit keeps all four entries
    assert [e.get("recordsKept", True) for e in history] == [True, True, False, False]
    assert all(e["reportBytes"] == budget_of_two_and_a_half_runs for e in history)
    assert history[3]["phase"] == "Failed" and history[3]["counts"]["failed"] == 2
    assert {r["run"] for r in w.kube.of("planreport")} == {ids[4], ids[3], ids[2]}


def test_an_entry_that_lost_its_records_never_gets_them_back_and_older_ones_follow(
    budget_of_two_and_a_half_runs: int,
) -> None:
    size = budget_of_two_and_a_half_runs
    kept = [{"id": "a"}, {"id": "b"}, {"id": "c"}, {"id": "d", "recordsKept": False}]
    sizes = {"a": size * 2, "b": size, "c": 1}
    out = run_history.within_budget(kept, sizes)
    # b does not fit after a; c would, but the budget keeps the newest runs' records only
    assert [run_history.records_kept(e) for e in out] == [True, False, False, False]
    assert run_history.within_budget([{"id": "d", "recordsKept": False}], {"d": 1}) == [
        {"id": "d", "recordsKept": False, "reportBytes": 1}
    ]


def test_while_the_archive_is_on_a_run_not_archived_keeps_its_planreports_past_the_budget(
    budget_of_two_and_a_half_runs: int,
) -> None:
    w = failing_world(status_records=1)
    w.reconciler.archive = True
    ids = reruns(w, 3)
    assert all(run_history.records_kept(e) for e in w.status()["history"])
    assert all(reports_of(w, run) != [] for run in ids)
    for e in w.plan["status"]["history"]:  # the archive's writer marks them
        e["archived"] = True
    rerun(w, "4", refuse=True)
    kept = [run_history.records_kept(e) for e in w.status()["history"]]
    assert kept == [True, True, False, False]
    assert reports_of(w, ids[0]) == [] and reports_of(w, ids[1]) == []


def test_get_run_of_an_entry_without_records_shows_its_summary_and_why(
    budget_of_two_and_a_half_runs: int,
) -> None:
    w = failing_world(status_records=1)
    ids = reruns(w, 4)
    old = asyncio.run(earlier_run(w.kube, w.plan, ids[0]))
    assert old is not None and old["phase"] == "Failed" and old["report"]["steps"] == []
    assert old["recordsKept"] is False and "history byte budget" in old["recordsDropped"]
    kept = asyncio.run(earlier_run(w.kube, w.plan, ids[3]))
    assert kept is not None and "recordsKept" not in kept and kept["report"]["steps"] != []


def test_a_retry_of_an_entry_without_records_reseeds_nothing_and_runs_every_step() -> None:
    w = failing_world(status_records=1)
    w.reconciled()
    plan = w.plan
    ref = manifests.PlanRef("ns", "p", plan["metadata"]["uid"], "old")
    record = {"stepId": "a", "status": "success", "attempts": 1, "output": "done"}
    chunk = reports_.Chunk(0, 0, 1, 0)
    asyncio.run(w.kube.create_plan_report("ns", reports_.body(ref, chunk, [record])))
    entry = {"id": "old", "generation": 1, "phase": "Failed", "failedStep": "b"}
    for keeps, settled in ((True, ["a"]), (False, [])):
        e = entry if keeps else {**entry, "recordsKept": False}
        plan["status"] = {"run": {"id": "new", "retryOf": "old"}, "history": [e]}
        found = asyncio.run(earlier_run(w.kube, plan, "old"))
        assert found is not None
        judged = asyncio.run(w.reconciler.judge(plan))
        earlier = retrying.Earlier.of_status(found, capsules({}))
        choice = retrying.Choice("new", reseed=True)
        facts = retrying.seed(choice, plan["status"], judged, earlier, Told())
        assert isinstance(facts, Facts) and [r.step_id for r in facts.settled] == settled


def test_the_worst_entry_with_its_byte_fields_stays_within_entry_bytes() -> None:
    long = "é<" * 100_000
    status = {
        "run": {"id": "r" * 300, "generation": 2**31, "rerun": long, "capsule": long},
        "phase": "Failed",
        "startedAt": "2026-11-30T00:00:00.123456Z",
        "finishedAt": "2026-11-30T00:00:00.123456Z",
        "failedStep": long,
        "conditions": [{"type": "Succeeded", "reason": long, "message": long}],
        "counts": {"success": 2**31, "failed": 2**31, "skipped": 2**31},
        "report": {"records": 2**31, "reportObjects": 2**31, "completed": True},
    }
    one = run_history.entry(status, "n" * 10, 0.0)
    assert one is not None
    [worst] = run_history.within_budget([one], {one["id"]: 2**62}, budget=0)
    assert worst["recordsKept"] is False
    assert stored_size(worst) <= run_history.ENTRY_BYTES, stored_size(worst)


def test_the_operators_history_report_bytes_sets_the_budget() -> None:
    size = one_runs_bytes()
    w = failing_world(status_records=1)
    w.reconciler.history_report_bytes = size * 3 // 2  # --history-report-bytes
    ids = reruns(w, 3)
    assert [run_history.records_kept(e) for e in w.status()["history"]] == [True, False, False]
    assert {r["run"] for r in w.kube.of("planreport")} == {ids[3], ids[2]}
