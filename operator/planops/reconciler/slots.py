"""Who may run on a Capsule with `concurrency.maxRunningPlans` (pure: Plans in, a verdict out).

The count is derived from the cluster, never from one process's memory, so it holds across
operator restarts and leader failover. The rule, in terms of the Plans of the Capsule's
namespace whose `spec.capsule` names it:

- A Plan **holds a slot** while its status says its current run started: phase Pending or
  Running without a `queue` entry (the operator writes that status, with the run's id and start
  time, before the run creates anything: reconciler.admission). It holds it until the run
  succeeds or fails, or the Plan is deleted.
- Every other Plan of the Capsule not finished and not being deleted **waits** (phase Pending,
  `status.queue` naming the Plans ahead), and so does one not reconciled yet.
- The waiting Plans are ordered by `metadata.creationTimestamp`, then name, then uid (the
  timestamp has one-second resolution). The first `maxRunningPlans - holders` of them may start,
  and no other: a later Plan never overtakes an earlier one, whichever is reconciled first.
- A capsule step's child Plan runs inside its parent's slot: it neither counts nor waits.
  Counted, a plan holding a slot of X whose child waits for Y's only slot, while a plan holding
  Y's waits for its child on X, would wait forever (a child on its parent's own Capsule cannot
  happen: the cycle rule refuses it). A child is a Plan whose controller is a Plan and which
  carries the parent label (both kept from plan authors by the admission policies).
- A new generation or re-run of a Plan is decided again as it starts, in the Plan's place of
  creation; its earlier run no longer counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from planops.api import names
from planops.api.names import Phase
from planops.engine.policy import DEFAULT_CAPSULE

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


def _status(plan: dict[str, Any]) -> dict[str, Any]:
    status = plan.get("status")
    return status if isinstance(status, dict) else {}


def counted(plan: dict[str, Any]) -> bool:
    """Whether a Plan takes part in its Capsule's count: neither finished, nor being deleted,
    nor a child Plan."""
    meta = plan.get("metadata") or {}
    return not (
        meta.get("deletionTimestamp")
        or names.finished(_status(plan).get("phase"))
        or is_child(plan)
    )


def holds(plan: dict[str, Any]) -> bool:
    """Whether a Plan holds a slot of its Capsule (the module's rule)."""
    status = _status(plan)
    return (
        counted(plan)
        and status.get("phase") in (Phase.PENDING, Phase.RUNNING)
        and not status.get("queue")
    )


def holds_run(plan: dict[str, Any], run_id: str) -> bool:
    """Whether a Plan holds a slot for the run `run_id` (not for an earlier run)."""
    return holds(plan) and (_status(plan).get("run") or {}).get("id") == run_id


def order(plan: dict[str, Any]) -> tuple[str, str, str]:
    """A Plan's place in its Capsule's queue: creation time, then name, then uid. RFC 3339
    timestamps in UTC (what the API server writes) sort as text."""
    meta = plan.get("metadata") or {}
    return (
        str(meta.get("creationTimestamp") or ""),
        str(meta.get("name") or ""),
        str(meta.get("uid") or ""),
    )


@dataclass(frozen=True)
class Verdict:
    """Whether a Plan may start now, and if not, what it waits for."""

    admitted: bool
    limit: int
    #: the Plans holding a slot (names, in queue order)
    running: tuple[str, ...]
    #: the Plans waiting ahead of this one (names, in queue order)
    ahead: tuple[str, ...]

    @property
    def position(self) -> int:
        """This Plan's place among the waiting (1: next to start)."""
        return len(self.ahead) + 1


def judge(plan: dict[str, Any], capsule: str, limit: int, plans: list[dict[str, Any]]) -> Verdict:
    """Whether `plan` may start on `capsule` whose maxRunningPlans is `limit`, the namespace's
    Plans being `plans` (it need not be among them: it is counted as waiting)."""
    me = (plan.get("metadata") or {}).get("uid")
    mine = [
        p
        for p in plans
        if capsule_of(p) == capsule
        and counted(p)
        and (p.get("metadata") or {}).get("uid") != me
        and (p.get("metadata") or {}).get("namespace")
        == (plan.get("metadata") or {}).get("namespace")
    ]
    running = sorted((p for p in mine if holds(p)), key=order)
    mine_order = order(plan)
    ahead = sorted((p for p in mine if not holds(p) and order(p) < mine_order), key=order)
    free = limit - len(running)
    return Verdict(
        admitted=len(ahead) < free,
        limit=limit,
        running=tuple(str(p["metadata"]["name"]) for p in running),
        ahead=tuple(str(p["metadata"]["name"]) for p in ahead),
    )


def _listed(names_: tuple[str, ...]) -> str:
    shown = ", ".join(names_[:NAMES_LISTED])
    more = len(names_) - NAMES_LISTED
    return shown + (f" and {more} more" if more > 0 else "")


def message(capsule: str, verdict: Verdict) -> str:
    """What a waiting Plan's condition says: the Capsule, its limit, the Plans ahead."""
    text = f"waiting for one of the {verdict.limit} slot(s) of Capsule {capsule}: "
    text += f"running: {_listed(verdict.running) or 'none'}"
    if verdict.ahead:
        text += f"; ahead in the queue: {_listed(verdict.ahead)}"
    return text


def queue(capsule: str, verdict: Verdict) -> dict[str, Any]:
    """`status.queue` of a waiting Plan (bounded: at most NAMES_LISTED names a list)."""
    return {
        "capsule": capsule,
        "maxRunningPlans": verdict.limit,
        "position": verdict.position,
        "running": list(verdict.running[:NAMES_LISTED]),
        "ahead": list(verdict.ahead[:NAMES_LISTED]),
        "message": message(capsule, verdict),
    }


def waiting(plan: dict[str, Any], capsule: str) -> bool:
    """Whether the Plan object's status says it waits for a slot of `capsule` (the watch handler
    wakes these when a slot frees)."""
    q = _status(plan).get("queue")
    return isinstance(q, dict) and q.get("capsule") == capsule and counted(plan)


def to_wake(freed: dict[str, Any], active: list[dict[str, Any] | None]) -> list[tuple[str, str]]:
    """The Plans (namespace, name) of `active` waiting for a slot of the Capsule of `freed`, a
    Plan that just finished or was deleted: one of them may start now, at once (not at the next
    resync). Nothing when `freed` took no part in the count (a child Plan)."""
    if is_child(freed):
        return []
    meta = freed.get("metadata") or {}
    namespace, capsule = meta.get("namespace"), capsule_of(freed)
    return [
        (namespace, p["metadata"]["name"])
        for p in active
        if p is not None
        and p["metadata"].get("namespace") == namespace
        and p["metadata"].get("name") != meta.get("name")
        and waiting(p, capsule)
    ]
