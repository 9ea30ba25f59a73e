"""Pure: what a reconcile of a ScheduledPlan or ClusterScheduledPlan decides, from what it read.

When a run is due is engine.schedule's rule (a pure function of the spec, the last schedule
time and the clock); this module decides, per namespace, what follows from it and from the runs
read there: the active runs a Replace policy stops, the run to create (named after its scheduled
time, so a restart or two replicas create it once: AlreadyExists is an adoption, or a name
taken), whether its author may still start it (run.authors), the times missed and skipped (told
once), and the finished runs the history limits delete (while the archive is on, a run it does
not hold yet is kept past the limits, KEPT_FOR_ARCHIVE at most). schedules.status builds the
status from the outcomes; schedules.shell reads, asks these, and acts.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from planops.api import API_VERSION, names
from planops.api.documents import problems_of
from planops.api.names import (
    ANNOTATION_AUTHOR,
    ANNOTATION_RUN_NOW,
    ANNOTATION_SCHEDULED_TIME,
    LABEL_CLUSTER_SCHEDULED_BY,
    LABEL_SCHEDULED_BY,
    RESERVED_ANNOTATIONS,
    RESERVED_LABELS,
    Phase,
)
from planops.api.schedule_models import ClusterScheduledPlanSpec, ScheduledPlanSpec
from planops.engine import PlanError
from planops.engine import schedule as rules
from planops.engine.report import parse_rfc3339, rfc3339
from planops.kube.manifests import MANAGED_BY, label_value
from planops.reconciler.effects.intents import Told
from planops.reconciler.history import retention
from planops.reconciler.history.retention import Archived
from planops.reconciler.run import authors
from planops.reconciler.run.observe import controller_uid
from planops.reconciler.schedules import status as schedule_status

Obj = dict[str, Any]
FINISHED = names.FINISHED
MIN_WAKE, MAX_WAKE = 0.5, 3600.0
#: finished runs a schedule keeps past its history limits while the archive does not hold them
#: yet (per namespace), at most: past it, the oldest are deleted unarchived (the archive's
#: database down for that many runs' time); as many as a Plan's history keeps waiting for it
KEPT_FOR_ARCHIVE = 100
PLURALS = {"scheduledplans": "ScheduledPlan", "clusterscheduledplans": "ClusterScheduledPlan"}


def structure(
    plural: str, obj: Obj
) -> tuple[ScheduledPlanSpec | None, rules.ScheduleSpec | None, list[str]]:
    """The spec read and its schedule judged, as both the reconcile and the webhook judge them
    (None and the reasons when the spec cannot be read)."""
    model = ClusterScheduledPlanSpec if plural == "clusterscheduledplans" else ScheduledPlanSpec
    try:
        spec = model.model_validate(obj.get("spec") or {})
    except ValidationError as e:
        return None, None, [f"{p.path}: {p.message}" for p in problems_of(e, "spec", model)]
    sched = rules.ScheduleSpec(
        spec.schedule,
        spec.time_zone,
        spec.starting_deadline_seconds,
        spec.concurrency_policy,
        spec.suspend,
    )
    return spec, sched, [f"spec.{field}: {message}" for field, message in rules.check(sched)]


def reserved(spec: ScheduledPlanSpec) -> list[str]:
    """The run template's labels and annotations that are planops' own (they mark the Plans the
    operator manages)."""
    meta = spec.plan_template.metadata
    return [
        f"planTemplate.metadata.{where}.{key}: reserved for planops (it marks the Plans the "
        "operator manages); remove it from the template"
        for where, keys, given in (
            ("labels", RESERVED_LABELS, meta.labels),
            ("annotations", RESERVED_ANNOTATIONS, meta.annotations),
        )
        for key in sorted(given)
        if key in keys
    ]


def template_errors(errors: list[PlanError], admit_capsule: bool) -> list[str]:
    """The run template's refusals (run.judging: the one judge of a Plan) as the schedule's
    status and webhook say them; `admit_capsule`: a refusal of its Capsule (missing, or one that
    cannot be used) is admitted, as the Plan webhook admits it (GitOps applies in any order; the
    reconcile refuses it, saying why, as it refuses a Plan)."""
    return [
        f"planTemplate.spec.{e.path}: [{e.code}] {e.message}"
        for e in errors
        if not (admit_capsule and e.code == "no-capsule")
    ]


def invalid(obj: Obj, previous: Obj, errors: list[str], told: Told) -> Obj:
    """The status of a schedule that cannot be used (nothing is scheduled), told once."""
    if previous.get("errors") != errors[:50]:
        told(
            "ValidationFailed",
            f"{len(errors)} error(s), nothing is scheduled: " + "; ".join(errors[:5]),
            warning=True,
        )
    return {
        "observedGeneration": obj["metadata"].get("generation"),
        "errors": errors[:50],
        "conditions": [
            {"type": "Ready", "status": "False", "reason": "Invalid", "message": errors[0][:1000]}
        ],
        "activeCount": 0,
    }


@dataclass(frozen=True)
class Where:
    """A schedule and one namespace it stamps runs in."""

    owner: Obj
    namespace: str
    cluster: bool
    spec: ScheduledPlanSpec
    sched: rules.ScheduleSpec
    now: datetime

    @property
    def kind(self) -> str:
        return "ClusterScheduledPlan" if self.cluster else "ScheduledPlan"

    @property
    def label(self) -> str:
        return LABEL_CLUSTER_SCHEDULED_BY if self.cluster else LABEL_SCHEDULED_BY

    @property
    def name(self) -> str:
        return str(self.owner["metadata"]["name"])

    @property
    def at(self) -> str:
        """How an Event names the namespace (a ClusterScheduledPlan's)."""
        return f" in {self.namespace}" if self.cluster else ""


def created(w: Where, before: Obj) -> datetime:
    """From when the namespace is scheduled: a ScheduledPlan's creation; for a
    ClusterScheduledPlan, when the namespace was first seen (no backfill of older times)."""
    if w.cluster:
        since = parse_rfc3339(before.get("since"))
        return datetime.fromtimestamp(since, UTC) if since else w.now
    return datetime.fromtimestamp(parse_rfc3339(w.owner["metadata"]["creationTimestamp"]) or 0, UTC)


def due(w: Where, before: Obj, runs: list[Obj]) -> rules.ScheduleDecision:
    """engine.schedule's decision for the namespace now, its runs being `runs`."""
    last_ts = parse_rfc3339(before.get("lastScheduleTime"))
    return rules.decide(
        w.sched,
        name=w.name,
        created=created(w, before),
        last_scheduled=datetime.fromtimestamp(last_ts, UTC) if last_ts else None,
        now=w.now,
        active=len(active_of(runs)),
    )


def run_now(w: Where, before: Obj) -> str | None:
    """The run-now token of a ScheduledPlan not yet acted on (names.ANNOTATION_RUN_NOW), or
    None. A ClusterScheduledPlan takes none (it would start a run in every namespace)."""
    token = (w.owner["metadata"].get("annotations") or {}).get(ANNOTATION_RUN_NOW)
    if w.cluster or not isinstance(token, str) or not token or token == before.get("runNow"):
        return None
    return token


def now_run(w: Where, decision: rules.ScheduleDecision, token: str) -> rules.ScheduleDecision:
    """The decision with a run started now for `token`, recorded as a scheduled run (its time
    now, its name from the token: asking again with the same token starts nothing); whatever
    the concurrency policy, as a person asked for it."""
    digest = hashlib.sha256(token.encode()).hexdigest()[:8]
    name = f"{w.name[:46].rstrip('.-')}-now-{digest}"
    return replace(decision, run_at=w.now, run_name=name, replace=False, skipped_by_policy=False)


def active_of(runs: list[Obj]) -> list[Obj]:
    return [r for r in runs if (r.get("status") or {}).get("phase") not in FINISHED]


def run_body(w: Where, name: str, at: datetime) -> Obj:
    """The Plan of a scheduled run: the template, labelled and owned by the schedule, started for
    its recorded author (a re-run of the run is started for the same author: run.authors)."""
    meta, tmpl = w.owner["metadata"], w.spec.plan_template
    author = (meta.get("annotations") or {}).get(ANNOTATION_AUTHOR)
    return {
        "apiVersion": API_VERSION,
        "kind": "Plan",
        "metadata": {
            "name": name,
            "namespace": w.namespace,
            "labels": {**tmpl.metadata.labels, w.label: label_value(meta["name"]), **MANAGED_BY},
            "annotations": {
                **tmpl.metadata.annotations,
                w.label: meta["name"],  # the label may be shortened (manifests.full_value)
                ANNOTATION_SCHEDULED_TIME: rfc3339(at.timestamp()) or "",
                **({ANNOTATION_AUTHOR: author} if author is not None else {}),
            },
            "ownerReferences": [
                {
                    "apiVersion": w.owner["apiVersion"],
                    "kind": w.owner["kind"],
                    "name": meta["name"],
                    "uid": meta["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": tmpl.spec.dump(),
    }


@dataclass
class Namespace:
    """What a reconcile decided for one namespace of a schedule."""

    #: the runs a Replace policy stops, and the run to create, if any
    deletes: list[str] = field(default_factory=list)
    create: Obj | None = None
    #: the active runs (a run created is added once its create answered)
    active: list[Obj] = field(default_factory=list)
    last: datetime | None = None
    last_successful: datetime | None = None
    missed_key: str | None = None
    #: the due run's author check: not made (None), allowed (no refusal), or refused
    checked: bool = False
    refusal: authors.Refusal | None = None
    #: finished runs kept past the limits for the archive
    kept: int = 0
    #: the run-now token acted on by this reconcile (run_now), if any
    run_now: str | None = None


def decide(
    w: Where,
    before: Obj,
    runs: list[Obj],
    decision: rules.ScheduleDecision,
    author: authors.Refusal | bool | None,
    told: Told,
) -> Namespace:
    """The namespace's part of the reconcile, up to the due run's create: `decision` is
    engine.schedule's, `author` the due run's author check (False: not made; None: allowed;
    else the refusal). The runs a Replace policy stops; the run to create, or why not."""
    out = Namespace(active=active_of(runs))
    if decision.replace:
        for r in out.active:
            out.deletes.append(r["metadata"]["name"])
            told("RunReplaced", f"run {r['metadata']['name']}{w.at} stopped: Replace policy")
        out.active = []
    last_ts = parse_rfc3339(before.get("lastScheduleTime"))
    out.last = datetime.fromtimestamp(last_ts, UTC) if last_ts else None
    if decision.run_at is not None and decision.run_name is not None:
        out.checked = author is not False
        out.refusal = author if isinstance(author, authors.Refusal) else None
        if out.refusal is not None:
            told.inc("scheduled_runs", "refused")
            told(
                out.refusal.reason,
                f"run {decision.run_name} not started: {out.refusal.why}",
                warning=True,
            )
        else:
            out.create = run_body(w, decision.run_name, decision.run_at)
        out.last = decision.run_at
    return out


def conclude(
    w: Where,
    before: Obj,
    runs: list[Obj],
    decision: rules.ScheduleDecision,
    out: Namespace,
    archived: Archived,
    told: Told,
) -> list[str]:
    """The rest of the namespace's part, once the due run is created (or not): the times missed
    and skipped, told once; the runs the history limits delete (returned), those kept for the
    archive; the last successful run's time."""
    out.missed_key = missed(w, before, decision, out.last, told)
    if decision.skipped_by_policy and before.get("skippedFor") != schedule_status.iso(out.last):
        told.inc("scheduled_runs", "skipped")
        told("RunSkipped", f"a run is due{w.at} but another is active (Forbid): it waits")
    pruned, out.kept = prune(runs, w.spec, archived, told)
    succeeded = [
        parse_rfc3339((r["metadata"].get("annotations") or {}).get(ANNOTATION_SCHEDULED_TIME))
        for r in runs
        if (r.get("status") or {}).get("phase") == Phase.SUCCEEDED
    ]
    prev_ok = parse_rfc3339(before.get("lastSuccessfulTime"))
    best = max([t for t in [*succeeded, prev_ok] if t is not None], default=None)
    out.last_successful = datetime.fromtimestamp(best, UTC) if best else None
    return pruned


def created_run(w: Where, out: Namespace, told: Told) -> None:
    """The due run was created now."""
    assert out.create is not None
    at = out.create["metadata"]["annotations"][ANNOTATION_SCHEDULED_TIME]
    told("RunStarted", f"run {out.create['metadata']['name']}{w.at} for {at}")
    told.inc("scheduled_runs", "started")
    out.active.append(out.create)


def name_taken(w: Where, out: Namespace, taken: Obj | None, told: Told) -> None:
    """The due run's name exists: ours (made before a restart: adopted), or squatted (run
    names are predictable: a Plan made in advance takes the name): said, and not started."""
    assert out.create is not None
    if taken is not None and controller_uid(taken, w.kind) != w.owner["metadata"]["uid"]:
        told.inc("scheduled_runs", "refused")
        told(
            "RunNameTaken",
            f"run {out.create['metadata']['name']}{w.at} not started: a Plan of that name exists "
            "and is not this schedule's (its controller is another object); delete it",
            warning=True,
        )
        return
    out.active.append(out.create)


def missed(
    w: Where, before: Obj, decision: rules.ScheduleDecision, last: datetime | None, told: Told
) -> str | None:
    """The times missed since the last schedule time, told once (counted as they grow)."""
    found = before.get("missedReported")
    missed_key = found if isinstance(found, str) else None
    if not decision.missed:
        return missed_key
    key = f"{schedule_status.iso(last)}/{decision.missed}"
    if key == missed_key:
        return key
    reported = (
        int((missed_key or "/0").split("/")[-1])
        if missed_key and missed_key.startswith(f"{schedule_status.iso(last)}/")
        else 0
    )
    told.inc("scheduled_runs", "missed", by=max(0, decision.missed - reported))
    why = " (suspended)" if w.sched.suspend else ""
    many = (
        " (more than 100: check the schedule and startingDeadlineSeconds)"
        if decision.too_many_missed
        else ""
    )
    told(
        "MissedSchedule",
        f"{decision.missed} scheduled time(s){w.at} missed{why}{many}",
        warning=True,
    )
    return key


def prune(
    runs: list[Obj], spec: ScheduledPlanSpec, archived: Archived, told: Told
) -> tuple[list[str], int]:
    """History limits: keep the newest finished runs of each outcome, delete the rest. While the
    archive is on, a run it does not hold yet is kept past the limits, deleted by a later
    reconcile once archived (its archive mark wakes this schedule); at most KEPT_FOR_ARCHIVE of
    them, past which the oldest are deleted anyway, said by a Warning Event. Returns the runs to
    delete and how many are kept for the archive."""

    def when(r: Obj) -> str:
        return str((r["metadata"].get("annotations") or {}).get(ANNOTATION_SCHEDULED_TIME, ""))

    deletes: list[str] = []
    waiting: list[Obj] = []
    for phases, keep in (
        ((Phase.SUCCEEDED,), spec.successful_runs_history_limit),
        ((Phase.FAILED, Phase.INVALID), spec.failed_runs_history_limit),
    ):
        done = sorted(
            (r for r in runs if (r.get("status") or {}).get("phase") in phases),
            key=when,
            reverse=True,
        )
        for r in done[keep:]:
            if retention.waits_for_archive(r, archived):
                waiting.append(r)
            else:
                deletes.append(r["metadata"]["name"])
    waiting.sort(key=when, reverse=True)
    for r in waiting[KEPT_FOR_ARCHIVE:]:  # the archive is down for long: the status is bound
        deletes.append(r["metadata"]["name"])
        told.inc("runs_deleted_unarchived")
        told(
            "RunNotArchived",
            f"run {r['metadata']['name']} deleted by the history limits before the archive held "
            f"it: {KEPT_FOR_ARCHIVE} finished runs past the limits already wait for the archive "
            "(is its database down? see the operator's log and metrics)",
            warning=True,
        )
    return deletes, min(len(waiting), KEPT_FOR_ARCHIVE)


def namespace_status(before: Obj, out: Namespace, now: datetime) -> Obj:
    """What one namespace's part of the status records."""
    return {
        "since": before.get("since") or rfc3339(now.timestamp()),
        "lastScheduleTime": schedule_status.iso(out.last),
        "lastSuccessfulTime": schedule_status.iso(out.last_successful),
        "active": sorted(r["metadata"]["name"] for r in out.active),
        "missedReported": out.missed_key,
        "runNow": out.run_now or before.get("runNow"),
    }


def wake(sched: rules.ScheduleSpec, name: str, now: datetime) -> tuple[datetime, float]:
    """The next schedule time, and the seconds until the schedule is looked at again then."""
    next_at = rules.decide(
        sched, name=name, created=now, last_scheduled=now, now=now, active=0
    ).next_at
    return next_at, min(MAX_WAKE, max(MIN_WAKE, (next_at - now).total_seconds() + 0.05))
