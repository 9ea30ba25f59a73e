"""What a finished run becomes in the archive: one row, computed from the Plan as the cluster
holds it (its status, with every record from its PlanReports). Pure: no database, no API.

A Plan's run is archived once its phase is Succeeded or Failed. After its row commits, the
operator writes `status.archived: <run id>` on the Plan (the status: only the operator writes
it), so the run is not archived again, and a run whose Plan's status does not say so (a
restart, a new leader, a database that was down) is found again from the cluster:
`pending_run` is that question. A new run's status starts without the field.

A run replaced by a new one (a re-run, a new generation) before it was archived is kept in the
Plan's status.history with its PlanReports (reconciler.history.run_history) and archived from there:
`pending_earlier` finds it, queue.earlier_row is its row, and its entry's `archived: true` the
mark.
While the archive is on, such an entry stays in the history past the Plan's historyLimit.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from planops.api.names import LABEL_CLUSTER_SCHEDULED_BY, LABEL_PARENT, LABEL_SCHEDULED_BY
from planops.engine.policy import DEFAULT_CAPSULE
from planops.engine.report import parse_rfc3339
from planops.kube.manifests import full_value
from planops.store import signed
from planops.store.keys import BadKeyError

#: the status field naming the run last archived
ARCHIVED = "archived"
#: the phases that end a run (Invalid does not: a Capsule created later starts it)
FINISHED = ("Succeeded", "Failed")


@dataclass(frozen=True)
class Row:
    """One finished run, as the table `planops_runs` holds it."""

    plan_uid: str
    run_id: str
    namespace: str
    name: str
    generation: int | None
    phase: str
    capsule: str | None
    created_by: str | None
    labels: dict[str, str]
    spec_digest: str | None
    spec: dict[str, Any] | None
    inputs: dict[str, Any] | None
    report: dict[str, Any]
    failed_step: str | None
    started_at: float | None
    finished_at: float | None
    duration_seconds: float | None
    #: where each step's full log went: {"repository", "keys": {step: [key per attempt]}}
    stored_logs: dict[str, Any] | None = None


def run_of(plan: dict[str, Any]) -> str | None:
    """The id of the Plan's current run, if it has one."""
    run = ((plan.get("status") or {}).get("run") or {}).get("id")
    return run if isinstance(run, str) and run else None


def pending_run(plan: dict[str, Any]) -> str | None:
    """The run id when the Plan's current run is finished and not yet archived, else None."""
    status = plan.get("status") or {}
    run = run_of(plan)
    if run is None or status.get("phase") not in FINISHED:
        return None
    return None if status.get(ARCHIVED) == run else run


def pending_earlier(plan: dict[str, Any]) -> list[tuple[int, dict[str, Any]]]:
    """The earlier runs the Plan keeps (status.history) that are finished and not archived yet,
    with their index in the history."""
    found = (plan.get("status") or {}).get("history")
    return [
        (i, e)
        for i, e in enumerate(found if isinstance(found, list) else [])
        if isinstance(e, dict) and isinstance(e.get("id"), str) and waits_for_archive(e)
    ]


def waits_for_archive(entry: dict[str, Any]) -> bool:
    """Whether an earlier run's entry is finished and not archived yet (the reconciler keeps
    such an entry past historyLimit by the same rule: reconciler.history.run_history)."""
    return entry.get("phase") in FINISHED and entry.get("archived") is not True


def pending_runs(plan: dict[str, Any]) -> list[str]:
    """Every run of the Plan still to be archived: its current run, then its earlier runs."""
    current = pending_run(plan)
    return ([current] if current else []) + [e["id"] for _, e in pending_earlier(plan)]


def archived(plan: dict[str, Any]) -> bool:
    """Whether the Plan's current run, finished, is in the archive, and every earlier run it
    keeps too: what a clean-up of finished Plans (a TTL) must ask before it deletes one while
    the archive is on (its PlanReports go with it)."""
    status = plan.get("status") or {}
    return status.get("phase") in FINISHED and not pending_runs(plan)


def marked(plan: dict[str, Any], run: str) -> dict[str, Any] | None:
    """The Plan's status with its current run `run` marked archived (status.archived), or None
    when there is nothing to mark: it is no longer the Plan's run, or is marked already."""
    status = plan.get("status") or {}
    if run_of(plan) != run or status.get(ARCHIVED) == run:
        return None
    return {**status, ARCHIVED: run}


def marked_earlier(plan: dict[str, Any], run: str) -> dict[str, Any] | None:
    """The Plan's status with the earlier run `run` its history keeps marked archived, or None
    when there is nothing to mark: the history no longer has it, or it is marked already."""
    status = plan.get("status") or {}
    history = status.get("history")
    entries = history if isinstance(history, list) else []
    found = next((e for e in entries if isinstance(e, dict) and e.get("id") == run), None)
    if found is None or found.get("archived") is True:
        return None
    kept = [{**e, "archived": True} if e is found else e for e in entries]
    return {**status, "history": kept}


