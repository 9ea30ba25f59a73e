"""kopf registrations: watches that feed the work queues, and the operator's lifecycle.

Only `on.event` handlers: no state-changing handlers, so kopf writes no annotations on Plans
(nothing shows as drift in Argo CD) and adds no finalizers (a finalizer would block Argo CD prunes
while the operator is down). Garbage collection removes children with their owner.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf

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
from planops.handlers.config import CONFIG
from planops.handlers.queue import Coalescer
from planops.kube import credentials
from planops.kube.cache import RunObjects, WatchCache
from planops.kube.client import Kube
from planops.kube.events import Poster
from planops.kube.leader import GuardedKube, LeaderElector, Timing
from planops.kube.manifests import full_value
from planops.reconciler import (
    Reconciler,
    ScheduleReconciler,
    SlotCounting,
    SlotStanding,
    job_event_matters,
    pod_event_matters,
    slot_group,
    slot_waiters,
)

log = logging.getLogger("planops.handlers")
GROUP, VERSION = names.GROUP, names.VERSION


class NoDiffBase(kopf.DiffBaseStorage):
    """No diff base: planops has no change-detecting handlers (on.create/update/field), only
    on.event, so kopf's default storage, which deep-copies every watched object on every event
    to build an "essence" nobody reads, cost a seventh of the operator's CPU (measured with
    py-spy in bench/vs_argo.py) for nothing."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


@kopf.on.login()
async def login(**_: Any) -> kopf.ConnectionInfo:
    """kopf's watches use the operator's own credentials (kube/credentials.py), read again at
    each login (kopf logs in again on a 401: a rotated token file is read anew). Without this
    handler kopf would log in through the Kubernetes client library, which the operator does
    not import (its memory)."""
    c = await credentials.load(CONFIG.kubeconfig)
    return kopf.ConnectionInfo(
        server=c.server,
        default_namespace=c.namespace,
        ca_path=c.ca_file,
        ca_data=c.ca_data,
        insecure=c.insecure,
        username=c.username,
        password=c.password,
        token=await c.bearer(),
        certificate_path=c.cert_file,
        certificate_data=c.cert_data,
        private_key_path=c.key_file,
        private_key_data=c.key_data,
        proxy_url=c.proxy,
    )


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    settings.posting.enabled = False  # our own Events only, not kopf's log lines
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.networking.request_timeout = 60
    settings.scanning.disabled = not CONFIG.scanning
    settings.persistence.diffbase_storage = NoDiffBase()
    kube: Kube = await Kube.connect(CONFIG.kubeconfig)
    memo.kube = kube
    memo.elector = None
    gate: asyncio.Event | None = None
    if CONFIG.leader_elect:  # every replica watches; only the Lease holder acts
        gate = asyncio.Event()
        memo.elector = LeaderElector(
            kube,
            CONFIG.leader_election_namespace,
            CONFIG.leader_election_id,
            timing=Timing(CONFIG.lease_duration, CONFIG.renew_deadline, CONFIG.retry_period),
            on_started=lambda: _lead(memo, True),
            on_stopped=lambda: _lead(memo, False),
        )
        kube = GuardedKube(kube, memo.elector.check)
    memo.gate = gate
    memo.capsules = WatchCache()
    # also the admission webhook's judge
    memo.plans = WatchCache(index=slot_group, group=SlotStanding)  # each Capsule's queue: slots
    memo.counting = SlotCounting()  # the Plans counted on a Capsule, as the watch shows them
    memo.runs = RunObjects(LABEL_PLAN, LABEL_RUN)
    memo.poster = Poster(kube)
    memo.poster.start()
    memo.archiver = _archiver(kube, memo.plans, memo.poster, gate)
    memo.reconciler = Reconciler(
        kube,
        CONFIG.policy,
        capsules=memo.capsules,
        plans=memo.plans,
        runs=memo.runs,
        chunk_records=CONFIG.chunk_records,
        status_records=CONFIG.status_records,
        history_report_bytes=CONFIG.history_report_bytes,
        create_concurrency=CONFIG.create_concurrency,
        require_author=CONFIG.require_author,
        poster=memo.poster,
        archive=memo.archiver is not None,
        default_ttl=CONFIG.ttl_seconds_after_finished,
        archived=archived if memo.archiver is not None else None,  # a TTL waits for it
    )
    memo.queue = Coalescer(memo.reconciler.reconcile, workers=CONFIG.workers, gate=gate)
    memo.queue.start()
    memo.schedule_judge = ScheduleReconciler(
        kube,
        CONFIG.policy,
        poster=memo.poster,
        require_author=CONFIG.require_author,
        archived=archived if memo.archiver is not None else None,  # the history limits wait
    )
    memo.schedules = Coalescer(memo.schedule_judge.reconcile, workers=2, gate=gate)
    memo.schedules.start()
    memo.scheduled = set()
    if CONFIG.metrics_port:
        metrics.serve(CONFIG.metrics_port, CONFIG.metrics_address)
    memo.active = set()  # plans not finished, kept by plan_event, for the resync
    memo.cluster_schedules = set()
    memo.resync = asyncio.create_task(_resync(memo))
    memo.campaign = asyncio.create_task(memo.elector.run()) if memo.elector else None
    metrics.leader.set(0 if memo.elector else 1)


