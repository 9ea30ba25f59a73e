"""Retention, acted on: deletes what reconciler.retention decides, and says when to look again.

No timer of its own: a finished Plan's TTL is a wake-up the reconcile returns (the work queue
looks at the Plan again then), computed from the status's `finishedAt` each time the Plan is
reconciled, so an operator restarted (whose watch lists every Plan again) or a new leader
times it exactly as before. A Plan held for the archive needs no wake-up: the archive's mark
(`status.archived`) is a change of the Plan, whose event brings the reconcile that deletes it.

A run's Jobs are deleted with propagation Background, so their pods go too (the garbage
collector's work), only after the status write that records their steps settled; the finished
run's collection is marked in the status (`jobsCollected: <run id>`) so that it is done once per
run, not listed again at every later look.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from planops import metrics
from planops.engine import StepRecord
from planops.kube import manifests
from planops.kube.api import KubeApi
from planops.kube.cache import WatchCache
from planops.kube.client import ApiError
from planops.kube.errors import ErrorKind
from planops.reconciler.history import retention
from planops.reconciler.history.retention import Archived
from planops.reconciler.run.observe import Observed, owned
from planops.reconciler.run.reading import bounded

__all__ = ["Archived", "Retainer"]
log = logging.getLogger("planops.retention")
#: Jobs deleted at once
DELETE_CONCURRENCY = 16
#: a deletion refused because the Plan changed since it was read: looked at again this soon
#: (its watch event normally comes first)
CHANGED_SECONDS = 1.0


@dataclass
class Retainer:
    kube: KubeApi
    clock: Callable[[], float]
    #: seconds after a run finished that its Plan is deleted when its spec says nothing
    default_ttl: int | None = None
    #: whether a finished run is archived (planops.archive.row.archived); None: no archive
    archived: Archived = None
    #: Plans as the watch shows them: the mark written goes there too
    plans: WatchCache | None = None

    def look_again(self, plan: dict[str, Any]) -> bool:
        """Whether a run that just finished has retention work (for the finishing reconcile,
        which then looks at the Plan again at once: its own status write wakes nothing)."""
        return retention.wants_a_look(plan, self.default_ttl)

    async def after_steps(
        self, plan: dict[str, Any], observed: list[Observed], records: Iterable[StepRecord]
    ) -> None:
        """OnStepCompletion: delete the Jobs of the steps whose `records` are settled, once the
        status that records them is written (never a Job of an attempt in flight). Other
        policies pay nothing here (not even a pass over the records)."""
        if retention.pod_gc(plan) != retention.ON_STEP or not observed:
            return
        jobs = retention.settled_jobs(observed, {r.step_id for r in records})
        if jobs:
            await self._delete_jobs(plan["metadata"]["namespace"], jobs, retention.ON_STEP)

    async def finished(self, plan: dict[str, Any], ref: manifests.PlanRef) -> float | None:
        """A finished run's retention: delete the Plan when its TTL has passed (and its run is
        archived, and its child Plans' runs, while the archive is on), else collect its Jobs if
        its podGC says so; returns seconds until the Plan is to be looked at again, or None. A
        child Plan of a run its parent replaced, kept for the archive, is deleted once archived
        (what its parent's new run would have done)."""
        now = self.clock()
        if self.archived is not None and retention.replaced_child(plan, await self._parent(plan)):
            return await self._replaced_child(plan)
        verdict = retention.ttl_verdict(plan, now, self.default_ttl, self.archived)
        if verdict.action == "delete" and await self._children_wait(ref):
            verdict = retention.Verdict("hold")  # they go with it: their archive marks wake it
        if verdict.action == "delete":
            return await self._delete_plan(plan)
        if verdict.action == "hold":
            log.info("%s/%s: its TTL passed; kept until its runs are archived", *_key(plan))
        if retention.collects_at_end(plan):
            await self._collect(plan, ref)
        if verdict.action == "wait" and verdict.at is not None:
            return max(0.0, verdict.at - now) + 0.05
        return None

    async def _parent(self, plan: dict[str, Any]) -> dict[str, Any] | None:
        """The Plan whose capsule step made `plan`, if it is a child (the watch's cache, else
        the API)."""
        meta = plan.get("metadata") or {}
        name = manifests.full_value(meta, manifests.LABEL_PARENT)
        if not name:
            return None
        found = self.plans.get(meta["namespace"], name) if self.plans is not None else None
        return found if found is not None else await self.kube.get_plan(meta["namespace"], name)

    async def _children_wait(self, ref: manifests.PlanRef) -> bool:
        """Whether a child Plan of the Plan (of any of its runs) waits for the archive: deleting
        the Plan would delete it (its owner reference)."""
        if self.archived is None:
            return False
        selector = f"{manifests.LABEL_PARENT}={manifests.label_value(ref.name)}"
        children = owned(await self.kube.list_plans(ref.namespace, selector), ref.uid)
        return any(retention.waits_for_archive(c, self.archived) for c in children)

    async def _replaced_child(self, plan: dict[str, Any]) -> float | None:
        if retention.waits_for_archive(plan, self.archived):
            log.info("%s/%s: its parent's run was replaced; kept until archived", *_key(plan))
            return None  # its archive mark is a change of it: that reconcile deletes it
        if await self._delete_as_seen(plan):
            log.info("%s/%s: archived; deleted (its parent's run was replaced)", *_key(plan))
            return None
        return CHANGED_SECONDS

    async def _delete_plan(self, plan: dict[str, Any]) -> float | None:
        if not await self._delete_as_seen(plan):
            return CHANGED_SECONDS
        metrics.plans_deleted_by_ttl.inc()
        log.info("%s/%s: deleted, %ss after its run finished (TTL)", *_key(plan), _ttl(plan))
        return None

    async def _delete_as_seen(self, plan: dict[str, Any]) -> bool:
        """Delete the Plan as it was read; False when it changed since (a re-run, a mark): it is
        judged again on what it is now."""
        meta = plan["metadata"]
        try:
            await self.kube.delete_plan_as_seen(
                meta["namespace"], meta["name"], str(meta["uid"]), str(meta["resourceVersion"])
            )
        except ApiError as e:
            if e.kind is not ErrorKind.CONFLICT:  # changed since it was read
                raise
            return False
        return True

    async def _collect(self, plan: dict[str, Any], ref: manifests.PlanRef) -> None:
        """Delete every Job of the finished run (this Plan's own, by UID), then mark it done."""
        policy = retention.pod_gc(plan)
        jobs = owned(await self.kube.list_jobs(ref.namespace, ref.selector()), ref.uid)
        names = sorted(j["metadata"]["name"] for j in jobs)
        if names:
            await self._delete_jobs(ref.namespace, names, policy)
        try:
            written = await self.kube.patch_plan_collected(ref.namespace, ref.name, ref.run)
        except ApiError as e:
            if e.kind not in (ErrorKind.NOT_FOUND, ErrorKind.INVALID):  # gone, or a new run
                raise
            return
        if self.plans is not None:
            self.plans.seen("MODIFIED", written)

    async def _delete_jobs(self, namespace: str, names: list[str], policy: str) -> None:
        await bounded([self.kube.delete_job(namespace, n) for n in names], DELETE_CONCURRENCY)
        metrics.jobs_collected.labels(policy).inc(len(names))


def _key(plan: dict[str, Any]) -> tuple[str, str]:
    meta = plan.get("metadata") or {}
    return str(meta.get("namespace")), str(meta.get("name"))


def _ttl(plan: dict[str, Any]) -> object:
    return (plan.get("spec") or {}).get("ttlSecondsAfterFinished", "the operator's default")
