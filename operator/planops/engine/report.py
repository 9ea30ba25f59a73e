"""The report: seed 1's shape in camelCase, one entry per settled step in the order they settled.

    {"planId", "completed", "failedStep", "steps": [{"stepId", "status", "output", "error",
     "attempts", "startedAt", "finishedAt", "stderr"?}]}

A record's `stderr` (the tail of what the step wrote on stderr: engine.outputs) is there only
when the step wrote some.

Steps never dispatched after a stop are absent, as the seed says. Times are RFC 3339 (UTC, ms).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, NamedTuple


def rfc3339(t: float | None) -> str | None:
    if t is None:
        return None
    return datetime.fromtimestamp(t, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_rfc3339(text: str | None) -> float | None:
    """Seconds since the epoch; None when absent or not a timestamp (objects and statuses can be
    edited by hand: a bad time reads as no time, it does not stop a reconcile)."""
    if not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except (ValueError, TypeError, AttributeError, OverflowError):
        return None


class StepRecord(NamedTuple):
    """One settled step (a NamedTuple: immutable, and cheap to build in the decider's hot path)."""

    step_id: str
    status: str
    output: str | None
    error: str | None
    attempts: int
    started_at: float | None
    finished_at: float | None
    #: the tail of the step's stderr (never part of its output)
    stderr: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "stepId": self.step_id,
            "status": self.status,
            "output": self.output,
            "error": self.error,
            "attempts": self.attempts,
            "startedAt": rfc3339(self.started_at),
            "finishedAt": rfc3339(self.finished_at),
        }
        if self.stderr is not None:
            out["stderr"] = self.stderr
        return out

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StepRecord:
        return cls(
            step_id=data["stepId"],
            status=data["status"],
            output=data.get("output"),
            error=data.get("error"),
            attempts=int(data.get("attempts") or 0),
            started_at=parse_rfc3339(data.get("startedAt")),
            finished_at=parse_rfc3339(data.get("finishedAt")),
            stderr=data.get("stderr"),
        )

    @property
    def duration(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return self.finished_at - self.started_at


class _NoOutput:
    """The plan declares no `output` (so the report has no `output` key)."""


NO_OUTPUT = _NoOutput()


@dataclass(frozen=True)
class OutputError:
    """The plan's `output` could not be rendered (reported as output: null, outputError)."""

    message: str


@dataclass(frozen=True)
class ExitReport:
    """A fired exit step (seed 2): which, with what status and message."""

    step_id: str
    status: str
    message: str | None
    output: Any = None


@dataclass(frozen=True)
class Report:
    plan_id: str
    completed: bool
    failed_step: str | None
    steps: tuple[StepRecord, ...]
    output: Any = NO_OUTPUT  # seed 2's structured output, when the plan declares one
    exit: ExitReport | None = None
    #: records whose text the run's budget cut as they settled, and the bytes they had
    #: (engine.budget)
    cut: tuple[int, int] = (0, 0)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "planId": self.plan_id,
            "completed": self.completed,
            "failedStep": self.failed_step,
            "steps": [s.to_json() for s in self.steps],
        }
        if isinstance(self.output, OutputError):
            out["output"], out["outputError"] = None, self.output.message
        elif self.output is not NO_OUTPUT:
            out["output"] = self.output
        if self.cut[0]:
            out["cut"] = {"records": self.cut[0], "bytes": self.cut[1]}
        if self.exit is not None:
            out["exit"] = {
                "stepId": self.exit.step_id,
                "status": self.exit.status,
                "message": self.exit.message,
            }
        return out
