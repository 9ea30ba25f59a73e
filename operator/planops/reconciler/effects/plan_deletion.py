"""A user's deletion of a Plan that stores objects (`kubectl delete plan X`): the finalizer put
on before anything is stored, and, once the Plan is being deleted, its prefix in the artifact
repository deleted before the finalizer is removed. The decisions are history.deletion's (pure:
the order, the archive's wait, the bound); this module reads and acts for them.

It runs in the reconcile: `ensure` as the Plan is read (effects.reads.Reads.plan), `deleted`
when the Plan read is being deleted (reconcile.py). The store's delete is a blocking call (the
S3 client), run in a thread and bounded by the client's own timeouts (planops.store.client).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from planops.api import names
from planops.kube import manifests
from planops.kube.api import KubeApi
from planops.kube.errors import ApiError, ErrorKind
from planops.kube.events import Recorder
from planops.reconciler.effects.actuator import Actuator, StatusWriter
from planops.reconciler.effects.intents import Delete
from planops.reconciler.effects.stored_logs import StoredLogs
from planops.reconciler.history import deletion
from planops.reconciler.history.deletion import Deletion
from planops.reconciler.run.observe import job_ended, owned
from planops.store import keys as keys_
from planops.store import repositories
from planops.store.client import StoreError

log = logging.getLogger("planops.reconciler")
Obj = dict[str, Any]
#: the Events of a deletion's store side
FAILED, ABANDONED = "ArtifactGCFailed", "ArtifactGCAbandoned"
#: the phases of a pod whose containers all ended (its collector too)
ENDED = ("Succeeded", "Failed")


@dataclass
class PlanDeletion:
    """The artifact finalizer's two halves (the module's docstring)."""

    kube: KubeApi
    stored: StoredLogs
    clock: Callable[[], float]
    #: its writes (the actuator's: the reconciler's one place for them)
    act: Actuator = field(init=False)

    def __post_init__(self) -> None:
        self.act = Actuator(self.kube, StatusWriter(self.kube))

    async def ensure(self, plan: Obj, capsule: Obj | None) -> Obj:
        """The Plan with the finalizer, added now when its run stores objects in a repository
        that collects them (`capsule`: its Capsule as read, None when there is none); the
        Plan as it was otherwise. A Plan changed since it was read raises ApiError (CONFLICT:
        read again, decided again)."""
        own = ((capsule or {}).get("spec") or {}).get("artifactRepository")
        default = self.stored.default
        fallback = default.model_dump(by_alias=True) if default is not None else None
        if not deletion.wants_finalizer(plan, own, fallback):
            return plan
        return await self.act.patch_finalizers(plan, deletion.with_finalizer(plan))

    async def deleted(self, plan: Obj | None) -> float | None:
        """A Plan being deleted: its objects deleted and the finalizer removed, or the seconds
        until it is looked at again (history.deletion says which); None: nothing more."""
        if plan is None:
            return None
        decided = deletion.decide(plan, self.clock(), self.stored.archived, self.stored.gc_seconds)
        if decided.action == "none":
            return None
        meta = plan["metadata"]
        if decided.action == "hold":
            log.info("%s/%s is deleted: its stored objects wait for the archive", *_key(meta))
            return decided.wake
        if decided.action == "collect":
            steps = await self._stop_steps(plan)
            uploads = self.stored.uploads.busy(str(meta.get("uid", "")))
            if decided.wait_for_steps and (steps or uploads):
                return deletion.PAUSE_MIN  # a collector's last PUT, a log upload in flight
            decided = await self._collect(plan, decided)
            if decided.action == "hold":
                return decided.wake
        if decided.action == "abandon":
            await self._tell(plan, ABANDONED, f"{decided.why}: {_where(meta)}; finalizer removed")
        await self._release(plan)
        return None

    async def _stop_steps(self, plan: Obj) -> bool:
        """The Plan's Jobs still running deleted (each run's: the finalizer holds the garbage
        collector back, which takes the others once the Plan is gone); whether a pod of it
        still runs (its collector may still PUT)."""
        meta = plan["metadata"]
        namespace = meta["namespace"]
        selector = f"{names.LABEL_PLAN}={manifests.label_value(meta['name'])}"
        jobs = owned(await self.kube.list_jobs(namespace, selector), str(meta.get("uid")))
        await self.act.delete(
            namespace,
            [
                Delete("job", j["metadata"]["name"])
                for j in jobs
                if not job_ended(j) and not (j.get("metadata") or {}).get("deletionTimestamp")
            ],
        )
        pods = await self.kube.list_pods(namespace, selector)
        return any((p.get("status") or {}).get("phase") not in ENDED for p in pods)

    async def _collect(self, plan: Obj, decided: Deletion) -> Deletion:
        """The Plan's prefix deleted: `collect` done, else what the failure means."""
        meta = plan["metadata"]
        try:
            found = await self.stored.targets(plan, None, strict=True)
            store, prefixes = found if found is not None else (None, [])
            for prefix in prefixes:
                assert store is not None
                n = await asyncio.to_thread(store.delete_prefix, prefix)
                log.info("%s/%s is deleted: %d stored objects deleted", *_key(meta), n)
        except (repositories.RepositoryError, StoreError, keys_.BadKeyError, ValueError) as e:
            failed = deletion.after_failure(decided.elapsed, self.stored.gc_seconds, str(e))
            if failed.action == "hold":
                message = (
                    f"{_where(meta)} not deleted yet ({e}); tried again in {failed.wake:.0f}s, "
                    f"for {self.stored.gc_seconds:.0f}s after the deletion at most"
                )
                await self._tell(plan, FAILED, message)
            return failed
        return decided

    async def _release(self, plan: Obj) -> None:
        """The finalizer removed (the Plan gone already is no error)."""
        try:
            await self.act.patch_finalizers(plan, deletion.without_finalizer(plan))
        except ApiError as e:
            if e.kind is not ErrorKind.NOT_FOUND:
                raise

    async def _tell(self, plan: Obj, reason: str, message: str) -> None:
        log.warning("%s/%s: %s", *_key(plan["metadata"]), message)
        events = Recorder(self.kube, plan, self.stored.poster)
        events(reason, message, warning=True)
        await events.flush()


def _key(meta: Obj) -> tuple[str, str]:
    return str(meta.get("namespace")), str(meta.get("name"))


def _where(meta: Obj) -> str:
    """The Plan's objects, as a message names them (beneath the repository's key prefix)."""
    return f"stored objects beneath {meta.get('namespace')}/{meta.get('uid')}/"
