"""Pure: what one reconcile decided to do, as data the actuator carries out.

The reconciler's decisions (reconciler.run.core) return intents instead of making requests: the
objects to create (an attempt's Job or child Plan) and to delete (a stopped run's), the Events
and metric updates to tell, the status to write and when to look at the Plan again. Kept as
data, a decision is checked by comparing values, with no API to fake; reconciler.effects.actuator is
the one place that turns them into requests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple, Protocol

from planops.api import CapsuleSpec
from planops.engine import Dispatch

Obj = dict[str, Any]


class Tell(Protocol):
    """Where a decision's Events go: kube.events.Recorder (posts them) or Told (keeps them)."""

    def __call__(
        self, reason: str, message: str, warning: bool = False, post: bool = True, **fields: Any
    ) -> None: ...


class Event(NamedTuple):
    """An Event of the trace on the Plan; `post` False: its JSON log line only."""

    reason: str
    message: str
    warning: bool
    post: bool
    fields: dict[str, Any]


#: the metrics a decision updates (planops.metrics by name)
MetricName = Literal[
    "plans", "plan_duration", "steps", "step_duration", "retries", "calls_denied",
    "dispatch_latency", "refusals", "scheduled_runs", "runs_deleted_unarchived",
]  # fmt: skip


class Metric(NamedTuple):
    """One metric update: a counter's increment (`observe` False) or a histogram's sample."""

    name: MetricName
    labels: tuple[str, ...]
    value: float
    observe: bool


@dataclass
class Told:
    """The Events and metric updates of a decision, in the order they happened."""

    events: list[Event] = field(default_factory=list)
    metrics: list[Metric] = field(default_factory=list)

    def __call__(
        self, reason: str, message: str, warning: bool = False, post: bool = True, **fields: Any
    ) -> None:
        self.events.append(Event(reason, message, warning, post, fields))

    def inc(self, name: MetricName, *labels: str, by: float = 1.0) -> None:
        self.metrics.append(Metric(name, labels, by, False))

    def observe(self, name: MetricName, value: float, *labels: str) -> None:
        self.metrics.append(Metric(name, labels, value, True))

    def reasons(self) -> list[str]:
        return [e.reason for e in self.events]

    def then(self, later: Told) -> Told:
        """These Events and metric updates, then `later`'s."""
        return Told([*self.events, *later.events], [*self.metrics, *later.metrics])


@dataclass(frozen=True)
class Create:
    """Create the object of a dispatched attempt: its Job (`body`, built when read: the
    actuator reads it as it sends it), a template step's child Plan (built from the run's
    snapshot of its template, reconciler.run.attempt_objects.recorded_child), or, for a capsule
    step, the child Plan the actuator builds from its target Capsule (`body` None: the Capsule's
    `plan` is read at the create, reconciler.run.attempt_objects.child)."""

    dispatch: Dispatch
    kind: Literal["job", "plan"]
    build: Callable[[], Obj] | None = None
    #: a step that moves files: its Capsule (the actuator makes its pod, effects.files)
    files: CapsuleSpec | None = None

    @property
    def body(self) -> Obj | None:
        return self.build() if self.build is not None else None


@dataclass(frozen=True)
class CreateAnswer:
    """The API server's answer to a Create, as the decision reads it: the attempt's object
    exists, made now (`created`: its name) or before a restart (neither field set: adopted),
    or the attempt fails and `refusal` says why."""

    dispatch: Dispatch
    created: str | None = None
    refusal: str | None = None


@dataclass(frozen=True)
class Delete:
    """Delete an object of the Plan's: an attempt's Job or child Plan (a stop, a pod that cannot
    start), or what a new run stops of the runs before it (their Jobs, child Plans, workspace
    claims, PlanReports)."""

    kind: Literal["job", "plan", "claim", "report"]
    name: str


@dataclass
class Intents:
    """What a reconcile does once it has decided: the status to write, Events and
    metrics, the attempts in flight (the steps-running gauge), whether the run ended (its
    objects are not read again) and the seconds until the Plan is looked at again (None: only
    on an event)."""

    status: Obj
    told: Told
    running: int
    closes: bool
    wake: float | None = None
    deletes: tuple[Delete, ...] = ()
