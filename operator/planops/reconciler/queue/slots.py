"""Who may run on a Capsule with `concurrency.maxRunningPlans` (pure: Plans in, a verdict out).

The count is derived from the cluster, never from one process's memory, so it holds across
operator restarts and leader failover. The rule, in terms of the Plans of the Capsule's
namespace whose `spec.capsule` names it:

- A Plan **holds a slot** while its status says its current run started: phase Pending or
  Running without a `queue` entry (the operator writes that status, with the run's id and start
  time, before the run creates anything: reconciler.queue.admission). It holds it until the run
  succeeds or fails, or the Plan is deleted.
- Every other Plan of the Capsule not finished and not being deleted **waits** (phase Pending,
  `status.queue` naming the Plans ahead), and so does one not reconciled yet.
- The waiting Plans are ordered by when their current run joined the queue (`queue.queuedAt`,
  written by the operator when it first sees the run), then name, then uid. A Plan's first run
  joins at `metadata.creationTimestamp` (one-second resolution), which also places a Plan not
  reconciled yet; a later run (a re-run, a retry, a new generation) joins when the operator
  first sees it, behind every run already waiting, even when an earlier run of the same Plan
  held a slot. The first `maxRunningPlans - holders` of them may start, and no other: a later
  Plan never overtakes an earlier one, whichever is reconciled first.
- A waiting Plan's `queue` is written when it joins, and again only while it is among the first
  NAMES_LISTED and what it shows changed: farther back, its `position` is an upper bound (a
  waiting run only moves forward), so that the queue's movement costs no status write for each
  of a long queue's Plans at every start.
- A capsule step's child Plan whose lineage (the Capsules of the Plans above it, the
  `planops.dev/lineage` annotation the operator writes) names a Capsule with a
  `maxRunningPlans` limit *now* runs inside that ancestor's slot: it is **exempt**, neither
  counting nor waiting. Counted, a plan holding a slot of X whose child waits for Y's only
  slot, while a plan holding Y's waits for its child on X, would wait forever (a child on its
  parent's own Capsule cannot happen: the cycle rule refuses it). The first limited Capsule of
  a lineage is where an ancestor holds a slot (the Plans above it are on unlimited Capsules,
  so it is counted), so "a limited Capsule above it" and "an ancestor holds a slot" are one.
  What this leaves: a limited Capsule in another limited one's spawn.allow starts children
  there outside the count (as many as each of its Plans has capsule steps into it in flight);
  counting them could close the cycle above, so that choice is the Capsules' owners'.
- Any other child (every Capsule above it unlimited) is counted and waits like any Plan: no
  ancestor holds a slot, so its waiting cannot close a cycle, and an author who may use an
  unlimited Capsule cannot run more Plans on a limited one it may spawn into than its limit.
  A child is a Plan whose controller is a Plan and which carries the parent label (both, and
  the lineage annotation, kept from plan authors by the admission policies). A child runs only
  as its parent started it: the operator takes no re-run or retry of a child (a re-run needs
  no `use`, and counted, two re-run children could close the cycle above), so every run of a
  child is an attempt its parent waits for, inside its parent's run.
- A limit added to or removed from a Capsule of a lineage changes the child's part at once
  (every Plan of the namespace is looked at again on a Capsule's event): a waiting child that
  becomes exempt starts; a running child that becomes counted holds a slot (nothing is
  stopped, so the Capsule may run more than its limit until it finishes). Which Capsules are
  limited is read from the Capsules' cache (when admitting, the API server for one the cache
  has not seen); a Capsule that does not exist is unlimited: the child is counted, the safe
  side for the count.
- A new generation or re-run of a Plan is decided again as it starts, in the queue's order;
  its earlier run no longer counts.
- When a slot frees (a counted Plan finishes, starts being deleted, or is deleted: not any
  other event of a finished Plan), only the first waiting Plans, as many as slots are free,
  are woken: the others are decided at the resync or on their own events. What the watch
  follows (the Plans' grouping by Capsule, a Plan's move out of the running) depends on the
  Plan alone, never on Capsules: whether a child is exempt is asked, of the Capsules as they
  are then, only when a verdict is made, so a limit changed leaves no stale grouping.

The queue's order is kept by reconciler.queue.standing (Standing: each Capsule's Plans sorted as
they change, so a verdict costs no sort of the queue; whom a freed slot wakes)."""

from __future__ import annotations

from collections.abc import Container
from dataclasses import dataclass
from typing import Any, Protocol

from planops.api import names
from planops.api.names import Phase
from planops.api.status_model import Queue
from planops.engine.policy import DEFAULT_CAPSULE
from planops.engine.report import parse_rfc3339, rfc3339
from planops.kube.cache import Group

#: the most Plan names a waiting Plan's status lists (running, and ahead in the queue)
NAMES_LISTED = 20
#: the Succeeded condition's reason while a Plan waits for a slot
REASON_WAITING = "WaitingForSlot"


