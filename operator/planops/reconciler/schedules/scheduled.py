"""Reconcile ScheduledPlans and ClusterScheduledPlans: stamp a Plan run when one is due.

The rules are planops.engine.schedule's (a pure function of spec, history and now); this module
observes the runs, acts on the decision and writes the status. Idempotent by construction: a run
is named after its scheduled time, so a restart or two replicas create it once (AlreadyExists =
adopt). Returns how long until the next schedule time, so the caller can wake up then.

A ClusterScheduledPlan applies the same decision per matching namespace, with per-namespace
history: each run uses the Capsule of its own namespace. A namespace that starts matching is
scheduled from the moment it is first seen (no backfill of older times); one that stops matching
gets no new runs (its runs finish and stay until the history limits or the owner remove them).

Each run of a ScheduledPlan is started for its recorded author (reconciler.authors): when that
author may no longer `use` the Capsule, the run is not created, the scheduled time counts as
passed, and the `Authorized` condition and a `UseRevoked` Event say why. A ClusterScheduledPlan's
runs too, in each namespace they are stamped in, for its recorded author under that namespace's
Capsule: writing one takes a cluster-wide right, but running in a namespace takes `use` there,
like anyone's (its `Authorized` condition names the first namespace refused).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from planops import metrics
from planops.api import API_VERSION, names
from planops.api.documents import problems_of
from planops.api.models import CapsuleSpec
from planops.api.names import Phase
from planops.api.schedule_models import ClusterScheduledPlanSpec, ScheduledPlanSpec
from planops.engine import OPERATOR_BUDGET_SECONDS, Budget, Policy, capsule_name, validate
from planops.engine import schedule as rules
from planops.engine.report import parse_rfc3339, rfc3339
from planops.kube.api import ScheduleApi
from planops.kube.client import ApiError
from planops.kube.events import Poster, Recorder
from planops.kube.manifests import (
    ANNOTATION_AUTHOR,
    ANNOTATION_SCHEDULED_TIME,
    LABEL_CLUSTER_SCHEDULED_BY,
    LABEL_SCHEDULED_BY,
    MANAGED_BY,
    RESERVED_ANNOTATIONS,
    RESERVED_LABELS,
    label_value,
)
from planops.reconciler.history import retention
from planops.reconciler.history.retention import Archived
from planops.reconciler.run import authors
from planops.reconciler.run.observe import controller_uid, owned
from planops.reconciler.schedules import status as schedule_status

log = logging.getLogger("planops.scheduled")
FINISHED = names.FINISHED
MIN_WAKE, MAX_WAKE = 0.5, 3600.0
#: finished runs a schedule keeps past its history limits while the archive does not hold them
#: yet (per namespace), at most: past it, the oldest are deleted unarchived (the archive's
#: database down for that many runs' time); as many as a Plan's history keeps waiting for it
KEPT_FOR_ARCHIVE = 100


@dataclass
class NamespaceResult:
    last_scheduled: datetime | None
    last_successful: datetime | None
    active: list[str]
    missed_key: str | None
    #: why the due run was not started for its author ("" when it was checked and allowed;
    #: None when nothing was checked)
    refused: str | None = None


@dataclass
class ScheduleReconciler:
    kube: ScheduleApi
    policy: Policy = field(default_factory=Policy)
    clock: Callable[[], float] = time.time
    #: one validation's time budget, as the Plan reconciler's
    budget: Budget | None = field(
        default_factory=lambda: Budget(OPERATOR_BUDGET_SECONDS, time.monotonic)
    )
    #: posts the Events in the background (None: each reconcile posts its own)
    poster: Poster | None = None
    #: runs need a recorded author (the chart records authors: reconciler.authors)
    require_author: bool = False
    #: whether a finished run is archived (planops.archive.row.archived); None: no archive
    archived: Archived = None
    #: finished runs kept past the history limits for the archive, per schedule and namespace
    _kept: dict[tuple[str, str, str, str], int] = field(default_factory=dict)

    async def reconcile(self, plural: str, namespace: str, name: str) -> float | None:
        cluster = plural == "clusterscheduledplans"
        obj = await self.kube.get_object(plural, None if cluster else namespace, name)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            self._count_kept((plural, namespace, name), {})
            return None
        now = datetime.fromtimestamp(self.clock(), UTC)
        previous = obj.get("status") or {}
        events = Recorder(self.kube, obj, self.poster)
        spec, sched, errors = _structure(plural, obj)
        if spec is None or sched is None or errors:
            await self._invalid(obj, plural, cluster, previous, errors, events)
            return None

        if cluster:
            assert isinstance(spec, ClusterScheduledPlanSpec)
            namespaces = [
                n["metadata"]["name"]
                for n in await self.kube.list_namespaces(spec.namespace_selector.to_selector())
            ]
        else:
            namespaces = [namespace]
        per_ns: dict[str, Any] = previous.get("namespaces") or {}
        new_ns: dict[str, Any] = {}
        invalid: list[str] = []
        results: list[str | None] = []  # NamespaceResult.refused
        for ns in sorted(namespaces):
            before = per_ns.get(ns, {}) if cluster else previous
            errs = await self._template_errors(spec, ns)
            if errs:
                invalid += [f"{ns}: {e}" if cluster else e for e in errs]
                continue
            since = parse_rfc3339(before.get("since")) if cluster else None
            created = (
                (datetime.fromtimestamp(since, UTC) if since else now)
                if cluster
                else datetime.fromtimestamp(
                    parse_rfc3339(obj["metadata"]["creationTimestamp"]) or 0, UTC
                )
            )
            result = await self._namespace(
                obj, ns, cluster, spec, sched, created, before, now, events
            )
            results.append(result.refused)
            new_ns[ns] = {
                "since": before.get("since") or rfc3339(now.timestamp()),
                "lastScheduleTime": schedule_status.iso(result.last_scheduled),
                "lastSuccessfulTime": schedule_status.iso(result.last_successful),
                "active": result.active,
                "missedReported": result.missed_key,
            }
        if invalid and not new_ns:
            await self._invalid(obj, plural, cluster, previous, invalid, events)
            return None
        next_at = rules.decide(
            sched, name=obj["metadata"]["name"], created=now, last_scheduled=now, now=now, active=0
        ).next_at
        checked = [r for r in results if r is not None]
        verdict = [next((r for r in checked if r), "")] if checked else []  # a refusal first
        status = schedule_status.of(obj, cluster, new_ns, next_at, invalid, verdict, previous)
        await self._write(obj, plural, cluster, status)
        await events.flush()
        return min(MAX_WAKE, max(MIN_WAKE, (next_at - now).total_seconds() + 0.05))

    async def judge(self, plural: str, obj: dict[str, Any]) -> list[str]:
        """The admission webhook's verdict (handlers.webhook): the structure, the schedule and
        the run template, as `reconcile` judges them. A ScheduledPlan's template is judged with
        its namespace's Capsule; a ClusterScheduledPlan's without one (each namespace it runs in
        has its own: those checks wait for the runs). A missing Capsule is admitted, as for a
        Plan (GitOps applies in any order)."""
        spec, _, errors = _structure(plural, obj)
        if spec is None:
            return errors
        namespace = (obj.get("metadata") or {}).get("namespace")
        errors += await self._template_errors(spec, namespace, admit_missing_capsule=True)
        return errors

    async def _template_errors(
        self, spec: ScheduledPlanSpec, namespace: str | None, admit_missing_capsule: bool = False
    ) -> list[str]:
        """The run template, judged by the one validator with this namespace's Capsule (no
        namespace: none, and no refusal for it)."""
        meta = spec.plan_template.metadata
        reserved = [
            f"planTemplate.metadata.{where}.{key}: reserved for planops (it marks the Plans the "
            "operator manages); remove it from the template"
            for where, keys, given in (
                ("labels", RESERVED_LABELS, meta.labels),
                ("annotations", RESERVED_ANNOTATIONS, meta.annotations),
            )
            for key in sorted(given)
            if key in keys
        ]
        if reserved:
            return reserved
        cname = capsule_name(spec.plan_template.spec)
        raw = await self.kube.get_capsule(namespace, cname) if namespace else None
        capsule = None
        if raw is not None:
            try:
                capsule = CapsuleSpec.model_validate(raw.get("spec") or {})
            except ValidationError:
                capsule = None
        errs = await asyncio.to_thread(  # off the event loop, like a Plan's (Reconciler.judge)
            validate,
            spec.plan_template.spec,
            lambda n: capsule if n == cname else None,
            self.policy,
            self.budget,
        )
        return [
            f"planTemplate.spec.{e.path}: [{e.code}] {e.message}"
            for e in errs
            if not (admit_missing_capsule and e.code == "no-capsule")
        ]

    async def _namespace(
        self,
        owner: dict[str, Any],
        ns: str,
        cluster: bool,
        spec: ScheduledPlanSpec,
        sched: rules.ScheduleSpec,
        created: datetime,
        before: dict[str, Any],
        now: datetime,
        events: Recorder,
    ) -> NamespaceResult:
        name = owner["metadata"]["name"]
        label = LABEL_CLUSTER_SCHEDULED_BY if cluster else LABEL_SCHEDULED_BY
        kind = "ClusterScheduledPlan" if cluster else "ScheduledPlan"
        runs = owned(
            await self.kube.list_plans(ns, f"{label}={label_value(name)}"),
            owner["metadata"]["uid"],
            kind,
        )
        active = [r for r in runs if (r.get("status") or {}).get("phase") not in FINISHED]
        last_ts = parse_rfc3339(before.get("lastScheduleTime"))
        last = datetime.fromtimestamp(last_ts, UTC) if last_ts else None
        decision = rules.decide(
            sched, name=name, created=created, last_scheduled=last, now=now, active=len(active)
        )
        where = f" in {ns}" if cluster else ""
        if decision.replace:
            for r in active:
                await self.kube.delete_plan(ns, r["metadata"]["name"])
                events("RunReplaced", f"run {r['metadata']['name']}{where} stopped: Replace policy")
            active = []
        refused: str | None = None
        if decision.run_at is not None and decision.run_name is not None:
            # each run is checked for the recorded author, under the Capsule of the namespace it
            # is stamped in (a ClusterScheduledPlan's too); an object with no record only where
            # the chart records authors (require_author)
            if self.require_author or authors.has_record(owner):
                cname = capsule_name(spec.plan_template.spec)
                refused = (
                    await authors.refusal(self.kube, owner, ns, cname, self.require_author) or ""
                )
            if refused:
                metrics.scheduled_runs.labels("refused").inc()
                events(
                    authors.reason(refused),
                    f"run {decision.run_name} not started: {refused}",
                    warning=True,
                )
            else:
                body = self._run(owner, ns, label, spec, decision.run_name, decision.run_at)
                try:
                    await self.kube.create_plan(ns, body)
                    events(
                        "RunStarted",
                        f"run {decision.run_name}{where} for "
                        f"{rfc3339(decision.run_at.timestamp())}",
                    )
                    metrics.scheduled_runs.labels("started").inc()
                except ApiError as e:
                    if not e.already_exists:
                        raise  # retried by the queue; the time stays due
                    taken = await self.kube.get_plan(ns, decision.run_name)
                    if (
                        taken is not None
                        and controller_uid(taken, kind) != owner["metadata"]["uid"]
                    ):
                        # run names are predictable: a Plan made in advance squats the name
                        metrics.scheduled_runs.labels("refused").inc()
                        events(
                            "RunNameTaken",
                            f"run {decision.run_name}{where} not started: a Plan of that name "
                            "exists and is not this schedule's (its controller is another "
                            "object); delete it",
                            warning=True,
                        )
                        body = {}
                if body:
                    active.append(body)
            last = decision.run_at
        missed_key = before.get("missedReported")
        if decision.missed:
            key = f"{schedule_status.iso(last)}/{decision.missed}"
            if key != missed_key:
                reported = (
                    int((missed_key or "/0").split("/")[-1])
                    if missed_key and missed_key.startswith(f"{schedule_status.iso(last)}/")
                    else 0
                )
                new = max(0, decision.missed - reported)
                metrics.scheduled_runs.labels("missed").inc(new)
                why = " (suspended)" if sched.suspend else ""
                many = (
                    " (more than 100: check the schedule and startingDeadlineSeconds)"
                    if decision.too_many_missed
                    else ""
                )
                events(
                    "MissedSchedule",
                    f"{decision.missed} scheduled time(s){where} missed{why}{many}",
                    warning=True,
                )
                missed_key = key
        if decision.skipped_by_policy and before.get("skippedFor") != schedule_status.iso(last):
            metrics.scheduled_runs.labels("skipped").inc()
            events("RunSkipped", f"a run is due{where} but another is active (Forbid): it waits")
        kept = await self._prune(ns, runs, spec, events)
        plural = "clusterscheduledplans" if cluster else "scheduledplans"
        self._count_kept((plural, owner["metadata"].get("namespace") or "", name), {ns: kept})
        succeeded = [
            parse_rfc3339((r["metadata"].get("annotations") or {}).get(ANNOTATION_SCHEDULED_TIME))
            for r in runs
            if (r.get("status") or {}).get("phase") == Phase.SUCCEEDED
        ]
        prev_ok = parse_rfc3339(before.get("lastSuccessfulTime"))
        best = max([t for t in [*succeeded, prev_ok] if t is not None], default=None)
        return NamespaceResult(
            last,
            datetime.fromtimestamp(best, UTC) if best else None,
            sorted(r["metadata"]["name"] for r in active),
            missed_key,
            refused,
        )

    def _run(
        self,
        owner: dict[str, Any],
        ns: str,
        label: str,
        spec: ScheduledPlanSpec,
        name: str,
        at: datetime,
    ) -> dict[str, Any]:
        meta = owner["metadata"]
        tmpl = spec.plan_template
        return {
            "apiVersion": API_VERSION,
            "kind": "Plan",
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": {**tmpl.metadata.labels, label: label_value(meta["name"]), **MANAGED_BY},
                "annotations": {
                    **tmpl.metadata.annotations,
                    label: meta["name"],  # the label may be shortened (manifests.full_value)
                    ANNOTATION_SCHEDULED_TIME: rfc3339(at.timestamp()) or "",
                    # a re-run of the run is started for the same author (reconciler.authors)
                    **(
                        {ANNOTATION_AUTHOR: meta["annotations"][ANNOTATION_AUTHOR]}
                        if ANNOTATION_AUTHOR in (meta.get("annotations") or {})
                        else {}
                    ),
                },
                "ownerReferences": [
                    {
                        "apiVersion": owner["apiVersion"],
                        "kind": owner["kind"],
                        "name": meta["name"],
                        "uid": meta["uid"],
                        "controller": True,
                        "blockOwnerDeletion": True,
                    }
                ],
            },
            "spec": tmpl.spec.dump(),
        }

    async def _prune(
        self, ns: str, runs: list[dict[str, Any]], spec: ScheduledPlanSpec, events: Recorder
    ) -> int:
        """History limits: keep the newest finished runs of each outcome, delete the rest. While
        the archive is on, a run it does not hold yet is kept past the limits, deleted by a later
        reconcile once archived (its archive mark wakes this schedule); at most KEPT_FOR_ARCHIVE
        of them, past which the oldest are deleted anyway, said by a Warning Event. Returns how
        many runs are kept for the archive."""

        def when(r: dict[str, Any]) -> str:
            return str((r["metadata"].get("annotations") or {}).get(ANNOTATION_SCHEDULED_TIME, ""))

        waiting: list[dict[str, Any]] = []
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
                if retention.waits_for_archive(r, self.archived):
                    waiting.append(r)
                else:
                    await self.kube.delete_plan(ns, r["metadata"]["name"])
        waiting.sort(key=when, reverse=True)
        for r in waiting[KEPT_FOR_ARCHIVE:]:  # the archive is down for long: the status is bound
            await self.kube.delete_plan(ns, r["metadata"]["name"])
            metrics.runs_deleted_unarchived.inc()
            events(
                "RunNotArchived",
                f"run {r['metadata']['name']} deleted by the history limits before the archive "
                f"held it: {KEPT_FOR_ARCHIVE} finished runs past the limits already wait for the "
                "archive (is its database down? see the operator's log and metrics)",
                warning=True,
            )
        return min(len(waiting), KEPT_FOR_ARCHIVE)

    def _count_kept(self, key: tuple[str, str, str], per_ns: dict[str, int]) -> None:
        """The runs a schedule keeps for the archive, per namespace, in the gauge (their sum)."""
        for ns, n in per_ns.items():
            if n:
                self._kept[(*key, ns)] = n
            else:
                self._kept.pop((*key, ns), None)
        if not per_ns:  # the schedule is gone
            for k in [k for k in self._kept if k[:3] == key]:
                del self._kept[k]
        metrics.scheduled_runs_kept_for_archive.set(sum(self._kept.values()))

    async def _invalid(
        self,
        obj: dict[str, Any],
        plural: str,
        cluster: bool,
        previous: dict[str, Any],
        errors: list[str],
        events: Recorder,
    ) -> None:
        if previous.get("errors") != errors[:50]:
            events(
                "ValidationFailed",
                f"{len(errors)} error(s), nothing is scheduled: " + "; ".join(errors[:5]),
                warning=True,
            )
        status = {
            "observedGeneration": obj["metadata"].get("generation"),
            "errors": errors[:50],
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "reason": "Invalid",
                    "message": errors[0][:1000],
                }
            ],
            "activeCount": 0,
        }
        await self._write(obj, plural, cluster, status)
        await events.flush()

    async def _write(
        self, obj: dict[str, Any], plural: str, cluster: bool, status: dict[str, Any]
    ) -> None:
        if (obj.get("status") or {}) == status:
            return
        meta = obj["metadata"]
        await self.kube.patch_status(
            plural, None if cluster else meta["namespace"], meta["name"], status
        )


def _structure(
    plural: str, obj: dict[str, Any]
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
