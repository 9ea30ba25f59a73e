"""The decider: what to do next, given a plan and the facts of its run. The only place where the
scheduling rules of seed 1 live; the local runner and the reconciler are two executors of it.

    run = Run(plan_id, spec)          # or Run.restore(plan_id, spec, facts)
    decision = run.decide(now)        # dispatches to start, steps it settled itself, finished?
    run.finish_attempt(...)           # an executor reports a dispatched attempt's result

`decide(plan_id, spec, facts, now)` is the same thing as a pure function of (plan, facts, now):
it restores a Run from the facts and decides. The reconciler uses that form (all run state lives
in the Plan's status and its Jobs); the local runner keeps one Run and feeds it results, so a whole
simulated plan costs O(steps + edges) (no rescans: ready steps are kept in heaps, readiness by
counting unsettled dependencies).

The rules (seed 1, word for word where quoted):
- "Omitted, the step is ready immediately": readiness by dependsOn only; a dependency must
  *settle* (success, failed or skipped), not succeed.
- shell and capsule steps that do not depend on each other run at the same time; "tool steps are
  dispatched one at a time even when the plan places no dependency between them". `parallelism`
  caps all steps in flight. Among ready steps, declaration order decides.
- `if` is evaluated when the step is about to be dispatched (its first attempt); false settles it
  `skipped` without dispatch. References in `if` and `input` are resolved then; "a reference to a
  step that has not settled fails the referring step" (a failed attempt, subject to retries).
- "retries is applied first": a failed attempt with retries left is dispatched again.
- onError once the last attempt failed: fail -> settles failed and stops the plan (steps never
  dispatched are absent from the report; steps in flight still settle and are reported);
  skip -> settles skipped; continue -> settles failed. Both continue.
"""

from __future__ import annotations

import heapq
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from planops.api.models import PlanSpec, RetryBackoff
from planops.engine import bodies, conditions, control, references, templates
from planops.engine.allowlists import shell_words
from planops.engine.bodyrun import Bodies
from planops.engine.dag import Graph
from planops.engine.facts import (
    NEVER_RAN_AGAIN,
    AttemptFact,
    Decision,
    Dispatch,
    Facts,
    Kind,
    exit_report,
)
from planops.engine.report import NO_OUTPUT, ExitReport, OutputError, Report, StepRecord
from planops.engine.shape import shape_of

Status = Literal["success", "failed", "skipped"]
CONTROL = ("exit", "filter")  # evaluated by the decider itself: no Job, no process
#: `ask` is dispatched like a tool call, but its executor asks a person (prompt or annotation)


@dataclass(slots=True)
class _State:
    attempts: int = 0
    started_at: float | None = None
    in_flight: bool = False
    settled: StepRecord | None = None
    queued: bool = False
    condition_checked: bool = False
    delayed: bool = False  # a retry waiting out its backoff
    never_ran: int = 0  # attempts that failed before the step's code ran (NEVER_RAN_AGAIN)


