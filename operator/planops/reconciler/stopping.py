"""Pure: whether a run must stop now, and what stopping it means.

A run stops when somebody cancels it (`kubectl plan cancel` writes the cancel annotation) or
when it has run longer than the plan's `activeDeadlineSeconds`. Stopping deletes the object of
every attempt in flight (its Job or child Plan), records each such attempt as failed with the
reason, and ends the plan (Failed). The reconciler deletes what `stop` names (the actuator's
part); everything here is decided from the run and what was observed, with the clock passed in.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from planops.api import PlanSpec
from planops.engine import Report, Run, StepRecord
from planops.reconciler.observe import Observed

Reason = Literal["Cancelled", "DeadlineExceeded"]


def deadline(spec: PlanSpec, started_at: float) -> float | None:
    """When the run must have ended (activeDeadlineSeconds after it started), or None."""
    return started_at + spec.active_deadline_seconds if spec.active_deadline_seconds else None


def why_stop(
    cancel: str | None, spec: PlanSpec, started_at: float, now: float, finished: bool
) -> tuple[str, Reason] | None:
    """Why the run stops now, and the reason's name; None: it goes on."""
    if cancel:
        return str(cancel), "Cancelled"
    ends = deadline(spec, started_at)
    if ends is not None and now >= ends and not finished:
        return (
            f"the plan ran longer than its activeDeadlineSeconds ({spec.active_deadline_seconds}s)",
            "DeadlineExceeded",
        )
    return None


@dataclass(frozen=True)
class Stop:
    """What stopping a run does: the objects to delete (kind "job" or "plan", name), the report
    with each attempt in flight recorded as failed, and the word the Events use."""

    deletes: tuple[tuple[Literal["job", "plan"], str], ...]
    report: Report
    stopped: int
    label: str


def stop(run: Run, observed: list[Observed], why: str, reason: Reason, now: float) -> Stop:
    label = "cancelled" if reason == "Cancelled" else "stopped"
    objects = {(o.step_id, o.attempt): o for o in observed}
    deletes: list[tuple[Literal["job", "plan"], str]] = []
    records = []
    for step_id, attempt in run.in_flight_attempts():
        obj = objects.get((step_id, attempt))
        if obj is not None:
            deletes.append((obj.kind, obj.object_name))
        started = obj.started_at if obj is not None else now
        records.append(
            StepRecord(step_id, "failed", None, f"{label} ({why})", attempt, started, now)
        )
    report = run.report()
    report = Report(report.plan_id, False, None, (*report.steps, *records))
    return Stop(tuple(deletes), report, len(records), label)
