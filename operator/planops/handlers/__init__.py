"""kopf registrations: watches that feed the work queue, and the operator's lifecycle.

Only `on.event` handlers and an index: no state-changing handlers, so kopf writes no annotations
on Plans (nothing shows as drift in Argo CD) and adds no finalizers (a finalizer would block
Argo CD prunes while the operator is down). Garbage collection removes children with their Plan.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf

from planops import metrics
from planops.handlers.config import CONFIG
from planops.handlers.queue import Coalescer
from planops.kube.client import Kube
from planops.kube.manifests import LABEL_PARENT, LABEL_PLAN
from planops.reconciler.reconcile import Reconciler

log = logging.getLogger("planops.handlers")
GROUP, VERSION = "planops.dev", "v1alpha1"


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    settings.posting.enabled = False  # our own Events only, not kopf's log lines
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.networking.request_timeout = 60
    kube = await Kube.connect(CONFIG.kubeconfig)
    memo.kube = kube
    memo.queue = Coalescer(Reconciler(kube, CONFIG.policy).reconcile, workers=CONFIG.workers)
    memo.queue.start()
    if CONFIG.metrics_port:
        metrics.serve(CONFIG.metrics_port, CONFIG.metrics_address)
    memo.active = set()  # plans not finished, kept by plan_event, for the resync
    memo.resync = asyncio.create_task(_resync(memo))


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    memo.resync.cancel()
    await memo.queue.stop()
    await memo.kube.close()


async def _resync(memo: kopf.Memo) -> None:
    """A slow timer without kopf timers (they add finalizers): catches what no event announces,
    e.g. a Capsule created after the Plan that needed it."""
    while True:
        await asyncio.sleep(CONFIG.resync_seconds)
        for key in list(memo.active):
            memo.queue.put(key)


@kopf.on.event(GROUP, VERSION, "plans")
async def plan_event(event: kopf.RawEvent, body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    meta = body.get("metadata", {})
    ns, name = meta.get("namespace"), meta.get("name")
    finished = (body.get("status") or {}).get("phase") in ("Succeeded", "Failed")
    if event["type"] == "DELETED" or finished:
        memo.active.discard((ns, name))
    else:
        memo.active.add((ns, name))
    if event["type"] != "DELETED":
        memo.queue.put((ns, name))
    parent = (meta.get("labels") or {}).get(LABEL_PARENT)
    if parent:
        memo.queue.put((ns, parent))


@kopf.on.event("batch", "v1", "jobs", labels={LABEL_PLAN: kopf.PRESENT})
async def job_event(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    memo.queue.put((body["metadata"]["namespace"], body["metadata"]["labels"][LABEL_PLAN]))


@kopf.on.event("", "v1", "pods", labels={LABEL_PLAN: kopf.PRESENT})
async def pod_event(body: kopf.Body, memo: kopf.Memo, **_: Any) -> None:
    memo.queue.put((body["metadata"]["namespace"], body["metadata"]["labels"][LABEL_PLAN]))


@kopf.on.probe(id="queue")
def queue_depth(memo: kopf.Memo, **_: Any) -> int:
    return memo.queue.queue.qsize() if "queue" in memo else 0
