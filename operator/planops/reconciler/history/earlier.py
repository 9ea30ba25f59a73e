"""An earlier run of a Plan, whole: its history entry and the records of its PlanReports.

What `kubectl plan get NAME --run ID` shows and what a retry reads of the run it retries; the
operator and the CLI ask it of their own clients through ReadsReports, so this module makes no
request of its own choosing and imports no client.
"""

from __future__ import annotations

from typing import Any, Protocol

from planops.kube import manifests
from planops.reconciler.history import chunks, run_history

Obj = dict[str, Any]


async def earlier_run(kube: ReadsReports, plan: Obj, run_id: str) -> Obj | None:
    """The earlier run `run_id` of `plan` as a status (run_history.earlier_status): its history
    entry with every record of its PlanReports in report.steps; None when the Plan's history has
    no such run. What `kubectl plan get NAME --run ID` shows, and what a retry reads of the run
    it retries."""
    meta = plan.get("metadata") or {}
    found = run_history.find(plan.get("status") or {}, run_id)
    if found is None:
        return None
    ref = manifests.PlanRef(str(meta["namespace"]), str(meta["name"]), str(meta["uid"]), run_id)
    records: list[Obj] = []
    if run_history.records_kept(found):  # else its PlanReports were deleted (the byte budget)
        listed = await kube.list_plan_reports(ref.namespace, chunks.selector(ref))
        records = chunks.records_json(listed, ref.uid, run_id)
    return run_history.earlier_status(ref.name, found, records)


class ReadsReports(Protocol):
    """What reading an earlier run asks of the API (the operator's and the CLI's clients)."""

    async def list_plan_reports(self, namespace: str, selector: str) -> list[Obj]: ...
