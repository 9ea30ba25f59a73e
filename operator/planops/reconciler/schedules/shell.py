"""The reconcile of a ScheduledPlan or ClusterScheduledPlan: read -> decide -> act.

The same shape as a Plan's: what it reads (`Reading`: the schedule, its namespaces, its runs,
the Capsules its run template is judged with, its author's `use`) and what it does (`Acting`:
runs created and deleted, the status written with the resourceVersion it was decided from, the
Events told) are effects.reads' and effects.actuator's, handed in by reconcile.py (this module
names only what it needs of them); what it decides is schedules.decide's, and the run template
is judged by the one judge of a Plan (run.judging), so a malformed Capsule refuses a schedule as
it refuses a Plan. A status write that finds the schedule changed since it was read is read and
decided again.

A ClusterScheduledPlan applies the same decision per matching namespace, with per-namespace
history: each run uses the Capsule of its own namespace. A namespace that starts matching is
scheduled from the moment it is first seen (no backfill of older times); one that stops matching
gets no new runs (its runs finish and stay until the history limits or the owner remove them).

Each run of a ScheduledPlan is started for its recorded author (run.authors): when that author
may no longer `use` the Capsule, the run is not created, the scheduled time counts as passed,
and the `Authorized` condition and a `UseRevoked` Event say why. A ClusterScheduledPlan's runs
too, in each namespace they are stamped in, for its recorded author under that namespace's
Capsule: writing one takes a cluster-wide right, but running in a namespace takes `use` there,
like anyone's (its `Authorized` condition names the first namespace refused).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any, Protocol

from planops import metrics
from planops.api.schedule_models import ClusterScheduledPlanSpec, ScheduledPlanSpec
from planops.engine import capsule_name
from planops.kube.errors import ApiError, ErrorKind
from planops.reconciler.effects.intents import Told
from planops.reconciler.history.retention import Archived
from planops.reconciler.run import authors
from planops.reconciler.run.judging import Judge
from planops.reconciler.schedules import decide
from planops.reconciler.schedules import status as schedule_status

Obj = dict[str, Any]
#: reads and decisions of one reconcile whose status write found the schedule changed
CONFLICT_ROUNDS = 3


class Reading(Protocol):
    """What a schedule's reconcile reads (effects.reads.ScheduleReads)."""

    async def schedule(self, plural: str, namespace: str | None, name: str) -> Obj | None: ...
    async def namespaces(self, selector: str) -> list[str]: ...
    async def runs(self, namespace: str, label: str, owner: Obj, kind: str) -> list[Obj]: ...
    async def capsule(self, namespace: str, name: str) -> Obj | None: ...
    async def targets(
        self, namespace: str, plan: Obj, raw: Obj | None
    ) -> dict[str, Obj | None]: ...
    async def plan(self, namespace: str, name: str) -> Obj | None: ...
    async def may_use(
        self, author: authors.Author, namespace: str, capsule: str
    ) -> tuple[bool, str]: ...
    async def templates(self, namespace: str, plan: Obj) -> dict[tuple[str, str], Obj | None]: ...


class Acting(Protocol):
    """What a schedule's reconcile does (effects.actuator.ScheduleActuator)."""

    async def create_run(self, namespace: str, body: Obj) -> bool: ...
    async def delete_run(self, namespace: str, name: str) -> None: ...
    async def write_status(self, obj: Obj, plural: str, cluster: bool, status: Obj) -> None: ...
    async def tell(self, obj: Obj, told: Told) -> None: ...


