"""Pure: the decisions of one reconcile of a valid Plan's run, as intents (no I/O, no await).

Given what the reconcile read (a `Situation`: the Plan's run, its spec and Capsule, the facts
of its attempts, the objects observed, the previous status, the clock), `plan_step` restores
the engine's Run (or advances the one the last reconcile kept, when the facts line up with it:
engine.keeping) and answers what to do: stop what a cancel or a deadline stops (Run.halt: the
objects to delete) and advance the rest (the Jobs and child Plans to create: the finally
steps after a stop too). The actuator (reconciler.effects.actuator) makes the requests;
the API server's answers come back as `CreateAnswer`s, and a refused create fails its attempt at
once, which may make other steps ready (its retry, an onError): the step decides again, and
the actuator creates again, a bounded number of rounds. Once the report is written (its
records as the PlanReports hold them), `conclude` gives the status, the Events and metrics,
the attempts in flight and the next wake-up.

Everything here is decided from values, with the clock passed in, so the reconciler's rules
(admission at dispatch, refusals remembered, cancel, asks, deadlines) are unit-tested by
comparing intents, with no API to fake.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from planops.api import CapsuleSpec, PlanSpec
from planops.api.status_model import PlanStatus
from planops.engine import (
    AttemptFact,
    Dispatch,
    Facts,
    Policy,
    Report,
    Run,
    StepRecord,
    finally_steps,
    keeping,
    step_files,
    step_kind,
)
from planops.engine import dispatch as dispatch_
from planops.engine.facts import CHILD_PLAN_KINDS
from planops.engine.report import Halt
from planops.kube import manifests
from planops.reconciler.effects import announcing
from planops.reconciler.effects.intents import Create, CreateAnswer, Delete, Intents, Told
from planops.reconciler.run import asks as asks_
from planops.reconciler.run import attempt_objects, stopping
from planops.reconciler.run import identity as runs
from planops.reconciler.run import status as status_
from planops.reconciler.run.observe import Observed

#: seconds until an output not readable yet is looked for again (reconciler.effects.reads)
LATER_SECONDS = 2.0
#: rounds of decide -> create -> refused in one reconcile; past them the refusals are recorded
#: and the Plan is looked at again at once (each round fails at least one attempt for good, so
#: only a plan with very many refused attempts in a row gets there)
MAX_ROUNDS = 64
#: added to every wake-up (the deadline itself has passed when the Plan is looked at)
WAKE_MARGIN = 0.05
#: a plan of at most this many steps, shell and script steps only, is `light` (see there)
LIGHT_STEPS = 64
#: the kinds whose decision is cheap: no tool input against its schema, no nested runs
LIGHT_KINDS = frozenset({"shell", "script"})


@dataclass(frozen=True)
class Situation:
    """What one reconcile read of a valid Plan's run, and the operator's settings."""

    ref: manifests.PlanRef
    spec: PlanSpec
    capsule: CapsuleSpec
    policy: Policy
    facts: Facts
    observed: list[Observed]
    #: the status this run builds on (a fresh run's: only the conditions)
    previous: dict[str, Any]
    run_info: dict[str, Any]
    annotations: dict[str, str]
    claim: str | None
    now: float
    started_at: float
    #: an output not readable yet (reconciler.run.observe): look again soon
    later: bool = False
    status_records: int = status_.STATUS_RECORDS
    #: the run holds (or needs no) Capsule slot: False for a run that waited for one and is
    #: cancelled before it started (reconciler.queue.admission), which runs nothing, finally steps
    #: included
    admitted: bool = True
    #: a step's output was read as one with its stderr (reconciler.run.step_logs)
    stderr_in_output: bool = False

    @property
    def total(self) -> int:
        return finally_steps.step_count(self.spec)


@dataclass
class PlanStep:
    """The run restored from a Situation, and what was decided of it so far."""

    s: Situation
    run: Run
    told: Told = field(default_factory=Told)
    #: the stop this reconcile applied (a cancel, the deadline: Run.halt), or None
    halt: Halt | None = None
    #: attempts stopped in flight (by `halt`, or by the finally steps' budget): their objects
    #: are deleted
    stopped: list[tuple[str, int]] = field(default_factory=list)
    #: the questions waiting (reconciler.run.asks)
    waiting: list[asks_.Waiting] = field(default_factory=list)
    #: attempts that failed without an object: refused by the cluster or at dispatch
    refused: list[AttemptFact] = field(default_factory=list)
    dispatched: list[Dispatch] = field(default_factory=list)
    settled: list[StepRecord] = field(default_factory=list)
    finished: bool = False
    wake_at: float | None = None
    rounds: int = 0
    #: the dispatches of the last decision, by attempt (what `answer` reads answers of)
    _round: list[Dispatch] = field(default_factory=list)
    #: the attempts of the last decision the dispatch rules refused (no request made)
    _answered: list[CreateAnswer] = field(default_factory=list)
    #: the run is the one the last reconcile kept, advanced (not restored)
    kept: bool = False

    def keep(self) -> keeping.Kept | None:
        """What the next reconcile may start from instead of restoring (engine.keeping); only
        once this reconcile's status is written, and never of a run that was stopped."""
        if self.run.stops():
            return None
        return keeping.keep(self.run, self.s.facts, self.refused)

    # -- advance: decide, create, read the answers ------------------------------------------

    def decide(self) -> list[Create]:
        """Decide once more: the objects to create for the attempts it starts (an ask creates
        nothing: it waits in status.asks). A step the dispatch rules refuse is answered at
        once, as a create the cluster refused."""
        s, run = self.s, self.run
        decision = run.decide(s.now)
        self.rounds += 1
        self.settled += decision.settled
        self.stopped += decision.stop
        self.finished, self.wake_at = decision.finished, decision.wake_at
        self._round = list(decision.dispatch)
        return [c for d in decision.dispatch if (c := self._create(d)) is not None]

    def _create(self, d: Dispatch) -> Create | None:
        s = self.s
        if d.kind == "ask":
            return None
        if d.kind in CHILD_PLAN_KINDS:
            refusal = attempt_objects.admit(s.ref, d, s.capsule, s.spec, s.policy)
            if refusal is None and d.kind == "template":  # from the run's snapshot
                made = attempt_objects.recorded_child(s.ref, d, s.spec, s.previous)
                if not isinstance(made, str):
                    return Create(d, "plan", lambda: made)
                refusal = made
            if refusal is None:
                return Create(d, "plan")
            self._answered.append(CreateAnswer(d, refusal=refusal))
            return None
        build = attempt_objects.job_later(s.ref, d, s.capsule, s.spec, s.policy, s.claim, s.now)
        if isinstance(build, str):
            self._answered.append(CreateAnswer(d, refusal=build))
            return None
        return Create(d, "job", build, s.capsule if step_files.uses_files(d.step) else None)

    def answer(self, answers: list[CreateAnswer]) -> bool:
        """Read the answers to the last decision's creates (and the refusals of the dispatch
        rules, answered without a request); True: an attempt failed, decide again."""
        now = self.s.now
        by_attempt = {
            (a.dispatch.step.id, a.dispatch.attempt): a for a in (*self._answered, *answers)
        }
        refused_any = False
        for d in self._round:
            got = by_attempt.get((d.step.id, d.attempt))
            if got is None or got.refusal is None:
                self.dispatched.append(d)
                if d.kind in CHILD_PLAN_KINDS and got is not None and got.created is not None:
                    to = f"capsule {d.step.capsule}" if d.kind == "capsule" else "its template"
                    self.told(
                        "DelegationStarted",
                        f"step {d.step.id} delegates to {to} as plan {got.created}",
                        step=d.step.id,
                        child=got.created,
                    )
                continue
            refused_any = True
            self.told.inc("calls_denied")
            self.told(
                "CallDenied",
                f"step {d.step.id} attempt {d.attempt}: {got.refusal}",
                warning=True,
                step=d.step.id,
                attempt=d.attempt,
            )
            self.run.finish_attempt(d.step.id, d.attempt, "failed", None, got.refusal, now)
            fact = AttemptFact(d.step.id, d.attempt, now, "failed", now, None, got.refusal)
            self.refused.append(fact)
        self._round, self._answered = [], []
        if refused_any and self.rounds >= MAX_ROUNDS:
            self.wake_at = now  # the next reconcile goes on deciding
            self.finished = False
            return False
        return refused_any

    # -- conclude: the status, Events and metrics of an advanced run ---------------------------

    def conclude(self, report: Report, chunks: int) -> Intents:
        """What this reconcile ends with, given the report as its PlanReports hold it and their
        count: the status, the Events and metrics, the attempts in flight, the next wake-up."""
        s, run, now, told = self.s, self.run, self.s.now, self.told
        self.waiting += [
            asks_.announce(
                d, dispatch_.attempt_timeout(d, s.capsule, s.policy, now), s.ref, told, now
            )
            for d in self.dispatched
            if d.kind == "ask"
        ]
        flying = set(run.in_flight_attempts())
        waiting = [w for w in self.waiting if (w.step_id, w.attempt) in flying]
        new = self._status(report, chunks, flying)
        new.asks = [w.to_json() for w in waiting] or None
        announcing.stops(told, report, s.previous, s.spec)
        decided = announcing.Decided(
            run,
            s.spec,
            s.previous,
            now,
            s.started_at,
            self.dispatched,
            self.settled,
            report,
            self.finished,
        )
        announcing.announce(told, decided)
        return Intents(
            status=new.to_status(),
            told=told,
            running=len(flying),
            closes=self.finished,
            wake=self._wake(waiting),
            deletes=self.deletes(),
        )

    def _status(self, report: Report, chunks: int, flying: set[tuple[str, int]]) -> PlanStatus:
        s = self.s
        progress = status_.Progress(
            total=s.total,
            finished=self.finished,
            dispatched_any=bool(self.dispatched or flying),
            generation=int(s.run_info["generation"]),
            run=s.run_info,
            refused=self.refused,
            previous=s.previous,
            started_at=s.started_at,
            now=s.now,
            reports=chunks,
            status_records=s.status_records,
        )
        new = status_.running(report, progress)
        status_.stderr_in_output(new, s.previous, s.stderr_in_output)
        new.in_flight = runs.in_flight(self.run, s.previous, s.now)
        return new

    def _wake(self, waiting: list[asks_.Waiting]) -> float | None:
        """Seconds until the Plan is looked at again: at the first question's deadline
        (whenUnanswered applies then), at the plan's own deadline, when a retry's backoff ends,
        and soon for an output not readable yet; None: on an event only."""
        s, now = self.s, self.s.now
        wake = [w.deadline for w in waiting]
        deadline = stopping.deadline(s.spec, s.started_at)
        if deadline is not None and deadline > now and not self.finished:
            wake.append(deadline)
        if self.wake_at is not None:
            wake.append(self.wake_at)
        if s.later:
            wake.append(now + LATER_SECONDS)
        return max(0.0, min(wake) - now) + WAKE_MARGIN if wake else None

    def deletes(self) -> tuple[Delete, ...]:
        """The objects to delete: those of the attempts stopped in flight (each one's Job or
        child Plan), and the Jobs of attempts whose pod cannot start or was evicted (observe:
        stuck; their attempts failed, and a Job left would hold its pod)."""
        objects = stopping.deletes(self.stopped, self.s.observed)
        stuck: list[tuple[Literal["job", "plan"], str]] = [
            ("job", o.object_name) for o in self.s.observed if o.stuck
        ]
        return tuple(Delete(kind, name) for kind, name in dict.fromkeys((*objects, *stuck)))

    @property
    def records(self) -> int:
        """How many records the run's report will hold (what each record's text shares)."""
        return max(self.run.record_count(), self.s.total)


