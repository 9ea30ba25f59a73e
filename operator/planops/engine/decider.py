"""The decider: what to do next, given a plan and the facts of its run. The only place where the
scheduling rules of seed 1 live; the local runner and the reconciler are two executors of it.
The bookkeeping the rules act on (ready heaps, settled records, the report) is engine.runstate.

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
from dataclasses import dataclass, replace
from typing import Any, Literal

from planops.api.attempt_models import RetryBackoff
from planops.api.models import PlanSpec
from planops.engine import bodies, conditions, control, finally_steps, references, templates
from planops.engine.allowlists import shell_words
from planops.engine.bodyrun import Bodies
from planops.engine.budget import exit_result
from planops.engine.facts import (
    NEVER_RAN_AGAIN,
    AttemptFact,
    Decision,
    Dispatch,
    Facts,
    StepFiles,
)
from planops.engine.report import Halt, StepRecord
from planops.engine.runstate import RunState, Status
from planops.engine.step_files import inputs_of
from planops.engine.step_grants import render_env

CONTROL = ("exit", "filter")  # evaluated by the decider itself: no Job, no process
#: `ask` is dispatched like a tool call, but its executor asks a person (prompt or annotation)


@dataclass
class Run(RunState):
    """One run of a plan and the rules that advance it (the state itself: engine.runstate)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        self._bodies = Bodies(self)
        #: attempts the finally steps' budget stopped since the last decision (Decision.stop)
        self._stopping: list[tuple[str, int]] = []

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
        if parent is None:  # every record restored, body steps' too, held as it was cut
            for record in facts.settled:
                run.budget.count(record)
        facts, final_facts = finally_steps.split(spec, facts)
        run._restore_main(facts)
        if final_facts.settled or final_facts.attempts:  # the main steps were over
            run._final = run._finally_run(final_facts)
            if not run._order:  # no main record: their budget began as the first of them
                starts = [f.started_at for f in final_facts.attempts] + [
                    r.started_at or r.finished_at or 0.0 for r in final_facts.settled
                ]
                run._began = min(starts)
        return run

    def _restore_main(self, facts: Facts) -> None:
        run = self
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
                run._tools_flying += 1
        finished = sorted(
            (f for f in latest.values() if f.status is not None),
            key=lambda f: (f.finished_at or 0.0, run.graph.index[f.step_id]),
        )
        for f in finished:
            run.finish_fact(f)
        for i in sorted(set(body_records) | set(body_attempts)):
            run._restore_body(i, body_records.get(i, []), body_attempts.get(i, []))

    def _restore_body(self, i: int, records: list[StepRecord], attempts: list[AttemptFact]) -> None:
        st = self._states[i]
        if st.settled is not None or st.in_flight:
            return
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
        stderr: str | None = None,
    ) -> None:
        """Record the result of a dispatched attempt. A stale or repeated report is ignored.
        `never_ran`: it failed before the step's code started (AttemptFact.never_ran).
        `stderr`: the tail of what it wrote on stderr, kept apart from its output. (An attempt
        that left files, results or artifacts, is told with finish_fact.)"""
        fact = AttemptFact(step_id, attempt, 0.0, status, now, output, error, never_ran, stderr)
        self.finish_fact(fact)

    def finish_fact(self, f: AttemptFact) -> None:
        """finish_attempt with a finished attempt's fact (as restoring and engine.keeping do,
        and an executor whose attempt left results or artifacts: engine.step_files)."""
        assert f.status is not None
        step_id, attempt, status = f.step_id, f.attempt, f.status
        if self._final is not None and self._final.declares(step_id):
            assert isinstance(self._final, Run)  # made by _finally_run
            self._final.finish_fact(f)
            return
        if "." in step_id:  # a body step: <control>.<key>.<step>
            self._bodies.finish(f)
            return
        output, error, now, stderr = f.output, f.error, f.finished_at or 0.0, f.stderr
        files = None if f.results is None and f.artifacts is None else (f.results, f.artifacts)
        i = self.graph.index[step_id]
        st = self._states[i]
        if not st.in_flight or st.attempts != attempt or st.settled is not None:
            return
        st.in_flight = False
        del self._flying[i]
        if self._kinds[i] == "tool":
            self._tools_flying -= 1
        if status == "success":
            self._settle(
                i, self._record(i, "success", output, None, now, stderr=stderr, files=files)
            )
        else:
            self._attempt_failed(i, output, error, now, f.never_ran, stderr, files)

    def decide(self, now: float) -> Decision:
        """Start what can start; settle what settles without running. Marks dispatches in flight."""
        dispatch: list[Dispatch] = []
        top = self.parent is None
        if top:  # a body's decide is part of its enclosing run's
            self.budget.started, self.budget.capped = 0, False
        self._release_due(now)
        self._dispatch_ready(now, dispatch)
        while self._bodies.active and self._bodies.pump(now, dispatch):
            self._dispatch_ready(now, dispatch)
        if self._final is not None or (
            self.spec.finally_ and self._main_finished and not self._stops_finally()
        ):
            self._decide_finally(now, dispatch)
        new, self._new = tuple(self._new), []
        stop, self._stopping = tuple(self._stopping), []
        # stopped at the body items a decide may start: decide again at once (engine.budget)
        wake = now if top and self.budget.capped and not self.finished else self.wake_at()
        return Decision(tuple(dispatch), new, self.finished, wake, stop)

    def _dispatch_ready(self, now: float, dispatch: list[Dispatch]) -> None:
        cap = self.spec.parallelism
        others, tools, states = self._ready_other, self._ready_tools, self._states
        while self.failed_step is None and self.exited is None and self.halted is None:
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

    def child(self, spec: PlanSpec, facts: Facts, *, scope: dict[str, Any], prefix: str) -> Run:
        """A body's Run (engine.bodyrun): restored from its facts, looking up through this run."""
        return Run.restore(self.plan_id, spec, facts, parent=self, scope=scope, prefix=prefix)

    # -- finally steps (engine.finally_steps) ---------------------------------------------------

    def _finally_run(self, facts: Facts) -> Run:
        """The finally steps' Run: it reads the main steps through this one, and their outcome
        as `plan` (made when the main steps are over, so the outcome is final; a halt applied
        to a restored run afterwards says so again: `halt`)."""
        outcome = finally_steps.outcome(self._main_completed(), self.failed_step, self.halted)
        return Run.restore(
            self.plan_id,
            finally_steps.finally_spec(self.spec),
            facts,
            parent=self,
            scope={finally_steps.PLAN: outcome},
            prefix=self.prefix,
            retry_backoff=self.retry_backoff,
        )

    def _decide_finally(self, now: float, dispatch: list[Dispatch]) -> None:
        """The main steps are over: start the finally steps (once), then advance them within
        their budget: each attempt must end by its end, and past it those in flight stop."""
        if self._final is None:
            self._final = self._finally_run(Facts())
        final = self._final
        assert isinstance(final, Run)
        ends = self._finally_began(now) + self._finally_budget()
        if now >= ends and not final.finished and final.halted is None:
            self._stopping += final.halt(finally_steps.out_of_budget(self.spec, ends), now)
        decision = final.decide(now)
        dispatch.extend(d._replace(deadline=ends) for d in decision.dispatch)
        self._new.extend(decision.settled)

    # -- halts: a cancel, the deadline (engine.finally_steps) -----------------------------------

    def halt(self, h: Halt, now: float) -> list[tuple[str, int]]:
        """Stop the run from outside (a cancel, the plan's deadline): the attempts in flight it
        stops, in dispatch order, each recorded failed with `h.error` (the executor stops them:
        a Job deleted, a process killed). Main steps not over stop, and nothing more of them
        starts; the finally steps then run when `h.run_finally`. A halt that runs no finally
        steps also stops those running, or keeps them from starting. A halt that stops nothing
        more (applied again: the same cancel seen again, a restored run) changes nothing, and
        one that runs the finally steps does nothing once the main steps are over by
        themselves: the finally steps run anyway (so the deadline bounds the main steps only).
        """
        stopped: list[tuple[str, int]] = []
        if self.halted is None and (self._stopped_any or not self._main_over()):
            self.halted = h
            self._began = h.at if h.run_finally else None
            stopped = self._stop_main(h, now)
            if self._final is not None:  # restored before the halt was known: say it now
                outcome = finally_steps.outcome(False, self.failed_step, h)
                self._final.scope[finally_steps.PLAN] = outcome
        if h.run_finally or not self.spec.finally_:
            return stopped
        if self._final is not None:  # they run: they stop
            assert isinstance(self._final, Run)
            stopped += self._final.halt(replace(h, steps="finally"), now)
        elif self.halted is None or self.halted.run_finally:
            self.halted = h  # they never start
        return stopped

    def _stop_main(self, h: Halt, now: float) -> list[tuple[str, int]]:
        """Each main attempt in flight recorded failed with the halt's error: no retry, no
        onError (the step did not fail: it was stopped), a running decide/map/reduce with its
        body steps in flight; the retries waiting never start."""
        stopped = self._in_flight_main()
        for i in list(self._flying):
            st = self._states[i]
            if i in self._bodies.active:
                self._bodies.halt(i, h, now)
            st.in_flight = False
            del self._flying[i]
            if self._kinds[i] == "tool":
                self._tools_flying -= 1
            self._settle(i, self._record(i, "failed", None, h.error, now))
        self._delayed.clear()
        return stopped

    def control_settled(
        self, i: int, result: Any, error: str | None, now: float, skipped: bool = False
    ) -> None:
        """A decide / map / reduce finished its bodies (engine.bodyrun): settle it. It does not
        retry; a failure follows onError; `skipped`: an exit ended the plan under it (the
        error says so), which is no failure of its own."""
        st = self._states[i]
        st.in_flight = False
        self._flying.pop(i, None)
        if skipped:
            self._settle(i, self._record(i, "skipped", None, error, now))
        elif error is None:
            self._settle(i, self._record(i, "success", json.dumps(result), None, now))
        else:
            status: Status = "skipped" if self.spec.steps[i].on_error == "skip" else "failed"
            self._settle(i, self._record(i, status, None, error, now))

    # -- internals ----------------------------------------------------------------------------

    def _start(self, i: int, now: float) -> Dispatch | None:
        step, st = self.spec.steps[i], self._states[i]
        # asked at every attempt: settled steps and the input never change, so a condition that
        # held holds again, and one that could not be evaluated is asked again at the retry
        expr = self._conditions.get(i)
        if expr is not None:
            try:
                holds = conditions.evaluate(expr, self._lookup, self.template_lookup("input"))
            except (references.UnsettledReference, conditions.MissingInput) as e:
                st.attempts += 1
                st.started_at = now
                self._unseen += 1
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
        words: list[str] | None = None
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
            env = render_env(step, self._template_lookup) if step.env else ()
            fetch = inputs_of(step, self._template_lookup)  # its input artifacts' records
        except (references.UnsettledReference, templates.TemplateError) as e:
            self._unseen += 1
            self._attempt_failed(i, None, str(e), now)
            return None
        st.in_flight = True
        self._flying[i] = st.attempts
        kind = self._kinds[i]
        if kind == "tool":
            self._tools_flying += 1
        return Dispatch(step, st.attempts, kind, resolved, words, env=env, fetch=fetch)

    def _run_control(self, i: int, now: float) -> None:
        """exit / filter: evaluated here, settled at once with the seed's result shape."""
        step = self.spec.steps[i]
        try:
            if self._kinds[i] == "filter":
                result: Any = control.evaluate_filter(step.filter, self._template_lookup)
            else:
                fired = control.evaluate_exit(step.exit, self._template_lookup)
                result = (
                    exit_result(fired.status, fired.message, fired.output)
                    if fired.fired
                    else {"passed": True}
                )
        except (control.GateError, templates.TemplateError) as e:
            self._unseen += 1
            self._attempt_failed(i, None, str(e), now)
            return
        # an exit's record stays JSON (whether it fired is read back from it): kept whole,
        # its parts bounded by exit_result
        whole = self._kinds[i] == "exit"
        self._settle(i, self._record(i, "success", json.dumps(result), None, now, whole=whole))

    def _attempt_failed(
        self,
        i: int,
        output: str | None,
        error: str | None,
        now: float,
        never_ran: bool = False,
        stderr: str | None = None,
        files: StepFiles = None,
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
        self._settle(i, self._record(i, status, output, error, now, stderr=stderr, files=files))


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