def capsule_of(plan: dict[str, Any]) -> str:
    """The Capsule a Plan object runs on (spec.capsule; the default Capsule when unset)."""
    spec = plan.get("spec")
    capsule = spec.get("capsule") if isinstance(spec, dict) else None
    return capsule if isinstance(capsule, str) and capsule else DEFAULT_CAPSULE


def is_child(plan: dict[str, Any]) -> bool:
    """A capsule step's child Plan: controlled by a Plan and labelled with its parent."""
    meta = plan.get("metadata") or {}
    if names.LABEL_PARENT not in (meta.get("labels") or {}):
        return False
    return any(
        isinstance(o, dict)
        and o.get("controller") is True
        and o.get("kind") == "Plan"
        and str(o.get("apiVersion", "")).startswith(f"{names.GROUP}/")
        for o in meta.get("ownerReferences") or []
    )


def lineage(plan: dict[str, Any]) -> tuple[str, ...]:
    """The Capsules of the Plans above a child Plan, outermost first: its lineage annotation,
    written by the operator, without the Plan's own Capsule (which the annotation ends with,
    and which the cycle rule keeps from every Plan above it); empty for a top-level Plan."""
    notes = (plan.get("metadata") or {}).get("annotations") or {}
    text = notes.get(names.ANNOTATION_LINEAGE)
    own = capsule_of(plan)
    return tuple(a for a in text.split(",") if a and a != own) if isinstance(text, str) else ()


def exemption(plan: dict[str, Any]) -> tuple[str, ...]:
    """The Capsules whose limit makes a Plan's run exempt: the lineage of a child Plan (its only
    runs are those its parent starts: the operator takes no re-run or retry of a child,
    reconciler.run.retrying, so a re-run annotation does not take it out of the slot); none for any
    other Plan."""
    return lineage(plan) if is_child(plan) else ()


def exempt(plan: dict[str, Any], limited: Container[str]) -> bool:
    """A child Plan with a Capsule above it among `limited` (the Capsules of its namespace with
    a limit now): it runs inside that ancestor's slot. A child with no limited Capsule above it
    is counted and queued like any Plan."""
    return any(c in limited for c in exemption(plan))


def _status(plan: dict[str, Any]) -> dict[str, Any]:
    status = plan.get("status")
    return status if isinstance(status, dict) else {}


def live(plan: dict[str, Any]) -> bool:
    """Whether a Plan may take part in its Capsule's count: neither finished nor being
    deleted (what the watch follows: it does not depend on Capsules)."""
    meta = plan.get("metadata") or {}
    return not (meta.get("deletionTimestamp") or names.finished(_status(plan).get("phase")))


def counted(plan: dict[str, Any], limited: Container[str]) -> bool:
    """Whether a Plan takes part in its Capsule's count: live and not exempt (`limited`: the
    Capsules of its namespace with a limit now)."""
    return live(plan) and not exempt(plan, limited)


def started(plan: dict[str, Any]) -> bool:
    """Whether a Plan's status says its current run started (Pending or Running, not queued):
    a slot held, when the Plan is counted."""
    status = _status(plan)
    return status.get("phase") in (Phase.PENDING, Phase.RUNNING) and not status.get("queue")


def holds(plan: dict[str, Any], limited: Container[str]) -> bool:
    """Whether a Plan holds a slot of its Capsule (the module's rule)."""
    return counted(plan, limited) and started(plan)


def holds_run(plan: dict[str, Any], run_id: str, limited: Container[str]) -> bool:
    """Whether a Plan holds a slot for the run `run_id` (not for an earlier run)."""
    return holds(plan, limited) and (_status(plan).get("run") or {}).get("id") == run_id


def capsule_key(plan: dict[str, Any]) -> tuple[str, str] | None:
    """The key the Plans' cache groups a Plan under: its namespace and Capsule while it is live
    (children included: whether one is exempt is asked when a verdict is made); None (not
    grouped) otherwise."""
    if not live(plan):
        return None
    return str((plan.get("metadata") or {}).get("namespace", "")), capsule_of(plan)


def queued_at(plan: dict[str, Any], run_id: str, now: float) -> str:
    """When the run `run_id` of a Plan joined its Capsule's queue: as its status records it
    for that run; else the Plan's creation for its first run; else now (a later run)."""
    status = _status(plan)
    run = status.get("run") if isinstance(status.get("run"), dict) else {}
    q = status.get("queue")
    if run and run.get("id") == run_id:
        if isinstance(q, dict) and isinstance(q.get("queuedAt"), str):
            return str(q["queuedAt"])
        if isinstance(run.get("startedAt"), str):  # seen before (it waited as Invalid)
            return str(run["startedAt"])
    created = (plan.get("metadata") or {}).get("creationTimestamp")
    if not run and isinstance(created, str):
        return created
    return str(rfc3339(now))