def _archiver(kube: Kube, plans: WatchCache, poster: Poster, gate: asyncio.Event | None) -> Any:
    """The archive's writers (planops.archive), when it is on: imported only then (the database
    driver is no part of an operator without it)."""
    if not CONFIG.archive_dsn:
        return None
    from planops.archive.queue import Archiver  # noqa: PLC0415
    from planops.archive.store import Store  # noqa: PLC0415

    dsn = CONFIG.archive_dsn
    archiver = Archiver(
        lambda: Store.connect(dsn),
        kube,
        plans,
        events=poster,
        gate=gate,
        capacity=CONFIG.archive_queue,
        dsn=dsn,
    )
    archiver.start()
    return archiver


def _lead(memo: kopf.Memo, leading: bool) -> None:
    """Leadership changed: open or close the queues' gate. A new leader looks at everything it
    knows at once (what changed while it followed is already queued)."""
    metrics.leader.set(1 if leading else 0)
    if not leading:
        memo.gate.clear()
        return
    memo.reconciler.check_all()  # list each run once before trusting the watch's cache
    memo.gate.set()
    for key in list(memo.active):
        memo.queue.put(key)
    if memo.archiver is not None:  # finished runs not archived yet, as the cluster says
        memo.archiver.sweep()
    for key in list(memo.scheduled):
        memo.schedules.put(key)
    for name in list(memo.cluster_schedules):
        memo.schedules.put(("clusterscheduledplans", "", name))


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    memo.resync.cancel()
    await memo.queue.stop()
    await memo.schedules.stop()
    if memo.archiver is not None:
        await memo.archiver.stop()  # what is queued is found again from the cluster
    await memo.poster.stop()  # what the last reconciles decided is told before the end
    if memo.campaign is not None:
        memo.campaign.cancel()
        await memo.elector.release()  # a clean stop hands over at once
    await memo.kube.close()


async def _resync(memo: kopf.Memo) -> None:
    """A slow timer without kopf timers (they add finalizers): catches what no event announces,
    e.g. a Capsule created after the Plan that needed it."""
    while True:
        await asyncio.sleep(CONFIG.resync_seconds)
        for key in list(memo.active):
            memo.reconciler.check(*key)  # a list: what the watch missed is found (Reads.resync)
            memo.queue.put(key)
        if memo.archiver is not None:  # runs the full queue did not take are found again
            memo.archiver.sweep()


