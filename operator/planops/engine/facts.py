"""The vocabulary shared by the decider and its body runs (engine.bodyrun), and by executors:
what a step is (its kind), what the decider asks for (Dispatch, Decision), what an executor
reports (AttemptFact, Facts). A leaf module: it imports nothing of the engine's logic, so the
modules that drive runs depend on it and never on each other's internals.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple

from planops.api.models import Step
from planops.engine.report import ExitReport, StepRecord

Kind = Literal["tool", "shell", "capsule", "ask", "exit", "filter", "decide", "map", "reduce"]


def step_kind(step: Step) -> Kind:
    if step.shell is not None:  # the common kinds first: this runs once per step per restore
        return "shell"
    if step.tool is not None:
        return "tool"
    for kind in ("capsule", "ask", "exit", "filter", "decide", "map", "reduce"):
        if getattr(step, kind) is not None:
            return kind
    return "shell"


class Dispatch(NamedTuple):
    """Start attempt `attempt` (1-based) of `step`, with its references resolved in `input`."""

    step: Step
    attempt: int
    kind: Kind
    input: Any
    #: a shell step's words, templates rendered per word (None: no shell step)
    words: list[str] | None = None


@dataclass(frozen=True)
class AttemptFact:
    """What an executor knows about one attempt: in flight (`status` None) or finished."""

    step_id: str
    attempt: int
    started_at: float
    status: Literal["success", "failed"] | None = None
    finished_at: float | None = None
    output: str | None = None
    error: str | None = None
    #: the attempt failed before the step's code ran (the node could not start its container):
    #: it is started again without using up a retry, at most NEVER_RAN_AGAIN times per step
    never_ran: bool = False


#: attempts that never ran which a step gets again on top of its retries
NEVER_RAN_AGAIN = 3


@dataclass(frozen=True)
class Facts:
    """Everything a run has established: steps settled (in settle order) and attempts seen."""

    settled: tuple[StepRecord, ...] = ()
    attempts: tuple[AttemptFact, ...] = ()


@dataclass(frozen=True)
class Decision:
    dispatch: tuple[Dispatch, ...]
    settled: tuple[StepRecord, ...]  # settled since the previous decision (to persist/announce)
    finished: bool
    #: when a retry waiting out its backoff becomes due: decide again then (None: nothing waits)
    wake_at: float | None = None


def exit_report(step_id: str, record: StepRecord) -> ExitReport | None:
    """The exit an exit step's record says fired (restorable: the result says so), or None."""
    if record.status != "success":
        return None
    result = json.loads(record.output or "{}")
    if not result.get("fired"):
        return None
    return ExitReport(
        step_id, result.get("status", "success"), result.get("message"), result.get("output")
    )