class Schedules:
    def __init__(
        self,
        reads: Reading,
        act: Acting,
        judge: Judge,
        clock: Callable[[], float] = time.time,
        require_author: bool = False,
        archived: Archived = None,
    ) -> None:
        self.reads, self.act, self.judge_ = reads, act, judge
        self.clock = clock
        #: runs need a recorded author (the chart records authors: run.authors)
        self.require_author = require_author
        #: whether a finished run is archived (planops.archive.row.archived); None: no archive
        self.archived = archived
        #: finished runs kept past the history limits for the archive, per schedule and namespace
        self._kept: dict[tuple[str, str, str, str], int] = {}

    async def reconcile(self, plural: str, namespace: str, name: str) -> float | None:
        """One reconcile; returns seconds until the next schedule time (the caller wakes then)."""
        for round_ in range(CONFLICT_ROUNDS):
            try:
                return await self._reconcile(plural, namespace, name)
            except ApiError as e:
                if e.kind is not ErrorKind.CONFLICT or round_ == CONFLICT_ROUNDS - 1:
                    raise
                metrics.status_conflicts.inc()  # read again, decide again
        return None  # (never reached: the last round raises)

    async def _reconcile(self, plural: str, namespace: str, name: str) -> float | None:
        cluster = plural == "clusterscheduledplans"
        obj = await self.reads.schedule(plural, None if cluster else namespace, name)
        if obj is None or obj["metadata"].get("deletionTimestamp"):
            self._count_kept((plural, namespace, name), {})
            return None
        now = datetime.fromtimestamp(self.clock(), UTC)
        previous, told = obj.get("status") or {}, Told()
        spec, sched, errors = decide.structure(plural, obj)
        if spec is None or sched is None or errors:
            await self._write(
                obj, plural, cluster, decide.invalid(obj, previous, errors, told), told
            )
            return None
        if cluster:
            assert isinstance(spec, ClusterScheduledPlanSpec)
            namespaces = await self.reads.namespaces(spec.namespace_selector.to_selector())
        else:
            namespaces = [namespace]
        per_ns: dict[str, Any] = previous.get("namespaces") or {}
        new_ns: dict[str, Any] = {}
        invalid: list[str] = []
        checked: list[authors.Refusal | None] = []
        for ns in sorted(namespaces):
            before = per_ns.get(ns, {}) if cluster else previous
            errs = await self.template_errors(spec, ns)
            if errs:
                invalid += [f"{ns}: {e}" if cluster else e for e in errs]
                continue
            where = decide.Where(obj, ns, cluster, spec, sched, now)
            out = await self._namespace(where, plural, before, told)
            if out.checked:
                checked.append(out.refusal)
            new_ns[ns] = decide.namespace_status(before, out, now)
        if invalid and not new_ns:
            await self._write(
                obj, plural, cluster, decide.invalid(obj, previous, invalid, told), told
            )
            return None
        next_at, wake = decide.wake(sched, obj["metadata"]["name"], now)
        verdict = [next((r for r in checked if r is not None), None)] if checked else []
        status = schedule_status.of(obj, cluster, new_ns, next_at, invalid, verdict, previous)
        await self._write(obj, plural, cluster, status, told)
        return wake

    async def _namespace(
        self, w: decide.Where, plural: str, before: Obj, told: Told
    ) -> decide.Namespace:
        """One namespace: its runs read, the due run decided, created, the rest decided, the
        runs the Replace policy and the history limits stop deleted."""
        runs = await self.reads.runs(w.namespace, w.label, w.owner, w.kind)
        due = decide.due(w, before, runs)
        author: authors.Refusal | bool | None = False
        if due.run_at is not None and due.run_name is not None:
            author = await self._author(
                w.owner, w.namespace, capsule_name(w.spec.plan_template.spec)
            )
        out = decide.decide(w, before, runs, due, author, told)
        for name in out.deletes:
            await self.act.delete_run(w.namespace, name)
        if out.create is not None:
            if await self.act.create_run(w.namespace, out.create):
                decide.created_run(w, out, told)
            else:  # the name exists: ours (adopted), or squatted
                taken = await self.reads.plan(w.namespace, out.create["metadata"]["name"])
                decide.name_taken(w, out, taken, told)
        for name in decide.conclude(w, before, runs, due, out, self.archived, told):
            await self.act.delete_run(w.namespace, name)
        key = (plural, w.owner["metadata"].get("namespace") or "", w.name)
        self._count_kept(key, {w.namespace: out.kept})
        return out

    async def _author(
        self, owner: Obj, namespace: str, capsule: str
    ) -> authors.Refusal | bool | None:
        """The due run's author check under the namespace's Capsule: False when none is made
        (nothing recorded where no record is required), None when they may, else why not."""
        asked = authors.question(owner, capsule, self.require_author)
        if asked is None:
            return False
        if isinstance(asked, authors.Refusal):
            return asked
        allowed, why = await self.reads.may_use(asked, namespace, capsule)
        return authors.answered(owner, asked, namespace, capsule, allowed, why)

    async def judge(self, plural: str, obj: Obj) -> list[str]:
        """The admission webhook's verdict (handlers.webhook): the structure, the schedule and
        the run template, as `reconcile` judges them. A ScheduledPlan's template is judged with
        its namespace's Capsule; a ClusterScheduledPlan's without one (each namespace it runs in
        has its own: those checks wait for the runs). A missing Capsule is admitted, as for a
        Plan (GitOps applies in any order), and so is one that cannot be used, as for a Plan: the
        reconcile refuses it, saying why."""
        spec, _, errors = decide.structure(plural, obj)
        if spec is None:
            return errors
        namespace = (obj.get("metadata") or {}).get("namespace")
        return errors + await self.template_errors(spec, namespace, admit_missing=True)

    async def template_errors(
        self, spec: ScheduledPlanSpec, namespace: str | None, admit_missing: bool = False
    ) -> list[str]:
        """The run template, judged by the one judge with this namespace's Capsule (no
        namespace: none, and no refusal for it)."""
        found = decide.reserved(spec)
        if found:
            return found
        template = spec.plan_template.spec
        raw, targets = None, {}
        used: dict[tuple[str, str], Obj | None] = {}
        if namespace:
            raw = await self.reads.capsule(namespace, capsule_name(template))
            targets = await self.reads.targets(namespace, {"spec": template.dump()}, raw)
        if template.template_ref is not None:
            ref = template.template_ref
            if namespace or ref.kind == "ClusterPlanTemplate":
                used = await self.reads.templates(namespace or "", {"spec": template.dump()})
            else:  # each namespace its runs go to has its own: judged with the runs
                return []
        errors = await self.judge_.judge_template(template, raw, targets, used)
        return decide.template_errors(errors, admit_missing or not namespace)

    async def _write(self, obj: Obj, plural: str, cluster: bool, status: Obj, told: Told) -> None:
        await self.act.write_status(obj, plural, cluster, status)
        await self.act.tell(obj, told)

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
