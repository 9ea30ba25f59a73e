"""The Plan's `.status`: a summary of the run under a fixed bound, whatever the plan's size.

A Plan's spec and status share one object, and etcd refuses objects over 1.5 MiB, so the status
holds only a summary (docs/architecture.md, "Reports"): phase, the `Succeeded` condition,
counts by status, the attempts in flight, the failed step's record, the most recent settled
records and the plan's output, each part under its own bound (SUMMARY_BUDGET in all). Every
settled record goes to the run's PlanReport objects (reconciler.history.chunks), the report's only
complete copy, which is also what a restarted operator restores from.

The trimming rules (docs/operator.md):
- a record's error + stderr + output share REPORT_BUDGET over the run's records: each may keep
  `text_share(records)` bytes, the error first (at most ERROR_LIMIT), then its stderr's tail
  (at most a quarter of what is left), the output in the rest, capped also at the Capsule's
  outputLimitBytes and at RECORD_TEXT_LIMIT; a cut text keeps its head and its tail around a
  mark (engine.outputs). The full output stays in the step's pod log (`kubectl plan logs`);
- the status repeats the last STATUS_RECORDS records (an operator flag), the newest with up to
  LAST_TEXT bytes of text (a capsule step's output is its child plan's last record, read from
  here), the others with RECENT_TEXT; the failed step's record with RECENT_TEXT;
- the plan's output, when larger than OUTPUT_LIMIT, is left out with an `outputError`;
- at most IN_FLIGHT_LIMIT attempts in flight and REFUSED_LIMIT refused attempts are recorded;
- validation errors: at most MAX_ERRORS entries of at most MAX_ERROR_MESSAGE bytes.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from planops.api.limits import MAX_STEPS, SPEC_BUDGET
from planops.api.names import Phase
from planops.api.status_model import Condition, PlanStatus, RefusedAttempt
from planops.engine import AttemptFact, PlanError, Report, outputs
from planops.engine.budget import RUN_TEXT_BUDGET
from planops.engine.report import parse_rfc3339, rfc3339

#: the spec's room (SPEC_BUDGET) and its literal steps (MAX_STEPS, the CRD's maxItems) are the
#: CRD's: they leave SUMMARY_BUDGET beside them
__all__ = [
    "MAX_STEPS",
    "SPEC_BUDGET",
    "cap_text",
    "invalid",
    "output_cap",
    "parse_rfc3339",
    "rfc3339",
    "running",
]

#: every record's texts of one run, in its PlanReport objects: the run's budget of record text,
#: which the engine already keeps as records settle (engine.budget); here it is shared out
REPORT_BUDGET = RUN_TEXT_BUDGET
STEP_OVERHEAD = 256  # stepId (63), status, attempts, two timestamps, keys and JSON punctuation
#: the most text one record keeps (a PlanReport object holds at least one record)
RECORD_TEXT_LIMIT = 256 << 10
#: the summary's bound (tests/unit/test_status_bound.py checks the worst case stays under it)
SUMMARY_BUDGET = 452 << 10
STATUS_RECORDS = 50
LAST_TEXT = 64 << 10
RECENT_TEXT = 1024
OUTPUT_LIMIT = 64 << 10
IN_FLIGHT_LIMIT = 500
REFUSED_LIMIT = 50
ERROR_LIMIT = 2048
MAX_ERRORS = 200
MAX_ERROR_MESSAGE = 512


def text_share(steps: int) -> int:
    """Bytes of error + stderr + output each step may record (the trimming rule above)."""
    n = max(1, steps)
    share = (REPORT_BUDGET - n * STEP_OVERHEAD) // n - MARK_ROOM * 3
    return max(RECENT_TEXT // 4, min(RECORD_TEXT_LIMIT, share))


def output_cap(capsule_limit: int, steps: int) -> int:
    """Bytes of output recorded per step when its error takes nothing."""
    return max(0, min(capsule_limit, text_share(steps)))


def error_cap(steps: int) -> int:
    return max(0, min(ERROR_LIMIT, text_share(steps)))


def stored_len(text: str) -> int:
    """Bytes `text` takes as a JSON string in the API server's encoding: UTF-8 (not \\u-escaped),
    but with Go's escapes (\\n, \\", control characters, and <, >, & as \\u003c: 6 bytes)."""
    n = len(json.dumps(text, ensure_ascii=False).encode()) - 2  # not the quotes
    return n + 5 * (text.count("<") + text.count(">") + text.count("&"))


