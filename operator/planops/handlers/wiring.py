"""The operator assembled, and what each watch event means.

`Operator` builds the runtime (kube/: the API client, leader election, the watch caches, the
informers of Jobs, pods and namespaces, the work queues, the Event poster), the reconcilers and
the archive, starts and stops them, and turns every watch event into the keys it queues. It
imports no kopf: the planops kinds' events reach it from kopf's watches through the one adapter
(handlers.kopf_adapter); a run's Jobs and pods, and the namespaces, from its own informers
(kube.informer), which feed the run-object cache (kube.cache.RunObjects) directly.

Every event is read level-based: an event only says which object to look at again; the
reconcile reads what is (the caches, else the API) and decides. The work queues start once the
informers have listed (has_synced), as controller-runtime starts its workers after its caches
sync, so no reconcile reads a cache that has not seen the cluster yet.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from planops import metrics
from planops.api import names
from planops.api.names import (
    LABEL_CLUSTER_SCHEDULED_BY,
    LABEL_PARENT,
    LABEL_PLAN,
    LABEL_RUN,
    LABEL_SCHEDULED_BY,
)
from planops.archive.row import archived
from planops.handlers.config import Config
from planops.kube.cache import RunObjects, WatchCache
from planops.kube.client import Kube
from planops.kube.events import Poster
from planops.kube.informer import JOBS, NAMESPACES, PODS, Informers, Names
from planops.kube.leader import GuardedKube, LeaderElector, Timing
from planops.kube.manifests import full_value
from planops.kube.queue import Coalescer
from planops.reconciler import (
    FileMover,
    Reconciler,
    ScheduleReconciler,
    Signer,
    SlotCounting,
    SlotStanding,
    StatusWriter,
    StoredLogs,
    job_event_matters,
    pod_event_matters,
    slot_group,
    slot_waiters,
)

log = logging.getLogger("planops.handlers")
Obj = dict[str, Any]
Key = tuple[str, str]
#: seconds between two warnings that the informers have not listed yet (the queues wait)
SYNC_WARN_SECONDS = 30.0


def exact_names(patterns: list[str]) -> bool:
    """Whether the namespaces are names, not patterns (kopf's globs: `*?[`, `!` negations and
    comma-separated lists)."""
    return not any(ch in p for p in patterns for ch in "*?[!,")


class Operator:
    """The running operator (one per process): see the module's docstring."""

    def __init__(self, config: Config, matches: Callable[[str], bool] | None = None) -> None:
        """`matches`: whether a namespace is watched, by the rule kopf applies to the planops
        kinds (the adapter passes kopf's own), so a run's Jobs and pods are watched in exactly
        the namespaces its Plan is; by default the names in `config.namespaces`."""
        self.config = config
        self.matches = matches or (lambda ns: ns in config.namespaces)
        self.active: set[Key] = set()  # Plans not finished, kept by plan_event, for the resync
        self.scheduled: set[tuple[str, str, str]] = set()
        self.cluster_schedules: set[str] = set()
        self.elector: LeaderElector | None = None
        self.gate: asyncio.Event | None = None
        self._tasks: list[asyncio.Task[Any]] = []
        self._campaign: asyncio.Task[None] | None = None

    # -- start and stop ---------------------------------------------------------------------

    async def start(self) -> None:
        """Connect, assemble, and start: the informers first, the work queues once they have
        listed (_start_queues)."""
        metrics.configure(tenant_labels=self.config.metrics_tenant_labels)  # before any count
        self.assemble(await Kube.connect(self.config.kubeconfig))
        self.poster.start()
        if self.archiver is not None:
            self.archiver.start()
        self.namespaces.watch(None)
        if not self.by_pattern:  # else as the namespaces' informer shows them (namespace_event)
            scopes: list[str | None] = [*self.config.namespaces] or [None]
            for namespace in scopes:
                self.jobs.watch(namespace)
                self.pods.watch(namespace)
        if self.config.metrics_port:
            metrics.serve(self.config.metrics_port, self.config.metrics_address)
        self._tasks = [
            asyncio.create_task(self._start_queues(), name="planops-queues"),
            asyncio.create_task(self._resync(), name="planops-resync"),
        ]
        if self.elector is not None:  # stop() ends it last: the Lease is held to the end
            self._campaign = asyncio.create_task(self.elector.run(), name="planops-lease")
        metrics.leader.set(0 if self.elector else 1)

    def assemble(self, kube: Kube) -> None:
        """Build every part on `kube` (the API client of this process), starting none."""
        config = self.config
        self.raw_kube = kube
        if config.leader_elect:  # every replica watches; only the Lease holder acts
            self.gate = asyncio.Event()
            self.elector = LeaderElector(
                kube,
                config.leader_election_namespace,
                config.leader_election_id,
                timing=Timing(config.lease_duration, config.renew_deadline, config.retry_period),
                on_started=lambda: self._lead(True),
                on_stopped=lambda: self._lead(False),
            )
            kube = GuardedKube(kube, self.elector.check)
        self.kube = kube
        self.capsules = WatchCache()
        # also the admission webhook's judge; each Capsule's queue: slots
        self.plans = WatchCache(index=slot_group, group=SlotStanding)
        self.counting = SlotCounting()  # the Plans counted on a Capsule, as the watch shows them
        self.runs = RunObjects(LABEL_PLAN, LABEL_RUN)
        self.poster = Poster(kube)
        self.archiver = self._archiver()
        self.reconciler = self._reconciler()
        self.signer = self._signer()
        self.queue = Coalescer(self.reconciler.reconcile, workers=config.workers, gate=self.gate)
        self.schedule_judge = ScheduleReconciler(
            kube,
            config.policy,
            poster=self.poster,
            require_author=config.require_author,
            archived=archived if self.archiver is not None else None,  # history limits wait
        )
        self.schedules = Coalescer(self.schedule_judge.reconcile, workers=2, gate=self.gate)
        self._informers()

    def _reconciler(self) -> Reconciler:
        config = self.config
        return Reconciler(
            self.kube,
            config.policy,
            capsules=self.capsules,
            plans=self.plans,
            runs=self.runs,
            chunk_records=config.chunk_records,
            status_records=config.status_records,
            history_report_bytes=config.history_report_bytes,
            create_concurrency=config.create_concurrency,
            require_author=config.require_author,
            poster=self.poster,
            archive=self.archiver is not None,
            default_ttl=config.ttl_seconds_after_finished,
            archived=archived if self.archiver is not None else None,  # a TTL waits for it
            store=(stored := self._stored_logs()),
            files=FileMover(config.collector_image, stored),
        )

    def _signer(self) -> Signer | None:
        """Reading URLs of stored logs and artifacts in Plans' status (store.signed)."""
        stored = self.reconciler.store
        if stored is None:
            return None
        gate = self.gate
        return Signer(
            stored,
            StatusWriter(self.kube, self.plans),
            ready=lambda: gate is None or gate.is_set(),
        )

    def _stored_logs(self) -> StoredLogs | None:
        """Full step logs into the artifact repository (docs/artifacts.md), when the operator
        has a default one or may read Capsules' credentials (a secrets namespace)."""
        config = self.config
        if config.artifact_repository is None and not config.artifact_secrets_namespace:
            return None
        return StoredLogs(
            self.kube,
            config.artifact_repository,
            config.artifact_secrets_namespace or "",
            # a deleted Plan's objects wait for the archive, a while at most (plan_deletion)
            archived=archived if self.archiver is not None else None,
            poster=self.poster,
            gc_seconds=config.artifact_gc_seconds,
        )

    def _archiver(self) -> Any:
        """The archive's writers (planops.archive), when it is on: imported only then (the
        database driver is no part of an operator without it)."""
        if not self.config.archive_dsn:
            return None
        from planops.archive.queue import Archiver  # noqa: PLC0415
        from planops.archive.store import Store  # noqa: PLC0415

        dsn = self.config.archive_dsn
        return Archiver(
            lambda: Store.connect(dsn),
            self.kube,
            self.plans,
            events=self.poster,
            gate=self.gate,
            capacity=self.config.archive_queue,
            dsn=dsn,
        )

    def _informers(self) -> None:
        """A run's Jobs and pods (those labelled with a Plan), in the operator's namespaces
        (started by `start`): all of them (one watch each), the names given (one each), or,
        for patterns, each namespace the namespaces' informer shows matching, as it comes and
        goes. Namespaces are watched in any case (a ClusterScheduledPlan's selector reads
        them)."""
        runs, raw = self.runs, self.raw_kube  # reads need no leadership

        def relisted(kind: str, handler: Callable[[str | None, Obj], None]) -> Any:
            def gone(namespace: str | None, present: Names, version: str | None) -> None:
                for obj in runs.absent(kind, namespace, present, version):
                    handler("DELETED", obj)

            return gone

        self.jobs = Informers(
            raw, JOBS, self.job_event, relisted("job", self.job_event), selector=LABEL_PLAN
        )
        self.pods = Informers(
            raw, PODS, self.pod_event, relisted("pod", self.pod_event), selector=LABEL_PLAN
        )
        self.namespaces = Informers(raw, NAMESPACES, self.namespace_event, self._relisted)
        namespaces = self.config.namespaces
        self.by_pattern = bool(namespaces) and not exact_names(namespaces)

    def has_synced(self) -> bool:
        """Whether every informer has listed once (the namespaces' first: with patterns, the
        Jobs' and pods' informers are started from that list)."""
        return all(i.has_synced() for i in (self.namespaces, self.jobs, self.pods))

    async def wait_synced(self) -> None:
        await self.namespaces.wait_synced()
        await self.jobs.wait_synced()
        await self.pods.wait_synced()

    async def _start_queues(self) -> None:
        while True:
            try:
                await asyncio.wait_for(self.wait_synced(), SYNC_WARN_SECONDS)
                break
            except TimeoutError:
                log.warning(
                    "the watches of Jobs, pods and namespaces have not listed yet: no reconcile "
                    "starts before they have (the operator's rights, the API server?)"
                )
        self.queue.start()
        self.schedules.start()

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for informers in (self.namespaces, self.jobs, self.pods):
            await informers.stop()
        await self.queue.stop()
        await self.schedules.stop()
        if self.archiver is not None:
            await self.archiver.stop()  # what is queued is found again from the cluster
        await self.poster.stop()  # what the last reconciles decided is told before the end
        if self.elector is not None and self._campaign is not None:
            self._campaign.cancel()
            await asyncio.gather(self._campaign, return_exceptions=True)
            await self.elector.release()  # a clean stop hands over at once
        await self.raw_kube.close()

    def _lead(self, leading: bool) -> None:
        """Leadership changed: open or close the queues' gate. A new leader looks at everything
        it knows at once (what changed while it followed is already queued)."""
        metrics.leader.set(1 if leading else 0)
        assert self.gate is not None
        if not leading:
            self.gate.clear()
            return
        self.reconciler.check_all()  # list each run once before trusting the watch's cache
        self.gate.set()
        for key in list(self.active):
            self.queue.put(key)
        if self.archiver is not None:  # finished runs not archived yet, as the cluster says
            self.archiver.sweep()
        for skey in list(self.scheduled):
            self.schedules.put(skey)
        for name in list(self.cluster_schedules):
            self.schedules.put(("clusterscheduledplans", "", name))

    async def _resync(self) -> None:
        """A slow timer without kopf timers (they add finalizers): catches what no event
        announces, e.g. a Capsule created after the Plan that needed it."""
        while True:
            await asyncio.sleep(self.config.resync_seconds)
            for key in list(self.active):
                self.reconciler.check(*key)  # a list: what the watch missed is found (Reads.resync)
                self.queue.put(key)
            if self.archiver is not None:  # runs the full queue did not take are found again
                self.archiver.sweep()
            if self.signer is not None:  # URLs that near their expiry are signed again
                for plan in self.plans.values():
                    self.signer.offer(plan)

    def queue_depth(self) -> int:
        return self.queue.queue.qsize()

    # -- what each event means ------------------------------------------------------------------

    def plan_event(self, event_type: str | None, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        ns, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
        finished = names.ended((obj.get("status") or {}).get("phase"))
        if event_type == "DELETED" or finished:
            self.active.discard((ns, name))
        else:
            self.active.add((ns, name))
        self.plans.seen(event_type, obj)
        # a slot of its Capsule freed (its move into finished, or its deletion; no other event
        # of a finished Plan): the first Plans waiting for one look again now (queue.slots)
        if self.counting.moved_out(event_type, obj):
            for key in slot_waiters(obj, self.plans, self.capsules):
                self.queue.put(key)
        if self.signer is not None and event_type != "DELETED":
            self.signer.offer(obj)  # never waits: its own task, when URLs are due
        if finished and self.archiver is not None and event_type != "DELETED":
            self.archiver.offer(obj)  # never waits: the archive's own writers
        if event_type == "DELETED":
            self.reconciler.forget(ns, name)
            self.queue.forget((ns, name))
        elif not self.reconciler.own_write(ns, name, meta.get("resourceVersion")):
            # (the echo of the reconciler's own status write is no news to it; a parent or a
            # schedule below still hears of it)
            self.queue.put((ns, name))
        # labels may hold shortened values (manifests.label_value): the full names are
        # annotations
        if parent := full_value(meta, LABEL_PARENT):
            self.queue.put((ns, parent))
        if schedule := full_value(meta, LABEL_SCHEDULED_BY):  # it may start the next run
            self.schedules.put(("scheduledplans", ns, schedule))
        if schedule := full_value(meta, LABEL_CLUSTER_SCHEDULED_BY):
            self.schedules.put(("clusterscheduledplans", "", schedule))

    def job_event(self, event_type: str | None, obj: Obj) -> None:
        # (an ended run's or a settled step's Job is no news: RunObjects.seen)
        if self.runs.seen("job", event_type, obj) and job_event_matters(event_type, obj):
            self._wake_plan(obj)

    def pod_event(self, event_type: str | None, obj: Obj) -> None:
        if self.runs.seen("pod", event_type, obj) and pod_event_matters(event_type, obj):
            self._wake_plan(obj)

    def _wake_plan(self, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        if plan := full_value(meta, LABEL_PLAN):
            self.queue.put((str(meta.get("namespace") or ""), plan))

    def capsule_event(self, event_type: str | None, obj: Obj) -> None:
        """A Capsule created, changed or deleted: kept for the reconciler's reads, and every
        Plan of its namespace not yet finished looks again at once (one waiting as Invalid for
        this Capsule starts now, not at the next resync)."""
        self.capsules.seen(event_type, obj)
        namespace = (obj.get("metadata") or {}).get("namespace")
        for key in list(self.active):
            if key[0] == namespace:
                self.queue.put(key)

    def scheduled_event(self, event_type: str | None, obj: Obj) -> None:
        meta = obj.get("metadata") or {}
        key = ("scheduledplans", str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if event_type == "DELETED":
            self.scheduled.discard(key)
            self.schedules.forget(key)
        else:
            self.scheduled.add(key)
            self.schedules.put(key)

    def cluster_scheduled_event(self, event_type: str | None, obj: Obj) -> None:
        name = str((obj.get("metadata") or {}).get("name") or "")
        if event_type == "DELETED":
            self.cluster_schedules.discard(name)
            self.schedules.forget(("clusterscheduledplans", "", name))
        else:
            self.cluster_schedules.add(name)
            self.schedules.put(("clusterscheduledplans", "", name))

    def namespace_event(self, event_type: str | None, obj: Obj) -> None:
        """A namespace appeared, changed its labels or went: every ClusterScheduledPlan looks
        again; with namespace patterns, its Jobs and pods are watched while it matches."""
        for name in list(self.cluster_schedules):
            self.schedules.put(("clusterscheduledplans", "", name))
        if not self.by_pattern:
            return
        namespace = str((obj.get("metadata") or {}).get("name") or "")
        if event_type != "DELETED" and self.matches(namespace):
            self.jobs.watch(namespace)
            self.pods.watch(namespace)
        elif namespace in self.jobs.informers or namespace in self.pods.informers:
            self._tasks.append(asyncio.create_task(self._unwatch(namespace)))

    def _relisted(self, _: str | None, present: Names, __: str | None) -> None:
        """The namespaces listed again: a watched one the list lacks was deleted meanwhile."""
        for namespace in list(self.jobs.informers):
            if self.by_pattern and (namespace is None or ("", namespace) not in present):
                self._tasks.append(asyncio.create_task(self._unwatch(namespace)))

    async def _unwatch(self, namespace: str | None) -> None:
        await self.jobs.unwatch(namespace)
        await self.pods.unwatch(namespace)
