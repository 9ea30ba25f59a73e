"""One run's budget (engine.budget): the record text it holds, cut as records settle, and the
work one decide() does. The plan that made a run hold gigabytes (bench/big_results.py: a map whose
body filters a large input, so every body record is the whole input again) runs here at a
smaller size, through the engine, the local runner and a restore."""

from __future__ import annotations

import asyncio
import json

from bench import big_results

from planops.api import PlanSpec
from planops.engine import Facts, Run, outputs
from planops.engine import budget as budget_
from planops.runners.local import LocalRunner

from .helpers import capsule, plan


def big(items: int = 30, rows: int = 1500) -> PlanSpec:
    return PlanSpec.model_validate(big_results.plan(items, rows)["spec"])


def run_engine(spec: PlanSpec) -> tuple[Run, int]:
    """Decide until finished (nothing here needs a Job); returns the run and how many decides."""
    run = Run("p", spec)
    decides = 0
    while True:
        decides += 1
        decision = run.decide(0.0)
        assert not decision.dispatch
        if decision.finished:
            return run, decides


def text_bytes(run: Run) -> int:
    return sum(len((r.output or "").encode()) + len((r.error or "").encode()) for r in run.settled)


def test_a_run_holds_no_more_record_text_than_its_budget():
    # 30 items x a ~300 KB filter result: 9 MB of results without a budget, more than twice it
    run, _ = run_engine(big())
    held = text_bytes(run)
    assert held <= budget_.RUN_TEXT_BUDGET + len(run.settled) * budget_.MARK_ROOM
    assert run.budget.held == held  # what it counts is what it holds
    assert all(len((r.output or "").encode()) <= budget_.RECORD_TEXT_LIMIT for r in run.settled)
    report = run.report()
    assert report.completed
    records, before = report.cut
    # every filter result (~300 KB) past the first 4 MiB, and the map's, were cut
    assert len(run.settled) - 15 <= records < len(run.settled)
    assert before > 30 * 250_000
    assert report.to_json()["cut"] == {"records": records, "bytes": before}


def test_a_cut_record_keeps_its_head_and_tail_and_says_how_big_it_was():
    rows = ["x" * 1000] * 1200  # a 1.2 MB result: over RECORD_TEXT_LIMIT
    every = {"value": 1, "op": "eq", "to": 1}
    spec = plan(
        {"id": "f", "filter": {"over": "{{input.rows}}", "where": every}},
        input={"rows": rows},
    )
    run, _ = run_engine(spec)
    (f,) = run.settled
    assert len(f.output.encode()) <= budget_.RECORD_TEXT_LIMIT
    whole = {"count": 1200, "items": rows, "dropped": [], "dropped_count": 0}
    assert outputs.cut_size(f.output) == len(json.dumps(whole))
    assert f.output.startswith(json.dumps(whole)[:1000])  # its head
    assert f.output.endswith(json.dumps(whole)[-1000:])  # and its tail


def test_once_the_budget_is_spent_a_record_keeps_only_its_mark():
    run, _ = run_engine(big())
    last_items = [r for r in run.settled if r.step_id.startswith("each.")][-5:]
    for r in last_items:
        assert r.output.startswith("[planops: ") and r.output.endswith(" budget)]")
        assert outputs.cut_size(r.output) > 250_000


def test_a_decide_starts_a_bounded_number_of_items_and_asks_to_decide_again_at_once():
    n = budget_.ITEMS_PER_DECIDE * 2 + 5
    spec = big(items=n, rows=2)
    run = Run("p", spec)
    first = run.decide(7.0)
    assert not first.finished
    assert first.wake_at == 7.0  # at once
    started = sum(1 for r in run.settled if r.step_id.startswith("each."))
    assert started == budget_.ITEMS_PER_DECIDE
    run, decides = run_engine(spec)
    assert decides == 3
    assert run.report().completed
    assert json.loads(run.settled[-1].output)["count"] == n


def test_a_restored_run_holds_and_counts_what_the_live_run_cut_without_cutting_again():
    live, _ = run_engine(big(items=12))
    facts = Facts(tuple(live.settled), ())
    restored = Run.restore("p", big(items=12), facts)
    assert restored.budget.held == live.budget.held
    assert restored.report().cut == live.report().cut
    assert [r.output for r in restored.settled] == [r.output for r in live.settled]


def test_a_restored_run_starts_more_items_a_decide_the_more_records_it_was_restored_from():
    n = budget_.ITEMS_PER_DECIDE * 20
    spec = big(items=n, rows=1)
    live = Run("p", spec)
    while len(live.settled) < budget_.ITEMS_PER_DECIDE * 16:
        live.decide(0.0)
    restored = Run.restore("p", spec, Facts(tuple(live.settled), ()))
    before = len(restored.settled)
    decision = restored.decide(0.0)
    assert decision.wake_at == 0.0
    assert len(restored.settled) - before == before // 8  # 200 items, not 100


def test_a_run_restored_halfway_cuts_the_rest_as_the_live_run_did():
    spec = big(items=budget_.ITEMS_PER_DECIDE + 20, rows=200)
    whole, _ = run_engine(spec)
    half = Run("p", spec)
    half.decide(0.0)  # the first ITEMS_PER_DECIDE items only
    restored = Run.restore("p", spec, Facts(tuple(half.settled), ()))
    while not restored.decide(0.0).finished:
        pass
    assert [r.output for r in restored.settled] == [r.output for r in whole.settled]


def test_an_exit_record_stays_json_whatever_its_output_and_message():
    spec = plan(
        {
            "id": "stop",
            "exit": {
                "status": "error",
                "message": "{{input.big}}",
                "output": {"rows": "{{input.rows}}"},
            },
        },
        input={"big": "m" * 40_000, "rows": ["x" * 1000] * 1200},
    )
    run, _ = run_engine(spec)
    (rec,) = run.settled
    result = json.loads(rec.output)
    assert result["fired"] is True and result["status"] == "error"
    assert len(result["message"].encode()) <= budget_.ERROR_TEXT_LIMIT
    assert outputs.cut_size(result["output"]) is not None
    assert run.report().exit is not None


def test_the_local_runner_runs_the_big_plan_within_the_budget_and_reports_the_cut():
    runner = LocalRunner({"default": capsule()})
    report = asyncio.run(runner.run("p", big(items=budget_.ITEMS_PER_DECIDE + 30)))
    assert report.completed
    held = sum(len((r.output or "").encode()) for r in report.steps)
    assert held <= budget_.RUN_TEXT_BUDGET + len(report.steps) * budget_.MARK_ROOM
    assert len(report.steps) - 15 <= report.cut[0] < len(report.steps)
