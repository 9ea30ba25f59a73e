"""Stopping a run, decided without the cluster: when it stops (a cancel, with or without its
finally steps; the plan's deadline), the stop its status holds, and what stopping means (each
attempt in flight recorded failed by the engine, its object deleted)."""

from __future__ import annotations

from planops.api import names
from planops.engine import Run
from planops.engine.report import Halt
from planops.reconciler.run import stopping
from planops.reconciler.run.observe import Observed

from .helpers import plan

CANCEL = names.ANNOTATION_CANCEL
RUN_FINALLY = names.ANNOTATION_CANCEL_RUN_FINALLY


def test_a_cancel_stops_a_run_at_once_and_a_deadline_only_once_passed():
    spec = plan({"id": "a", "shell": "true"}, activeDeadlineSeconds=30)
    cancel = stopping.why_stop({CANCEL: "no longer needed"}, spec, 100.0, 101.0)
    assert cancel == Halt("Cancelled", "no longer needed", 101.0, run_finally=False)
    assert stopping.why_stop({}, spec, 100.0, 129.9) is None
    assert stopping.why_stop({}, spec, 100.0, 131.0) == Halt(
        "DeadlineExceeded",
        "the plan ran longer than its activeDeadlineSeconds (30s)",
        130.0,  # the deadline itself: the finally steps' budget counts from there
        run_finally=True,
    )
    assert stopping.why_stop({}, plan({"id": "a", "shell": "true"}), 0.0, 1e9) is None
    assert stopping.deadline(spec, 100.0) == 130.0


def test_a_cancel_runs_the_finally_steps_only_when_asked_and_a_plain_cancel_wins():
    spec = plan({"id": "a", "shell": "true"})
    asked = stopping.why_stop({RUN_FINALLY: "clean up"}, spec, 0.0, 5.0)
    assert asked is not None and (asked.reason, asked.run_finally) == ("Cancelled", True)
    both = stopping.why_stop({RUN_FINALLY: "clean up", CANCEL: "now"}, spec, 0.0, 5.0)
    assert both is not None and (both.why, both.run_finally) == ("now", False)
    # a run that never started (it waited for a slot) runs nothing, finally steps included
    waiting = stopping.why_stop({RUN_FINALLY: "clean up"}, spec, 0.0, 5.0, admitted=False)
    assert waiting is not None and not waiting.run_finally
    huge = stopping.why_stop({CANCEL: "x" * 100_000}, spec, 0.0, 5.0)
    assert huge is not None and len(huge.why) == 256  # an annotation may hold 256 KiB


def test_the_stop_a_status_holds_is_read_back_and_anything_else_is_ignored():
    deadline = Halt("DeadlineExceeded", "too long", 130.0, run_finally=True)
    budget = Halt("DeadlineExceeded", "cleanup too long", 730.0, False, steps="finally")
    status = {"report": {"stopped": [deadline.to_json(), budget.to_json()]}}
    assert stopping.held(status) == (deadline, budget)
    assert stopping.persisted(status) == deadline
    for bad in ({"report": {"stopped": "x"}}, {"report": {"stopped": [{"reason": "Bored"}]}}, {}):
        assert stopping.persisted(bad) is None


def test_stopping_records_every_attempt_in_flight_failed_and_deletes_its_object():
    spec = plan(
        {"id": "job", "shell": "sleep 9"},
        {"id": "child", "capsule": "other", "input": "x"},
        {"id": "gone", "shell": "sleep 9"},
        {"id": "later", "shell": "true", "dependsOn": ["job"]},
    )
    run = Run("p", spec)
    run.decide(10.0)  # job, child and gone are in flight
    halt = Halt("Cancelled", "no longer needed", 20.0, run_finally=False)
    stopped = run.halt(halt, 20.0)
    assert stopped == [("job", 1), ("child", 1), ("gone", 1)]
    observed = [
        Observed("job", 1, "p-job-1", "job", 11.0, None),
        Observed("child", 1, "p-child-1", "plan", 12.0, None),
    ]
    assert stopping.deletes(stopped, observed) == (("job", "p-job-1"), ("plan", "p-child-1"))
    report = run.report()
    records = {r.step_id: r for r in report.steps}
    assert set(records) == {"job", "child", "gone"}  # `later` never ran: absent
    assert all(r.status == "failed" for r in records.values())
    assert records["job"].error == "cancelled (no longer needed)"
    assert {(r.attempts, r.finished_at) for r in records.values()} == {(1, 20.0)}
    assert (report.completed, report.failed_step, report.stopped) == (False, None, (halt,))
    assert run.decide(21.0).finished and run.halt(halt, 22.0) == []  # stopped once


def test_a_run_past_its_deadline_is_stopped_not_cancelled():
    run = Run("p", plan({"id": "a", "shell": "sleep 9"}, activeDeadlineSeconds=5))
    run.decide(0.0)
    halt = stopping.why_stop({}, run.spec, 0.0, 6.0)
    assert halt is not None and halt.label == "stopped"
    run.halt(halt, 6.0)
    assert run.report().steps[0].error == (
        "stopped (the plan ran longer than its activeDeadlineSeconds (5s))"
    )
