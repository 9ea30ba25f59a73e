"""What a reconcile does: every write request of the reconcilers, and the one status writer.

One of the three reconciler modules that talk to the API client (with effects.reads and the
shells of reconcile.py: an import-linter contract keeps it so). It carries out what a pure
decision returned (effects.intents): the attempts' objects created (at most CREATE_CONCURRENCY
at once) with each answer read back as a `CreateAnswer` the decision takes (run.attempt_objects
says what an error means: adopt our own object, fail the attempt, or retry the reconcile); the
objects a stop, a stuck pod, a new run or retention deletes; the report's PlanReports; the
status; the Events and metrics. It decides nothing itself.

The status is written by `StatusWriter` alone, for the reconciler, the Capsule queue, retention
and the archive's marks: the whole status replaced with the resourceVersion it was decided from
as a precondition, so a write never replaces what another writer wrote meanwhile (the API server
answers 409 Conflict, ErrorKind.CONFLICT). The writer of a decision then reads the object again
and decides again (reconcile.py; `StatusWriter.change` for a change that is one function of the
status, such as the archive's mark).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

from prometheus_client import Counter, Gauge, Histogram

from planops import metrics
from planops.api import CapsuleSpec, PlanSpec, names
from planops.engine import Report, budget, capsule_name
from planops.kube import manifests
from planops.kube.api import KubeApi, ScheduleApi
from planops.kube.cache import RunObjects, WatchCache
from planops.kube.errors import ApiError, ErrorKind
from planops.kube.events import Poster, Recorder
from planops.reconciler.effects.bounded import bounded
from planops.reconciler.effects.files import FileMover
from planops.reconciler.effects.intents import (
    Create,
    CreateAnswer,
    Delete,
    MetricName,
    Told,
)
from planops.reconciler.history import chunks
from planops.reconciler.history.report_book import ReportBook
from planops.reconciler.run import attempt_objects
from planops.reconciler.run import status as status_
from planops.reconciler.run.observe import controller_uid

log = logging.getLogger("planops.reconciler")
Obj = dict[str, Any]

#: Jobs / child Plans created at once by one reconcile (a wide fan-out must not be created one by
#: one: the last step's dispatch latency would grow with the width of the plan).
CREATE_CONCURRENCY = 16
#: Jobs deleted at once
DELETE_CONCURRENCY = 16
#: Plans whose last write is remembered (the oldest forgotten first)
WRITES_KEPT = 20_000
#: tries of one status change (StatusWriter.change) before its conflict is raised
CHANGE_TRIES = 5

COUNTERS: Mapping[MetricName, Counter] = {
    "scheduled_runs": metrics.scheduled_runs,
    "runs_deleted_unarchived": metrics.runs_deleted_unarchived,
}
HISTOGRAMS: Mapping[MetricName, Histogram] = {
    "dispatch_latency": metrics.dispatch_latency,
}
#: the run and step metrics: counted under the Plan's tenant (metrics.Tenanted)
TENANT_COUNTERS: Mapping[MetricName, metrics.Tenanted[Counter]] = {
    "plans": metrics.plans,
    "steps": metrics.steps,
    "retries": metrics.retries,
    "calls_denied": metrics.calls_denied,
    "refusals": metrics.refusals,
}
TENANT_HISTOGRAMS: Mapping[MetricName, metrics.Tenanted[Histogram]] = {
    "plan_duration": metrics.plan_duration,
    "step_duration": metrics.step_duration,
}


def tenant(namespace: str, cname: str, capsule: CapsuleSpec | None) -> metrics.Tenant:
    """A Plan's tenant in the metrics: its namespace, and its Capsule's name only when the judge
    found that Capsule (`capsule`): a name no Capsule has (a Plan refused for it, its author's
    free text) is never a label value."""
    return (namespace, cname if capsule is not None else "")


@dataclass
class TenantGauge:
    """A gauge of the Plans' own numbers (steps in flight, waiting for a slot) summed by tenant:
    each Plan's number and tenant kept, each tenant's sum set when it changes (0 when it has
    none left: one series per tenant that had some)."""

    gauge: metrics.Tenanted[Gauge]
    _plans: dict[tuple[str, str], tuple[metrics.Tenant, int]] = field(default_factory=dict)
    _sums: dict[metrics.Tenant, int] = field(default_factory=dict)

    def set(self, key: tuple[str, str], n: int, tenant_: metrics.Tenant | None = None) -> None:
        """Plan `key`'s number is `n`, under `tenant_` (None: the one it had)."""
        old_tenant, old = self._plans.pop(key, (None, 0))
        if old_tenant is None and not n:
            return  # none before, none now
        tenant_ = tenant_ or old_tenant or (key[0], "")
        if old_tenant is not None:
            self._sums[old_tenant] -= old
        if n:
            self._plans[key] = (tenant_, n)
            self._sums[tenant_] = self._sums.get(tenant_, 0) + n
        if self.gauge.tenant_labels:
            for t in {tenant_, old_tenant} - {None}:
                assert t is not None
                self.gauge.of(t).set(self._sums.get(t, 0))
        else:
            self.gauge.of(metrics.NO_TENANT).set(sum(self._sums.values()))


