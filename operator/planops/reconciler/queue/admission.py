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
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from planops.api import CapsuleSpec, PlanSpec
from planops.api.names import Phase
from planops.engine import capsule_name, finally_steps
from planops.kube.api import KubeApi
from planops.kube.cache import WatchCache
from planops.kube.events import Recorder
from planops.reconciler.effects.writing import StatusWriter
from planops.reconciler.history import run_history
from planops.reconciler.queue import slots, standing
from planops.reconciler.run import status as status_
from planops.reconciler.run import stopping

#: the Event a Plan gets when it starts waiting for a slot
REASON_QUEUED = "Queued"
#: what the gate answers: go on holding a slot (`held`), go on as the run's start (`admitted`),
#: go on without a slot to be cancelled (`cancelled`: the run creates nothing), wait, or stop
#: (`refused`: the run waited and may no longer start; `may_start` wrote why)
Answer = Literal["held", "admitted", "cancelled", "waits", "refused"]
#: asked before a run that waited in the queue takes its slot: whether it may still start (its
#: author's `use` of the Capsule may have been revoked meanwhile); on False it wrote why
MayStart = Callable[[], Awaitable[bool]]


def waiting_status(
    previous: dict[str, Any],
    *,
    generation: int,
    run: dict[str, Any],
    total: int,
    capsule: str,
    verdict: slots.Verdict,
    joined: str,
    now: float,
) -> dict[str, Any]:
    """The status of a run waiting for a slot: Pending, not started, the queue it waits in
    (joined at `joined`)."""
    return {
        "observedGeneration": generation,
        "run": {k: v for k, v in run.items() if k != "startedAt"},
        "phase": Phase.PENDING.value,
        "progress": f"0/{total}",
        "conditions": [
            status_.condition(
                "Unknown",
                slots.REASON_WAITING,
                slots.message(capsule, verdict),
                generation,
                previous.get("conditions", []),
                now,
            )
        ],
        "queue": slots.queue(capsule, verdict, joined),
    }


def admitted_status(
    previous: dict[str, Any],
    *,
    generation: int,
    run: dict[str, Any],
    total: int,
    capsule: str,
    verdict: slots.Verdict,
    now: float,
) -> dict[str, Any]:
    """The status that takes a slot for the run, written before it creates anything (the
    reconcile's own status replaces it once it has dispatched)."""
    started = status_.rfc3339(now)
    return {
        "observedGeneration": generation,
        "run": {**run, "startedAt": started},
        "phase": Phase.PENDING.value,
        "progress": f"0/{total}",
        "conditions": [
            status_.condition(
                "Unknown",
                Phase.PENDING.value,
                f"started on Capsule {capsule}: "
                f"slot {verdict.running_count + 1} of {verdict.limit}",
                generation,
                previous.get("conditions", []),
                now,
            )
        ],
        "startedAt": started,
    }


