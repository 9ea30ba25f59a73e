"""Retention, as pure decisions: when a finished Plan is deleted (its TTL) and which of a run's
Jobs are collected (its podGC). No API calls here: effects.reads reads what `wants` names,
`decide` answers, and effects.actuator acts.

Everything is derived from the Plan object (its spec, its status's `finishedAt`, `archived` and
`jobsCollected`) and the clock, never from memory: a restarted operator, or a new leader, reads
the same Plan and reaches the same answer (the deletion time is `finishedAt + TTL`, however
late it is asked).

The rules:
- A TTL applies to a finished run, Succeeded or Failed. Not to Invalid: an Invalid Plan waits
  for its Capsule (created later, it starts the run), so it has not finished for good.
- The Plan's own `spec.ttlSecondsAfterFinished`, else the operator's default, except:
  a capsule step's child Plan (its controller is a Plan) has no TTL: it is collected with its
  parent, which reads it until its step settles; a scheduled run (its controller is a
  ScheduledPlan or a ClusterScheduledPlan) takes no operator default: its schedule's history
  limits keep it (an explicit TTL in the schedule's template applies as well, and whichever
  deletes the run first wins).
- While the archive is on, a due Plan is held until its run is archived: deleting it earlier
  would lose the run (its PlanReports go with it), and so is one whose capsule steps' child
  Plans are not all archived (they go with it). The question is the archive's
  (planops.archive.row.archived), handed in by the operator when the archive is on: the
  archive is a layer above the reconciler. Every other deletion of a finished Plan asks it too
  (`waits_for_archive`): a schedule's history limits (reconciler.schedules.shell), a parent's new
  run (reconciler.run.identity), which leaves such a child to delete itself once archived
  (`replaced_child`).
- podGC collects only the Jobs of settled steps (their records, outputs included, are in the
  status or the PlanReports before any Job is deleted): the Job of an attempt in flight is never
  deleted, so a collected Job is never taken for one that vanished (run.facts.vanished reads only
  the attempts the status has in flight).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from planops.api import names
from planops.api.names import Phase
from planops.engine.report import parse_rfc3339
from planops.reconciler.run.observe import Observed

NEVER = "Never"
ON_STEP = "OnStepCompletion"
ON_PLAN = "OnPlanCompletion"
ON_SUCCESS = "OnPlanSuccess"
#: the status field naming the run whose Jobs were collected once it finished
COLLECTED = "jobsCollected"
#: the kinds whose runs have their own retention (their history limits)
SCHEDULES = ("ScheduledPlan", "ClusterScheduledPlan")


def _controller_kind(meta: dict[str, Any]) -> str | None:
    """The kind of the object's controller, when it is one of planops' kinds."""
    for ref in meta.get("ownerReferences") or []:
        if (
            isinstance(ref, dict)
            and ref.get("controller")
            and str(ref.get("apiVersion", "")).startswith(f"{names.GROUP}/")
        ):
            return str(ref.get("kind"))
    return None


def pod_gc(plan: dict[str, Any]) -> str:
    """The Plan's podGC policy (Never when unset, or not one the schema allows)."""
    policy = (plan.get("spec") or {}).get("podGC")
    return policy if policy in (ON_STEP, ON_PLAN, ON_SUCCESS) else NEVER


def ttl(plan: dict[str, Any], default: int | None) -> int | None:
    """Seconds after its run finished that the Plan is deleted, or None (kept)."""
    meta = plan.get("metadata") or {}
    owner = _controller_kind(meta)
    if owner == "Plan":  # a capsule step's child: goes with its parent
        return None
    own = (plan.get("spec") or {}).get("ttlSecondsAfterFinished")
    if isinstance(own, int) and not isinstance(own, bool) and own >= 0:
        return own
    return None if owner in SCHEDULES else default


@dataclass(frozen=True)
class TtlAction:
    """What a finished Plan's TTL says now: keep it (no TTL, or not finished), wait until `at`,
    hold it for the archive, or delete it."""

    action: Literal["keep", "wait", "hold", "delete"]
    at: float | None = None


#: whether a Plan's finished run is in the archive (None: the archive is off)
Archived = Callable[[dict[str, Any]], bool] | None


def waits_for_archive(plan: dict[str, Any], archived: Archived) -> bool:
    """Whether deleting the finished Plan now would lose a run to the archive: the archive is on
    and its run (or an earlier run its status keeps) ended, Succeeded or Failed, and is not
    archived yet. Whatever deletes a finished Plan asks it first: its TTL, its schedule's
    history limits, its parent's next run (a run not ended, or Invalid, is not the archive's)."""
    status = plan.get("status") or {}
    return (
        archived is not None
        and status.get("phase") in (Phase.SUCCEEDED, Phase.FAILED)
        and not archived(plan)
    )


def replaced_child(child: dict[str, Any], parent: dict[str, Any] | None) -> bool:
    """Whether `child` is a capsule step's child Plan of an earlier run of `parent`, which a new
    run replaced (the child's run label is not the parent's run; the parent is its controller,
    by UID). Its parent's new run deletes such a child at once, but one the archive does not
    hold yet: that one deletes itself once archived."""
    if parent is None:
        return False
    meta, parent_meta = child.get("metadata") or {}, parent.get("metadata") or {}
    controlled = any(
        isinstance(ref, dict)
        and ref.get("controller") is True
        and ref.get("kind") == "Plan"
        and ref.get("uid") == parent_meta.get("uid")
        for ref in meta.get("ownerReferences") or []
    )
    run = ((parent.get("status") or {}).get("run") or {}).get("id")
    return controlled and (meta.get("labels") or {}).get(names.LABEL_RUN) not in (None, run)


