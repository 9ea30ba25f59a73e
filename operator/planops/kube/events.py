"""Kubernetes Events on Plans (the seed's trace records, as `kubectl describe` and
`kubectl plan trace` show them), plus one JSON log line per record with the seed's record name.

Posting an Event is best effort: a failure is logged, never fails a reconcile.
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from datetime import UTC, datetime
from typing import Any

from planops.engine.report import rfc3339
from planops.kube.client import ApiError, Kube

log = logging.getLogger("planops.trace")
COMPONENT = "planops-operator"

#: Event reason -> the seed's trace record name (for the JSON log line).
RECORDS = {
    "PlanStarted": "plan_start",
    "StepStarted": "plan_step_start",
    "StepSucceeded": "plan_step",
    "StepFailed": "plan_step",
    "StepSkipped": "plan_step",
    "PlanSucceeded": "plan_end",
    "PlanFailed": "plan_end",
    "DelegationStarted": "delegation_start",
    "DelegationFinished": "delegation",
    "CallDenied": "call_denied",
    "ValidationFailed": "validation_failed",
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
        "reportingComponent": "planops.dev/operator",
        "reportingInstance": os.environ.get("HOSTNAME", "planops")[:128],
        "action": reason,
        # eventTime has microseconds (firstTimestamp only seconds): it orders a plan's trace
        "eventTime": micro,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


class Recorder:
    """Collects a reconcile's events, then posts them and logs their JSON lines."""

    def __init__(self, kube: Kube, plan: dict[str, Any]) -> None:
        self.kube, self.plan, self.pending = kube, plan, []  # type: ignore[var-annotated]

    def __call__(self, reason: str, message: str, warning: bool = False, **fields: Any) -> None:
        self.pending.append((reason, message, warning, fields))

    async def flush(self) -> None:
        meta = self.plan["metadata"]
        for reason, message, warning, fields in self.pending:
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
            try:
                await self.kube.create_event(
                    (meta.get("namespace") or "default"), event(self.plan, reason, message, warning)
                )
            except ApiError as e:
                log.warning(
                    "could not post event %s on plan %s/%s: %s",
                    reason,
                    (meta.get("namespace") or "default"),
                    meta["name"],
                    e,
                )
        self.pending.clear()