@dataclass
class Gate:
    """The admission decisions of one operator process (the leader's)."""

    kube: KubeApi
    writer: StatusWriter
    #: Plans as the watch shows them (None: always list)
    plans: WatchCache | None = None
    #: Capsules as the watch shows them (None, or one not seen: ask the API)
    capsules: WatchCache | None = None
    _locks: dict[tuple[str, str], asyncio.Lock] = field(default_factory=dict)

    async def admit(
        self,
        plan: dict[str, Any],
        previous: dict[str, Any],
        spec: PlanSpec,
        capsule: CapsuleSpec,
        run: dict[str, Any],
        events: Recorder,
        now: float,
        may_start: MayStart | None = None,
    ) -> Answer:
        """Whether the Plan's current run (`run`, the status' run record) may go on under
        `capsule`, the run's status building on `previous` (its earlier runs, `history`, are
        kept). When it waits, its status says why (written here); when it is admitted, the slot
        is recorded here, before the caller creates anything. A run that waited and needs no
        slot any more (the limit gone, or a child whose ancestor's Capsule got one) starts, as
        one admitted does."""
        namespace = str(plan["metadata"]["namespace"])
        limited = (
            await self._limited(namespace, set(slots.exemption(plan)))
            if capsule.concurrency
            else frozenset()
        )
        if capsule.concurrency is None or slots.exempt(plan, limited):
            if not (slots.waiting(plan) and (previous.get("run") or {}).get("id") == run["id"]):
                return "held"
            return "admitted" if may_start is None or await may_start() else "refused"
        if slots.holds_run(plan, str(run["id"]), limited):
            return "held"
        annotations = plan["metadata"].get("annotations") or {}
        if stopping.cancel_of(annotations):  # stopped before it started: reconcile cancels
            return "cancelled"  # (a cancelled run creates nothing, finally steps included)
        return await self._decide(
            plan,
            previous,
            capsule_name(spec),
            capsule.concurrency.max_running_plans,
            run,
            finally_steps.step_count(spec),
            events,
            now,
            may_start,
        )

    async def _limited(self, namespace: str, wanted: set[str]) -> frozenset[str]:
        """Which of the Capsules `wanted` (above some child Plans) have a limit now (the cache,
        else the API server: a Capsule the cache has not seen is not taken as absent)."""
        found = set()
        for name in wanted:
            obj = self.capsules.get(namespace, name) if self.capsules is not None else None
            if obj is None:
                obj = await self.kube.get_capsule(namespace, name)
            if slots.limit_of(obj) is not None:
                found.add(name)
        return frozenset(found)

    async def _judge(
        self, plan: dict[str, Any], limit: int, plans: standing.Standing, joined: str
    ) -> slots.Verdict:
        """Standing.verdict, with the limits of the Capsules above the Capsule's children."""
        limited = await self._limited(str(plan["metadata"]["namespace"]), plans.lineage_capsules())
        return plans.verdict(plan, limit, limited, joined)

    def _cached(self, namespace: str, capsule: str) -> standing.Standing | None:
        """The live Plans of the Capsule as the watch shows them (None: no cache)."""
        if self.plans is None:
            return None
        return standing.standing(self.plans, namespace, capsule)

    async def _decide(
        self,
        plan: dict[str, Any],
        previous: dict[str, Any],
        capsule: str,
        limit: int,
        run: dict[str, Any],
        total: int,
        events: Recorder,
        now: float,
        may_start: MayStart | None,
    ) -> Answer:
        meta = plan["metadata"]
        namespace = str(meta["namespace"])
        generation = int(run["generation"])
        joined = slots.queued_at(plan, str(run["id"]), now)
        queued = slots.waiting(plan, capsule) and (previous.get("run") or {}).get("id") == run["id"]
        lock = self._locks.setdefault((namespace, capsule), asyncio.Lock())
        async with lock:
            verdict = None
            cached = self._cached(namespace, capsule)
            if cached is not None:
                verdict = await self._judge(plan, limit, cached, joined)
            if verdict is None or verdict.admitted:  # the truth before a slot is taken
                listed = await self.kube.list_plans(namespace, "")
                mine = (p for p in listed if slots.capsule_key(p) == (namespace, capsule))
                verdict = await self._judge(plan, limit, standing.Standing.of(mine), joined)
            if verdict.admitted and queued and may_start is not None and not await may_start():
                return "refused"  # it waited: its author's `use` is asked again as it starts
            if verdict.admitted:
                new = admitted_status(
                    previous,
                    generation=generation,
                    run=run,
                    total=total,
                    capsule=capsule,
                    verdict=verdict,
                    now=now,
                )
                await self.writer.write(plan, run_history.carried(new, previous))
                return "admitted"
        new = waiting_status(
            previous,
            generation=generation,
            run=run,
            total=total,
            capsule=capsule,
            verdict=verdict,
            joined=joined,
            now=now,
        )
        if not queued:
            events(REASON_QUEUED, slots.message(capsule, verdict))
        elif not slots.rewritten(previous.get("queue"), new["queue"]):
            return "waits"  # farther back than it shows, or unchanged: no write (slots' rule)
        await self.writer.write(plan, run_history.carried(new, previous))
        return "waits"
