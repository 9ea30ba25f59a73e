"""The Plan's `.status`: phase, a `Succeeded` condition, the report, and what a restart needs.

Bounded by design: a Plan's status stays under 1 MiB whatever the plan's size or its steps'
output (etcd refuses objects over 1.5 MiB, and the spec needs room too). The trimming rule
(docs/operator.md):
- a plan has at most MAX_STEPS steps (CRD maxItems); each settled step's record costs at most
  STEP_OVERHEAD bytes besides its texts;
- what remains of STATUS_BUDGET is shared equally: each step may record `text_share(steps)` bytes
  of error + output, the error first (at most ERROR_LIMIT), the output in the rest, capped also at
  the Capsule's outputLimitBytes; a cut text ends with a truncation mark. The full output stays in
  the step's pod log (`kubectl plan logs`);
- validation errors: at most MAX_ERRORS entries of at most MAX_ERROR_MESSAGE bytes.
"""

from __future__ import annotations

import json
from typing import Any

from planops.engine import AttemptFact, PlanError, Report
from planops.engine.report import parse_rfc3339, rfc3339

__all__ = ["cap_text", "invalid", "output_cap", "parse_rfc3339", "rfc3339", "running"]

STATUS_BUDGET = 900 * 1024
STEP_OVERHEAD = 256  # stepId (63), status, attempts, two timestamps, keys and JSON punctuation
MAX_STEPS = 2000
ERROR_LIMIT = 2048
MAX_ERRORS = 200
MAX_ERROR_MESSAGE = 512
TRUNCATED = "\n[planops: output truncated at {kept} bytes]"
MARK_ROOM = 48  # the truncation mark's own bytes


def text_share(steps: int) -> int:
    """Bytes of error + output each step may record (the trimming rule above)."""
    n = max(1, min(steps, MAX_STEPS))
    return (STATUS_BUDGET - n * STEP_OVERHEAD) // n - MARK_ROOM * 2


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


def cap_text(text: str | None, limit: int) -> str | None:
    """`text` within `limit` stored bytes (stored_len), marked when cut; None for no text."""
    if not text:
        return None
    if stored_len(text) <= limit:
        return text
    lo, hi = 0, min(len(text), max(0, limit))  # longest prefix that fits: binary search
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if stored_len(text[:mid]) <= limit:
            lo = mid
        else:
            hi = mid - 1
    kept = text[:lo]
    return kept + TRUNCATED.format(kept=len(kept.encode()))


def cap_step(
    output: str | None, error: str | None, capsule_limit: int, steps: int
) -> tuple[str | None, str | None]:
    """(output, error) of one step within its share: the error first, the output in the rest."""
    share = text_share(steps)
    error = cap_text(error, min(ERROR_LIMIT, share))
    room = share - (stored_len(error) if error else 0)
    return cap_text(output, max(0, min(capsule_limit, room))), error


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
) -> dict[str, Any]:
    """The `Succeeded` condition (True / False / Unknown), as Tekton and Argo CD read it."""
    old = next((c for c in previous if c.get("type") == "Succeeded"), None)
    changed = old is None or old.get("status") != status or old.get("reason") != reason
    return {
        "type": "Succeeded",
        "status": status,
        "reason": reason,
        "message": message[:ERROR_LIMIT],
        "observedGeneration": generation,
        "lastTransitionTime": rfc3339(now) if changed else old["lastTransitionTime"],  # type: ignore[index]
    }


def invalid(
    errors: list[PlanError],
    *,
    generation: int,
    run: dict[str, Any],
    previous: dict[str, Any],
    now: float,
) -> dict[str, Any]:
    shown = errors[:MAX_ERRORS]
    message = f"{len(errors)} validation error(s); first: {errors[0]}" if errors else ""
    return {
        "observedGeneration": generation,
        "run": run,
        "phase": "Invalid",
        "progress": "0/0",
        "errors": [{**e.to_json(), "message": e.message[:MAX_ERROR_MESSAGE]} for e in shown],
        "errorCount": len(errors),
        "conditions": [
            condition(
                "False",
                "ValidationFailed",
                message,
                generation,
                previous.get("conditions", []),
                now,
            )
        ],
        "report": None,
        "failedStep": None,
        "refusedAttempts": None,
        "startedAt": None,
        "finishedAt": None,
        "duration": None,
    }


def running(
    report: Report,
    *,
    total: int,
    finished: bool,
    dispatched_any: bool,
    generation: int,
    run: dict[str, Any],
    refused: list[AttemptFact],
    previous: dict[str, Any],
    started_at: float,
    now: float,
    cancelled: str | None = None,
    stopped_reason: str = "Cancelled",
    records: int = 0,
    output_limit: int = 1 << 20,
) -> dict[str, Any]:
    """The status of a run in progress or finished. `records`: the step records the run has or
    will have (body steps included); every text is cut to the share of that many records, so the
    status stays within its budget whatever made the text."""
    top = top_level(report)
    if finished:
        phase = "Succeeded" if report.completed else "Failed"
    else:
        phase = "Running" if (report.steps or dispatched_any) else "Pending"
    if phase == "Succeeded":
        cond = condition(
            "True",
            "Succeeded",
            f"all {total} steps settled",
            generation,
            previous.get("conditions", []),
            now,
        )
    elif phase == "Failed" and cancelled:
        cond = condition(
            "False",
            stopped_reason,
            f"{'cancelled' if stopped_reason == 'Cancelled' else 'stopped'}: {cancelled}",
            generation,
            previous.get("conditions", []),
            now,
        )
    elif phase == "Failed":
        why = (
            f"step {report.failed_step!r} failed and stopped the plan"
            if report.failed_step
            else "the plan did not complete"
        )
        cond = condition("False", "Failed", why, generation, previous.get("conditions", []), now)
    else:
        cond = condition(
            "Unknown",
            phase,
            f"{top} of {total} steps settled",
            generation,
            previous.get("conditions", []),
            now,
        )
    finished_at = (
        previous.get("finishedAt")
        if finished and previous.get("finishedAt")
        else (rfc3339(now) if finished else None)
    )
    end = (
        now
        if not finished
        else (max((s.finished_at or 0) for s in report.steps) if report.steps else now)
    )
    settled = {r.step_id for r in report.steps}
    return {
        "observedGeneration": generation,
        "run": run,
        "phase": phase,
        "progress": f"{top}/{total}",
        "errors": None,
        "errorCount": None,
        "conditions": [cond],
        "report": {
            **_recut(report.to_json(), records, total, output_limit),
            "generation": generation,
        },
        "failedStep": report.failed_step,  # top level for the printer column (absent when null)
        "refusedAttempts": [
            {
                "stepId": f.step_id,
                "attempt": f.attempt,
                "error": f.error,
                "startedAt": rfc3339(f.started_at),
                "finishedAt": rfc3339(f.finished_at),
            }
            for f in refused
            if f.step_id not in settled
        ]
        or None,
        "startedAt": rfc3339(started_at),
        "finishedAt": finished_at,
        "duration": human_duration(max(0.0, end - started_at)),
    }


def _recut(report: dict[str, Any], records: int, total: int, output_limit: int) -> dict[str, Any]:
    """Every record within its share: Job outputs were cut when read, but results the decider
    made itself (filter, map, ask...) and the smaller share bodies bring are cut here."""
    n = max(records, total)
    for step in report["steps"]:
        step["output"], step["error"] = cap_step(
            step.get("output"), step.get("error"), output_limit, n
        )
    return report
