"""Pure: a run's facts for the engine, from what a reconcile read of it.

A run's settled records come from its PlanReports (history.report_book); everything else is read
by effects.reads (the Jobs and pods of steps not settled yet, their child Plans, the log of each
attempt that ended) and turned into the engine's facts here, with what the last status
remembers (refused attempts, asks waiting, attempts in flight whose object has vanished). A
settled step's objects are never read again.

An output is never made up: a log that cannot be read now is looked at again (`Later`, for up to
LOG_GRACE_SECONDS after the attempt ended), one that is gone for good fails a successful
attempt saying so (`Lost`).
"""

from __future__ import annotations

from collections.abc import Container, Iterable
from dataclasses import dataclass, replace
from typing import Any

from planops.api import CapsuleSpec
from planops.engine import AttemptFact, outputs
from planops.kube.errors import ApiError, ErrorKind
from planops.reconciler.run import asks as asks_
from planops.reconciler.run import status as status_
from planops.reconciler.run.observe import Observed, attempt_step
from planops.reconciler.run.status import parse_rfc3339
from planops.reconciler.run.step_logs import LOG_LOST, StepLog

#: how long a finished Job's pod may be missing from a listing before it counts as gone
POD_GRACE_SECONDS = 30.0
#: how long after a step ended its log may stay unreadable (a node restarting) before the
#: output counts as lost; looked at again every core.LATER_SECONDS meanwhile
LOG_GRACE_SECONDS = 120.0


@dataclass(frozen=True)
class Later:
    """An attempt's output that cannot be read now but may be soon."""

    reason: str


@dataclass(frozen=True)
class Lost:
    """An attempt's output that can no longer be read."""

    reason: str


#: what reading an ended attempt's output gave: its log read, its child's output or its
#: termination message, or why it is not there (yet)
Output = StepLog | str | Lost | Later | None


def pending(
    observed: Iterable[Observed], settled: Container[str], now: float
) -> tuple[list[Observed], bool]:
    """The attempts of steps not settled, and whether to look again shortly: a Job done whose pod
    is not listed (yet) is not settled without its output (past POD_GRACE_SECONDS the pod is
    taken as gone, and its output says so)."""
    out, later = [], False
    for o in observed:
        if o.step_id in settled:
            continue
        if (
            o.kind == "job"
            and o.status == "success"
            and o.pod is None
            and now - (o.finished_at or now) < POD_GRACE_SECONDS
        ):
            o, later = replace(o, status=None), True
        out.append(o)
    return out, later


def reads_log(o: Observed) -> bool:
    """Whether the attempt's output is read from its pod's log now (a Job's, once it ended)."""
    return o.kind == "job" and o.status is not None


def log_unreadable(
    namespace: str, obs: Observed, error: ApiError, gone: bool, now: float, cap: int
) -> Output:
    """What a log read the cluster refused means for the attempt's output: a failed attempt is
    settled by its error (its log is only a bonus) and a pod `gone` has no log any more (the
    termination message stands in); otherwise the node may serve it soon (`Later`), until
    LOG_GRACE_SECONDS after the attempt ended, and then the output is `Lost`."""
    if obs.status != "success" or gone:
        return terminated(obs, cap)
    if now - (obs.finished_at or now) < LOG_GRACE_SECONDS:
        return Later(f"log of {namespace}/{obs.pod} not readable yet: {error}")
    return Lost(
        f"its output could not be read: the node did not serve the log for "
        f"{LOG_GRACE_SECONDS:g}s after the step ended ({error.message[:300]})"
    )


def may_be_gone(error: ApiError) -> bool:
    """Whether a log read's error says the pod may be gone (the API server is asked then)."""
    return error.kind is ErrorKind.NOT_FOUND


def log_read(got: StepLog) -> Output:
    """A log read: its output, unless the kubelet said the container's log is gone."""
    if (got.output or "").startswith(LOG_LOST):
        return Lost(f"its output is gone: the node lost the container's log ({got.output})")
    return got


