"""The report: seed 1's shape in camelCase, one entry per settled step in the order they settled.

    {"planId", "completed", "failedStep", "steps": [{"stepId", "status", "output", "error",
     "attempts", "startedAt", "finishedAt", "stderr"?, "results"?, "artifacts"?}]}

A record's `stderr` (the tail of what the step wrote on stderr: engine.outputs) is there only
when the step wrote some; `results` and `artifacts` (engine.step_files) only when the step
declares some.

Steps never dispatched after a stop are absent, as the seed says. Times are RFC 3339 (UTC, ms).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, NamedTuple


def rfc3339(t: float | None) -> str | None:
    return None if t is None else _rfc3339(t)


@functools.lru_cache(maxsize=8192)
def _rfc3339(t: float) -> str:
    """Kept for the times seen last: a reconcile writes every record's times in the status
    again (its summary, the report's chunks), the same few thousand floats each time, and
    formatting a datetime was 5 % of the operator's CPU (a profile of bench/scale.py's
    concurrent chains)."""
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


class ArtifactRecord(NamedTuple):
    """One output artifact as the step's report record keeps it: where it is (`key`: the
    repository's object key; locally, a path under the artifacts directory), its sha256, its
    size in bytes (a directory: its tar archive's) and whether it is a directory."""

    name: str
    key: str
    sha256: str
    size: int
    directory: bool = False

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "name": self.name,
            "key": self.key,
            "sha256": self.sha256,
            "size": self.size,
        }
        if self.directory:
            out["directory"] = True
        return out

    @classmethod
    def from_json(cls, data: Any) -> ArtifactRecord | None:
        """None when `data` is not one (a status edited by hand reads as no artifact)."""
        if not isinstance(data, dict):
            return None
        name, key, sha, size = (data.get(k) for k in ("name", "key", "sha256", "size"))
        if not (isinstance(name, str) and isinstance(key, str) and isinstance(sha, str)):
            return None
        if not isinstance(size, int):
            return None
        return cls(name, key, sha, size, data.get("directory") is True)


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
    #: the results it wrote (engine.step_files): None when it declares none
    results: Mapping[str, str] | None = None
    #: the artifacts it left (engine.step_files): None when it declares none
    artifacts: tuple[ArtifactRecord, ...] | None = None

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
        if self.results is not None:
            out["results"] = dict(self.results)
        if self.artifacts is not None:
            out["artifacts"] = [a.to_json() for a in self.artifacts]
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
            results=_results(data.get("results")),
            artifacts=_artifacts(data.get("artifacts")),
        )

    @property
    def duration(self) -> float | None:
        if self.started_at is None or self.finished_at is None:
            return None
        return self.finished_at - self.started_at


def _results(data: Any) -> dict[str, str] | None:
    """A record's results as a status holds them (a value that is not text is dropped: a
    status edited by hand reads as no such result)."""
    if not isinstance(data, dict):
        return None
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}


def _artifacts(data: Any) -> tuple[ArtifactRecord, ...] | None:
    if not isinstance(data, list):
        return None
    return tuple(a for a in map(ArtifactRecord.from_json, data) if a is not None)


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


#: why a run stopped before its end: somebody cancelled it, or it ran past a deadline
StopReason = Literal["Cancelled", "DeadlineExceeded"]


@dataclass(frozen=True)
class Halt:
    """A stop that comes from outside the plan's steps (engine.finally_steps has the rules): a
    cancel, the plan's activeDeadlineSeconds, or the finally steps' budget running out. The
    attempts in flight of the steps it stops are stopped and recorded failed with `error`;
    nothing new of them starts. `run_finally`: the finally steps run after it (the deadline,
    a cancel asking for them); `at`: when it took effect (the finally steps' budget counts from
    then)."""

    reason: StopReason
    why: str
    at: float
    run_finally: bool
    #: the steps it stopped: the main steps, or the finally steps (their budget, or a cancel
    #: while they ran)
    steps: Literal["main", "finally"] = "main"

    @property
    def label(self) -> str:
        return "cancelled" if self.reason == "Cancelled" else "stopped"

    @property
    def error(self) -> str:
        """What each attempt it stopped is recorded with (`cancelled (...)`, `stopped (...)`)."""
        return f"{self.label} ({self.why})"

    def to_json(self) -> dict[str, Any]:
        return {
            "reason": self.reason,
            "message": self.why,
            "at": rfc3339(self.at),
            "steps": self.steps,
            "runFinally": self.run_finally,
        }

    @classmethod
    def from_json(cls, data: Any) -> Halt | None:
        """A halt as a report holds it; None when it is not one (a status edited by hand)."""
        if not isinstance(data, dict):
            return None
        reason, steps, at = data.get("reason"), data.get("steps"), parse_rfc3339(data.get("at"))
        if reason not in ("Cancelled", "DeadlineExceeded") or steps not in ("main", "finally"):
            return None
        if at is None or not isinstance(data.get("message"), str):
            return None
        return cls(reason, data["message"], at, data.get("runFinally") is True, steps)


#: what a stopped attempt's error starts with, and no other error does (Halt.error)
STOPPED_MARKS = ("cancelled (", "stopped (")


def stopped_record(record: StepRecord) -> bool:
    """Whether a failed record is an attempt a Halt stopped: it never names the failed step
    (the plan was stopped, not failed by the step), restored or live."""
    return record.status == "failed" and (record.error or "").startswith(STOPPED_MARKS)


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
    #: what stopped the run from outside, in order (a cancel, a deadline, the finally steps'
    #: budget): absent from the JSON when nothing did
    stopped: tuple[Halt, ...] = ()

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
        if self.stopped:
            out["stopped"] = [h.to_json() for h in self.stopped]
        return out
