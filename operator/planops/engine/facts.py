"""The vocabulary shared by the decider and its body runs (engine.bodyrun), and by executors:
what a step is (its kind), what the decider asks for (Dispatch, Decision), what an executor
reports (AttemptFact, Facts), and what a body run needs of the Run that owns it (BodyHost). A
leaf module: it imports nothing of the engine's logic, so the modules that drive runs depend on
it and never on each other's internals (engine.bodyrun names its owner through BodyHost, not
through the decider: no import cycle, even counting imports made only for type checking).
"""

from __future__ import annotations

import json
import typing
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol

from planops.api.models import PlanSpec, Step
from planops.engine.budget import TextBudget
from planops.engine.dag import Graph
from planops.engine.report import ExitReport, Halt, StepRecord

Kind = Literal[
    "tool",
    "shell",
    "script",
    "capsule",
    "template",
    "ask",
    "exit",
    "filter",
    "decide",
    "map",
    "reduce",
]
#: the kinds whose attempt is a child plan (a Plan object in the cluster, a sub-run locally)
CHILD_PLAN_KINDS = ("capsule", "template")
#: the kinds step_kind looks for after the common two (in this order)
_OTHER_KINDS: tuple[Kind, ...] = tuple(
    k for k in typing.get_args(Kind) if k not in ("shell", "tool")
)


def step_kind(step: Step) -> Kind:
    if step.shell is not None:  # the common kinds first: this runs once per step per restore
        return "shell"
    if step.tool is not None:
        return "tool"
    for kind in _OTHER_KINDS:
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
    #: when the attempt must have ended, whatever its own timeout (a finally step's: the end of
    #: the finally steps' budget, engine.finally_steps); None: its timeout alone bounds it
    deadline: float | None = None
    #: a shell or script step's env values, each rendered once, as text (engine.step_grants);
    #: its valueFrom entries are the kubelet's to read
    env: tuple[tuple[str, str], ...] = ()


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
    #: the tail of what it wrote on stderr (engine.outputs)
    stderr: str | None = None


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
    #: attempts in flight the engine stopped (the finally steps' budget ran out): the executor
    #: stops them now (deletes the Job, kills the process); they are recorded failed already
    stop: tuple[tuple[str, int], ...] = ()


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


class BodyHost(Protocol):
    """A Run as the bodies it runs see it (engine.bodyrun): the owning run, whose state a body
    reads and settles, and the nested Runs it makes for each branch or item (`child`).
    engine.decider.Run is the one implementation."""

    @property
    def spec(self) -> PlanSpec: ...
    @property
    def graph(self) -> Graph: ...
    @property
    def failed_step(self) -> str | None: ...
    @property
    def exited(self) -> ExitReport | None: ...
    @property
    def settled(self) -> Sequence[StepRecord]: ...
    @property
    def finished(self) -> bool: ...
    @property
    def budget(self) -> TextBudget: ...

    def kind(self, i: int) -> Kind: ...
    def template_lookup(self, root: str) -> Any: ...
    def record_count(self) -> int: ...
    def child(
        self, spec: PlanSpec, facts: Facts, *, scope: dict[str, Any], prefix: str
    ) -> BodyHost: ...
    def add_record(self, record: StepRecord, announce: bool) -> None: ...
    def record_exit(self, exited: ExitReport) -> None: ...
    def control_settled(
        self, i: int, result: Any, error: str | None, now: float, skipped: bool = False
    ) -> None: ...
    def decide(self, now: float) -> Decision: ...
    def in_flight_attempts(self) -> list[tuple[str, int]]: ...
    def is_settled(self, step_id: str) -> bool: ...
    def halt(self, h: Halt, now: float) -> list[tuple[str, int]]: ...
    def last_record(self) -> StepRecord | None: ...
    def wake_at(self) -> float | None: ...
    def finish_attempt(
        self,
        step_id: str,
        attempt: int,
        status: Literal["success", "failed"],
        output: str | None,
        error: str | None,
        now: float,
        never_ran: bool = False,
        stderr: str | None = None,
    ) -> None: ...