def terminated(obs: Observed, cap: int) -> Output:
    """The output of an attempt whose pod has no log to read: the last lines of the log the
    kubelet kept (FallbackToLogsOnError), made a value alike; a success without one lost it."""
    if obs.termination_message is None and obs.status == "success":
        return Lost("its output is gone: the pod was deleted before its log was read")
    return outputs.output_value(outputs.Capture.of(obs.termination_message, cap), cap)


@dataclass
class Assembled:
    """The attempts of a run's unsettled steps, and what reading them found."""

    attempts: list[AttemptFact]
    later: bool = False
    #: a step's output was read as one with its stderr (the cluster could not split the log)
    merged: bool = False


def attempts(
    pending_: list[Observed],
    read: dict[tuple[str, int], Output],
    capsule: CapsuleSpec,
    steps: int,
    now: float,
) -> Assembled:
    """The engine's fact of each pending attempt, its output as `read` (by attempt) or, for a
    child Plan, as observed; each output, error and stderr within its share of the report."""
    out = Assembled([])
    for obs in pending_:
        got = read.get((obs.step_id, obs.attempt)) if reads_log(obs) else obs.output
        status, error = obs.status, obs.error
        output: str | None = None
        stderr: str | None = None
        if isinstance(got, Later):  # still in flight: looked at again shortly
            status, out.later = None, True
        elif isinstance(got, Lost):
            status, error = "failed", error or got.reason
        elif isinstance(got, StepLog):
            out.merged = out.merged or got.merged
            output, stderr = got.output, got.stderr
        else:
            output = got
        text, err, stderr = status_.cap_step(
            output, error, capsule.output_limit_bytes, steps, stderr
        )
        finished = (obs.finished_at or now) if status else None
        out.attempts.append(
            AttemptFact(
                obs.step_id,
                obs.attempt,
                obs.started_at,
                status,
                finished,
                text,
                err,
                never_ran=obs.never_ran and status == "failed",
                stderr=stderr,
            )
        )
    return out


def remembered(previous: dict[str, Any], settled: Container[str]) -> list[AttemptFact]:
    """What the last status remembers of attempts with no object: those the cluster or the
    dispatch rules refused, and the asks waiting for an answer."""
    out = []
    for r in previous.get("refusedAttempts") or []:
        if r["stepId"] not in settled:
            t = parse_rfc3339(r.get("startedAt")) or 0.0
            finished = parse_rfc3339(r.get("finishedAt")) or t
            out.append(
                AttemptFact(
                    r["stepId"], int(r["attempt"]), t, "failed", finished, None, r.get("error")
                )
            )
    out += [w.fact() for w in asks_.waiting(previous) if w.step_id not in settled]
    return out


def vanished(
    previous: dict[str, Any],
    settled_ids: Container[str],
    observed: list[Observed],
    known: list[AttemptFact],
    now: float,
) -> list[AttemptFact]:
    """Attempts the last status had in flight whose Job or child Plan is gone (deleted by hand,
    or by anyone with the rights): they failed, so retries and onError apply as for any
    failure, and the step is never started again as the same attempt."""
    seen = {(o.step_id, o.attempt) for o in observed} | {(f.step_id, f.attempt) for f in known}
    out = []
    for f in previous.get("inFlight") or []:
        key = (str(f.get("stepId")), int(f.get("attempt") or 0))
        if key[0] in settled_ids or key in seen:
            continue
        started = parse_rfc3339(f.get("since")) or now
        out.append(
            AttemptFact(
                key[0],
                key[1],
                started,
                "failed",
                now,
                None,
                "its Job (or child Plan) was deleted before the attempt finished",
            )
        )
    return out


def unsettled(objs: list[dict[str, Any]], settled: Container[str]) -> list[dict[str, Any]]:
    """The Jobs or child Plans of steps not settled (read from the step label alone)."""
    return [o for o in objs if attempt_step(o) not in settled]
