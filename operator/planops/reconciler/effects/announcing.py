"""What a reconcile tells about what it decided: the Events on the Plan and the metrics.

Settlements first (a step's start follows the settlements that made it ready), then the steps
started, then the plan's own end, once: the Plan's previous phase says whether it was told.
Pure: they are told to a `Told` (reconciler.effects.intents), which the actuator posts and counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from planops.api import PlanSpec, names
from planops.engine import Dispatch, Report, Run, StepRecord, finally_steps
from planops.engine.report import stopped_record
from planops.reconciler.effects.body_events import BodyEvents
from planops.reconciler.effects.intents import Told
from planops.reconciler.run import status as status_
from planops.reconciler.run import stopping


@dataclass(frozen=True)
class Decided:
    """What a reconcile decided of a run, as its Events and metrics tell it: the run and its
    spec, the status it built on, the clock and the run's start, the attempts dispatched and
    the records settled now, the report as written, and whether the run finished."""

    run: Run
    spec: PlanSpec
    previous: dict[str, Any]
    now: float
    started_at: float
    dispatched: list[Dispatch]
    settled: list[StepRecord]
    report: Report
    finished: bool


def announce(events: Told, d: Decided) -> None:
    """The Events and metrics of what this reconcile decided, in the order it happened:
    settlements first (a start follows the settlements that made its step ready), then the
    steps started, then the plan's own end, once."""
    body = BodyEvents(d.run.settled, d.settled)  # a big map posts summaries, not an Event each
    for rec in d.settled:
        _settled(events, d.run, rec, body)
    settled_at = {r.step_id: r.finished_at for r in d.run.settled if r.finished_at is not None}
    for dispatch in d.dispatched:
        if dispatch.attempt > 1:
            events.inc("retries")
        events(
            "StepStarted",
            f"step {dispatch.step.id} attempt {dispatch.attempt} ({dispatch.kind})",
            post=body.post_started(dispatch.step.id),
            step=dispatch.step.id,
            attempt=dispatch.attempt,
        )
        ready = ready_at(settled_at, dispatch, d.started_at)
        events.observe("dispatch_latency", max(0.0, d.now - ready))
    for ctl, message, warning in body.summaries():
        events("BodyStepsSettled", message, warning=warning, step=ctl)
    if d.finished and not names.ended(d.previous.get("phase")):
        _ended(events, d)


def _settled(events: Told, run: Run, rec: StepRecord, body: BodyEvents) -> None:
    reason = {"success": "StepSucceeded", "failed": "StepFailed"}.get(rec.status, "StepSkipped")
    events(
        reason,
        f"step {rec.step_id} {rec.status}" + (f": {rec.error}" if rec.error else ""),
        warning=rec.status == "failed",
        post=body.post_settled(rec.step_id),
        step=rec.step_id,
        status=rec.status,
        attempts=rec.attempts,
    )
    kind = run.kind_of(rec.step_id)
    events.inc("steps", kind, rec.status)
    if rec.duration is not None:
        events.observe("step_duration", rec.duration, kind)
    if kind in ("capsule", "template") and rec.attempts:
        events(
            "DelegationFinished", f"step {rec.step_id}: child plan {rec.status}", step=rec.step_id
        )


def _ended(events: Told, d: Decided) -> None:
    """The plan's end, told once (the status it built on had not ended)."""
    report = d.report
    result = "succeeded" if report.completed else "failed"
    if report.stopped and report.stopped[0].reason == "Cancelled":
        result = "cancelled"
    events.inc("plans", result)
    events.observe("plan_duration", max(0.0, d.now - d.started_at))
    settled = f"{status_.top_level(report)}/{finally_steps.step_count(d.spec)} steps settled"
    if report.stopped:
        stopped = sum(1 for r in report.steps if stopped_record(r))
        why = "; ".join(f"{h.label} ({h.why})" for h in report.stopped)
        message = f"{why}; {stopped} running step(s) stopped; {settled}"
    else:
        message = settled + (
            f"; step {report.failed_step} stopped the plan" if report.failed_step else ""
        )
    events(
        "PlanSucceeded" if report.completed else "PlanFailed", message, warning=not report.completed
    )


def stops(events: Told, report: Report, previous: dict[str, Any], spec: PlanSpec) -> None:
    """A PlanStopped Event for each stop of the run its status did not hold yet: a cancel or
    the deadline (and whether the finally steps run now), the finally steps' budget."""
    held = {(h.reason, h.why, h.steps) for h in stopping.held(previous)}
    for h in report.stopped:
        if (h.reason, h.why, h.steps) in held:
            continue
        if h.steps == "finally":
            then = "the finally steps running were stopped"
        elif h.run_finally and spec.finally_:
            budget = finally_steps.budget_seconds(spec)
            then = f"the finally steps run now, within {budget}s (finallyTimeoutSeconds)"
        else:
            then = "no finally step runs" if spec.finally_ else "nothing more runs"
        events("PlanStopped", f"{h.label} ({h.why}): {then}", warning=True, stop=h.reason)


def ready_at(finished: dict[str, float], d: Dispatch, default: float) -> float:
    """When a dispatched step became ready: its last dependency's settlement (or the run start)."""
    return max((finished[dep] for dep in d.step.depends_on if dep in finished), default=default)