@kopf.on.event(GROUP, VERSION, "plans")
async def plan_event(event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    meta = body.get("metadata", {})
    ns, name = meta.get("namespace"), meta.get("name")
    finished = names.ended((body.get("status") or {}).get("phase"))
    if event["type"] == "DELETED" or finished:
        memo.active.discard((ns, name))
    else:
        memo.active.add((ns, name))
    memo.plans.seen(event["type"], dict(event["object"]))
    # a slot of its Capsule freed (its move into finished, or its deletion; no other event of
    # a finished Plan): the first Plans waiting for one look again now (reconciler.queue.slots)
    if memo.counting.moved_out(event["type"], dict(event["object"])):
        for key in slot_waiters(dict(event["object"]), memo.plans, memo.capsules):
            memo.queue.put(key)
    if finished and memo.archiver is not None and event["type"] != "DELETED":
        memo.archiver.offer(dict(event["object"]))  # never waits: the archive's own writers
    if event["type"] == "DELETED":
        memo.reconciler.forget(ns, name)
        memo.queue.forget((ns, name))
    elif not memo.reconciler.own_write(ns, name, meta.get("resourceVersion")):
        # (the echo of the reconciler's own status write is no news to it; a parent or a
        # schedule below still hears of it)
        memo.queue.put((ns, name))
    # labels may hold shortened values (manifests.label_value): the full names are annotations
    if parent := full_value(meta, LABEL_PARENT):
        memo.queue.put((ns, parent))
    if schedule := full_value(meta, LABEL_SCHEDULED_BY):  # its schedule may start the next run
        memo.schedules.put(("scheduledplans", ns, schedule))
    if schedule := full_value(meta, LABEL_CLUSTER_SCHEDULED_BY):
        memo.schedules.put(("clusterscheduledplans", "", schedule))


@kopf.on.event("batch", "v1", "jobs", labels={LABEL_PLAN: kopf.PRESENT})
async def job_event(event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    obj: dict[str, Any] = dict(event["object"])
    memo.runs.seen("job", event["type"], obj)
    if not job_event_matters(event["type"], obj):
        return
    if plan := full_value(body["metadata"], LABEL_PLAN):
        memo.queue.put((body["metadata"]["namespace"], plan))


@kopf.on.event("", "v1", "pods", labels={LABEL_PLAN: kopf.PRESENT})
async def pod_event(event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    obj: dict[str, Any] = dict(event["object"])
    memo.runs.seen("pod", event["type"], obj)
    if not pod_event_matters(event["type"], obj):
        return
    if plan := full_value(body["metadata"], LABEL_PLAN):
        memo.queue.put((body["metadata"]["namespace"], plan))


@kopf.on.event(GROUP, VERSION, "capsules")
async def capsule_event(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
    """A Capsule created, changed or deleted: kept for the reconciler's reads, and every Plan of
    its namespace not yet finished looks again at once (one waiting as Invalid for this Capsule
    starts now, not at the next resync)."""
    obj: dict[str, Any] = dict(event["object"])
    memo.capsules.seen(event["type"], obj)
    namespace = (obj.get("metadata") or {}).get("namespace")
    for key in list(memo.active):
        if key[0] == namespace:
            memo.queue.put(key)


@kopf.on.event(GROUP, VERSION, "scheduledplans")
async def scheduled_event(event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    key = ("scheduledplans", body["metadata"]["namespace"], body["metadata"]["name"])
    if event["type"] == "DELETED":
        memo.scheduled.discard(key)
        memo.schedules.forget(key)
    else:
        memo.scheduled.add(key)
        memo.schedules.put(key)


@kopf.on.event(GROUP, VERSION, "clusterscheduledplans")
async def cluster_scheduled_event(
    event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any
) -> None:
    name = body["metadata"]["name"]
    if event["type"] == "DELETED":
        memo.cluster_schedules.discard(name)
        memo.schedules.forget(("clusterscheduledplans", "", name))
    else:
        memo.cluster_schedules.add(name)
        memo.schedules.put(("clusterscheduledplans", "", name))


@kopf.on.event("", "v1", "namespaces")
async def namespace_event(memo: kopf.Memo, **_: Any) -> None:
    """A namespace appeared or its labels changed: every ClusterScheduledPlan looks again."""
    for name in list(memo.cluster_schedules):
        memo.schedules.put(("clusterscheduledplans", "", name))


@kopf.on.probe(id="queue")
def queue_depth(memo: kopf.Memo, **_: Any) -> int:
    return memo.queue.queue.qsize() if "queue" in memo else 0
