"""Admission of a run on a Capsule with `concurrency.maxRunningPlans`: the decision made one at a
time per Capsule, from what the cluster holds, and recorded before the run creates anything.

Why it is atomic. Only the leader reconciles (every write goes through the Lease check), and it
reconciles one Plan at a time per Plan but many Plans at once. Two Plans judged in the same
instant could both see a free slot; so the decisions for one Capsule are serialized here (a lock
per Capsule), and an admitted run's status (phase Pending, its run and start time, no `queue`)
is written while the lock is held, before the run creates any Job or child Plan. The next
decision for that Capsule reads it (slots.holds) whichever Plan it is about.

What a decision reads. The watch's cache first: if it says the Plan must wait, it waits (a
stale cache can only show a slot still held that has been freed, and the event that freed it
wakes the waiting Plans again). If it says a slot is free, the Plans of the namespace are listed
from the API server (a quorum read, which sees every status written before it) and the decision
is made on that list. So a new leader, or a restarted operator, admits nothing the cluster does
not allow, whatever its cache holds.

The bound of this guarantee is the Lease's: a leader stops writing when it cannot renew within
its renew deadline, before another replica may take the Lease (the lease duration); a status
write held up in the network for longer than that difference could reach the API server after a
new leader decided without it, as could any other write of a deposed leader.

Pure but for the locks: what to read (`need`), what the queue's order says (queue.standing), and
the decision (`decide`) are functions of what was read; effects.reads reads, the status writer
writes, and reconcile.py holds the Capsule's lock (`Gate`) from the read to the write.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Literal

from planops.api import CapsuleSpec
from planops.api.names import Phase
from planops.api.status_model import PlanStatus
from planops.reconciler.effects.intents import Told
from planops.reconciler.history import run_history
from planops.reconciler.queue import slots
from planops.reconciler.run import authors, stopping
from planops.reconciler.run import status as status_

#: the Event a Plan gets when it starts waiting for a slot
REASON_QUEUED = "Queued"
#: what admission answers: go on holding a slot (`held`), go on as the run's start (`admitted`),
#: go on without a slot to be cancelled (`cancelled`: the run creates nothing), wait, or stop
#: (`refused`: the run waited and may no longer start)
Admission = Literal["held", "admitted", "cancelled", "waits", "refused"]
#: what must be known before deciding: nothing more (held, cancelled), whether its author may
#: still start it (`start`: it waited, and needs no slot now), or the queue's order (`queue`)
Need = Literal["held", "cancelled", "start", "queue"]


def waiting_status(
    previous: dict[str, Any], asked: Asked, verdict: slots.QueuePlace, joined: str
) -> PlanStatus:
    """The status of a run waiting for a slot: Pending, not started, the queue it waits in
    (joined at `joined`)."""
    run, generation = asked.run, int(asked.run["generation"])
    message = slots.message(asked.capsule, verdict)
    return PlanStatus.model_construct(
        observed_generation=generation,
        run={k: v for k, v in run.items() if k != "startedAt"},
        phase=Phase.PENDING.value,
        progress=f"0/{asked.total}",
        conditions=[
            status_.condition(
                "Unknown",
                slots.REASON_WAITING,
                message,
                generation,
                previous.get("conditions", []),
                asked.now,
            )
        ],
        queue=slots.queue(asked.capsule, verdict, joined),
    )


def admitted_status(
    previous: dict[str, Any], asked: Asked, verdict: slots.QueuePlace
) -> PlanStatus:
    """The status that takes a slot for the run, written before it creates anything (the
    reconcile's own status replaces it once it has dispatched)."""
    generation = int(asked.run["generation"])
    started = status_.rfc3339(asked.now)
    return PlanStatus.model_construct(
        observed_generation=generation,
        run={**asked.run, "startedAt": started},
        phase=Phase.PENDING.value,
        progress=f"0/{asked.total}",
        conditions=[
            status_.condition(
                "Unknown",
                Phase.PENDING.value,
                f"started on Capsule {asked.capsule}: "
                f"slot {verdict.running_count + 1} of {verdict.limit}",
                generation,
                previous.get("conditions", []),
                asked.now,
            )
        ],
        started_at=started,
    )


def need(
    plan: dict[str, Any],
    previous: dict[str, Any],
    capsule: CapsuleSpec,
    run: dict[str, Any],
    limited: frozenset[str],
) -> Need:
    """What admission needs to know of the Plan's current run (`run`, the status' run record)
    under `capsule`, the Capsules of its namespace with a limit being `limited` (those its
    exemption names: slots.exemption). A run that waited and needs no slot any more (the limit
    gone, or a child whose ancestor's Capsule got one) starts, as one admitted does."""
    if capsule.concurrency is None or slots.exempt(plan, limited):
        waited = slots.waiting(plan) and (previous.get("run") or {}).get("id") == run["id"]
        return "start" if waited else "held"
    if slots.holds_run(plan, str(run["id"]), limited):
        return "held"
    if stopping.cancel_of(plan["metadata"].get("annotations") or {}):
        return "cancelled"  # stopped before it started (a cancelled run creates nothing)
    return "queue"


def queued(
    plan: dict[str, Any], previous: dict[str, Any], capsule: str, run: dict[str, Any]
) -> bool:
    """Whether the run waits in the Capsule's queue already (its author is asked again as it
    takes a slot)."""
    return slots.waiting(plan, capsule) and (previous.get("run") or {}).get("id") == run["id"]


@dataclass(frozen=True)
class Decided:
    """An admission decision: its answer, and the status to write (a slot taken, a run
    waiting or refused; None: none)."""

    admission: Admission
    status: dict[str, Any] | None = None


@dataclass(frozen=True)
class Asked:
    """What one admission decision read: the run, its Capsule and limit, its place in the queue,
    and (for a run that waited) whether its author may still start it."""

    plan: dict[str, Any]
    previous: dict[str, Any]
    run: dict[str, Any]
    capsule: str
    total: int
    now: float
    verdict: slots.QueuePlace | None = None
    refusal: authors.Refusal | None = None


def decide(need_: Need, asked: Asked, told: Told) -> Decided:
    """Whether the run goes on, waits or is refused; the status it writes (carried with its
    history: run_history.carried) and the Events (told to `told`)."""
    if need_ in ("held", "cancelled"):
        return Decided(need_)
    if asked.refusal is not None:
        return Decided("refused", refused(asked, told))
    if need_ == "start":
        return Decided("admitted")
    verdict, run = asked.verdict, asked.run
    assert verdict is not None
    if verdict.admitted:
        new = admitted_status(asked.previous, asked, verdict)
        return Decided("admitted", run_history.carried(new.to_status(), asked.previous))
    joined = slots.queued_at(asked.plan, str(run["id"]), asked.now)
    new = waiting_status(asked.previous, asked, verdict, joined)
    if not queued(asked.plan, asked.previous, asked.capsule, run):
        told(REASON_QUEUED, slots.message(asked.capsule, verdict))
    elif not slots.rewritten(asked.previous.get("queue"), new.queue):
        return Decided("waits")  # farther back than it shows, or unchanged: no write (slots' rule)
    return Decided("waits", run_history.carried(new.to_status(), asked.previous))


def refused(asked: Asked, told: Told) -> dict[str, Any]:
    """A run that may not start for its author (run.authors): the Event, and its status."""
    assert asked.refusal is not None
    return authors.refused_start(asked.run, asked.previous, asked.refusal, asked.now, told)


@dataclass
class Gate:
    """One admission decision at a time per Capsule, in the leader (the module's docstring)."""

    _locks: dict[tuple[str, str], asyncio.Lock] = field(default_factory=dict)

    @asynccontextmanager
    async def held(self, namespace: str, capsule: str) -> AsyncIterator[None]:
        lock = self._locks.setdefault((namespace, capsule), asyncio.Lock())
        async with lock:
            yield