@dataclass
class PlanGauges:
    """The gauges of the Plans' own numbers: their attempts in flight (planops_steps_running),
    and whether each waits for a slot in its Capsule's queue (planops_plans_waiting)."""

    waiting: TenantGauge = field(default_factory=lambda: TenantGauge(metrics.plans_waiting))
    _running: TenantGauge = field(default_factory=lambda: TenantGauge(metrics.steps_running))

    def running(self, key: tuple[str, str], n: int, tenant_: metrics.Tenant | None = None) -> None:
        """Plan `key` has `n` attempts in flight (0: it is gone or ended, and waits no more)."""
        self._running.set(key, n, tenant_)
        if not n:
            self.waiting.set(key, 0)


def conflict(e: BaseException) -> bool:
    """Whether an error is a write's precondition refused (read again, decide again)."""
    return isinstance(e, ApiError) and e.kind is ErrorKind.CONFLICT


class StatusApi(Protocol):
    """What the status writer asks of the API (kube.api.KubeApi's, and the archive's client)."""

    async def get_plan(self, namespace: str, name: str) -> Obj | None: ...
    async def patch_plan_status(
        self, namespace: str, name: str, status: Obj, resource_version: str | None = None
    ) -> Obj: ...


@dataclass
class StatusWriter:
    """The one writer of a Plan's status (the module's docstring)."""

    kube: StatusApi
    #: Plans as the watch shows them: what is written goes there (the next reconcile reads it)
    plans: WatchCache | None = None
    #: the resourceVersion of each Plan's last status write (own_write)
    _written: dict[tuple[str, str], str] = field(default_factory=dict)

    async def write(self, plan: Obj, new: Obj) -> Obj:
        """Replace the status of `plan` (as it was read) with `new`, unless nothing changed; a
        running plan's `duration` alone is no change (it is refreshed with the next real one and
        final when the plan ends). Returns the Plan as it stands after. Raises ApiError
        (CONFLICT) when the Plan changed since it was read: nothing is written then."""
        new = {k: v for k, v in new.items() if v is not None}
        old = plan.get("status") or {}
        if old == new or (
            not names.ended(new.get("phase"))
            and {**old, "duration": None} == {**new, "duration": None}
        ):
            return plan
        meta = plan["metadata"]
        version = meta.get("resourceVersion")
        written = await self.kube.patch_plan_status(
            meta["namespace"], meta["name"], new, str(version) if version else None
        )
        metrics.status_patches.inc()
        if self.plans is not None:  # the next reconcile starts from what was written
            self.plans.seen("MODIFIED", written)
        after = (written.get("metadata") or {}).get("resourceVersion")
        if after:
            self._written[(meta["namespace"], meta["name"])] = str(after)
            while len(self._written) > WRITES_KEPT:
                del self._written[next(iter(self._written))]  # the oldest
        return written

    async def change(
        self, namespace: str, name: str, change: Callable[[Obj], Obj | None]
    ) -> Obj | None:
        """Write `change(plan)`, the Plan's new status as a function of the Plan (None: nothing
        to write), read from the watch's cache (else the API); on a conflict read from the API
        and changed again, CHANGE_TRIES times at most. Returns the Plan as written, or None
        when it is gone or nothing was written."""
        plan = self.plans.get(namespace, name) if self.plans is not None else None
        for attempt in range(CHANGE_TRIES):
            if plan is None or attempt:
                plan = await self.kube.get_plan(namespace, name)
            if plan is None:
                return None
            new = change(plan)
            if new is None:
                return None
            try:
                return await self.write(plan, new)
            except ApiError as e:
                if not conflict(e) or attempt == CHANGE_TRIES - 1:
                    raise
                metrics.status_conflicts.inc()
        return None

    def own_write(self, namespace: str, name: str, version: str | None) -> bool:
        """Whether a Plan event shows exactly the object this reconciler last wrote (the same
        resourceVersion): its watch echoes every status write, and reconciling on the echo would
        only read again what was just decided."""
        key = (namespace, name)
        if version is None or self._written.get(key) != str(version):
            return False
        del self._written[key]
        return True

    def forget(self, namespace: str, name: str) -> None:
        self._written.pop((namespace, name), None)


