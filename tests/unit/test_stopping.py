"""Stopping a run, decided without the cluster: when it stops (a cancel, the plan's deadline)
and what stopping it means (each attempt in flight deleted and recorded as failed)."""

from __future__ import annotations

from planops.engine import Run
from planops.reconciler import stopping
from planops.reconciler.observe import Observed

from .helpers import plan


def test_a_cancel_stops_a_run_at_once_and_a_deadline_only_once_passed_and_unfinished():
    spec = plan({"id": "a", "shell": "true"}, activeDeadlineSeconds=30)
    assert stopping.why_stop("no longer needed", spec, 100.0, 101.0, False) == (
        "no longer needed",
        "Cancelled",
    )
    assert stopping.why_stop(None, spec, 100.0, 129.9, False) is None
    assert stopping.why_stop(None, spec, 100.0, 130.0, False) == (
        "the plan ran longer than its activeDeadlineSeconds (30s)",
        "DeadlineExceeded",
    )
    assert stopping.why_stop(None, spec, 100.0, 130.0, True) is None  # it ended in time
    assert stopping.why_stop(None, plan({"id": "a", "shell": "true"}), 0.0, 1e9, False) is None
    assert stopping.deadline(spec, 100.0) == 130.0


def test_stopping_deletes_every_attempt_in_flight_and_records_it_failed():
    spec = plan(
        {"id": "job", "shell": "sleep 9"},
        {"id": "child", "capsule": "other", "input": "x"},
        {"id": "gone", "shell": "sleep 9"},
        {"id": "later", "shell": "true", "dependsOn": ["job"]},
    )
    run = Run("p", spec)
    run.decide(10.0)  # job, child and gone are in flight
    observed = [
        Observed("job", 1, "p-job-1", "job", 11.0, None),
        Observed("child", 1, "p-child-1", "plan", 12.0, None),
    ]
    stop = stopping.stop(run, observed, "no longer needed", "Cancelled", 20.0)
    assert stop.deletes == (("job", "p-job-1"), ("plan", "p-child-1"))
    assert stop.stopped == 3 and stop.label == "cancelled"
    records = {r.step_id: r for r in stop.report.steps}
    assert set(records) == {"job", "child", "gone"}  # `later` never ran: absent
    assert all(r.status == "failed" for r in records.values())
    assert records["job"].error == "cancelled (no longer needed)"
    assert (records["job"].started_at, records["gone"].started_at) == (11.0, 20.0)
    assert {(r.attempts, r.finished_at) for r in records.values()} == {(1, 20.0)}
    assert stop.report.completed is False and stop.report.failed_step is None
    assert stop.report.plan_id == "p"


def test_a_run_past_its_deadline_is_stopped_not_cancelled():
    run = Run("p", plan({"id": "a", "shell": "sleep 9"}))
    run.decide(0.0)
    stop = stopping.stop(run, [], "too long", "DeadlineExceeded", 5.0)
    assert stop.label == "stopped" and stop.deletes == ()
    assert stop.report.steps[0].error == "stopped (too long)"
