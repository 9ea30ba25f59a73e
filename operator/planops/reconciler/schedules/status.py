"""A ScheduledPlan's (or ClusterScheduledPlan's) status, built from what one reconcile found: the
last and next schedule times, the active runs, the Ready and Authorized conditions. Pure, apart
from the scheduler's requests (planops.reconciler.schedules.shell), so the shape users read with
`kubectl get -o yaml` is in one place.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from planops.engine.report import rfc3339
from planops.reconciler.run import authors


def of(
    obj: dict[str, Any],
    cluster: bool,
    per_ns: dict[str, Any],
    next_at: datetime,
    invalid: list[str],
    checked: list[authors.Refusal | None],
    previous: dict[str, Any],
) -> dict[str, Any]:
    """The status: `per_ns` what each namespace's runs show, `invalid` the namespaces skipped and
    why, `checked` the author check of the last due run (None: allowed; empty: none made)."""
    lasts = [v["lastScheduleTime"] for v in per_ns.values() if v.get("lastScheduleTime")]
    oks = [v["lastSuccessfulTime"] for v in per_ns.values() if v.get("lastSuccessfulTime")]
    active = [f"{ns}/{a}" if cluster else a for ns, v in per_ns.items() for a in v["active"]]
    status: dict[str, Any] = {
        "observedGeneration": obj["metadata"].get("generation"),
        "lastScheduleTime": max(lasts) if lasts else None,
        "lastSuccessfulTime": max(oks) if oks else None,
        "active": active,
        "activeCount": len(active),
        "nextScheduleTime": rfc3339(next_at.timestamp()),
        "conditions": [
            {
                "type": "Ready",
                "status": "True",
                "reason": "Scheduling",
                "message": ""
                if not invalid
                else f"{len(invalid)} namespace(s) skipped: " + "; ".join(invalid[:3]),
            },
            *authorized(checked, previous),
        ],
    }
    if cluster:
        status["namespaces"] = per_ns
    else:
        (only,) = per_ns.values() if per_ns else ({},)
        status.update({k: only.get(k) for k in ("missedReported", "runNow")})
    if invalid:
        status["errors"] = invalid[:50]
    return {k: v for k, v in status.items() if v is not None}


def authorized(
    checked: list[authors.Refusal | None], previous: dict[str, Any]
) -> list[dict[str, Any]]:
    """The `Authorized` condition: whether the last due run's author could still use the Capsule
    (`checked`: the refusal, None when allowed); kept from `previous` between runs."""
    if not checked:
        return [c for c in previous.get("conditions") or [] if c.get("type") == "Authorized"]
    (refusal,) = checked
    return [
        {
            "type": "Authorized",
            "status": "False" if refusal else "True",
            "reason": refusal.reason if refusal else "AuthorMayUse",
            "message": refusal.why[:1000] if refusal else "",
        }
    ]


def iso(t: datetime | None) -> str | None:
    return rfc3339(t.timestamp()) if t is not None else None
