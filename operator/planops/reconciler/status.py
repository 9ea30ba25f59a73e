"""The Plan's `.status`: phase, a `Succeeded` condition, the report, and what a restart needs.

Bounded by design (a Plan must stay far under etcd's 1.5 MiB object limit whatever its size):
- each step's recorded output is capped at min(Capsule outputLimitBytes, OUTPUT_BUDGET / steps),
  with a truncation mark: the *documented trimming rule* (docs/operator.md) — a plan's outputs
  together never exceed OUTPUT_BUDGET, however many steps print however much;
- each error is capped at ERROR_LIMIT bytes; validation errors at MAX_ERRORS entries.
"""

from __future__ import annotations

from typing import Any

from planops.engine import AttemptFact, PlanError, Report
from planops.engine.report import parse_rfc3339, rfc3339

__all__ = ["cap_text", "invalid", "output_cap", "parse_rfc3339", "rfc3339", "running"]

OUTPUT_BUDGET = 512 * 1024
MIN_OUTPUT_SHARE = 256
ERROR_LIMIT = 2048
MAX_ERRORS = 200
TRUNCATED = "\n[planops: output truncated at {kept} bytes]"


def output_cap(capsule_limit: int, steps: int) -> int:
    """Bytes of output recorded per step (the trimming rule above)."""
    return max(MIN_OUTPUT_SHARE, min(capsule_limit, OUTPUT_BUDGET // max(1, steps)))


def cap_text(text: str | None, limit: int) -> str | None:
    """`text` within `limit` UTF-8 bytes, marked when cut; None for no text."""
    if not text:
        return None
    data = text.encode()
    if len(data) <= limit:
        return text
    kept = data[:limit].decode(errors="ignore")
    return kept + TRUNCATED.format(kept=len(kept.encode()))


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
        "errors": [{**e.to_json(), "message": e.message[:ERROR_LIMIT]} for e in shown],
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
) -> dict[str, Any]:
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
            f"{len(report.steps)} of {total} steps settled",
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
        "progress": f"{len(report.steps)}/{total}",
        "errors": None,
        "errorCount": None,
        "conditions": [cond],
        "report": {**report.to_json(), "generation": generation},
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