#: the most a cut text's mark takes, stored (engine.outputs: the count of cut records reads its
#: total back, engine.budget.tally)
MARK_ROOM = outputs.mark_room(stored_len)


def json_size(value: Any) -> int:
    """Bytes `value` takes as JSON in the API server's encoding (see stored_len)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return len(text.encode()) + 5 * (text.count("<") + text.count(">") + text.count("&"))


def cap_text(text: str | None, limit: int, why: str = outputs.REPORT_SHARE) -> str | None:
    """`text` with at most `limit` stored bytes (stored_len) of its own, its head and its tail
    around a mark when cut (engine.outputs.cut, the one rule); None for no text."""
    if not text:
        return None
    return outputs.cut(text, max(0, limit) + MARK_ROOM, why, stored_len)


def cap_step(
    output: str | None,
    error: str | None,
    capsule_limit: int,
    steps: int,
    stderr: str | None = None,
) -> tuple[str | None, str | None, str | None]:
    """(output, error, stderr) of one step within its share (the output also within the
    Capsule's limit): `cap_texts`."""
    return cap_texts(output, error, stderr, text_share(steps), capsule_limit)


def cap_texts(
    output: str | None,
    error: str | None,
    stderr: str | None,
    limit: int,
    output_limit: int | None = None,
) -> tuple[str | None, str | None, str | None]:
    """(output, error, stderr) within `limit` stored bytes of text: the error first (at most
    ERROR_LIMIT), then stderr (at most a quarter of what is left: its tail was bounded when it
    was read), the output in the rest (and within `output_limit`)."""
    error = cap_text(error, min(ERROR_LIMIT, limit))
    room = limit - (stored_len(error) if error else 0)
    stderr = cap_text(stderr, room // 4)
    room -= stored_len(stderr) if stderr else 0
    if output_limit is not None:
        room = min(output_limit, room)
    return cap_text(output, max(0, room)), error, stderr


def top_level(report: Report) -> int:
    """Settled steps of the plan itself (body steps, `<control>.<key>.<step>`, are not counted)."""
    return sum(1 for r in report.steps if "." not in r.step_id)


def human_duration(seconds: float) -> str:
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60}s"
    return f"{s // 3600}h{(s % 3600) // 60}m"


def condition(
    status: str, reason: str, message: str, generation: int, previous: list[Any], now: float
) -> Condition:
    """The `Succeeded` condition (True / False / Unknown), as Tekton and Argo CD read it."""
    old = next((c for c in previous if c.get("type") == "Succeeded"), None)
    changed = old is None or old.get("status") != status or old.get("reason") != reason
    return Condition.model_construct(
        type="Succeeded",
        status=status,
        reason=reason,
        message=message[:ERROR_LIMIT],
        observed_generation=generation,
        last_transition_time=rfc3339(now) if changed else old["lastTransitionTime"],  # type: ignore[index]
    )


def invalid(
    errors: list[PlanError],
    *,
    generation: int,
    run: dict[str, Any],
    previous: dict[str, Any],
    now: float,
) -> PlanStatus:
    """The status of a Plan the judge refused: Invalid, its refusals (bounded), nothing run."""
    shown = errors[:MAX_ERRORS]
    message = f"{len(errors)} validation error(s); first: {errors[0]}" if errors else ""
    cond = condition(
        "False", "ValidationFailed", message, generation, previous.get("conditions", []), now
    )
    return PlanStatus.model_construct(
        observed_generation=generation,
        run=run,
        phase=Phase.INVALID.value,
        progress="0/0",
        errors=[{**e.to_json(), "message": e.message[:MAX_ERROR_MESSAGE]} for e in shown],
        error_count=len(errors),
        conditions=[cond],
        report=None,
        failed_step=None,
        refused_attempts=None,
        started_at=None,
        finished_at=None,
        duration=None,
    )


@dataclass(frozen=True)
class Progress:
    """What a run's status says besides its report: how many steps it has, whether it finished
    or dispatched anything, its generation and run record, the attempts refused without an
    object, the status it builds on, when it started, the clock, its PlanReports' count and how
    many records the status repeats."""

    total: int
    finished: bool
    dispatched_any: bool
    generation: int
    run: dict[str, Any]
    refused: list[AttemptFact]
    previous: dict[str, Any]
    started_at: float
    now: float
    reports: int = 0
    status_records: int = STATUS_RECORDS


def running(report: Report, p: Progress) -> PlanStatus:
    """The status of a run in progress or finished: a summary of `report` (whose records are
    all in the run's `p.reports` PlanReport objects), bounded whatever the report's size."""
    phase = _phase(report, p)
    settled = {r.step_id for r in report.steps}
    refused = [f for f in p.refused if f.step_id not in settled][-REFUSED_LIMIT:]
    return PlanStatus.model_construct(
        observed_generation=p.generation,
        run=p.run,
        phase=phase.value,
        progress=f"{top_level(report)}/{p.total}",
        errors=None,
        error_count=None,
        conditions=[_succeeded(phase, report, p)],
        report={
            **summary(report, p.status_records),
            "reportObjects": p.reports,
            "generation": p.generation,
        },
        counts=counts(report),
        failed_step=report.failed_step,  # top level for the printer column (absent when null)
        refused_attempts=[
            RefusedAttempt.model_construct(
                step_id=f.step_id,
                attempt=f.attempt,
                error=cap_text(f.error, RECENT_TEXT),
                started_at=rfc3339(f.started_at),
                finished_at=rfc3339(f.finished_at),
            )
            for f in refused
        ]
        or None,
        started_at=rfc3339(p.started_at),
        finished_at=_finished_at(p),
        duration=_duration(report, p),
    )


def _phase(report: Report, p: Progress) -> Phase:
    if p.finished:
        return Phase.SUCCEEDED if report.completed else Phase.FAILED
    return Phase.RUNNING if (report.steps or p.dispatched_any) else Phase.PENDING


def _succeeded(phase: Phase, report: Report, p: Progress) -> Condition:
    """The Succeeded condition of a run in `phase`: why it succeeded, failed or goes on."""
    if phase == Phase.SUCCEEDED:
        status, reason, why = "True", "Succeeded", f"all {p.total} steps settled"
    elif phase == Phase.FAILED and report.stopped:  # a cancel, a deadline, the finally budget
        status, reason = "False", report.stopped[0].reason
        why = "; ".join(f"{h.label}: {h.why}" for h in report.stopped)
    elif phase == Phase.FAILED:
        status, reason = "False", "Failed"
        why = (
            f"step {report.failed_step!r} failed and stopped the plan"
            if report.failed_step
            else "the plan did not complete"
        )
    else:
        stops = "".join(f"; {h.label}: {h.why}, the finally steps run" for h in report.stopped)
        status, reason = "Unknown", phase.value
        why = f"{top_level(report)} of {p.total} steps settled{stops}"
    return condition(status, reason, why, p.generation, p.previous.get("conditions", []), p.now)


def _finished_at(p: Progress) -> str | None:
    """When the run finished: as the status first said it (a later reconcile keeps it)."""
    if not p.finished:
        return None
    return str(p.previous.get("finishedAt") or "") or rfc3339(p.now)


def _duration(report: Report, p: Progress) -> str:
    """How long the run took: until its last record settled once it finished, else until now."""
    end = p.now
    if p.finished and report.steps:
        end = max((s.finished_at or 0) for s in report.steps)
    return human_duration(max(0.0, end - p.started_at))


def stderr_in_output(new: PlanStatus, previous: dict[str, Any], now: bool) -> None:
    """Mark the run's report when a step's output was read as one with its stderr (the cluster
    could not read the pod log's streams apart: docs/operator.md), now or by an earlier
    reconcile of the run; one field for the run, nothing per record."""
    if new.report is not None and (now or (previous.get("report") or {}).get("stderrInOutput")):
        new.report["stderrInOutput"] = True


def recut(record: dict[str, Any], records: int, output_limit: int) -> dict[str, Any]:
    """One record (StepRecord.to_json) within its share of REPORT_BUDGET: Job outputs were cut
    when read, but results the decider made itself (filter, map, ask...) are cut here, once,
    before the record is written to its PlanReport object."""
    texts = record.get("output"), record.get("error"), record.get("stderr")
    return _with_texts(record, cap_step(*texts[:2], output_limit, records, texts[2]))


def _within(record: dict[str, Any], limit: int) -> dict[str, Any]:
    texts = record.get("output"), record.get("error"), record.get("stderr")
    return _with_texts(record, cap_texts(*texts, limit))


def _with_texts(
    record: dict[str, Any], texts: tuple[str | None, str | None, str | None]
) -> dict[str, Any]:
    out, err, stderr = texts
    new = {**record, "output": out, "error": err}
    if stderr is not None:
        new["stderr"] = stderr
    else:
        new.pop("stderr", None)
    return new


def _repeated(status_records: int) -> int:
    """How many of the last records a status repeats."""
    return max(1, min(status_records, STATUS_RECORDS_MAX))


def _as_repeated(tail: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The last records (to_json) as the status repeats them: the newest with LAST_TEXT bytes
    of text, the others RECENT_TEXT."""
    last = len(tail) - 1
    return [_within(r, LAST_TEXT if k == last else RECENT_TEXT) for k, r in enumerate(tail)]


def summary(report: Report, status_records: int = STATUS_RECORDS) -> dict[str, Any]:
    """The report as the status holds it: its verdict and output, the last `status_records`
    records (the newest with LAST_TEXT bytes of text, the others RECENT_TEXT), the failed
    step's record, and how many records there are in all (`records`; `stepsOmitted` of them
    are only in the PlanReport objects)."""
    recent = _as_repeated([r.to_json() for r in report.steps[-_repeated(status_records) :]])
    out: dict[str, Any] = {
        "planId": report.plan_id,
        "completed": report.completed,
        "failedStep": report.failed_step,
        "steps": recent,
        "records": len(report.steps),
        "stepsOmitted": len(report.steps) - len(recent),
    }
    # the stops too: a stop holds once written (reconciler.run.stopping reads them back)
    whole = Report(
        report.plan_id,
        report.completed,
        None,
        (),
        report.output,
        report.exit,
        stopped=report.stopped,
    )
    extra = {
        k: v
        for k, v in whole.to_json().items()
        if k in ("output", "outputError", "exit", "stopped")
    }
    if "exit" in extra:
        message = cap_text(extra["exit"]["message"], ERROR_LIMIT)
        extra["exit"] = {**extra["exit"], "message": message}
    size = json_size(extra.get("output"))
    if size > OUTPUT_LIMIT:
        extra["output"], extra["outputError"] = (
            None,
            f"the plan's output is {size} bytes, more than a Plan's status holds "
            f"({OUTPUT_LIMIT} bytes); make the plan's output smaller (its steps' full results "
            "are in its report: kubectl plan get NAME -o json)",
        )
    out.update(extra)
    if report.cut[0]:  # what the run's result budget cut as records settled (engine.budget)
        out["cut"] = {"records": report.cut[0], "bytes": report.cut[1]}
    if report.failed_step:
        failed = next((r for r in reversed(report.steps) if r.step_id == report.failed_step), None)
        if failed is not None:
            out["failedRecord"] = _within(failed.to_json(), RECENT_TEXT)
    return out


#: the most records a status may repeat (the operator flag's ceiling: SUMMARY_BUDGET holds it)
STATUS_RECORDS_MAX = 100


def holds_all(records: list[dict[str, Any]], status_records: int = STATUS_RECORDS) -> bool:
    """Whether `summary` repeats every one of a run's `records` (StepRecord.to_json, as cut for
    the report) without shortening any: then the status alone is the run's whole report, and
    no PlanReport is written for it (reconciler.history.chunks)."""
    if not records or len(records) > _repeated(status_records):
        return False
    return all(
        (kept.get(text) or None) == (record.get(text) or None)
        for kept, record in zip(_as_repeated(records), records, strict=True)
        for text in ("output", "error", "stderr")
    )


def counts(report: Report) -> dict[str, int]:
    """Settled records by status (body steps included)."""
    out = {"success": 0, "failed": 0, "skipped": 0}
    for r in report.steps:
        out[r.status] = out.get(r.status, 0) + 1
    return out
