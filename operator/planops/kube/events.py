"""Kubernetes Events on Plans (the seed's trace records, as `kubectl describe` and
`kubectl plan trace` show them), plus one JSON log line per record with the seed's record name.

Posting an Event is best effort: a failure is logged, never fails a reconcile. In the operator
a `Poster` posts them behind the reconciles: a reconcile hands its events over and goes on (two
POSTs per step inline were a third of a reconcile's time); each event's eventTime is taken when it
is handed over, so their order stays the order of the decisions.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from planops.api import names
from planops.engine.report import rfc3339
from planops.kube.api import KubeApi
from planops.kube.client import ApiError

log = logging.getLogger("planops.trace")
COMPONENT = "planops-operator"

#: Event reason -> the seed's trace record name (for the JSON log line).
RECORDS = {
    "PlanStarted": "plan_start",
    "StepStarted": "plan_step_start",
    "StepSucceeded": "plan_step",
    "StepFailed": "plan_step",
    "StepSkipped": "plan_step",
    "PlanStopped": "plan_stopped",
    "PlanSucceeded": "plan_end",
    "PlanFailed": "plan_end",
    "DelegationStarted": "delegation_start",
    "DelegationFinished": "delegation",
    "CallDenied": "call_denied",
    "ValidationFailed": "validation_failed",
    "BodyStepsSettled": "plan_body_steps",
}


def event(plan: dict[str, Any], reason: str, message: str, warning: bool = False) -> dict[str, Any]:
    meta = plan["metadata"]
    t = time.time()
    now = rfc3339(t)
    micro = datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            # cut where it cannot end in `.` or `-` (`a..b` is no object name)
            "name": f"{meta['name'][:200].rstrip('.-')}.{uuid.uuid4().hex[:16]}",
            "namespace": meta.get("namespace") or "default",  # cluster-scoped objects: default
        },
        "involvedObject": {
            "apiVersion": plan["apiVersion"],
            "kind": plan["kind"],
            "name": meta["name"],
            "namespace": meta.get("namespace") or "",
            "uid": meta["uid"],
        },
        "reason": reason,
        "message": message[:1024],
        "type": "Warning" if warning else "Normal",
        "source": {"component": COMPONENT},
        "reportingComponent": names.REPORTING_COMPONENT,
        "reportingInstance": os.environ.get("HOSTNAME", "planops")[:128],
        "action": reason,
        # eventTime has microseconds (firstTimestamp only seconds): it orders a plan's trace
        "eventTime": micro,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


#: events waiting to be posted at most (beyond: dropped, counted, the operator goes on)
POSTER_QUEUE = 10_000
POSTERS = 4
#: seconds between two log lines about dropped events (a 100,000-item map settles faster than
#: its Events post: one line per dropped event would flood the log)
DROP_LOG_EVERY = 10.0


class Poster:
    """Posts Events in the background, with a few tasks (`start` in the operator's loop)."""

    def __init__(self, kube: KubeApi, workers: int = POSTERS) -> None:
        self.kube = kube
        self.queue: asyncio.Queue[tuple[str, dict[str, Any]]] = asyncio.Queue(POSTER_QUEUE)
        self.workers = workers
        self.tasks: list[asyncio.Task[None]] = []
        #: events dropped so far, and how many of them the log has told of
        self.dropped = 0
        self._told = 0
        self._told_at = -DROP_LOG_EVERY

    def start(self) -> None:
        self.tasks = [asyncio.create_task(self._work()) for _ in range(self.workers)]

    def put(self, namespace: str, body: dict[str, Any]) -> None:
        try:
            self.queue.put_nowait((namespace, body))
        except asyncio.QueueFull:
            self.dropped += 1
            now = time.monotonic()
            if now - self._told_at >= DROP_LOG_EVERY:
                log.warning(
                    "%d event(s) dropped (the last: %s): %d events wait to be posted",
                    self.dropped - self._told,
                    body["reason"],
                    POSTER_QUEUE,
                )
                self._told, self._told_at = self.dropped, now

    async def _work(self) -> None:
        while True:
            namespace, body = await self.queue.get()
            try:
                await _post(self.kube, namespace, body)
            except Exception as e:  # best effort, and this task must go on posting the rest
                log.warning("could not post event %s: %s: %s", body["reason"], type(e).__name__, e)
            finally:
                self.queue.task_done()

    async def stop(self, timeout: float = 5.0) -> None:
        """Post what is queued (for at most `timeout` seconds), then stop."""
        try:
            await asyncio.wait_for(self.queue.join(), timeout)
        except TimeoutError:
            log.warning("%d events not posted at shutdown", self.queue.qsize())
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def _post(kube: KubeApi, namespace: str, body: dict[str, Any]) -> None:
    try:
        await kube.create_event(namespace, body)
    except ApiError as e:
        obj = body["involvedObject"]
        log.warning(
            "could not post event %s on %s %s/%s: %s",
            body["reason"],
            obj["kind"],
            namespace,
            obj["name"],
            e,
        )


_POST = "__post"


class Recorder:
    """Collects a reconcile's events, then logs their JSON lines and posts them (through the
    `Poster` when there is one, else at once)."""

    def __init__(self, kube: KubeApi, plan: dict[str, Any], poster: Poster | None = None) -> None:
        self.kube, self.plan, self.poster = kube, plan, poster
        self.pending: list[tuple[str, str, bool, dict[str, Any]]] = []

    def __call__(
        self, reason: str, message: str, warning: bool = False, post: bool = True, **fields: Any
    ) -> None:
        """An event of the trace; `post=False`: its JSON log line only, no Kubernetes Event
        (a body step past the first few: reconciler.effects.body_events)."""
        self.pending.append((reason, message, warning, {**fields, _POST: post}))

    async def flush(self) -> None:
        meta = self.plan["metadata"]
        for reason, message, warning, fields in self.pending:
            post = fields.pop(_POST, True)
            log.info(
                json.dumps(
                    {
                        "record": RECORDS.get(reason, reason),
                        "reason": reason,
                        "namespace": (meta.get("namespace") or "default"),
                        "plan": meta["name"],
                        "message": message,
                        **fields,
                    },
                    default=str,
                )
            )
            if not post:
                continue
            namespace = meta.get("namespace") or "default"
            body = event(self.plan, reason, message, warning)
            if self.poster is not None:
                self.poster.put(namespace, body)
            else:
                await _post(self.kube, namespace, body)
        self.pending.clear()