@dataclass
class Run:
    """The state of one run of a plan. No I/O; the clock is always passed in."""

    plan_id: str
    spec: PlanSpec
    #: a body's Run (engine.bodyrun): lookups fall back to the enclosing run after `scope`
    parent: Run | None = None
    scope: dict[str, Any] = field(default_factory=dict)  # item, index, length, accumulator
    #: a body's Run: what qualifies its step ids in messages (`scan.3.`)
    prefix: str = ""
    #: the retry pause of steps that set none (the Capsule's retryBackoff); bodies inherit it
    retry_backoff: RetryBackoff | None = None
    graph: Graph = field(init=False)
    #: retries waiting out their backoff: (due time, step index), a heap
    _delayed: list[tuple[float, int]] = field(init=False, default_factory=list)
    _states: list[_State] = field(init=False)
    _remaining: list[int] = field(init=False)
    _ready_tools: list[int] = field(init=False, default_factory=list)
    _ready_other: list[int] = field(init=False, default_factory=list)
    _order: list[StepRecord] = field(init=False, default_factory=list)
    _new: list[StepRecord] = field(init=False, default_factory=list)
    _flying: dict[int, int] = field(init=False, default_factory=dict)  # index -> attempt
    _tool_busy: bool = field(init=False, default=False)
    failed_step: str | None = field(init=False, default=None)
    exited: ExitReport | None = field(init=False, default=None)  # a fired exit step ended the plan
    _conditions: Mapping[int, conditions.Or] = field(init=False)
    _kinds: Sequence[Kind] = field(init=False)
    _has_refs: Sequence[bool] = field(init=False)
    _has_templates: Sequence[bool] = field(init=False)
    _bodies: Bodies = field(init=False)
    _settled_count: int = field(init=False, default=0)  # top-level steps settled
    _results: dict[int, templates.StepResult] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        # derived from the spec once per spec object, not per Run (engine.shape says why)
        shape = shape_of(self.spec)
        self.graph = shape.graph
        self._kinds, self._has_refs, self._has_templates = (
            shape.kinds,
            shape.has_refs,
            shape.has_templates,
        )
        self._conditions = shape.conditions
        self._bodies = Bodies(self)
        self._states = [_State() for _ in self.spec.steps]
        self._remaining = list(shape.unsettled_deps)
        # what _push_if_ready makes of a run that has not started: its roots, queued in order
        # (a sorted list is a heap)
        self._ready_tools, self._ready_other = list(shape.roots_tools), list(shape.roots_other)
        for i in shape.roots_tools + shape.roots_other:
            self._states[i].queued = True

    # -- restoring from facts -----------------------------------------------------------------

    @classmethod
    def restore(
        cls,
        plan_id: str,
        spec: PlanSpec,
        facts: Facts,
        parent: Run | None = None,
        scope: dict[str, Any] | None = None,
        prefix: str = "",
        retry_backoff: RetryBackoff | None = None,
    ) -> Run:
        run = cls(plan_id, spec, parent, scope or {}, prefix, retry_backoff)
        settled_ids = {r.step_id for r in facts.settled}
        body_records: dict[int, list[StepRecord]] = {}
        body_attempts: dict[int, list[AttemptFact]] = {}
        for record in facts.settled:
            ctl, dot, _ = record.step_id.partition(".")
            i = run.graph.index.get(ctl)
            if i is None:
                continue
            if dot:  # a body step's record
                if ctl in settled_ids:
                    run._order.append(record)  # its control step settled: just reported
                    if run._kinds[i] == "decide" and run.exited is None:
                        run.exited = run._bodies.fired_exit(i, record)  # an exit in a branch
                else:
                    body_records.setdefault(i, []).append(record)
                continue
            if run._states[i].settled is not None:
                continue
            run._states[i].attempts = record.attempts
            run._states[i].condition_checked = True
            run._settle(i, record, announce=False)
        latest: dict[int, AttemptFact] = {}
        for fact in facts.attempts:
            ctl, dot, _ = fact.step_id.partition(".")
            if dot:
                j = run.graph.index.get(ctl)
                if j is not None and ctl not in settled_ids:
                    body_attempts.setdefault(j, []).append(fact)
                continue
            i = run.graph.index.get(fact.step_id)
            if i is None or run._states[i].settled is not None:
                continue
            st = run._states[i]
            st.condition_checked = True
            st.started_at = (
                fact.started_at if st.started_at is None else min(st.started_at, fact.started_at)
            )
            if i not in latest or fact.attempt > latest[i].attempt:
                latest[i] = fact
        for fact in facts.attempts:  # earlier attempts that never ran (the latest counts below)
            i = run.graph.index.get(fact.step_id)
            if (
                i is not None
                and i in latest
                and fact.never_ran
                and fact.status == "failed"
                and fact.attempt < latest[i].attempt
            ):
                run._states[i].never_ran += 1
        for i, fact in latest.items():
            st = run._states[i]
            st.attempts = fact.attempt
            st.in_flight = True
            run._flying[i] = fact.attempt
            if run._kinds[i] == "tool":
                run._tool_busy = True
        finished = sorted(
            (f for f in latest.values() if f.status is not None),
            key=lambda f: (f.finished_at or 0.0, run.graph.index[f.step_id]),
        )
        for f in finished:
            assert f.status is not None
            run.finish_attempt(
                f.step_id,
                f.attempt,
                f.status,
                f.output,
                f.error,
                f.finished_at or 0.0,
                never_ran=f.never_ran,
            )
        for i in sorted(set(body_records) | set(body_attempts)):
            run._restore_body(i, body_records.get(i, []), body_attempts.get(i, []))
        return run

    def _restore_body(self, i: int, records: list[StepRecord], attempts: list[AttemptFact]) -> None:
        st = self._states[i]
        if st.settled is not None or st.in_flight:
            return
        st.condition_checked = True
        st.attempts = max(st.attempts, 1)
        st.started_at = min(
            [f.started_at for f in attempts] + [r.started_at for r in records if r.started_at],
            default=0.0,
        )
        try:
            self._bodies.restore(i, records, attempts)
        except (control.GateError, templates.TemplateError, bodies.BodyError):
            return  # cannot happen for facts this run made; the next decide reports it
        st.in_flight = True
        self._flying[i] = st.attempts

    # -- what executors call ------------------------------------------------------------------

    def finish_attempt(
        self,
        step_id: str,
        attempt: int,
        status: Literal["success", "failed"],
        output: str | None,
        error: str | None,
        now: float,
        never_ran: bool = False,
    ) -> None:
        """Record the result of a dispatched attempt. A stale or repeated report is ignored.
        `never_ran`: it failed before the step's code started (AttemptFact.never_ran)."""
        if "." in step_id:  # a body step: <control>.<key>.<step>
            self._bodies.finish(step_id, attempt, status, output, error, now, never_ran)
            return
        i = self.graph.index[step_id]
        st = self._states[i]
        if not st.in_flight or st.attempts != attempt or st.settled is not None:
            return
        st.in_flight = False
        del self._flying[i]
        if self._kinds[i] == "tool":
            self._tool_busy = False
        if status == "success":
            self._settle(i, self._record(i, "success", output, None, now))
        else:
            self._attempt_failed(i, output, error, now, never_ran)

    def decide(self, now: float) -> Decision:
        """Start what can start; settle what settles without running. Marks dispatches in flight."""
        dispatch: list[Dispatch] = []
        self._release_due(now)
        self._dispatch_ready(now, dispatch)
        while self._bodies.active and self._bodies.pump(now, dispatch):
            self._dispatch_ready(now, dispatch)
        new, self._new = tuple(self._new), []
        return Decision(tuple(dispatch), new, self.finished, self.wake_at())

    def _release_due(self, now: float) -> None:
        """Retries whose backoff has passed become ready (in declaration order, as any step)."""
        while self._delayed and self._delayed[0][0] <= now:
            _, i = heapq.heappop(self._delayed)
            self._states[i].delayed = False
            self._push_if_ready(i)

    def wake_at(self) -> float | None:
        """The earliest time a waiting retry (here or in a running body) becomes due."""
        if self.failed_step is not None or self.exited is not None:
            return None
        times = [self._delayed[0][0]] if self._delayed else []
        body = self._bodies.wake_at() if self._bodies.active else None
        if body is not None:
            times.append(body)
        return min(times, default=None)

    def _dispatch_ready(self, now: float, dispatch: list[Dispatch]) -> None:
        cap = self.spec.parallelism
        others, tools, states = self._ready_other, self._ready_tools, self._states
        while self.failed_step is None and self.exited is None:
            # the lowest declaration index among ready steps that may start now
            if others and (not tools or self._tool_busy or others[0] < tools[0]):
                heap = others
            elif tools and not self._tool_busy:
                heap = tools
            else:
                break
            i = heap[0]
            st = states[i]
            if st.settled is not None or st.in_flight or st.delayed:  # lazily dropped entry
                heapq.heappop(heap)
                st.queued = False
                continue
            if cap is not None and len(self._flying) >= cap:
                break
            heapq.heappop(heap)
            st.queued = False
            action = self._start(i, now)
            if action is not None:
                dispatch.append(action)

    @property
    def finished(self) -> bool:
        if self._flying:
            return False
        if self.failed_step is not None or self.exited is not None:
            return True
        return (
            not self._ready_other
            and not (self._ready_tools and not self._tool_busy)
            and not self._delayed
        )

    def report(self) -> Report:
        settled_all = self._settled_count == len(self.spec.steps)
        completed = settled_all and self.failed_step is None
        output: Any = NO_OUTPUT
        if self.exited is not None:  # seed 2: an exit ends the plan; success counts as completed
            completed = self.exited.status == "success" and self.failed_step is None
            if self.exited.output is not None:
                return Report(
                    self.plan_id,
                    completed,
                    self.failed_step,
                    tuple(self._order),
                    self.exited.output,
                    self.exited,
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
            self.plan_id, completed, self.failed_step, tuple(self._order), output, self.exited
        )

    @property
    def settled(self) -> Sequence[StepRecord]:
        """Settled steps in settle order (a live, read-only view)."""
        return self._order

    def is_settled(self, step_id: str) -> bool:
        return self._states[self.graph.index[step_id]].settled is not None

    def in_flight_attempts(self) -> list[tuple[str, int]]:
        """(step id, attempt) of every attempt in flight, in dispatch order (body steps by
        their qualified names; a control step running its bodies is not an attempt)."""
        steps, active = self.spec.steps, self._bodies.active
        if not active:
            return [(steps[i].id, attempt) for i, attempt in self._flying.items()]
        return [
            (steps[i].id, attempt) for i, attempt in self._flying.items() if i not in active
        ] + self._bodies.in_flight()

    def record_count(self) -> int:
        """Step records this run has or will have: every top-level step, plus body steps
        recorded and those its running bodies will record (the status shares its room by it)."""
        return (
            len(self.spec.steps) + len(self._order) - self._settled_count + self._bodies.planned()
        )

    def last_record(self) -> StepRecord | None:
        """The last declared step's record (a body's result)."""
        return self._states[-1].settled if self._states else None

    def kind(self, i: int) -> Kind:
        return self._kinds[i]

    def kind_of(self, step_id: str) -> Kind:
        """The kind of a step by id, body steps by qualified name (for metrics and events)."""
        i = self.graph.index.get(step_id)
        return self._kinds[i] if i is not None else self._bodies.kind_of(step_id)

    def child(self, spec: PlanSpec, facts: Facts, *, scope: dict[str, Any], prefix: str) -> Run:
        """A body's Run (engine.bodyrun): restored from its facts, looking up through this run."""
        return Run.restore(self.plan_id, spec, facts, parent=self, scope=scope, prefix=prefix)

    def record_exit(self, exited: ExitReport) -> None:
        """An exit fired (in a decide branch): the first one ends the plan."""
        if self.exited is None:
            self.exited = exited

    def add_record(self, record: StepRecord, announce: bool) -> None:
        """A body step's record (engine.bodyrun), qualified: reported, not a step of this plan."""
        self._order.append(record)
        if announce:
            self._new.append(record)

    def control_settled(self, i: int, result: Any, error: str | None, now: float) -> None:
        """A decide / map / reduce finished its bodies (engine.bodyrun): settle it. It does not
        retry; a failure follows onError."""
        st = self._states[i]
        st.in_flight = False
        self._flying.pop(i, None)
        if error is None:
            self._settle(i, self._record(i, "success", json.dumps(result), None, now))
        else:
            status: Status = "skipped" if self.spec.steps[i].on_error == "skip" else "failed"
            self._settle(i, self._record(i, status, None, error, now))

    def unsettled(self) -> list[str]:
        return [self.spec.steps[i].id for i, s in enumerate(self._states) if s.settled is None]

    # -- internals ----------------------------------------------------------------------------

    def _lookup(self, step_id: str) -> tuple[str, str | None] | None:
        i = self.graph.index.get(step_id)
        if i is None:
            return self.parent._lookup(step_id) if self.parent is not None else None
        rec = self._states[i].settled
        return (rec.status, rec.output) if rec is not None else None

    def _start(self, i: int, now: float) -> Dispatch | None:
        step, st = self.spec.steps[i], self._states[i]
        if not st.condition_checked:
            st.condition_checked = True
            expr = self._conditions.get(i)
            if expr is not None:
                try:
                    holds = conditions.evaluate(expr, self._lookup)
                except references.UnsettledReference as e:
                    st.attempts += 1
                    st.started_at = now
                    self._attempt_failed(i, None, str(e), now)
                    return None
                if not holds:
                    self._settle(i, self._record(i, "skipped", None, None, now))
                    return None
        st.attempts += 1
        if st.started_at is None:
            st.started_at = now
        if self._kinds[i] in CONTROL:
            self._run_control(i, now)
            return None
        if self._kinds[i] in bodies.BODY_KINDS:
            try:
                self._bodies.begin(i)
            except (control.GateError, templates.TemplateError, bodies.BodyError) as e:
                self.control_settled(i, None, str(e), now)
                return None
            st.in_flight = True
            self._flying[i] = st.attempts
            return None
        words = None
        try:
            resolved = step.input
            if step.ask is not None:
                if self._has_refs[i]:  # unused by an ask, but an unsettled one fails it as before
                    references.resolve_input(step.input, self._lookup)
                resolved = control.render_ask(step.ask, self._template_lookup)
            elif self._has_refs[i] or self._has_templates[i]:
                # one pass: references and templates together, nothing they yield rescanned
                resolved = templates.render(step.input, self._template_lookup, self._lookup)
            if step.shell is not None:
                words = shell_words(step.shell)
                if self._has_templates[i]:
                    words = templates.render_command(
                        words, self._template_lookup, self.prefix + step.id
                    )
        except (references.UnsettledReference, templates.TemplateError) as e:
            self._attempt_failed(i, None, str(e), now)
            return None
        st.in_flight = True
        self._flying[i] = st.attempts
        kind = self._kinds[i]
        if kind == "tool":
            self._tool_busy = True
        return Dispatch(step, st.attempts, kind, resolved, words)

    def _run_control(self, i: int, now: float) -> None:
        """exit / filter: evaluated here, settled at once with the seed's result shape."""
        step = self.spec.steps[i]
        try:
            if self._kinds[i] == "filter":
                result: Any = control.evaluate_filter(step.filter, self._template_lookup)
            else:
                fired = control.evaluate_exit(step.exit, self._template_lookup)
                result = (
                    {"passed": True}
                    if not fired.fired
                    else {
                        "fired": True,
                        "status": fired.status,
                        "message": fired.message,
                        "output": fired.output,
                    }
                )
        except (control.GateError, templates.TemplateError) as e:
            self._attempt_failed(i, None, str(e), now)
            return
        self._settle(i, self._record(i, "success", json.dumps(result), None, now))

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
            result = self._results[i] = templates.StepResult(rec.status, rec.output)
        return result

    _template_lookup = template_lookup

    def _attempt_failed(
        self, i: int, output: str | None, error: str | None, now: float, never_ran: bool = False
    ) -> None:
        step, st = self.spec.steps[i], self._states[i]
        if never_ran and st.never_ran < NEVER_RAN_AGAIN and self.failed_step is None:
            st.never_ran += 1  # the step's code never started: start it again, no retry used
            self._push_if_ready(i)
            return
        if st.attempts - st.never_ran <= step.retries and self.failed_step is None:
            backoff = step.retry_backoff or self._default_backoff()
            wait = backoff.delay(st.attempts) if backoff is not None else 0.0
            if wait > 0:  # counted from when the attempt failed: restored runs wait the same
                st.delayed = True
                heapq.heappush(self._delayed, (now + wait, i))
            else:
                self._push_if_ready(i)
            return
        # onError: skip settles skipped; continue and fail settle failed (fail also stops the plan,
        # in _settle). The error is kept on a skipped step: it says why it was skipped.
        status: Status = "skipped" if step.on_error == "skip" else "failed"
        self._settle(i, self._record(i, status, output, error, now))

    def _record(
        self, i: int, status: Status, output: str | None, error: str | None, now: float
    ) -> StepRecord:
        st = self._states[i]
        return StepRecord(
            step_id=self.spec.steps[i].id,
            status=status,
            output=output or None,
            error=error,
            attempts=st.attempts,
            started_at=st.started_at,
            finished_at=now,
        )

    def _settle(self, i: int, record: StepRecord, announce: bool = True) -> None:
        st = self._states[i]
        st.settled = record
        self._settled_count += 1
        self._order.append(record)
        if announce:
            self._new.append(record)
        step = self.spec.steps[i]
        if self._kinds[i] == "exit" and self.exited is None:
            self.exited = exit_report(step.id, record)
        if (
            record.status == "failed"
            and step.on_error not in ("continue", "skip")
            and self.failed_step is None
        ):
            self.failed_step = step.id
        for d in self.graph.dependents[i]:
            self._remaining[d] -= 1
            self._push_if_ready(d)

    def _default_backoff(self) -> RetryBackoff | None:
        run: Run | None = self
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


def decide(
    plan_id: str,
    spec: PlanSpec,
    facts: Facts,
    now: float,
    retry_backoff: RetryBackoff | None = None,
) -> tuple[Run, Decision]:
    """The decider as a pure function of (plan, facts, now); also returns the restored Run."""
    run = Run.restore(plan_id, spec, facts, retry_backoff=retry_backoff)
    return run, run.decide(now)
