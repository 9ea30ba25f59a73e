"""Pure: the decisions of a Plan's life, every path of it, from what a reconcile read.

A reconcile reads the Plan and what its path needs (effects.reads), decides here as a function
of what was read, and the actuator carries it out (effects.actuator); reconcile.py strings them
together. The paths, in the order a reconcile meets them:

- the Plan is gone or being deleted: nothing (`view` None);
- a capsule step's child Plan takes no re-run or retry: refused with an Event, recorded in the
  status it writes (run.retrying.child_requests), and the reconcile goes on without them;
- its run ended: retention (history.retention: its TTL, its Jobs collected);
- a retry asked for: the engine may refuse it (run.retrying.seed: an Event, the status
  records its token), else the retried run starts from what it keeps;
- a new run replaces the one before (history.replacing, its own read and act);
- the Plan is refused by the judge (run.judging): Invalid, an Event once;
- a run started later on its author's behalf (a re-run, a retry, one that waited as Invalid):
  refused when the author may no longer use the Capsule (run.authors);
- its Capsule's queue (queue.admission): it waits, is refused, is cancelled before it started,
  or takes a slot;
- it goes: the run advances (run.core: restored or kept, decided, created, concluded).

Each decision returns intents (the status to write, Events and metrics told, the next wake-up),
never makes a request.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from planops.api import names
from planops.api.names import Phase
from planops.engine import PlanError, finally_steps
from planops.kube import manifests
from planops.reconciler.effects.intents import Told
from planops.reconciler.history import run_history
from planops.reconciler.queue import slots
from planops.reconciler.run import authors, identity, retrying
from planops.reconciler.run import status as status_
from planops.reconciler.run.judging import Judgement

Obj = dict[str, Any]


@dataclass(frozen=True)
class PlanView:
    """A Plan object as its reconcile's decisions read it, at `now`."""

    plan: Obj
    #: its metadata (a child's without the re-run and retry annotations it takes no part in)
    meta: Obj
    #: its status as read (a child's with the refusal of those recorded: run.ignored)
    status: Obj
    choice: retrying.Choice
    ref: manifests.PlanRef
    generation: int
    rerun: str
    #: the run the status knows is not this one: a new run starts
    fresh: bool
    #: the first run of what its author just wrote (a new Plan, a new generation), with no
    #: re-run asked for: the API server checked their `use` then
    written_now: bool
    run_info: Obj
    now: float
    #: the Events decided on reading it (a child's re-run or retry refused)
    told: Told = field(default_factory=Told)

    @property
    def key(self) -> tuple[str, str]:
        return self.ref.namespace, self.ref.name

    @property
    def annotations(self) -> dict[str, str]:
        return self.meta.get("annotations") or {}

    @property
    def finished(self) -> bool:
        """The run the status knows ended: only retention is left to do."""
        return not self.fresh and names.ended(self.status.get("phase"))


def view(plan: Obj | None, now: float) -> PlanView | None:
    """The Plan as its decisions read it; None when it is gone or being deleted."""
    if plan is None or plan["metadata"].get("deletionTimestamp"):
        return None
    meta, status, told = plan["metadata"], plan.get("status") or {}, Told()
    if slots.is_child(plan):  # no re-run, no retry: its runs are its parent's
        meta, status = retrying.child_requests(plan, status, told)
    generation = int(meta.get("generation", 1))
    rerun = (meta.get("annotations") or {}).get(names.ANNOTATION_RERUN, "")
    choice = retrying.choose(meta, status, generation, rerun)
    rid = choice.rid
    before = status.get("run") or {}
    fresh = before.get("id") != rid
    info = {
        "id": rid,
        "generation": generation,
        "rerun": retrying.token_of(rerun) or None,  # bounded: an annotation may be 256 KiB
        "startedAt": None if fresh else before.get("startedAt"),
        # the Capsule it runs under, recorded as it starts (the archive's row reads it: the
        # Plan's may change before the row is written)
        "capsule": (None if fresh else before.get("capsule")) or slots.capsule_of(plan),
    }
    info["startedAt"] = info["startedAt"] or status_.rfc3339(now)
    info.update(choice.info)
    return PlanView(
        plan=plan,
        meta=meta,
        status=status,
        choice=choice,
        ref=identity.plan_ref(meta["namespace"], meta["name"], meta, rid),
        generation=generation,
        rerun=rerun,
        fresh=fresh,
        written_now=fresh and not rerun and before.get("generation") != generation,
        run_info=info,
        now=now,
        told=told,
    )


@dataclass(frozen=True)
class Stop:
    """A reconcile that ends short of its run's advance: the status to write (its history
    carried on; the writer writes nothing when it is the status read) and what to tell."""

    status: Obj
    told: Told


def invalid(v: PlanView, previous: Obj, errors: list[PlanError], told: Told) -> Stop:
    """The Plan is refused by the judge: Invalid, nothing runs; the refusal is told once (when
    the Plan was not Invalid already). It waits for what refused it to change (its Capsule
    created: ENDED excludes Invalid)."""
    if previous.get("phase") != Phase.INVALID:
        for e in errors:
            told.inc("refusals", e.code)
        told.inc("plans", "invalid")
        told(
            "ValidationFailed",
            f"{len(errors)} error(s), nothing runs: " + "; ".join(str(e) for e in errors[:5]),
            warning=True,
        )
    new = status_.invalid(
        errors, generation=v.generation, run=v.run_info, previous=previous, now=v.now
    )
    return Stop(run_history.carried(new.to_status(), previous), told)


def starts(v: PlanView, previous: Obj) -> bool:
    """Whether the run starts now: a new run, or one that waited as Invalid (for its Capsule)."""
    return v.fresh or previous.get("phase") == Phase.INVALID


def asks_author(v: PlanView, previous: Obj) -> bool:
    """Whether the run is started on its author's behalf, later than their act (a re-run, a
    retry, a run that waited as Invalid): their `use` of the Capsule is asked first."""
    return starts(v, previous) and not v.written_now


def author_refused(v: PlanView, previous: Obj, refusal: authors.Refusal, told: Told) -> Stop:
    """The run is not started: its author may no longer use the Capsule (or is unknown where a
    record is required): an Event, and the run's status ended (Failed) saying why."""
    return Stop(authors.refused_start(v.run_info, previous, refusal, v.now, told), told)


def plan_started(v: PlanView, judged: Judgement, told: Told) -> Obj:
    """The run starts now (a new run, one that waited as Invalid or for a slot): the time it
    waited is not its own. The PlanStarted Event; returns its run record."""
    spec = judged[0]
    assert spec is not None
    rid = v.run_info["id"]
    told(
        "PlanStarted",
        f"run {rid} of generation {v.generation}: {finally_steps.step_count(spec)} steps",
        run=rid,
        generation=v.generation,
    )
    return {**v.run_info, "startedAt": status_.rfc3339(v.now)}


def seeded(v: PlanView) -> bool:
    """Whether the run starts from what it was seeded with, reading nothing of its own: a run the
    status does not know has dispatched nothing that needs observing (an object a crashed
    reconcile created before its status write has the name the next dispatch creates, and that
    create adopts it: AlreadyExists), and a retried run that never started starts from the run
    it retries."""
    return v.fresh or v.choice.reseed


def new_run_status(previous: Obj, history: list[Obj] | None) -> Obj:
    """What a new run's status builds on: the conditions (their transition times) and the
    history of the runs before it."""
    return {"conditions": previous.get("conditions", []), "history": history or None}