def light(spec: PlanSpec) -> bool:
    """Whether deciding this plan's run costs less than handing it to a worker thread (~80 us
    of CPU a hand-over, three a reconcile): at most LIGHT_STEPS steps, finally steps included,
    every one a shell or script step (no tool input judged against its schema, no bodies run
    as nested Runs, no child Plans), so what a decision does is bounded by the few steps'
    records. The reconciler decides a light plan's run on the event loop, any other in a worker
    thread (reconcile.py); the decision is the same either way."""
    if finally_steps.step_count(spec) > LIGHT_STEPS:
        return False
    return all(step_kind(step) in LIGHT_KINDS for step in (*spec.steps, *spec.finally_))


def plan_step(s: Situation, kept: keeping.Kept | None = None) -> PlanStep:
    """The run of `s` restored, or `kept` advanced to its facts when they line up with it
    (engine.keeping: the same Run either way): whether it stops now, and the answers to its
    asks settled. `kept` is spent: the step's run is the one to keep next."""
    spec, ref = s.spec, s.ref
    run = keeping.advance(kept, s.facts) if kept is not None else None
    step = PlanStep(
        s,
        run or Run.restore(ref.name, spec, s.facts, retry_backoff=s.capsule.retry_backoff),
        kept=run is not None,
    )
    run = step.run
    held = stopping.persisted(s.previous)  # a stop holds once written
    if held is not None:
        run.halt(held, held.at)  # its attempts were stopped then: none is in flight now
    step.halt = stopping.why_stop(s.annotations, spec, s.started_at, s.now, admitted=s.admitted)
    if step.halt is not None:
        step.stopped += run.halt(step.halt, s.now)
    step.waiting = asks_.settle(run, s.previous, s.annotations, ref.uid, ref.run, step.told, s.now)
    with_object = {(o.step_id, o.attempt) for o in s.observed}
    step.refused = [
        f
        for f in s.facts.attempts
        if f.status == "failed" and (f.step_id, f.attempt) not in with_object
    ]
    return step