@dataclass
class Actuator:
    kube: KubeApi
    status: StatusWriter
    #: Jobs and pods of runs as the watches show them: a created Job goes there at once
    runs: RunObjects | None = None
    #: posts the Events in the background (None: each reconcile posts its own)
    poster: Poster | None = None
    #: a decision's creates in flight at once
    create_concurrency: int = CREATE_CONCURRENCY
    #: makes the pods of steps that move files (None: such a step fails, saying why)
    files: FileMover | None = None

    # -- a run's attempts ----------------------------------------------------------------------

    async def create(
        self, ref: manifests.PlanRef, creates: list[Create], spec: PlanSpec
    ) -> list[CreateAnswer]:
        """Create each object; the answers in the same order. An error that may pass (a
        conflict, throttling, a server error) raises: the queue retries the reconcile, and the
        objects created meanwhile are adopted then (deterministic names)."""
        return await bounded([self._create(ref, c, spec) for c in creates], self.create_concurrency)

    async def _create(self, ref: manifests.PlanRef, c: Create, spec: PlanSpec) -> CreateAnswer:
        d = c.dispatch
        body = c.body
        if body is None:  # a capsule step's child Plan: its target Capsule's `plan`, read now
            # (a template step's is built by the decision, from the run's snapshot: run.core)
            target = await self.kube.get_capsule(ref.namespace, d.step.capsule or "")
            built = attempt_objects.child(ref, d, spec, target)
            if isinstance(built, str):
                return CreateAnswer(d, refusal=built)
            body = built
        elif c.files is not None:  # a step with results or artifacts: the collector's pod
            made = await self._files_pod(ref, c, spec, body)
            if isinstance(made, str):
                return CreateAnswer(d, refusal=made)
            body = made
        name = body["metadata"]["name"]
        if c.kind != "plan" and self._ours_cached(ref, name):
            return CreateAnswer(d)  # adopted: made by a reconcile whose status write failed
        try:
            if c.kind == "plan":
                await self.kube.create_plan(ref.namespace, body)
            else:
                job = await self.kube.create_job(ref.namespace, body)
                if self.runs is not None:  # the next reconcile sees it even before the watch
                    self.runs.seen("job", "ADDED", job)
        except ApiError as e:
            meaning = attempt_objects.create_refused(d.kind, e.kind, e.message)
            if meaning == "retry":
                raise
            if meaning != "adopt":
                return CreateAnswer(d, refusal=meaning)
            get = self.kube.get_plan if c.kind == "plan" else self.kube.get_job
            refusal = attempt_objects.squatter(ref, d.kind, name, await get(ref.namespace, name))
            return CreateAnswer(d, refusal=refusal)  # ours (made before a restart), or squatted
        return CreateAnswer(d, created=name)

    def _ours_cached(self, ref: manifests.PlanRef, name: str) -> bool:
        """Whether the watches already show this Plan's Job of that name: adopted without a
        create (AlreadyExists) and a read. A retried run that never wrote its start (the status
        write of a 20,000-step run timed out) otherwise sent both for every Job again."""
        held = self.runs.named("job", ref.namespace, name) if self.runs is not None else None
        return held is not None and controller_uid(held) == ref.uid

    async def _files_pod(
        self, ref: manifests.PlanRef, c: Create, spec: PlanSpec, body: Obj
    ) -> Obj | str:
        if self.files is None or c.files is None:
            return "this operator does not move results or artifacts (no collector image)"
        return await self.files.pod(ref, c.dispatch, c.files, capsule_name(spec), body)

    async def claim(self, namespace: str, body: Obj) -> None:
        """The workspace claim of a run: created once (AlreadyExists: it is there)."""
        try:
            await self.kube.create_pvc(namespace, body)
        except ApiError as e:
            if e.kind is not ErrorKind.ALREADY_EXISTS:
                raise

    async def delete(self, namespace: str, deletes: Iterable[Delete]) -> None:
        """Delete each object (one already gone is no error)."""
        remove = {
            "job": self.kube.delete_job,
            "plan": self.kube.delete_plan,
            "claim": self.kube.delete_pvc,
            "report": self.kube.delete_plan_report,
        }
        for d in deletes:
            await remove[d.kind](namespace, d.name)

    async def delete_jobs(self, namespace: str, names_: list[str], policy: str) -> None:
        """podGC: a run's Jobs collected (their pods go with them: Background)."""
        calls = [self.kube.delete_job(namespace, n) for n in names_]
        await bounded(calls, DELETE_CONCURRENCY)
        metrics.jobs_collected.labels(policy).inc(len(names_))

    async def patch_finalizers(self, plan: Obj, patch: Obj) -> Obj:
        """The Plan's finalizers (history.deletion's merge patch, with the resourceVersion it
        was read at: one changed since raises ApiError, CONFLICT). Returns the Plan after."""
        meta = plan["metadata"]
        return await self.kube.patch_plan(meta["namespace"], meta["name"], patch)

    async def delete_plan_as_seen(self, plan: Obj) -> None:
        """Delete the Plan as it was read (its uid and resourceVersion as preconditions): one
        changed since raises ApiError (CONFLICT), and is read and judged again."""
        meta = plan["metadata"]
        await self.kube.delete_plan_as_seen(
            meta["namespace"], meta["name"], str(meta["uid"]), str(meta["resourceVersion"])
        )

    # -- the report ----------------------------------------------------------------------------

    async def keep_records(self, ref: manifests.PlanRef, writes: list[chunks.Write]) -> None:
        """A replaced run's records, which its status held, written to PlanReports now (one a
        reconcile that crashed before its status created is there already)."""
        for w in writes:
            try:
                await self.kube.create_plan_report(
                    ref.namespace, chunks.body(ref, w.chunk, w.records)
                )
            except ApiError as e:
                if e.kind is not ErrorKind.ALREADY_EXISTS:
                    raise

    async def record(
        self,
        book: ReportBook,
        ref: manifests.PlanRef,
        report: Report,
        records: int,
        capsule: CapsuleSpec | None,
        previous: Obj,
    ) -> Report:
        """Write the records the run's PlanReports do not hold yet (the book's `writes`), before
        the status that counts them; returns the report with its records as written (what the
        summary repeats, what a restart restores) and what of them was cut (Report.cut)."""
        written = book.known(ref)
        if written is None:
            fresh = (previous.get("run") or {}).get("id") != ref.run
            listed = [] if fresh else await self._chunks(ref)
            written = book.started(ref) if fresh else book.listed(ref, previous, listed)
        limit = capsule.output_limit_bytes if capsule is not None else status_.RECORD_TEXT_LIMIT
        for again in (False, True):
            try:
                for w in book.writes(written, report.steps, records, limit):
                    await self._write_chunk(ref, w)
                    chunks.applied(written, w)
                break
            except ApiError as e:
                # a chunk there already, or a count its `test` did not find: read, write again
                if again or e.kind not in (ErrorKind.ALREADY_EXISTS, ErrorKind.INVALID):
                    book.forget((ref.namespace, ref.name))
                    raise
                written = book.relisted(ref, await self._chunks(ref))
        # what was cut, counted from the records as written: what a restarted operator restores
        steps = tuple(written.records)
        return replace(report, steps=steps, cut=budget.tally(steps))

    async def _write_chunk(self, ref: manifests.PlanRef, w: chunks.Write) -> None:
        if w.create:
            await self.kube.create_plan_report(ref.namespace, chunks.body(ref, w.chunk, w.records))
        else:
            name = chunks.chunk_name(ref.name, ref.run, w.chunk.index)
            await self.kube.patch_plan_report(ref.namespace, name, chunks.append_patch(w))

    async def _chunks(self, ref: manifests.PlanRef) -> list[Obj]:
        return await self.kube.list_plan_reports(ref.namespace, chunks.selector(ref))

    # -- Events and metrics --------------------------------------------------------------------

    async def tell(self, plan: Obj, told: Told, tenant_: metrics.Tenant | None = None) -> None:
        """A decision's Events posted (behind the reconcile, through the Poster) and logged, its
        metrics updated under the Plan's tenant (None: its namespace alone): once what it
        decided is written."""
        events = Recorder(self.kube, plan, self.poster)
        for e in told.events:
            events(e.reason, e.message, e.warning, e.post, **e.fields)
        count(told, tenant_ or (plan["metadata"]["namespace"], ""))
        await events.flush()


