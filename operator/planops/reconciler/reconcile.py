"""The reconciles: read -> decide -> act, for a Plan (Reconciler) and a ScheduledPlan or
ClusterScheduledPlan (ScheduleReconciler).

Level-based: everything is derived from the object (its spec and status) and the objects of its
current run, read each time (from the watches' caches when they hold them). Nothing lives only in
memory, so a restarted operator resumes exactly where it was: the same deterministic names make a
repeated create an adoption, never a second Job. The shells only string the pieces together:
effects.reads reads, the pure decisions decide (run.life for each path of a Plan's life, run.core
for its run's advance, queue.admission, history.replacing, history.retention, schedules.decide),
effects.actuator acts, and the status is written once per decision by the one status writer, with
the resourceVersion it was decided from as a precondition. A write refused because the object
changed since it was read (a Conflict: a user's annotation, the archive's mark) is no error: the
object is read again from the API and decided again (CONFLICT_ROUNDS times at most; then the queue
retries).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from planops import metrics
from planops.engine import (
    OPERATOR_BUDGET_SECONDS,
    Budget,
    Facts,
    Policy,
    capsule_name,
    finally_steps,
)
from planops.engine.keeping import Kept
from planops.kube import manifests
from planops.kube.api import KubeApi, ScheduleApi
from planops.kube.cache import RunObjects, WatchCache
from planops.kube.client import ApiError
from planops.kube.errors import ErrorKind
from planops.kube.events import Poster
from planops.reconciler.effects import actuator as actuator_
from planops.reconciler.effects.actuator import Actuator, ScheduleActuator, StatusWriter, conflict
from planops.reconciler.effects.files import FileMover
from planops.reconciler.effects.intents import Told
from planops.reconciler.effects.reads import Reads, RunRead, ScheduleReads
from planops.reconciler.effects.stored_logs import StoredLogs
from planops.reconciler.history import chunks, earlier, replacing, retention, run_history
from planops.reconciler.history.report_book import ReportBook
from planops.reconciler.history.retention import Archived
from planops.reconciler.queue import admission, slots, standing
from planops.reconciler.run import authors, core, identity, life, retrying, templating
from planops.reconciler.run import status as status_
from planops.reconciler.run.judging import Judge, Judgement, capsule_named
from planops.reconciler.run.kept_runs import Basis, KeptRuns, written_as_run
from planops.reconciler.schedules.shell import Schedules

__all__ = ["CONFLICT_ROUNDS", "Reconciler", "ScheduleReconciler"]
log = logging.getLogger("planops.reconciler")
Obj = dict[str, Any]
#: the templates a plan runs, as read (effects.reads.templates); None: not read yet
Used = dict[tuple[str, str], Obj | None] | None
#: reads and decisions of one reconcile whose status write found the object changed
CONFLICT_ROUNDS = 3
#: the validator's own time budget, unless one is given (None: no budget)
DEFAULT_BUDGET = Budget(0.0, time.monotonic)


@dataclass
class Reconciler:
    kube: KubeApi
    policy: Policy = field(default_factory=Policy)
    clock: Callable[[], float] = time.time
    #: one validation's time budget (a huge plan is refused, not judged without end)
    budget: Budget | None = field(
        default_factory=lambda: Budget(OPERATOR_BUDGET_SECONDS, time.monotonic)
    )
    #: each Plan's attempts in flight and whether it waits for a slot (gauges by tenant)
    _gauges: actuator_.PlanGauges = field(default_factory=actuator_.PlanGauges)
    #: Capsules as the watch shows them (handlers.capsule_event); None: always ask the API
    capsules: WatchCache | None = None
    #: Plans as the watch shows them, and as this reconciler last wrote them (handlers.plan_event)
    plans: WatchCache | None = None
    #: Jobs and pods of runs as the watches show them (handlers.job_event / pod_event)
    runs: RunObjects | None = None
    #: the archive is on: runs not archived yet stay in status.history past historyLimit
    archive: bool = False
    #: posts the Events in the background (None: each reconcile posts its own)
    poster: Poster | None = None
    #: records per PlanReport chunk, and records repeated in the status (operator flags)
    chunk_records: int = chunks.CHUNK_RECORDS
    status_records: int = status_.STATUS_RECORDS
    #: a decision's creates in flight at once (Actuator.create)
    create_concurrency: int = actuator_.CREATE_CONCURRENCY
    #: bytes of earlier runs' PlanReports kept per Plan (run_history.within_budget)
    history_report_bytes: int | None = None
    #: runs checked for their author need a recorded one (the chart records authors)
    require_author: bool = False
    #: retention (history.retention): the operator's TTL; the archive's question, when on
    default_ttl: int | None = None
    archived: Archived = None
    store: StoredLogs | None = None  # the artifact repository's writes (effects.stored_logs)
    files: FileMover | None = None  # the pods of steps that move files (effects.files)
    _reads: Reads = field(init=False)
    _status: StatusWriter = field(init=False)
    _act: Actuator = field(init=False)
    #: parses and validates Plans, and keeps the verdicts (shared with the admission webhook)
    _judge: Judge = field(init=False)
    #: one admission decision at a time per Capsule (queue.admission)
    _gate: admission.Gate = field(init=False, default_factory=admission.Gate)
    #: what each running Plan's PlanReports hold
    _book: ReportBook = field(init=False)
    #: each running Plan's Run as the last reconcile left it (run.kept_runs, engine.keeping)
    _kept: KeptRuns = field(init=False, default_factory=KeptRuns)
    #: the runs whose workspace claim this replica made (once per run)
    _claimed: set[tuple[str, str, str]] = field(init=False, default_factory=set)

    def __post_init__(self) -> None:
        self._reads = Reads(self.kube, self.clock, self.plans, self.capsules, self.runs, self.store)
        self._status = StatusWriter(self.kube, self.plans)
        self._act = Actuator(
            self.kube, self._status, self.runs, self.poster, self.create_concurrency, self.files
        )
        self._judge = Judge(self.policy, self.budget)
        self._book = ReportBook(self.chunk_records, self.status_records)

    async def reconcile(self, namespace: str, name: str) -> float | None:
        """One reconcile; returns seconds until the Plan must be looked at again without an event
        (an ask's deadline, a TTL), or None."""
        started = time.perf_counter()
        try:
            for round_ in range(CONFLICT_ROUNDS):
                try:
                    return await self._reconcile(namespace, name, fresh=round_ > 0)
                except ApiError as e:
                    if not conflict(e) or round_ == CONFLICT_ROUNDS - 1:
                        raise
                    metrics.status_conflicts.inc()  # read again, decide again
            return None  # (never reached: the last round raises)
        except ApiError:
            metrics.reconcile_errors.labels("api").inc()
            raise
        except Exception:
            metrics.reconcile_errors.labels("unexpected").inc()
            raise
        finally:
            metrics.reconcile_duration.observe(time.perf_counter() - started)

    async def _reconcile(self, namespace: str, name: str, *, fresh: bool) -> float | None:
        """Read -> decide -> act, along the Plan's path (run.life)."""
        plan = await self._reads.plan(namespace, name, fresh=fresh)
        if (v := life.view(plan, self.clock())) is None:  # gone, or being deleted: its objects
            self._gauges.running((namespace, name), 0)
            return await self._reads.deleted(plan)
        if v.finished:
            return await self._retain(v)
        told = v.told
        used = await self._reads.run_templates(v.plan, v.ref.run, fresh=v.fresh)
        judged = await self.judge(v.plan, reuse=True, templates=used)
        tenant = actuator_.tenant(namespace, capsule_named(v.plan), judged[1])
        seed = await self._seed(v, judged, told)
        if isinstance(seed, retrying.Refused):  # a retry refused: the ended run stays
            await self._stop(v.plan, life.Stop(seed.status, told), tenant)
            return None
        previous = v.status
        if v.fresh:
            previous = life.new_run_status(previous, await self._replace(v))
            self._reads.trust(v.key)  # nothing yet; its creations are written back
        spec, capsule, errors = judged
        if errors:
            await self._stop(v.plan, life.invalid(v, previous, errors, told), tenant)
            return None
        assert spec is not None and capsule is not None
        recorded, refusal = templating.recorded(previous, v.plan, v.ref.run, used), None
        if used and life.starts(v, recorded):  # may its author read the template it runs?
            refusal = await self._reads.template_refusal(v.plan, used, self.require_author)
        previous = recorded if refusal is None else previous  # one it may not: never shown
        if refusal is None and life.asks_author(v, previous):
            refusal = await self._author(v.plan, v.ref.namespace, capsule_name(spec))
        if refusal is not None:
            await self._stop(v.plan, life.author_refused(v, previous, refusal, told), tenant)
            return None
        decided, plan = await self._admit(v, previous, judged, told)
        self._gauges.waiting.set(v.key, int(decided.admission == "waits"), tenant)
        if decided.admission in ("waits", "refused"):  # for a slot, or no longer allowed
            await self._act.tell(v.plan, told, tenant)
            return None
        run_info = v.run_info
        if life.starts(v, previous) or decided.admission == "admitted":
            run_info = life.plan_started(v, judged, told)
        admitted = decided.admission != "cancelled"
        situation, kept = await self._situation(v, previous, judged, run_info, seed, admitted)
        return await self._advance(plan, situation, kept, told, tenant)

    # -- the paths before a run advances --------------------------------------------------------

    async def _stop(self, plan: Obj, stop: life.Stop, tenant: metrics.Tenant) -> None:
        """A decision that ends the reconcile: its status written, its Events told."""
        meta = plan["metadata"]
        self._gauges.waiting.set((meta["namespace"], meta["name"]), 0)
        await self._status.write(plan, stop.status)
        await self._act.tell(plan, stop.told, tenant)

    async def _retain(self, v: life.PlanView) -> float | None:
        """A finished run: its retention (history.retention), and nothing of its run read again."""
        self._gauges.running(v.key, 0)
        self._close(v.ref)
        plan, now = v.plan, v.now
        parent, children, jobs = retention.wants(plan, now, self.default_ttl, self.archived)
        read = retention.Read(
            await self._reads.parent(plan) if parent else None,
            tuple(await self._reads.children(v.ref)) if children else (),
            tuple(await self._reads.run_jobs(v.ref)) if jobs else (),
        )
        retain = retention.decide(plan, now, self.default_ttl, self.archived, read)
        if retain.note:
            log.info("%s/%s: %s", *v.key, retain.note)
        if retain.delete is not None:
            await self._act.delete_plan_as_seen(plan)  # changed since: read again, decided again
            await self._reads.forget_plan(plan)  # its stored logs and artifacts go with it
            if retain.delete == "ttl":
                metrics.plans_deleted_by_ttl.inc()
            await self._act.tell(plan, v.told)
            return None
        if retain.mark:
            await self._act.delete_jobs(v.ref.namespace, list(retain.collect), retain.policy)
        status = retention.collected(v.status) if retain.mark else v.status
        try:
            await self._status.write(plan, status)
        except ApiError as e:
            if e.kind is not ErrorKind.NOT_FOUND:  # gone meanwhile: nothing to mark
                raise
        await self._act.tell(plan, v.told)
        return retain.wake

    async def _seed(
        self, v: life.PlanView, judged: Judgement, told: Told
    ) -> Facts | retrying.Refused:
        """What the run starts from (run.retrying.seed), the run it retries read first."""
        of = retrying.retried(v.choice, v.status)
        spec, _, errors = judged
        retried = None
        if of is not None and spec is not None and not errors:
            ns = v.ref.namespace
            if v.choice.reseed:  # from the history: the retried run has been replaced since
                found = await earlier.earlier_run(self.kube, v.plan, of)
                if found is not None:
                    resolver = await self._reads.capsule_plans(ns, spec)
                    retried = retrying.Earlier.of_status(found, resolver)
            else:
                records, completed, exited = await self._reads.earlier_records(v.ref, v.status)
                resolver = await self._reads.capsule_plans(ns, spec)
                retried = retrying.Earlier(records, completed, exited, resolver)
        return retrying.seed(v.choice, v.status, judged, retried, told)

    async def _replace(self, v: life.PlanView) -> list[Obj] | None:
        """A new run replaces the one the status holds (history.replacing): the replaced run's
        records its status held written out, the other runs' objects read, their history and
        what to delete decided, and deleted. Returns the new run's history."""
        if not replacing.needed(v.status, v.generation, v.rerun):
            history: list[Obj] | None = v.status.get("history")
            return history
        rep = replacing.begin(v.plan, v.status, v.ref, v.now, archive=self.archive)
        if rep.old is not None:
            await self._act.keep_records(rep.old, rep.writes)
        other = await self._reads.other_runs(v.ref, rep.same_id)
        history, deletes = replacing.finish(
            rep,
            other,
            archive=self.archive,
            budget=self.history_report_bytes,
            archived=self.archived,
        )
        await self._act.delete(v.ref.namespace, deletes)
        await self._reads.forget_runs(v.plan, rep.dropped, rep.new_run, self.archive)
        return history

    async def _author(self, obj: Obj, namespace: str, capsule: str) -> authors.Refusal | None:
        """Whether the object's recorded author may still use the Capsule (effects.reads)."""
        return await self._reads.capsule_refusal(obj, namespace, capsule, self.require_author)

    async def _admit(
        self, v: life.PlanView, previous: Obj, judged: Judgement, told: Told
    ) -> tuple[admission.Decided, Obj]:
        """The run's admission on its Capsule (queue.admission): read, decided and written one
        at a time per Capsule; a slot taken is written before the run creates anything. Returns
        the decision and the Plan as it stands after."""
        spec, capsule, _ = judged
        assert spec is not None and capsule is not None
        plan, ns, run = v.plan, v.ref.namespace, v.run_info
        limited: frozenset[str] = frozenset()
        if capsule.concurrency:
            limited = await self._reads.limited(ns, set(slots.exemption(plan)))
        need = admission.need(plan, previous, capsule, run, limited)
        cname = capsule_name(spec)
        asked = admission.Asked(plan, previous, run, cname, finally_steps.step_count(spec), v.now)
        if need == "start":
            asked = replace(asked, refusal=await self._author(plan, ns, cname))
        if need != "queue":
            decided = admission.decide(need, asked, told)
            if decided.status is not None:
                plan = await self._status.write(plan, decided.status)
            return decided, plan
        assert capsule.concurrency is not None
        async with self._gate.held(ns, cname):
            place = await self._place(plan, ns, cname, capsule.concurrency.max_running_plans, run)
            asked = replace(asked, verdict=place)
            if place.admitted and admission.queued(plan, previous, cname, run):
                asked = replace(asked, refusal=await self._author(plan, ns, cname))
            decided = admission.decide(need, asked, told)
            if decided.status is not None:
                plan = await self._status.write(plan, decided.status)
        return decided, plan

    async def _place(
        self, plan: Obj, namespace: str, capsule: str, limit: int, run: Obj
    ) -> slots.QueuePlace:
        """The run's place in its Capsule's queue: from the watch's cache when it says to wait (a
        stale cache can only show a slot still held that has been freed, and the event that freed
        it wakes the waiting Plans again), else from a list (the truth before a slot is taken)."""
        joined = slots.queued_at(plan, str(run["id"]), self.clock())
        found = None
        if self.plans is not None:
            cached = standing.standing(self.plans, namespace, capsule)
            limited = await self._reads.limited(namespace, cached.lineage_capsules())
            found = cached.verdict(plan, limit, limited, joined)
        if found is None or found.admitted:
            listed = standing.Standing.of(await self._reads.capsule_queue(namespace, capsule))
            limited = await self._reads.limited(namespace, listed.lineage_capsules())
            found = listed.verdict(plan, limit, limited, joined)
        return found

    # -- the run's advance ----------------------------------------------------------------------

    async def _situation(
        self,
        v: life.PlanView,
        previous: Obj,
        judged: Judgement,
        run_info: Obj,
        seed: Facts,
        admitted: bool,
    ) -> tuple[core.Situation, Kept | None]:
        """What the run's advance decides from: its facts read (effects.reads), or the seed a new
        run starts from (life.seeded); and the Run the last reconcile kept, when it was kept
        with the same basis (run.kept_runs)."""
        spec, capsule, _ = judged
        assert spec is not None and capsule is not None
        ref, key = v.ref, v.key
        read, kept = RunRead(seed, [], False), None
        if life.seeded(v):
            self._kept.drop(key)
        else:
            written = self._book.known(ref)
            if written is None:
                written = self._book.listed(ref, previous, await self._reads.report_chunks(ref))
            read = await self._reads.run(ref, spec, capsule, previous, written)
            version = v.meta.get("resourceVersion")
            basis = Basis(ref.uid, ref.run, v.generation, version, spec, capsule, written)
            kept = self._kept.take(key, basis)  # used only if the facts line up (core)
        claim, _ = identity.claim(ref, spec)
        situation = core.Situation(
            ref=ref,
            spec=spec,
            capsule=capsule,
            policy=self.policy,
            facts=read.facts,
            observed=read.observed,
            previous=previous,
            run_info=run_info,
            annotations=v.annotations,
            claim=claim,
            now=v.now,
            started_at=status_.parse_rfc3339(str(run_info["startedAt"])) or v.now,
            later=read.later,
            status_records=self.status_records,
            admitted=admitted,
            stderr_in_output=read.merged,
        )
        return situation, kept

    async def _advance(
        self, plan: Obj, s: core.Situation, kept: Kept | None, told: Told, tenant: metrics.Tenant
    ) -> float | None:
        """The run advances (run.core): decided, created (the answers decided again), stopped
        attempts deleted, the report and the status written, the Events told. The core decides
        in a worker thread: pure CPU work that grows with the plan (restoring its run, judging
        answers, tool inputs against their schemas) would hold the event loop, which serves
        every other Plan, the webhook and the health probe (one reconcile per Plan at a time:
        no state is shared); a light plan's on the loop (core.light: cheaper than a thread)."""
        ref, key = s.ref, (s.ref.namespace, s.ref.name)
        light, thread = core.light(s.spec), asyncio.to_thread
        step = core.plan_step(s, kept) if light else await thread(core.plan_step, s, kept)
        creates = step.decide() if light else await thread(step.decide)
        while step.answer(await self._create(ref, s.spec, creates)):
            creates = step.decide() if light else await thread(step.decide)
        await self._act.delete(ref.namespace, step.deletes())
        own = step.run.report()
        report = await self._act.record(self._book, ref, own, step.records, s.capsule, s.previous)
        intents = step.conclude(report, self._book.chunks(key))
        self._gauges.running(key, intents.running, tenant)
        written = await self._status.write(plan, run_history.carried(intents.status, s.previous))
        await self._act.tell(plan, told.then(intents.told), tenant)
        if intents.closes:
            self._close(ref)
        elif written_as_run(own.steps, report.steps, len(s.facts.settled)):
            # written: the next reconcile of this run may start from this Run (run.kept_runs)
            keep = step.keep()
            if keep is not None:
                version = (written.get("metadata") or {}).get("resourceVersion")
                generation = int(s.run_info["generation"])
                held = self._book.held(key)
                basis = Basis(ref.uid, ref.run, generation, version, s.spec, s.capsule, held)
                self._kept.put(key, basis, keep)
        # podGC: the Jobs of steps settled, now that the status records them
        if retention.pod_gc(plan) == retention.ON_STEP and s.observed:
            jobs = retention.settled_jobs(s.observed, {r.step_id for r in report.steps})
            if jobs:
                await self._act.delete_jobs(ref.namespace, jobs, retention.ON_STEP)
        if intents.closes and retention.wants_a_look(plan, self.default_ttl):
            return 0.0  # the run's end: its retention (its own status write wakes nothing)
        return intents.wake

    async def _create(self, ref: manifests.PlanRef, spec: Any, creates: list[Any]) -> list[Any]:
        """The decision's creates, the run's workspace claim first (once per run, with its first
        Jobs: identity.claim)."""
        _, body = identity.claim(ref, spec)
        run = (ref.namespace, ref.name, ref.run)
        if body is not None and run not in self._claimed and any(c.kind == "job" for c in creates):
            await self._act.claim(ref.namespace, body)
            self._claimed.add(run)
        return await self._act.create(ref, creates, spec)

    # -- the webhook's judgement, and what the handlers tell ------------------------------------

    async def judge(self, plan: Obj, *, reuse: bool = False, templates: Used = None) -> Judgement:
        """The one judgement of a Plan object (run.judging), for the reconcile and the admission
        webhook: its Capsule and targets (the watch's cache first), its template (given or read)."""
        namespace = plan["metadata"]["namespace"]
        raw = await self._reads.capsule(namespace, capsule_named(plan))
        targets = await self._reads.targets(namespace, plan, raw)
        if templates is None:
            templates = await self._reads.templates(namespace, plan)
        return await self._judge.judge(plan, raw, targets, reuse=reuse, templates=templates)

    def _close(self, ref: manifests.PlanRef) -> None:
        """The run ended: its Jobs and pods are not read again (RunObjects.close)."""
        self._reads.close(ref)
        self._book.forget((ref.namespace, ref.name))
        self._kept.drop((ref.namespace, ref.name))
        self._claimed.discard((ref.namespace, ref.name, ref.run))

    def check_all(self) -> None:
        """Trust no cached run (this replica starts leading: list each run once first)."""
        self._reads.check_all()
        self._book.clear()
        self._kept.clear()
        self._claimed.clear()

    def check(self, namespace: str, name: str) -> None:
        """The resync's look: the next reconcile of this Plan lists its run's objects instead
        of trusting the cache, unless the run was listed too recently for what its list costs
        (Reads.resync)."""
        self._reads.resync((namespace, name))

    def own_write(self, namespace: str, name: str, version: str | None) -> bool:
        return self._status.own_write(namespace, name, version)

    def forget(self, namespace: str, name: str) -> None:
        self._status.forget(namespace, name)
        self._reads.check((namespace, name))
        self._book.forget((namespace, name))
        self._kept.drop((namespace, name))
        self._claimed = {c for c in self._claimed if c[:2] != (namespace, name)}


class ScheduleReconciler(Schedules):
    """The reconcile of ScheduledPlans and ClusterScheduledPlans (schedules.shell), with what it
    reads and does through `kube`."""

    def __init__(
        self,
        kube: ScheduleApi,
        policy: Policy | None = None,
        clock: Callable[[], float] = time.time,
        budget: Budget | None = DEFAULT_BUDGET,
        poster: Poster | None = None,
        require_author: bool = False,
        archived: Archived = None,
    ) -> None:
        if budget is DEFAULT_BUDGET:
            budget = Budget(OPERATOR_BUDGET_SECONDS, time.monotonic)
        super().__init__(
            ScheduleReads(kube),
            ScheduleActuator(kube, poster),
            Judge(policy or Policy(), budget),
            clock,
            require_author,
            archived,
        )