def ttl_action(
    plan: dict[str, Any], now: float, default: int | None, archived: Archived
) -> TtlAction:
    """The TTL's answer for this Plan at `now` (see the module's rules)."""
    status = plan.get("status") or {}
    if status.get("phase") not in (Phase.SUCCEEDED, Phase.FAILED):
        return TtlAction("keep")
    seconds = ttl(plan, default)
    at = status.get("finishedAt")
    finished = parse_rfc3339(at) if isinstance(at, str) else None
    if seconds is None or finished is None:
        return TtlAction("keep")
    due = finished + seconds
    if now < due:
        return TtlAction("wait", due)
    if waits_for_archive(plan, archived):
        return TtlAction("hold")
    return TtlAction("delete")


def collects_at_end(plan: dict[str, Any]) -> bool:
    """Whether the finished run's Jobs are to be collected now (and were not yet)."""
    status = plan.get("status") or {}
    run = (status.get("run") or {}).get("id")
    if not run or status.get(COLLECTED) == run:
        return False
    policy, phase = pod_gc(plan), status.get("phase")
    if phase not in (Phase.SUCCEEDED, Phase.FAILED):
        return False
    return policy in (ON_STEP, ON_PLAN) or (policy == ON_SUCCESS and phase == Phase.SUCCEEDED)


def settled_jobs(observed: Iterable[Observed], settled: set[str]) -> list[str]:
    """The Jobs (names) of steps whose records are settled: what OnStepCompletion collects after
    the status that records them is written. Child Plans stay (they are their own runs)."""
    return sorted({o.object_name for o in observed if o.kind == "job" and o.step_id in settled})


def wants_a_look(plan: dict[str, Any], default: int | None) -> bool:
    """Whether a run that just finished has retention work (Jobs to collect, a TTL to time):
    the reconcile that finishes it then looks at it again at once."""
    return pod_gc(plan) != NEVER or ttl(plan, default) is not None


#: added to a TTL's wake-up (the deadline itself has passed when the Plan is looked at)
WAKE_MARGIN = 0.05


@dataclass(frozen=True)
class Read:
    """What a finished run's retention read (what `wants` named)."""

    #: the Plan whose capsule step made this one (a child's; None: none, or not read)
    parent: dict[str, Any] | None = None
    #: the child Plans of any run of the Plan (read when its TTL would delete it)
    children: tuple[dict[str, Any], ...] = ()
    #: the run's Jobs (read when its podGC collects them at the end)
    jobs: tuple[str, ...] = ()


@dataclass(frozen=True)
class Retain:
    """What a finished run's retention does now: delete the Plan as it was read (`deleted`
    says why: its TTL, or its parent's new run replaced it), collect the run's Jobs by its podGC
    `policy` and mark them collected in the status, and look at the Plan again in `wake`
    seconds. `note`: what the operator's log says."""

    delete: str | None = None
    collect: tuple[str, ...] = ()
    policy: str = NEVER
    mark: bool = False
    wake: float | None = None
    note: str | None = None


def wants(
    plan: dict[str, Any], now: float, default: int | None, archived: Archived
) -> tuple[bool, bool, bool]:
    """What a finished run's retention must read first: (the parent of a child Plan, the
    Plan's children, the run's Jobs)."""
    meta = plan.get("metadata") or {}
    parent = archived is not None and bool(_labels(meta).get(names.LABEL_PARENT))
    children = archived is not None and ttl_action(plan, now, default, archived).action == "delete"
    return parent, children, collects_at_end(plan)


def decide(
    plan: dict[str, Any], now: float, default: int | None, archived: Archived, read: Read
) -> Retain:
    """A finished run's retention: its TTL (held while its run, or a child's, is not archived),
    its Jobs collected by its podGC, and a child Plan of a run its parent replaced, kept for the
    archive, deleted once archived (what its parent's new run would have done)."""
    if archived is not None and replaced_child(plan, read.parent):
        if waits_for_archive(plan, archived):  # its archive mark is a change: that reconcile
            return Retain(note="its parent's run was replaced; kept until archived")
        return Retain(delete="replaced", note="archived; deleted (its parent's run was replaced)")
    action = ttl_action(plan, now, default, archived)
    if action.action == "delete" and any(waits_for_archive(c, archived) for c in read.children):
        action = TtlAction("hold")  # they go with it: their archive marks wake it
    if action.action == "delete":
        return Retain(delete="ttl", note=f"deleted, {_ttl(plan)}s after its run finished (TTL)")
    note = "its TTL passed; kept until its runs are archived" if action.action == "hold" else None
    wake = None
    if action.action == "wait" and action.at is not None:
        wake = max(0.0, action.at - now) + WAKE_MARGIN
    if collects_at_end(plan):
        return Retain(collect=read.jobs, policy=pod_gc(plan), mark=True, wake=wake, note=note)
    return Retain(wake=wake, note=note)


def collected(status: dict[str, Any]) -> dict[str, Any]:
    """A finished run's status, its Jobs marked collected (once per run)."""
    return {**status, COLLECTED: (status.get("run") or {}).get("id")}


def _labels(meta: dict[str, Any]) -> dict[str, Any]:
    labels = meta.get("labels")
    return labels if isinstance(labels, dict) else {}


def _ttl(plan: dict[str, Any]) -> object:
    return (plan.get("spec") or {}).get("ttlSecondsAfterFinished", "the operator's default")