def count(told: Told, tenant_: metrics.Tenant = metrics.NO_TENANT) -> None:
    """A decision's metric updates, the run and step metrics' under `tenant_`."""
    for m in told.metrics:
        if m.observe:
            if m.name in TENANT_HISTOGRAMS:
                TENANT_HISTOGRAMS[m.name].of(tenant_, *m.labels).observe(m.value)
                continue
            histogram = HISTOGRAMS[m.name]
            (histogram.labels(*m.labels) if m.labels else histogram).observe(m.value)
        elif m.name in TENANT_COUNTERS:
            TENANT_COUNTERS[m.name].of(tenant_, *m.labels).inc(m.value)
        else:
            counter = COUNTERS[m.name]
            (counter.labels(*m.labels) if m.labels else counter).inc(m.value)


@dataclass
class ScheduleActuator:
    """What a ScheduledPlan's (or ClusterScheduledPlan's) reconcile does."""

    kube: ScheduleApi
    poster: Poster | None = None

    async def create_run(self, namespace: str, body: Obj) -> bool:
        """Create a scheduled run; False when its name is taken (AlreadyExists: whose it is is
        read and decided then). Anything else raises: the queue retries, the time stays due."""
        try:
            await self.kube.create_plan(namespace, body)
        except ApiError as e:
            if e.kind is not ErrorKind.ALREADY_EXISTS:
                raise
            return False
        return True

    async def delete_run(self, namespace: str, name: str) -> None:
        await self.kube.delete_plan(namespace, name)

    async def write_status(self, obj: Obj, plural: str, cluster: bool, status: Obj) -> None:
        """The schedule's status, replaced whole unless unchanged, with the resourceVersion it
        was decided from as a precondition (CONFLICT: read again, decide again)."""
        if (obj.get("status") or {}) == status:
            return
        meta = obj["metadata"]
        version = meta.get("resourceVersion")
        await self.kube.patch_status(
            plural,
            None if cluster else meta["namespace"],
            meta["name"],
            status,
            str(version) if version else None,
        )

    async def tell(self, obj: Obj, told: Told) -> None:
        events = Recorder(self.kube, obj, self.poster)
        for e in told.events:
            events(e.reason, e.message, e.warning, e.post, **e.fields)
        count(told)
        await events.flush()
