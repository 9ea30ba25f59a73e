"""The order of a Capsule's queue (reconciler.queue.slots' rule), kept as its Plans change.

The Plans' cache keeps one Standing per Capsule of a namespace (kube.cache.WatchCache's groups):
its live Plans, those holding a slot and those waiting, each sorted by queue order (slots.order)
in lists kept with `bisect`. A verdict is then a binary search per group and the first
NAMES_LISTED names, not a sort of the queue: a resync reconciles every waiting Plan, and a sort
for each made it quadratic (5,000 waiting Plans: ~2 CPU-minutes every resync; bench/
capsule_queue.py, docs/performance.md). A Plan's change moves its one entry (an insertion moves
pointers, not Python work).

Plans are grouped by their exemption (slots.exemption: children whose Capsules above may exempt
them): which groups count is asked of the Capsules' limits at each verdict, as slots says,
without a pass over the Plans. The list the API server answers before a slot is taken is made
into a Standing too (Standing.of), so one structure gives every verdict.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
from collections.abc import Container, Iterable
from dataclasses import dataclass
from typing import Any

from planops.reconciler.queue.slots import (
    NAMES_LISTED,
    Cache,
    QueuePlace,
    capsule_of,
    exempt,
    exemption,
    limit_of,
    limited_in,
    live,
    order,
    started,
)

Key = tuple[str, str]
#: a Plan's place in the queue (order)
Order = tuple[float, str, str]


@dataclass
class _Line:
    """The Plans of a Standing that one `exemption` leaves counted or exempt together: those
    holding a slot and those waiting, each a list sorted by queue order."""

    holders: list[Order]
    waiters: list[Order]


@dataclass(frozen=True)
class _Entry:
    order: Order
    started: bool
    exemption: tuple[str, ...]


class Standing:
    """The live Plans of one Capsule of one namespace, in queue order, kept as they change (the
    module's docstring)."""

    def __init__(self) -> None:
        self._objects: dict[Key, dict[str, Any]] = {}
        self._entries: dict[Key, _Entry] = {}
        self._lines: dict[tuple[str, ...], _Line] = {}

    @classmethod
    def of(cls, plans: Iterable[dict[str, Any]]) -> Standing:
        """A Standing of the live Plans among `plans` (all of one namespace and Capsule)."""
        standing = cls()
        for p in plans:
            if live(p):
                meta = p.get("metadata") or {}
                standing.put((str(meta.get("namespace", "")), str(meta.get("name", ""))), p)
        return standing

    def put(self, key: Key, plan: dict[str, Any]) -> None:
        """The Plan `key` as it is now (replacing what it was)."""
        self.pop(key)
        entry = _Entry(order(plan), started(plan), exemption(plan))
        line = self._lines.setdefault(entry.exemption, _Line([], []))
        bisect.insort(line.holders if entry.started else line.waiters, entry.order)
        self._entries[key] = entry
        self._objects[key] = plan

    def pop(self, key: Key) -> None:
        """The Plan `key` left (finished, being deleted, deleted, or moved to another Capsule)."""
        entry = self._entries.pop(key, None)
        if entry is None:
            return
        del self._objects[key]
        line = self._lines[entry.exemption]
        held = line.holders if entry.started else line.waiters
        del held[bisect.bisect_left(held, entry.order)]
        if not (line.holders or line.waiters):
            del self._lines[entry.exemption]

    def __len__(self) -> int:
        return len(self._entries)

    def values(self) -> list[dict[str, Any]]:
        return list(self._objects.values())

    def lineage_capsules(self) -> set[str]:
        """The Capsules whose limit may exempt some of these Plans: a verdict's `limited` is
        asked among them."""
        return {c for exemption_ in self._lines for c in exemption_}

    def _counted(self, limited: Container[str]) -> list[_Line]:
        return [line for ex, line in self._lines.items() if not any(c in limited for c in ex)]

    def _own(self, plan: dict[str, Any], lines: list[_Line]) -> _Entry | None:
        """The Plan's own entry when it is counted here (the same name and uid)."""
        meta = plan.get("metadata") or {}
        entry = self._entries.get((str(meta.get("namespace", "")), str(meta.get("name", ""))))
        if entry is None or entry.order[2] != str(meta.get("uid") or ""):
            return None
        return entry if any(line is self._lines[entry.exemption] for line in lines) else None

    def verdict(
        self,
        plan: dict[str, Any],
        limit: int,
        limited: Container[str],
        joined: str | None = None,
    ) -> QueuePlace:
        """Whether `plan` may start on this Capsule whose maxRunningPlans is `limit` (it need
        not be among the Plans: it is counted as waiting), the Capsules with a limit being
        `limited` and its run having joined the queue at `joined` (else as its status says)."""
        lines = self._counted(limited)
        own = self._own(plan, lines)
        mine = order(plan, joined)
        running_count = sum(len(line.holders) for line in lines)
        ahead_count = sum(bisect.bisect_left(line.waiters, mine) for line in lines)
        if own is not None and own.started:
            running_count -= 1
        elif own is not None and own.order < mine:
            ahead_count -= 1
        skip = own.order if own is not None else None
        running = _first((line.holders for line in lines), skip, None)
        ahead = _first((line.waiters for line in lines), skip, mine)
        return QueuePlace(
            admitted=ahead_count < limit - running_count,
            limit=limit,
            running=running,
            running_count=running_count,
            ahead=ahead,
            ahead_count=ahead_count,
        )

    def first_waiters(
        self, freed: dict[str, Any], free: int | None, limited: Container[str]
    ) -> list[str]:
        """The names of the first `free` waiting Plans (None: all) that count under `limited`,
        `freed` (which left) not among them."""
        uid = str((freed.get("metadata") or {}).get("uid") or "")
        waiters = heapq.merge(*(line.waiters for line in self._counted(limited)))
        return [o[1] for o in itertools.islice((o for o in waiters if o[2] != uid), free)]


def _first(
    lists: Iterable[list[Order]], skip: Order | None, before: Order | None
) -> tuple[str, ...]:
    """The names of the first NAMES_LISTED Plans of the sorted `lists` merged, `skip` not
    among them, all before `before` (when given)."""
    found: list[str] = []
    for o in heapq.merge(*(itertools.islice(x, NAMES_LISTED + 1) for x in lists)):
        if before is not None and not o < before:
            break
        if o != skip:
            found.append(o[1])
            if len(found) == NAMES_LISTED:
                break
    return tuple(found)


def first_waiters(
    freed: dict[str, Any],
    plans: Standing,
    limit: int | None,
    limited: Container[str],
) -> list[tuple[str, str]]:
    """The Plans (namespace, name) to look again now that `freed` freed a slot of its Capsule
    (limit `limit`; None: unknown or unlimited), `plans` being the Plans of that Capsule the
    cache holds and `limited` the Capsules of the namespace with a limit: the first waiting
    ones in the queue's order, as many as slots are free (at least one), not the whole queue.
    Nobody when `freed` was exempt (it held no slot)."""
    if exempt(freed, limited):
        return []
    namespace = str((freed.get("metadata") or {}).get("namespace", ""))
    free = None
    if limit is not None:
        free = max(1, limit - plans.verdict(freed, limit, limited).running_count)
    return [(namespace, name) for name in plans.first_waiters(freed, free, limited)]


def to_wake(freed: dict[str, Any], plans: Cache, capsules: Cache) -> list[tuple[str, str]]:
    """The Plans (namespace, name) to look again at once now that `freed` left the count of its
    Capsule (Counting.moved_out): the first waiting Plans of its Capsule (first_waiters), read
    from the caches."""
    meta = freed.get("metadata") or {}
    namespace, capsule = str(meta.get("namespace", "")), capsule_of(freed)
    members = standing(plans, namespace, capsule)
    return first_waiters(
        freed,
        members,
        limit_of(capsules.get(namespace, capsule)),
        limited_in(capsules, namespace, set(exemption(freed)) | members.lineage_capsules()),
    )


def standing(plans: Cache, namespace: str, capsule: str) -> Standing:
    """The Standing of a Capsule's Plans in the Plans' cache: the one it keeps, when it groups
    them so; else one made of what it holds."""
    group = plans.grouped((namespace, capsule))
    if isinstance(group, Standing):
        return group
    found = plans.values() if group is None else group.values()
    return Standing.of(
        p
        for p in found
        if capsule_of(p) == capsule and (p.get("metadata") or {}).get("namespace") == namespace
    )
