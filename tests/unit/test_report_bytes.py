"""The bytes one run writes to its report (engine.budget RUN_REPORT_BYTES): besides their text,
records' frames (id, status, attempts, times) are counted, and a `map` whose body runs no Job
stops starting items once they are spent, live and restored alike."""

from __future__ import annotations

from bench import big_results

from planops.api import PlanSpec
from planops.engine import Facts, Run, StepRecord
from planops.engine import budget as budget_
from planops.reconciler.run import status as status_


def spec(items: int) -> PlanSpec:
    return PlanSpec.model_validate(big_results.plan(items, rows=1)["spec"])


def finish(run: Run) -> Run:
    while not run.decide(0.0).finished:
        pass
    return run


def frames(records: tuple[StepRecord, ...] | list[StepRecord]) -> int:
    return sum(budget_.frame_bytes(r) for r in records)


def test_a_map_stops_starting_items_once_the_runs_frames_are_spent_and_fails_saying_so():
    run = Run("p", spec(1000))
    one = budget_.frame_bytes(StepRecord("each.0.call", "success", "x", None, 1, 0.0, 0.0))
    run.budget.frame_limit = 250 * one
    finish(run)
    report = run.report()
    assert report.failed_step == "each"
    failed = next(r for r in run.settled if r.step_id == "each")
    assert failed.status == "failed"
    assert "[ReportBytesExceeded]" in (failed.error or "")
    assert "split the list" in (failed.error or "")
    body = [r for r in run.settled if r.step_id != "each"]
    assert 240 <= len(body) <= 251  # stopped at the budget, not at the list's end
    # what the run counted is what its records take besides text, within the budget plus the
    # record an item started in the same decide may take beyond the average
    assert run.budget.frames == frames(run.settled)
    assert frames(body) <= run.budget.frame_limit + 2 * one


def test_a_map_within_the_frame_budget_runs_to_its_end():
    run = finish(Run("p", spec(400)))
    assert run.report().failed_step is None
    assert run.budget.frames == frames(run.settled) < budget_.RUN_FRAME_BUDGET


def test_a_run_restored_after_its_frames_were_spent_fails_the_map_at_the_same_item():
    live = Run("p", spec(1000))
    limit = 250 * budget_.frame_bytes(StepRecord("each.0.call", "success", "x", None, 1, 0, 0))
    live.budget.frame_limit = limit
    finish(live)
    before = tuple(r for r in live.settled if r.step_id != "each")
    restored = Run.restore("p", spec(1000), Facts(before, ()))
    restored.budget.frame_limit = limit
    finish(restored)
    assert restored.budget.frames == frames(restored.settled)
    assert [r for r in restored.settled if r.step_id != "each"] == list(before)
    mine = next(r for r in restored.settled if r.step_id == "each")
    theirs = next(r for r in live.settled if r.step_id == "each")
    assert (mine.status, mine.error) == (theirs.status, theirs.error)


def test_a_records_frame_is_the_same_after_the_reconciler_cuts_its_text_again():
    record = StepRecord("each.7.call", "success", "y" * 300_000, "e" * 5000, 2, 1.5, 9.25)
    cut = StepRecord.from_json(status_.recut(record.to_json(), 200_000, 1024))
    assert cut.output != record.output
    assert budget_.frame_bytes(cut) == budget_.frame_bytes(record)


def test_the_frame_of_a_record_bounds_what_it_writes_besides_its_text():
    record = StepRecord("each.7.call", "success", "z" * 10, None, 1, 1.0, 2.0)
    whole = status_.json_size(record.to_json())
    assert whole - 10 <= budget_.frame_bytes(record)
    assert budget_.RUN_FRAME_BUDGET + budget_.RUN_TEXT_BUDGET == budget_.RUN_REPORT_BYTES


def test_a_map_stopped_past_the_text_budget_still_says_why_in_its_error():
    run = Run("p", spec(1000))
    run.budget.limit = 0  # the text budget spent from the start: every record keeps its mark
    one = budget_.frame_bytes(StepRecord("each.0.call", "success", "x", None, 1, 0.0, 0.0))
    run.budget.frame_limit = 250 * one
    finish(run)
    failed = next(r for r in run.settled if r.step_id == "each")
    assert (failed.error or "").startswith("[ReportBytesExceeded] map stopped before item ")
    assert "split the list" in (failed.error or "")  # whole: within the error's floor
    assert run.budget.frames == frames(run.settled)


def test_past_the_text_budget_a_record_writes_no_more_than_its_frame():
    run = Run("p", spec(1000))
    run.budget.limit = 0
    one = budget_.frame_bytes(StepRecord("each.0.call", "success", "x", None, 1, 0.0, 0.0))
    run.budget.frame_limit = 250 * one
    finish(run)
    assert any(r.error for r in run.settled)
    for r in run.settled:
        assert status_.json_size(r.to_json()) <= budget_.frame_bytes(r), r
