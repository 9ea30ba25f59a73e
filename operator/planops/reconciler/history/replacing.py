"""What happens to a Plan's run when a new one replaces it, and how an earlier run is read back.

When a re-run or a new generation starts a new run, the run it replaces becomes the first entry
of `status.history` (reconciler.run_history says what an entry holds and which are kept). Its
Jobs, pods, child Plans and workspace claim are stopped as before (runs.stop_other_runs); its
PlanReports are kept while its entry is in the history, and those of the entries that fall off
are deleted, and so are those of the entries past the history byte budget (such an entry
keeps its summary: run_history.within_budget). A run whose status was its whole report (a small
run writes no PlanReport: reports.hold_in_status) gets its records written to a PlanReport now,
since the new run's status is about to replace them.

`earlier_run` reads an earlier run back whole (its entry and every record of its PlanReports):
what `kubectl plan get NAME --run ID` shows, and what a retry reads of the run it retries.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any, Protocol

from planops.kube import manifests
from planops.kube.api import KubeApi
from planops.kube.client import ApiError
from planops.reconciler.history import chunks as reports_
from planops.reconciler.history import run_history
from planops.reconciler.history.retention import Archived
from planops.reconciler.run import identity as plan_runs
from planops.reconciler.run.observe import owned


async def start(
    kube: KubeApi,
    ref: manifests.PlanRef,
    plan: dict[str, Any],
    previous: dict[str, Any],
    now: float,
    *,
    archive: bool = False,
    budget: int | None = None,
    archived: Archived = None,
) -> list[dict[str, Any]]:
    """The new run `ref.run` replaces the run `previous` (the Plan's status) holds: stop the
    earlier runs' objects (their finished child Plans the archive, `archived` when on, does not
    hold yet are kept), keep the PlanReports of the runs the history keeps (writing those of
    a run whose status held them), delete the others; returns the new run's status.history."""
    kept, dropped = run_history.replaced(
        previous, ref.run, run_history.limit(plan.get("spec")), now, archive=archive
    )
    current = (previous.get("run") or {}).get("id")
    if kept and kept[0]["id"] == current:
        kept[0] = await keep_records(kube, replace(ref, run=current), previous, kept[0])
    if kept:
        kept = run_history.within_budget(
            kept, await report_bytes(kube, ref), archive=archive, budget=budget
        )
    if any(e["id"] == ref.run for e in dropped):
        # an earlier run of the new run's id (a re-run value used again): its PlanReports are
        # not the new run's, and the selector of other runs does not find them
        for chunk in owned(await kube.list_plan_reports(ref.namespace, ref.selector()), ref.uid):
            await kube.delete_plan_report(ref.namespace, chunk["metadata"]["name"])
    keep = frozenset(e["id"] for e in kept if run_history.records_kept(e))
    await plan_runs.stop_other_runs(kube, ref, keep, archived)
    return kept


async def report_bytes(kube: KubeApi, ref: manifests.PlanRef) -> dict[str, int]:
    """The bytes of the PlanReports of each earlier run of the Plan (its objects as JSON, as
    listed): what run_history.within_budget counts."""
    sizes: dict[str, int] = {}
    for chunk in owned(
        await kube.list_plan_reports(ref.namespace, ref.other_runs_selector()), ref.uid
    ):
        run = chunk.get("run")
        if isinstance(run, str):
            sizes[run] = sizes.get(run, 0) + len(json.dumps(chunk, separators=(",", ":")))
    return sizes


async def keep_records(
    kube: KubeApi, old: manifests.PlanRef, status: dict[str, Any], entry: dict[str, Any]
) -> dict[str, Any]:
    """The replaced run's records in PlanReports: written now when its status held them all
    (no PlanReport), else already there. Returns its entry with its PlanReports counted."""
    held = reports_.from_status(old.run, status.get("report") or {})
    if held is None:
        return entry
    records = [r.to_json() for r in held.records]
    written = reports_.Written(old.run)
    for w in reports_.plan_writes(written, records):
        try:
            await kube.create_plan_report(old.namespace, reports_.body(old, w.chunk, w.records))
        except ApiError as e:
            if not e.already_exists:  # written by a reconcile that crashed before its status
                raise
        reports_.applied(written, w)
    return {**entry, "records": len(records), "reportObjects": len(written.chunks)}


class ReadsReports(Protocol):
    """What reading an earlier run asks of the API (the operator's and the CLI's clients)."""

    async def list_plan_reports(self, namespace: str, selector: str) -> list[dict[str, Any]]: ...


async def earlier_run(
    kube: ReadsReports, plan: dict[str, Any], run_id: str
) -> dict[str, Any] | None:
    """The earlier run `run_id` of `plan` as a status (run_history.earlier_status): its history
    entry with every record of its PlanReports in report.steps; None when the Plan's history
    has no such run."""
    meta = plan.get("metadata") or {}
    found = run_history.find(plan.get("status") or {}, run_id)
    if found is None:
        return None
    ref = manifests.PlanRef(str(meta["namespace"]), str(meta["name"]), str(meta["uid"]), run_id)
    records: list[dict[str, Any]] = []
    if run_history.records_kept(found):  # else its PlanReports were deleted (the byte budget)
        listed = await kube.list_plan_reports(ref.namespace, reports_.selector(ref))
        records = reports_.records_json(listed, ref.uid, run_id)
    return run_history.earlier_status(ref.name, found, records)