def order(plan: dict[str, Any], joined: str | None = None) -> tuple[float, str, str]:
    """A Plan's place in its Capsule's queue: when its run joined (`joined`, else its status'
    queue.queuedAt, else its creation), then name, then uid."""
    meta = plan.get("metadata") or {}
    q = _status(plan).get("queue")
    if joined is None and isinstance(q, dict) and isinstance(q.get("queuedAt"), str):
        joined = q["queuedAt"]
    when = parse_rfc3339(joined or meta.get("creationTimestamp"))
    return (
        when if when is not None else 0.0,
        str(meta.get("name") or ""),
        str(meta.get("uid") or ""),
    )


@dataclass(frozen=True)
class QueuePlace:
    """Whether a Plan may start now, and if not, what it waits for."""

    admitted: bool
    limit: int
    #: the Plans holding a slot: the first NAMES_LISTED names in queue order, and how many
    running: tuple[str, ...]
    running_count: int
    #: the Plans waiting ahead of this one: the first NAMES_LISTED names in queue order, and
    #: how many
    ahead: tuple[str, ...]
    ahead_count: int

    @property
    def position(self) -> int:
        """This Plan's place among the waiting (1: next to start)."""
        return self.ahead_count + 1


def _listed(names_: tuple[str, ...], count: int) -> str:
    shown = ", ".join(names_[:NAMES_LISTED])
    more = count - min(len(names_), NAMES_LISTED)
    return shown + (f" and {more} more" if more > 0 else "")


def message(capsule: str, verdict: QueuePlace) -> str:
    """What a waiting Plan's condition says: the Capsule, its limit, the Plans ahead."""
    text = f"waiting for one of the {verdict.limit} slot(s) of Capsule {capsule}: "
    text += f"running: {_listed(verdict.running, verdict.running_count) or 'none'}"
    if verdict.ahead_count:
        text += f"; ahead in the queue: {_listed(verdict.ahead, verdict.ahead_count)}"
    return text


def queue(capsule: str, verdict: QueuePlace, joined: str) -> Queue:
    """`status.queue` of a waiting Plan (bounded: at most NAMES_LISTED names a list)."""
    return Queue.model_construct(
        capsule=capsule,
        queued_at=joined,
        max_running_plans=verdict.limit,
        position=verdict.position,
        running=list(verdict.running[:NAMES_LISTED]),
        ahead=list(verdict.ahead[:NAMES_LISTED]),
        message=message(capsule, verdict),
    )


def waiting(plan: dict[str, Any], capsule: str | None = None) -> bool:
    """Whether the Plan object's status says it waits for a slot (of `capsule`, if named)."""
    q = _status(plan).get("queue")
    return isinstance(q, dict) and capsule in (None, q.get("capsule")) and live(plan)


def rewritten(old: Any, queue_: Queue | None) -> bool:
    """Whether a waiting run's `queue` must be written again (the module's rule): it joined
    only now, the limit changed, or it is among the first NAMES_LISTED and what it shows
    changed."""
    assert queue_ is not None
    new = queue_.to_status()
    if not isinstance(old, dict) or old.get("queuedAt") != new["queuedAt"]:
        return True
    if old.get("maxRunningPlans") != new["maxRunningPlans"]:
        return True
    return int(new["position"]) <= NAMES_LISTED and old != new


class Counting:
    """The Plans (namespace, name) whose last watch event showed them live, kept by the Plan
    watch handler alone: a slot is freed by a Plan's move out of the count (into finished,
    being deleted, deleted), and only the watch sees each move once and in order (the status
    writer puts the leader's own writes into the Plans' cache before their events arrive, so
    the cache cannot tell). A Plan first seen already out of the count (the watch's first
    listing, a label written on a finished Plan) frees nothing: a new leader looks at every
    Plan anyway. Whether the Plan that moved out was counted (not an exempt child) is to_wake's
    question, asked of the Capsules as they are then."""

    def __init__(self) -> None:
        self._keys: set[tuple[str, str]] = set()

    def moved_out(self, event_type: str | None, plan: dict[str, Any]) -> bool:
        """Record a Plan's watch event; whether it took the Plan out of the count."""
        meta = plan.get("metadata") or {}
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
        was = key in self._keys
        if event_type != "DELETED" and live(plan):
            self._keys.add(key)
            return False
        self._keys.discard(key)
        return was


class Cache(Protocol):
    """What to_wake reads of the watch's caches (kube.cache.WatchCache)."""

    def get(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def values(self) -> list[dict[str, Any]]: ...

    def grouped(self, key: tuple[str, str]) -> Group | None: ...


def limit_of(capsule: dict[str, Any] | None) -> int | None:
    """A Capsule object's maxRunningPlans, or None (unknown, unlimited, or not a number)."""
    spec = (capsule or {}).get("spec")
    conc = spec.get("concurrency") if isinstance(spec, dict) else None
    n = conc.get("maxRunningPlans") if isinstance(conc, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) else None


def limited_in(capsules: Cache, namespace: str, wanted: set[str]) -> frozenset[str]:
    """Which of the Capsules `wanted` of `namespace` have a limit, as the Capsules' cache shows
    them (one it has not seen: none)."""
    return frozenset(c for c in wanted if limit_of(capsules.get(namespace, c)) is not None)
