"""What one run of a plan holds, and the questions asked of it: which steps are ready, in
flight, waiting out a retry's backoff or settled; the records in settle order; the report.

The decider (engine.decider) applies seed 1's rules to this state: it starts ready steps, takes
attempts' results, and retries or settles. Kept apart so that each reads on its own: here is no
rule about *what* happens next, only the bookkeeping every rule relies on (readiness by a count of
unsettled dependencies, ready steps in two heaps by declaration index: tool steps run one at a
time).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from planops.api import PlanSpec, RetryBackoff
from planops.engine import conditions, finally_steps, step_files, templates
from planops.engine.bodyrun import Bodies
from planops.engine.budget import TextBudget
from planops.engine.dag import Graph
from planops.engine.facts import Kind, StepFiles, exit_report
from planops.engine.report import (
    NO_OUTPUT,
    ExitReport,
    Halt,
    OutputError,
    Report,
    StepRecord,
    stopped_record,
)
from planops.engine.shape import shape_of

Status = Literal["success", "failed", "skipped"]


@dataclass(slots=True)
class StepState:
    attempts: int = 0
    started_at: float | None = None
    in_flight: bool = False
    settled: StepRecord | None = None
    queued: bool = False
    delayed: bool = False  # a retry waiting out its backoff
    never_ran: int = 0  # attempts that failed before the step's code ran (NEVER_RAN_AGAIN)


@dataclass
class RunState:
    """The state of one run of a plan. No I/O; the clock is always passed in."""

    plan_id: str
    spec: PlanSpec
    #: a body's Run (engine.bodyrun): lookups fall back to the enclosing run after `scope`
    parent: RunState | None = None
    scope: dict[str, Any] = field(default_factory=dict)  # item, index, length, accumulator
    #: a body's Run: what qualifies its step ids in messages (`scan.3.`)
    prefix: str = ""
    #: the retry pause of steps that set none (the Capsule's retryBackoff); bodies inherit it
    retry_backoff: RetryBackoff | None = None
    graph: Graph = field(init=False)
    #: retries waiting out their backoff: (due time, step index), a heap
    _delayed: list[tuple[float, int]] = field(init=False, default_factory=list)
    _states: list[StepState] = field(init=False)
    _remaining: list[int] = field(init=False)
    _ready_tools: list[int] = field(init=False, default_factory=list)
    _ready_other: list[int] = field(init=False, default_factory=list)
    _order: list[StepRecord] = field(init=False, default_factory=list)
    _new: list[StepRecord] = field(init=False, default_factory=list)
    _flying: dict[int, int] = field(init=False, default_factory=dict)  # index -> attempt
    #: tool attempts in flight: one at a time is dispatched, but a restore can find a tool's
    #: finished attempt beside another tool's running one (a retry waiting, or a restart)
    _tools_flying: int = field(init=False, default=0)
    failed_step: str | None = field(init=False, default=None)
    exited: ExitReport | None = field(init=False, default=None)  # a fired exit step ended the plan
    #: a cancel or a deadline stopped this run's steps (engine.finally_steps): nothing more of
    #: them starts; the finally steps run after it when it says so
    halted: Halt | None = field(init=False, default=None)
    #: a record of an attempt a halt stopped was settled (live, or restored before the halt is
    #: applied again): the steps were stopped, not over by themselves
    _stopped_any: bool = field(init=False, default=False)
    #: when the finally steps' budget started counting (engine.finally_steps), once known
    _began: float | None = field(init=False, default=None)
    _conditions: Mapping[int, conditions.Or] = field(init=False)
    _kinds: Sequence[Kind] = field(init=False)
    _has_refs: Sequence[bool] = field(init=False)
    _has_templates: Sequence[bool] = field(init=False)
    _bodies: Bodies = field(init=False)
    _settled_count: int = field(init=False, default=0)  # top-level steps settled
    _results: dict[int, templates.StepResult] = field(init=False, default_factory=dict)
    #: the finally steps' Run (engine.finally_steps), made once the main steps are over: the
    #: questions below answer for both, main steps first
    _final: RunState | None = field(init=False, default=None)
    #: the run's record text and decide work (engine.budget), shared with its bodies' runs
    budget: TextBudget = field(init=False)
    #: attempts that failed inside the engine as they were about to start (a reference not
    #: settled, a template or gate that could not be evaluated): no fact records them, so a run
    #: that had one is restored from its facts next time, never kept (engine.keeping)
    _unseen: int = field(init=False, default=0)

    @property
    def _tool_busy(self) -> bool:
        """A tool step is in flight: tools run one at a time (the seed's rule)."""
        return self._tools_flying > 0

    def __post_init__(self) -> None:
        self.budget = self.parent.budget if self.parent is not None else TextBudget()
        # derived from the spec once per spec object, not per Run (engine.shape says why)
        shape = shape_of(self.spec)
        self.graph = shape.graph
        self._kinds, self._has_refs, self._has_templates = (
            shape.kinds,
            shape.has_refs,
            shape.has_templates,
        )
        self._conditions = shape.conditions
        self._states = [StepState() for _ in self.spec.steps]
        self._remaining = list(shape.unsettled_deps)
        # what _push_if_ready makes of a run that has not started: its roots, queued in order
        # (a sorted list is a heap)
        self._ready_tools, self._ready_other = list(shape.roots_tools), list(shape.roots_other)
        for i in shape.roots_tools + shape.roots_other:
            self._states[i].queued = True

    def _release_due(self, now: float) -> None:
        """Retries whose backoff has passed become ready (in declaration order, as any step)."""
        while self._delayed and self._delayed[0][0] <= now:
            _, i = heapq.heappop(self._delayed)
            self._states[i].delayed = False
            self._push_if_ready(i)

    def wake_at(self) -> float | None:
        """The earliest time a waiting retry (here or in a running body) becomes due."""
        if self._final is not None:  # the main steps are over: the finally steps' times
            final = self._final.wake_at()
            times = [final] if final is not None else []
            if not self._final._main_over():  # their budget's end: they are stopped then
                times.append(self._finally_began(0.0) + self._finally_budget())
            return min(times, default=None)
        if self.failed_step is not None or self.exited is not None or self.halted is not None:
            return None
        times = [self._delayed[0][0]] if self._delayed else []
        body = self._bodies.wake_at() if self._bodies.active else None
        if body is not None:
            times.append(body)
        return min(times, default=None)

    @property
    def finished(self) -> bool:
        """Nothing more will run: the main steps are over, and so are the finally steps (or a
        stop that runs none of them came first)."""
        if not self._main_finished:
            return False
        if not self.spec.finally_:
            return True
        if self._final is not None:
            return self._final.finished
        return self._stops_finally()

    def _stops_finally(self) -> bool:
        """A halt that runs no finally steps stopped the main steps (a cancel)."""
        return self.halted is not None and not self.halted.run_finally

    def _main_over(self) -> bool:
        """Whether the main steps are over, exactly: a restored run's ready heaps still hold
        steps that settled (a decide drops them lazily), so they are not asked."""
        if self._flying:
            return False
        return (
            self.failed_step is not None
            or self.exited is not None
            or self.halted is not None
            or self._settled_count == len(self.spec.steps)
        )

    @property
    def _main_finished(self) -> bool:
        if self._flying:
            return False
        if self.failed_step is not None or self.exited is not None or self.halted is not None:
            return True
        return (
            not self._ready_other
            and not (self._ready_tools and not self._tool_busy)
            and not self._delayed
        )

    def report(self) -> Report:
        main = self._main_report()
        if self._final is None:
            return main
        final = self._final
        return Report(
            main.plan_id,
            main.completed and final.failed_step is None and final.halted is None,
            main.failed_step or final.failed_step,
            (*main.steps, *final.settled),
            main.output,
            main.exit,
            cut=(self.budget.cut, self.budget.cut_bytes),
            stopped=self.stops(),
        )

    def stops(self) -> tuple[Halt, ...]:
        """The halts that stopped this run, in order: the main steps' (a cancel, the deadline),
        then the finally steps' (their budget, or a cancel while they ran)."""
        final = self._final.halted if self._final is not None else None
        return tuple(h for h in (self.halted, final) if h is not None)

    def _finally_began(self, now: float) -> float:
        """When the finally steps' budget started counting: when a halt stopped the main
        steps, else when the last main record settled (`now`: a plan with no main step). Known
        once the main steps are over, and the same for a restored run as for the live one."""
        if self._began is None:
            if self.halted is not None:
                self._began = self.halted.at
            else:
                ends = [r.finished_at for r in self._order if r.finished_at is not None]
                self._began = max(ends, default=now)
        return self._began

    def _finally_budget(self) -> float:
        return float(finally_steps.budget_seconds(self.spec))

    def _main_completed(self) -> bool:
        if self.halted is not None or self._stopped_any:  # stopped from outside
            return False
        if self.exited is not None:  # seed 2: an exit ends the plan; success counts as completed
            return self.exited.status == "success" and self.failed_step is None
        return self._settled_count == len(self.spec.steps) and self.failed_step is None

    def _main_report(self) -> Report:
        completed = self._main_completed()
        output: Any = NO_OUTPUT
        if self.exited is not None and self.exited.output is not None:
            return Report(
                self.plan_id,
                completed,
                self.failed_step,
                tuple(self._order),
                self.exited.output,
                self.exited,
                cut=(self.budget.cut, self.budget.cut_bytes),
                stopped=self.stops(),
            )
        if self.spec.output is not None:
            # seed 2: the output template map, rendered once every step settled; a template that
            # cannot render leaves it null (the report says why in outputError)
            output = None
            if completed:
                try:
                    output = templates.render(self.spec.output, self._template_lookup)
                except templates.TemplateError as e:
                    output = OutputError(str(e))
        return Report(
            self.plan_id,
            completed,
            self.failed_step,
            tuple(self._order),
            output,
            self.exited,
            cut=(self.budget.cut, self.budget.cut_bytes),
            stopped=self.stops(),
        )

    @property
    def settled(self) -> Sequence[StepRecord]:
        """Settled steps in settle order (a live, read-only view; the finally steps' after)."""
        return self._order if self._final is None else [*self._order, *self._final.settled]

    def is_settled(self, step_id: str) -> bool:
        """Whether no further attempt of the step will start: it has its record, or, a body step
        (`<control>.<key>.<step>`, as dispatched), its item is over (engine.bodyrun). Every id
        this run dispatches is known here; an unknown one is a KeyError."""
        if self._final is not None and self._final.declares(step_id):
            return self._final.is_settled(step_id)
        i = self.graph.index.get(step_id)
        if i is None and "." in step_id:
            return self._bodies.is_settled(step_id)
        return self._states[self.graph.index[step_id]].settled is not None

    def declares(self, step_id: str) -> bool:
        """Whether the step (a body step by its control step) is one of this Run's."""
        return step_id.partition(".")[0] in self.graph.index

    def in_flight_attempts(self) -> list[tuple[str, int]]:
        """(step id, attempt) of every attempt in flight, in dispatch order (body steps by
        their qualified names; a control step running its bodies is not an attempt)."""
        if self._final is not None:
            return self._in_flight_main() + self._final.in_flight_attempts()
        return self._in_flight_main()

    def _in_flight_main(self) -> list[tuple[str, int]]:
        steps, active = self.spec.steps, self._bodies.active
        if not active:
            return [(steps[i].id, attempt) for i, attempt in self._flying.items()]
        return [
            (steps[i].id, attempt) for i, attempt in self._flying.items() if i not in active
        ] + self._bodies.in_flight()

    def unseen_failures(self) -> int:
        """Attempts failed inside the engine, which no executor's fact records (`_unseen`)."""
        return self._unseen + (self._final.unseen_failures() if self._final is not None else 0)

    def ending(self) -> bool:
        """Whether a failed step, a fired exit or a halt is ending the run (main or finally
        steps)."""
        if self.failed_step is not None or self.exited is not None or self.halted is not None:
            return True
        return self._final is not None and self._final.ending()

    def bodies_running(self) -> bool:
        """Whether a decide, map or reduce is running its bodies (here or in the finally steps)."""
        return bool(self._bodies.active) or (
            self._final is not None and self._final.bodies_running()
        )

    def step_state(self, step_id: str) -> tuple[StepState, int] | None:
        """A top-level or finally step's state and its place in restore's order (main steps in
        declaration order, then the finally steps); None for a body step or an unknown id."""
        i = self.graph.index.get(step_id)
        if i is not None:
            return self._states[i], i
        if self._final is not None and (found := self._final.step_state(step_id)) is not None:
            return found[0], len(self._states) + found[1]
        return None

    def follow(self, step_ids: Sequence[str]) -> None:
        """Hold the attempts in flight in the order `step_ids` first names their steps: the
        order a run restored from facts in that order holds them (engine.keeping)."""
        ranks: dict[int, int] = {}
        for step_id in step_ids:
            i = self.graph.index.get(step_id)
            if i is not None:
                ranks.setdefault(i, len(ranks))
        self._flying = dict(sorted(self._flying.items(), key=lambda f: ranks.get(f[0], len(ranks))))
        if self._final is not None:
            self._final.follow(step_ids)

    def record_count(self) -> int:
        """Step records this run has or will have: every top-level step, plus body steps
        recorded and those its running bodies will record (the status shares its room by it)."""
        final = len(self.spec.finally_) if self._final is None else self._final.record_count()
        return (
            len(self.spec.steps)
            + len(self._order)
            - self._settled_count
            + self._bodies.planned()
            + final
        )

    def last_record(self) -> StepRecord | None:
        """The last declared step's record (a body's result)."""
        return self._states[-1].settled if self._states else None

    def kind(self, i: int) -> Kind:
        return self._kinds[i]

    def kind_of(self, step_id: str) -> Kind:
        """The kind of a step by id, body steps by qualified name (for metrics and events)."""
        i = self.graph.index.get(step_id)
        if i is not None:
            return self._kinds[i]
        if self._final is not None and self._final.declares(step_id):
            return self._final.kind_of(step_id)
        return self._bodies.kind_of(step_id)

    def record_exit(self, exited: ExitReport) -> None:
        """An exit fired (in a decide branch): the first one ends the plan."""
        if self.exited is None:
            self.exited = exited

    def add_record(self, record: StepRecord, announce: bool) -> None:
        """A body step's record (engine.bodyrun), qualified: reported, not a step of this plan."""
        self._order.append(record)
        if announce:
            self._new.append(record)
            if self.parent is None:  # restored records were counted by budget.count
                self.budget.frame(record)

    def unsettled(self) -> list[str]:
        mine = [self.spec.steps[i].id for i, s in enumerate(self._states) if s.settled is None]
        if self._final is not None:
            return mine + self._final.unsettled()
        return mine + [s.id for s in self.spec.finally_]

    # -- internals ----------------------------------------------------------------------------

    def _lookup(self, step_id: str) -> tuple[str, str | None] | None:
        i = self.graph.index.get(step_id)
        if i is None:
            named = self.scope.get(step_id)  # the main steps' outcome, in finally steps ($plan)
            if isinstance(named, templates.StepResult):
                return named["status"], named["output"]
            return self.parent._lookup(step_id) if self.parent is not None else None
        rec = self._states[i].settled
        return (rec.status, rec.output) if rec is not None else None

    def template_lookup(self, root: str) -> Any:
        if root in self.scope:
            return self.scope[root]
        if root == "input":
            return self.spec.input or {}
        i = self.graph.index.get(root)
        if i is None:  # a body's Run: the enclosing run's steps, through its cache
            return self.parent.template_lookup(root) if self.parent is not None else None
        rec = self._states[i].settled
        if rec is None:
            return None
        # one StepResult per settled step: its output is parsed as JSON at most once
        result = self._results.get(i)
        if result is None:
            result = self._results[i] = templates.StepResult(
                rec.status, rec.output, rec.stderr, rec.results, rec.artifacts
            )
        return result

    _template_lookup = template_lookup

    def _record(
        self,
        i: int,
        status: Status,
        output: str | None,
        error: str | None,
        now: float,
        whole: bool = False,
        stderr: str | None = None,
        files: StepFiles = None,
    ) -> StepRecord:
        """The record of step `i` settling now: its texts cut to what the run has left of its
        budget (engine.budget), here and nowhere later. `whole`: kept as it is (an exit's
        result, bounded by budget.exit_result), and counted."""
        st = self._states[i]
        output = output or None
        if whole:
            self.budget.held += len(output.encode()) if output else 0
        else:
            output, error, stderr = self.budget.keep(output, error, stderr or None)
        results, artifacts = files or (None, None)  # bounded, never cut: later steps read them
        self.budget.held += len(step_files.encoded_results(results).encode()) if results else 0
        return StepRecord(
            step_id=self.spec.steps[i].id,
            status=status,
            output=output,
            error=error,
            attempts=st.attempts,
            started_at=st.started_at,
            finished_at=now,
            stderr=stderr,
            results=results,
            artifacts=artifacts,
        )

    def _settle(self, i: int, record: StepRecord, announce: bool = True) -> None:
        st = self._states[i]
        st.settled = record
        self._settled_count += 1
        self._order.append(record)
        if announce:
            self._new.append(record)
            if self.parent is None:  # restored records were counted by budget.count
                self.budget.frame(record)
        step = self.spec.steps[i]
        if self._kinds[i] == "exit" and self.exited is None:
            self.exited = exit_report(step.id, record)
        stopped = stopped_record(record)  # a halt's: the plan was stopped, not failed by it
        self._stopped_any = self._stopped_any or stopped
        if (
            record.status == "failed"
            and step.on_error not in ("continue", "skip")
            and self.failed_step is None
            and not stopped
        ):
            self.failed_step = step.id
        for d in self.graph.dependents[i]:
            self._remaining[d] -= 1
            self._push_if_ready(d)

    def _default_backoff(self) -> RetryBackoff | None:
        run: RunState | None = self
        while run is not None:
            if run.retry_backoff is not None:
                return run.retry_backoff
            run = run.parent
        return None

    def _push_if_ready(self, i: int) -> None:
        st = self._states[i]
        if (
            self._remaining[i] > 0
            or st.queued
            or st.settled is not None
            or st.in_flight
            or st.delayed
        ):
            return
        st.queued = True
        heapq.heappush(self._ready_tools if self._kinds[i] == "tool" else self._ready_other, i)