def needs_report_objects(plan: dict[str, Any]) -> bool:
    """Whether the run's records are in PlanReport objects (else the status holds them all)."""
    report = (plan.get("status") or {}).get("report") or {}
    return bool(report.get("reportObjects"))


def spec_digest(spec: dict[str, Any]) -> str:
    """sha256 of the spec as canonical JSON (sorted keys, no spaces): equal specs, equal digests."""
    text = json.dumps(spec, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def created_by(meta: dict[str, Any]) -> str | None:
    """Who made the Plan, when the cluster says: a parent Plan's capsule step or a schedule.
    (The API server does not record the user who created an object.)"""
    if parent := full_value(meta, LABEL_PARENT):
        return f"plan/{parent}"
    if schedule := full_value(meta, LABEL_SCHEDULED_BY):
        return f"scheduledplan/{schedule}"
    if schedule := full_value(meta, LABEL_CLUSTER_SCHEDULED_BY):
        return f"clusterscheduledplan/{schedule}"
    return None


def capsule_ran(run: dict[str, Any], plan: dict[str, Any]) -> str | None:
    """The Capsule the run `run` (a status.run, or a status.history entry) of `plan` ran under:
    as the operator recorded it when the run started. A run recorded before it did so: the
    Plan's Capsule while the run's generation is the Plan's (another Capsule is another
    generation), else unknown (None: a wrong one is worse than none)."""
    recorded = run.get("capsule")
    if isinstance(recorded, str) and recorded:
        return recorded
    generation = run.get("generation")
    if generation is not None and generation != (plan.get("metadata") or {}).get("generation"):
        return None
    spec = plan.get("spec") if isinstance(plan.get("spec"), dict) else {}
    return str((spec or {}).get("capsule") or DEFAULT_CAPSULE)


def row(plan: dict[str, Any], records: list[dict[str, Any]] | None = None) -> Row:
    """The row of the Plan's finished run. `records` are every record of the run (from its
    PlanReports) when the status holds only the last ones; None when the status holds all.

    The spec is the Plan's as it is now: when it changed after the run started (the status's
    run generation is not the object's), the run's own spec is gone from the cluster, so none is
    recorded rather than the wrong one."""
    meta = plan.get("metadata") or {}
    status = plan.get("status") or {}
    run = status.get("run") or {}
    run_id = run_of(plan)
    if run_id is None or status.get("phase") not in FINISHED:
        raise ValueError(f"plan {meta.get('name')!r} has no finished run")
    generation = run.get("generation")
    same_spec = generation is None or generation == meta.get("generation")
    spec = plan.get("spec") if same_spec and isinstance(plan.get("spec"), dict) else None
    report = dict(status.get("report") or {})
    if records is not None:
        report["steps"] = records
        report["stepsOmitted"] = 0
    started, finished = (
        parse_rfc3339(status.get("startedAt")),
        parse_rfc3339(status.get("finishedAt")),
    )
    labels = meta.get("labels") or {}
    return Row(
        plan_uid=str(meta.get("uid") or ""),
        run_id=run_id,
        namespace=str(meta.get("namespace") or ""),
        name=str(meta.get("name") or ""),
        generation=generation if isinstance(generation, int) else None,
        phase=str(status["phase"]),
        capsule=capsule_ran(run, plan),
        created_by=created_by(meta),
        labels={str(k): str(v) for k, v in labels.items()},
        spec_digest=spec_digest(spec) if spec is not None else None,
        spec=spec,
        inputs=spec.get("input") if spec is not None else None,
        report=report,
        failed_step=status.get("failedStep") or report.get("failedStep"),
        started_at=started,
        finished_at=finished,
        duration_seconds=finished - started
        if started is not None and finished is not None
        else None,
        stored_logs=stored_logs(plan, run_id, report.get("steps") or []),
    )


def stored_logs(
    plan: dict[str, Any], run: str, records: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """Where the run's steps' full logs went (store.signed's entry of the run names the
    repository and its key prefix, written as the run starts), each attempt's key; None when
    the run has no repository."""
    meta, status = plan.get("metadata") or {}, plan.get("status") or {}
    e = signed.entry(status, run)
    if e is None:
        return None
    ns, uid = str(meta.get("namespace") or ""), str(meta.get("uid") or "")
    try:
        rel = signed.relative_run_keys(ns, uid, run)
        keys: dict[str, list[str]] = {}
        for k in signed.keys_of_records(records, rel):
            step, kind, _ = k.split("/", 2)
            if kind == "logs":
                keys.setdefault(step, []).append(signed.object_key(e, ns, uid, k))
    except BadKeyError:
        return None
    return {"repository": e.get("repository"), "keys": keys}
