"""One reconcile of one Plan: observe -> facts -> the engine's decision -> act -> one status patch.

Level-based: everything is derived from the Plan (its spec and status) and the objects of its
current run (Jobs, their pods, child Plans), read from the API each time (the Plan and its
Capsule come from the watch's cache, the Plan as last written by this reconciler or seen since).
Nothing lives only in memory, so a restarted operator resumes exactly where it was: the same
deterministic names make a repeated create an adoption, never a second Job.

The decisions are not here: `planops.engine.Run` holds the scheduling rules, and
reconciler.core decides a reconcile as a pure function of what it read (intents: the objects
to create or delete, the status, Events, metrics, the next wake-up), which reconciler.actuator
carries out. This module is the pipeline around them: judging (parse, validate, the verdicts),
reading (the run's facts), runs (the run's identity and its objects besides attempts), the
core and the actuator, the report (reporting) and the status write (writing).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from planops import metrics
from planops.api import names
from planops.api.names import Phase
from planops.engine import (
    OPERATOR_BUDGET_SECONDS,
    Budget,
    Policy,
    capsule_name,
    finally_steps,
)
from planops.kube import manifests
from planops.kube.api import KubeApi
from planops.kube.cache import RunObjects, WatchCache
from planops.kube.client import ApiError
from planops.kube.events import Poster, Recorder
from planops.reconciler.effects import actuator
from planops.reconciler.effects.writing import StatusWriter
from planops.reconciler.history import chunks as reports_
from planops.reconciler.history import replacing as earlier_runs
from planops.reconciler.history import run_history
from planops.reconciler.history.collecting import Archived, Retainer
from planops.reconciler.history.report_book import ReportBook
from planops.reconciler.queue import admission, slots
from planops.reconciler.run import authors, core, retrying
from planops.reconciler.run import identity as plan_runs
from planops.reconciler.run import status as status_
from planops.reconciler.run.judging import Judge, Verdict
from planops.reconciler.run.kept_runs import Basis, KeptRuns, written_as_run
from planops.reconciler.run.observe import Observed
from planops.reconciler.run.reading import RunReader

log = logging.getLogger("planops.reconciler")


@dataclass
class Reconciler:
    kube: KubeApi
    policy: Policy = field(default_factory=Policy)
    clock: Callable[[], float] = time.time
    #: one validation's time budget (a huge plan is refused, not judged without end)
    budget: Budget | None = field(
        default_factory=lambda: Budget(OPERATOR_BUDGET_SECONDS, time.monotonic)
    )
    #: verdicts of judge(reuse=True) by (uid, generation, Capsule name, Capsule version)
    #: attempts in flight per plan, for the planops_steps_running gauge (their sum)
    _running: dict[tuple[str, str], int] = field(default_factory=dict)
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
    #: the resourceVersion of each Plan's last status write (own_write)
    #: records per PlanReport chunk, and records repeated in the status (operator flags)
    chunk_records: int = reports_.CHUNK_RECORDS
    status_records: int = status_.STATUS_RECORDS
    #: a decision's creates in flight at once (actuator.create)
    create_concurrency: int = actuator.CREATE_CONCURRENCY
    #: bytes of earlier runs' PlanReports kept per Plan (run_history.within_budget)
    history_report_bytes: int | None = None
    #: runs checked for their author need a recorded one (the chart records authors)
    require_author: bool = False
    #: retention (reconciler.collecting): the operator's TTL; the archive's question, when on
    default_ttl: int | None = None
    archived: Archived = None
    #: what each running Plan's PlanReports hold, and the one writer of them
    _reports: ReportBook = field(init=False)
    #: what a reconcile reads of its run (Jobs, pods, child Plans, outputs), and when the
    #: watch cache is trusted for it
    _reader: RunReader = field(init=False)

    #: parses and validates Plans, and keeps the verdicts (shared with the admission webhook)
    _judge: Judge = field(init=False)
    #: the one status write per reconcile, and the echo of it on the watch
    _status: StatusWriter = field(init=False)
    #: who may run on a Capsule with a concurrency limit (reconciler.admission)
    _gate: admission.Gate = field(init=False)
    #: a finished run's TTL and its Jobs' collection (podGC)
    _retain: Retainer = field(init=False)
    #: each running Plan's Run as the last reconcile left it (reconciler.kept, engine.keeping)
    _kept: KeptRuns = field(init=False, default_factory=KeptRuns)

    def __post_init__(self) -> None:
        self._judge = Judge(self.kube, self.policy, self.budget, self.capsules)
        self._status = StatusWriter(self.kube, self.plans)
        self._gate = admission.Gate(self.kube, self._status, self.plans, self.capsules)
        self._reports = ReportBook(self.kube, self.chunk_records, self.status_records)
        self._reader = RunReader(self.kube, self.clock, self.runs)
        self._retain = Retainer(self.kube, self.clock, self.default_ttl, self.archived, self.plans)

    def _set_running(self, key: tuple[str, str], n: int) -> None:
        if n:
            self._running[key] = n
        else:
            self._running.pop(key, None)
        metrics.steps_running.set(sum(self._running.values()))

    async def reconcile(self, namespace: str, name: str) -> float | None:
        """One reconcile; returns seconds until the Plan must be looked at again without an event
        (an ask's deadline), or None."""
        started = time.perf_counter()
        try:
            return await self._reconcile(namespace, name)
        except ApiError:
            metrics.reconcile_errors.labels("api").inc()
            raise
        except Exception:
            metrics.reconcile_errors.labels("unexpected").inc()
            raise
        finally:
            metrics.reconcile_duration.observe(time.perf_counter() - started)

    async def _reconcile(self, namespace: str, name: str) -> float | None:
        plan = self.plans.get(namespace, name) if self.plans else None
        if plan is None:  # not seen on the watch (yet): ask
            plan = await self.kube.get_plan(namespace, name)
        if plan is None or plan["metadata"].get("deletionTimestamp"):
            self._set_running((namespace, name), 0)
            return None
        meta, previous = plan["metadata"], plan.get("status") or {}
        if slots.is_child(plan):  # no re-run, no retry: its runs are its parent's
            told = Recorder(self.kube, plan, self.poster)
            meta, previous = await retrying.child_requests(plan, previous, self._status, told)
        generation = int(meta.get("generation", 1))
        rerun = (meta.get("annotations") or {}).get(manifests.ANNOTATION_RERUN, "")
        choice = retrying.choose(meta, previous, generation, rerun)
        rid = choice.rid
        ref = plan_runs.plan_ref(namespace, name, meta, rid)
        fresh = (previous.get("run") or {}).get("id") != rid
        # A run is its author's act only when it is the first run of what they just wrote (a new
        # Plan, a new generation) and no re-run is asked for: the API server checked their `use`
        # then. Any other start (a re-run set, changed or removed; a run that waited as Invalid
        # for its Capsule) is made later on their behalf: their `use` is asked first (authors).
        before = previous.get("run") or {}
        written_now = fresh and not rerun and (not before or before.get("generation") != generation)
        if not fresh and names.ended(previous.get("phase")):
            self._set_running((namespace, name), 0)
            self._close(ref)
            return await self._retain.finished(plan, ref)  # its TTL, its Jobs (podGC)
        events = Recorder(self.kube, plan, self.poster)
        now = self.clock()
        run_info = {
            "id": rid,
            "generation": generation,
            "rerun": retrying.token_of(rerun) or None,  # bounded: an annotation may be 256 KiB
            "startedAt": (previous.get("run") or {}).get("startedAt") if not fresh else None,
            # the Capsule it runs under, recorded as it starts (the archive's row reads it: the
            # Plan's may change before the row is written)
            "capsule": ((previous.get("run") or {}).get("capsule") if not fresh else None)
            or slots.capsule_of(plan),
        }
        run_info["startedAt"] = run_info["startedAt"] or status_.rfc3339(now)
        run_info.update(choice.info)
        seed = await retrying.seed(self.kube, self.judge, self._status, plan, choice, events)
        if seed is None:  # a retry refused (an Event and the status say why)
            return None
        if fresh:
            # Run ids derive from (uid, generation, re-run): a first generation that never ran
            # and was never re-run has no other run to stop (three lists saved per new Plan).
            history = previous.get("history")
            if previous.get("run") or generation > 1 or rerun:
                history = await earlier_runs.start(
                    self.kube,
                    ref,
                    plan,
                    previous,
                    now,
                    archive=self.archive,
                    budget=self.history_report_bytes,
                    archived=self.archived,
                )
            previous = {"conditions": previous.get("conditions", []), "history": history or None}
            self._reader.trust((namespace, name))  # nothing yet; its creations are written back
        spec, capsule, errors = await self.judge(plan, reuse=True)
        if errors:
            if previous.get("phase") != Phase.INVALID:
                for e in errors:
                    metrics.refusals.labels(e.code).inc()
                metrics.plans.labels("invalid").inc()
                events(
                    "ValidationFailed",
                    f"{len(errors)} error(s), nothing runs: "
                    + "; ".join(str(e) for e in errors[:5]),
                    warning=True,
                )
            new = status_.invalid(
                errors, generation=generation, run=run_info, previous=previous, now=now
            )
            await self._write(plan, previous, new)
            await events.flush()
            return None
        assert spec is not None and capsule is not None
        starts = fresh or previous.get("phase") == Phase.INVALID

        async def may_start() -> bool:  # started for the recorded author: may they still?
            why = await authors.refusal(
                self.kube, plan, namespace, capsule_name(spec), self.require_author
            )
            if why:
                what = f"re-run {retrying.token_of(rerun)}" if rerun else f"run {rid}"
                events(authors.reason(why), f"{what} not started: {why}", warning=True)
                new = authors.refused_run_status(
                    why, generation=generation, run=run_info, previous=previous, now=now
                )
                await self._write(plan, previous, new)
            return not why

        if starts and not written_now and not await may_start():
            await events.flush()
            return None
        # a run that waited for a slot is asked again as it takes one (reconciler.admission)
        gate = await self._gate.admit(
            plan, previous, spec, capsule, run_info, events, now, may_start
        )
        if gate in ("waits", "refused"):  # for a slot of its Capsule, or no longer allowed
            await events.flush()
            return None
        if starts or gate == "admitted":
            # the run starts now: the time it waited as Invalid (for its Capsule) is not its own
            run_info["startedAt"] = status_.rfc3339(now)
            events(
                "PlanStarted",
                f"run {rid} of generation {generation}: {finally_steps.step_count(spec)} steps",
                run=rid,
                generation=generation,
            )

        claim = await plan_runs.workspace(self.kube, ref, spec)
        key, kept = (namespace, name), None
        observed: list[Observed]
        if fresh or choice.reseed:
            # A run the status does not know has dispatched nothing that needs observing: an
            # object a crashed reconcile created before its status write has the name the next
            # dispatch creates, and that create adopts it (AlreadyExists).
            facts, observed, later = seed, [], False
            self._kept.drop(key)
        else:
            written = await self._reports.written(ref, previous)
            facts, observed, later = await self._reader.facts(ref, spec, capsule, previous, written)
            basis = Basis(
                ref.uid, rid, generation, meta.get("resourceVersion"), spec, capsule, written
            )
            kept = self._kept.take(key, basis)  # used only if the facts line up (core)
        situation = core.Situation(
            ref=ref,
            spec=spec,
            capsule=capsule,
            policy=self.policy,
            facts=facts,
            observed=observed,
            previous=previous,
            run_info=run_info,
            annotations=meta.get("annotations") or {},
            claim=claim,
            now=now,
            started_at=status_.parse_rfc3339(str(run_info["startedAt"])) or now,
            later=later,
            status_records=self.status_records,
            admitted=gate != "cancelled",
            stderr_in_output=self._reader.merged(ref),
        )
        return await self._act(plan, core.plan_step(situation, kept), events)

    # -- validation ---------------------------------------------------------------------------

    async def judge(self, plan: dict[str, Any], *, reuse: bool = False) -> Verdict:
        """The one judgement of a Plan object (reconciler.judging), for the reconcile and the
        admission webhook."""
        return await self._judge.judge(plan, reuse=reuse)

    # -- the run's reading and report: kept per run, forgotten when it ends ----------------------

    def _close(self, ref: manifests.PlanRef) -> None:
        """The run ended: its Jobs and pods are not read again (RunObjects.close)."""
        self._reader.close(ref)
        self._reports.forget((ref.namespace, ref.name))  # its report is written
        self._kept.drop((ref.namespace, ref.name))

    def check_all(self) -> None:
        """Trust no cached run (this replica starts leading: list each run once first)."""
        self._reader.check_all()
        self._reports.clear()
        self._kept.clear()

    def check(self, namespace: str, name: str) -> None:
        """The resync's look: the next reconcile of this Plan lists its run's objects instead
        of trusting the cache, so a deletion a watch did not deliver is found, unless the run
        was listed too recently for what its list costs (RunReader.resync)."""
        self._reader.resync((namespace, name))

    # -- act: what reconciler.core decided, carried out by reconciler.actuator ------------------

    async def _act(
        self, plan: dict[str, Any], step: core.PlanStep, events: Recorder
    ) -> float | None:
        s = step.s
        ref, key = s.ref, (s.ref.namespace, s.ref.name)
        creates = step.decide()
        while step.answer(
            await actuator.create(
                self.kube, ref, creates, s.spec, self.runs, self.create_concurrency
            )
        ):
            creates = step.decide()
        # what a cancel, the deadline or the finally steps' budget stopped (reconciler.stopping)
        await actuator.delete(self.kube, ref.namespace, step.deletes())
        own = step.run.report()
        report = await self._reports.record(ref, own, step.records, s.capsule, s.previous)
        intents = step.conclude(report, self._reports.chunks(key))
        self._set_running(key, intents.running)
        actuator.tell(events, intents.told)
        version = await self._write(plan, s.previous, intents.status)
        if intents.closes:
            self._close(ref)
        elif written_as_run(own.steps, report.steps, len(s.facts.settled)):
            # written: the next reconcile of this run may start from this Run (reconciler.kept)
            kept = step.keep()
            basis = Basis(
                ref.uid,
                ref.run,
                int(s.run_info["generation"]),
                version,
                s.spec,
                s.capsule,
                self._reports.held(key),
            )
            if kept is not None:
                self._kept.put(key, basis, kept)
        await events.flush()
        # podGC: the Jobs of steps settled, now that the status records them (collecting)
        await self._retain.after_steps(plan, s.observed, report.steps)
        if intents.closes and self._retain.look_again(plan):  # the run's end: its retention
            return 0.0
        return intents.wake

    # -- report -----------------------------------------------------------------------------------

    async def _write(
        self, plan: dict[str, Any], previous: dict[str, Any], new: dict[str, Any]
    ) -> str | None:
        # the earlier runs (status.history) go from status to status; a new run's
        # `previous` holds the history it starts with (earlier_runs.start)
        return await self._status.write(plan, run_history.carried(new, previous))

    def own_write(self, namespace: str, name: str, version: str | None) -> bool:
        return self._status.own_write(namespace, name, version)

    def forget(self, namespace: str, name: str) -> None:
        self._status.forget(namespace, name)
        self._reader.check((namespace, name))
        self._reports.forget((namespace, name))
        self._kept.drop((namespace, name))
