"""One reconcile of one Plan: observe -> facts -> the engine's decision -> act -> one status patch.

Level-based: everything is derived from the Plan (its spec and status) and the objects of its
current run (Jobs, their pods, child Plans), read from the API each time (the Plan and its
Capsule come from the watch's cache, the Plan as last written by this reconciler or seen since).
Nothing lives only in memory, so a restarted operator resumes exactly where it was: the same
deterministic names make a repeated create an adoption, never a second Job.

The scheduling rules are not here: `planops.engine.Run` decides; this module only executes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from pydantic import ValidationError

from planops import metrics
from planops.api import CapsuleSpec, PlanSpec, Step, parse_document
from planops.api.documents import problems_of
from planops.engine import (
    OPERATOR_BUDGET_SECONDS,
    AttemptFact,
    Budget,
    Decision,
    Dispatch,
    Facts,
    PlanError,
    Policy,
    Report,
    Run,
    StepRecord,
    capsule_name,
    finally_steps,
    image_allowed,
    shell_words,
    validate,
)
from planops.engine.validation import DEFAULT_CAPSULE
from planops.kube import manifests
from planops.kube.cache import RunObjects, WatchCache
from planops.kube.client import ApiError, Kube
from planops.kube.events import Poster, Recorder
from planops.reconciler import asks as asks_
from planops.reconciler import authors, reading
from planops.reconciler import reports as reports_
from planops.reconciler import status as status_
from planops.reconciler.body_events import BodyEvents
from planops.reconciler.observe import (
    Observed,
    controller_uid,
    owned,
)
from planops.reconciler.reading import RunReader, bounded
from planops.reconciler.reporting import ReportBook
from planops.reconciler.status import rfc3339

log = logging.getLogger("planops.reconciler")
T = TypeVar("T")
MAX_DEPTH = 8
DEFAULT_TIMEOUT_SECONDS = 3600
FINISHED = ("Succeeded", "Failed")
#: Jobs / child Plans created at once by one reconcile (a wide fan-out must not be created one by
#: one: the last step's dispatch latency would grow with the width of the plan).
CREATE_CONCURRENCY = 16
#: verdicts kept (one per Plan generation; a few MB for this many plans)
VERDICTS_KEPT = 20_000
Verdict = tuple[PlanSpec | None, CapsuleSpec | None, list[PlanError]]


@dataclass
class _Pass:
    """One reconcile of one Plan once it is judged valid: what it read, the run it restored, and
    the Events it will tell. The steps of a reconcile (dispatch, cancel, announce, the status)
    take it whole instead of a dozen arguments each."""

    plan: dict[str, Any]
    ref: manifests.PlanRef
    spec: PlanSpec
    capsule: CapsuleSpec
    run: Run
    observed: list[Observed]
    #: the status this run builds on (a fresh run's: only the conditions)
    previous: dict[str, Any]
    run_info: dict[str, Any]
    events: Recorder
    now: float
    started_at: float

    @property
    def generation(self) -> int:
        return int(self.run_info["generation"])

    @property
    def key(self) -> tuple[str, str]:
        return (self.ref.namespace, self.ref.name)


@dataclass
class Reconciler:
    kube: Kube
    policy: Policy = field(default_factory=Policy)
    clock: Callable[[], float] = time.time
    #: one validation's time budget (a huge plan is refused, not judged without end)
    budget: Budget | None = field(
        default_factory=lambda: Budget(OPERATOR_BUDGET_SECONDS, time.monotonic)
    )
    #: verdicts of judge(reuse=True) by (uid, generation, Capsule name, Capsule version, and
    #: the capsule steps' target Capsules with their versions)
    _verdicts: dict[tuple[Any, ...], Verdict] = field(default_factory=dict)
    #: attempts in flight per plan, for the planops_steps_running gauge (their sum)
    _running: dict[tuple[str, str], int] = field(default_factory=dict)
    #: Capsules as the watch shows them (handlers.capsule_event); None: always ask the API
    capsules: WatchCache | None = None
    #: Plans as the watch shows them, and as this reconciler last wrote them (handlers.plan_event)
    plans: WatchCache | None = None
    #: Jobs and pods of runs as the watches show them (handlers.job_event / pod_event)
    runs: RunObjects | None = None
    #: posts the Events in the background (None: each reconcile posts its own)
    poster: Poster | None = None
    #: the resourceVersion of each Plan's last status write (own_write)
    _written: dict[tuple[str, str], str] = field(default_factory=dict)
    #: records per PlanReport chunk, and records repeated in the status (operator flags)
    chunk_records: int = reports_.CHUNK_RECORDS
    status_records: int = status_.STATUS_RECORDS
    #: what each running Plan's PlanReports hold, and the one writer of them
    _reports: ReportBook = field(init=False)
    #: what a reconcile reads of its run (Jobs, pods, child Plans, outputs), and when the
    #: watch cache is trusted for it
    _reader: RunReader = field(init=False)

    def __post_init__(self) -> None:
        self._reports = ReportBook(self.kube, self.chunk_records, self.status_records)
        self._reader = RunReader(self.kube, self.clock, self.runs)

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
        generation = int(meta.get("generation", 1))
        rerun = (meta.get("annotations") or {}).get(manifests.ANNOTATION_RERUN, "")
        rid = manifests.run_id(meta["uid"], generation, rerun)
        labels = meta.get("labels") or {}
        ref = manifests.PlanRef(
            namespace,
            name,
            meta["uid"],
            rid,
            depth=_depth(labels.get(manifests.LABEL_DEPTH)),
            lineage=tuple(
                a
                for a in (meta.get("annotations") or {})
                .get(manifests.ANNOTATION_LINEAGE, "")
                .split(",")
                if a
            ),
            author=(meta.get("annotations") or {}).get(manifests.ANNOTATION_AUTHOR),
        )
        fresh = (previous.get("run") or {}).get("id") != rid
        if not fresh and previous.get("phase") in FINISHED:
            self._set_running((namespace, name), 0)
            self._close(ref)
            return None
        events = Recorder(self.kube, plan, self.poster)
        now = self.clock()
        run_info = {
            "id": rid,
            "generation": generation,
            "rerun": rerun or None,
            "startedAt": (previous.get("run") or {}).get("startedAt") if not fresh else None,
        }
        run_info["startedAt"] = run_info["startedAt"] or status_.rfc3339(now)
        if fresh:
            # Run ids derive from (uid, generation, re-run): a first generation that never ran
            # and was never re-run has no other run to stop (three lists saved per new Plan).
            if previous.get("run") or generation > 1 or rerun:
                await self._stop_other_runs(ref)
            previous = {"conditions": previous.get("conditions", [])}
            self._reader.trust((namespace, name))  # nothing yet; its creations are written back
        if fresh and rerun:  # started for the Plan's recorded author: may they still? (authors)
            cname = str((plan.get("spec") or {}).get("capsule") or DEFAULT_CAPSULE)
            why = await authors.refusal(self.kube, plan, namespace, cname)
            if why:
                events(authors.REASON, f"re-run {rerun} not started: {why}", warning=True)
                new = authors.refused_run_status(
                    why, generation=generation, run=run_info, previous=previous, now=now
                )
                await self._write(plan, previous, new)
                await events.flush()
                return None

        spec, capsule, errors = await self.judge(plan, reuse=True)
        if errors:
            if previous.get("phase") != "Invalid":
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
        if fresh or previous.get("phase") == "Invalid":
            # the run starts now: the time it waited as Invalid (for its Capsule) is not its own
            run_info["startedAt"] = status_.rfc3339(now)
            events(
                "PlanStarted",
                f"run {rid} of generation {generation}: {finally_steps.step_count(spec)} steps",
                run=rid,
                generation=generation,
            )

        claim = await self._workspace(ref, spec)
        facts, observed, later = (
            (Facts((), ()), [], False)
            if fresh
            # A run the status does not know has dispatched nothing that needs observing: an
            # object a crashed reconcile created before its status write has the name the next
            # dispatch creates, and that create adopts it (AlreadyExists).
            else await self._reader.facts(
                ref, spec, capsule, previous, await self._reports.written(ref, previous)
            )
        )
        run = Run.restore(name, spec, facts, retry_backoff=capsule.retry_backoff)
        started_at = status_.parse_rfc3339(str(run_info["startedAt"])) or now
        p = _Pass(
            plan, ref, spec, capsule, run, observed, previous, run_info, events, now, started_at
        )
        cancel = (meta.get("annotations") or {}).get(manifests.ANNOTATION_CANCEL)
        deadline = (
            started_at + spec.active_deadline_seconds if spec.active_deadline_seconds else None
        )
        overdue = deadline is not None and now >= deadline and not run.finished
        if cancel or overdue:
            why = (
                str(cancel)
                if cancel
                else f"the plan ran longer than its activeDeadlineSeconds "
                f"({spec.active_deadline_seconds}s)"
            )
            await self._cancel(p, why, "Cancelled" if cancel else "DeadlineExceeded")
            return None
        waiting = self._answers(run, previous, meta, rid, events, now)
        with_object = {(o.step_id, o.attempt) for o in observed}
        refused = [
            f
            for f in facts.attempts
            if f.status == "failed" and (f.step_id, f.attempt) not in with_object
        ]
        decision, dispatched, new_settled = await self._advance(p, claim, refused)
        waiting += [self._ask(d, capsule, name, events, now) for d in dispatched if d.kind == "ask"]
        finished = decision.finished
        report = await self._reports.record(
            ref,
            run.report(),
            max(run.record_count(), finally_steps.step_count(spec)),
            capsule,
            previous,
        )
        self._set_running(p.key, len(run.in_flight_attempts()))
        new = status_.running(
            report,
            total=finally_steps.step_count(spec),
            finished=finished,
            dispatched_any=bool(dispatched or run.in_flight_attempts()),
            generation=generation,
            run=run_info,
            refused=refused,
            previous=previous,
            started_at=started_at,
            now=now,
            reports=self._reports.chunks(p.key),
            status_records=self.status_records,
        )
        flying = set(run.in_flight_attempts())
        waiting = [w for w in waiting if (w.step_id, w.attempt) in flying]
        new["asks"] = [w.to_json() for w in waiting] or None
        new["inFlight"] = _in_flight(run, previous, now)
        self._announce(p, dispatched, new_settled, report, finished)
        await self._write(plan, previous, new)
        await events.flush()
        if finished:
            self._close(ref)
        # wake up at the first question's deadline (whenUnanswered applies then), and at the
        # plan's own deadline
        wake = [w.deadline for w in waiting]
        if deadline is not None and not finished:
            wake.append(deadline)
        if decision.wake_at is not None:  # a retry waiting out its backoff
            wake.append(decision.wake_at)
        if later:  # an output not readable yet (observe)
            wake.append(now + reading.LATER_SECONDS)
        return max(0.0, min(wake) - now) + 0.05 if wake else None

    # -- validation ---------------------------------------------------------------------------

    async def judge(self, plan: dict[str, Any], *, reuse: bool = False) -> Verdict:
        """The one place a Plan object is judged: the reconcile and the admission webhook
        (handlers.webhook) both call it; it reads the Plan's Capsule from the watch cache when it
        has it, else through the API.

        Parsing and validation run in a worker thread (a large plan never holds the event loop,
        which serves every other plan, the webhook and the health probe) under the validator's
        time budget. With `reuse` (the reconciler), a verdict is kept per Plan generation and
        Capsule version: a plan is judged once per change, not on every reconcile."""
        meta = plan["metadata"]
        cname = str((plan.get("spec") or {}).get("capsule") or DEFAULT_CAPSULE)
        raw = self.capsules.get(meta["namespace"], cname) if self.capsules else None
        if raw is None:
            raw = await self.kube.get_capsule(meta["namespace"], cname)
        targets = await self._targets(meta["namespace"], plan, raw)
        versions = [(n, _version(t)) for n, t in targets.items()]
        key = (
            str(meta.get("uid")),
            int(meta.get("generation") or 0),
            cname,
            (raw or {}).get("metadata", {}).get("resourceVersion"),
            tuple(versions),
        )
        if reuse and key in self._verdicts:
            return self._verdicts[key]
        verdict = await asyncio.to_thread(self._judge, plan, cname, raw, targets)
        if reuse:
            self._verdicts[key] = verdict
            while len(self._verdicts) > VERDICTS_KEPT:
                del self._verdicts[next(iter(self._verdicts))]  # the oldest
        return verdict

    async def _targets(
        self, namespace: str, plan: dict[str, Any], raw: dict[str, Any] | None
    ) -> dict[str, dict[str, Any] | None]:
        """The Capsules the plan's capsule steps name that its Capsule lets it spawn (any other
        is refused at dispatch): the validator holds their plans' inputSchemas to the steps'
        task text. From the watch cache, else through the API (at most one read per name in
        spawn.allow)."""
        allow = ((raw or {}).get("spec") or {}).get("spawn", {}).get("allow")
        spec = plan.get("spec") or {}
        steps = [s for k in ("steps", "finally") if isinstance(spec.get(k), list) for s in spec[k]]
        if not isinstance(allow, list):
            return {}
        named = {s.get("capsule") for s in steps if isinstance(s, dict)}
        out: dict[str, dict[str, Any] | None] = {}
        for name in sorted(n for n in named if isinstance(n, str) and n in allow):
            found = self.capsules.get(namespace, name) if self.capsules else None
            out[name] = found if found is not None else await self.kube.get_capsule(namespace, name)
        return out

    def _judge(
        self,
        plan: dict[str, Any],
        cname: str,
        raw: dict[str, Any] | None,
        targets: dict[str, dict[str, Any] | None] | None = None,
    ) -> Verdict:
        doc, problems = parse_document(
            {k: plan[k] for k in ("apiVersion", "kind", "metadata", "spec")}
        )
        if problems or doc is None:
            return None, None, [PlanError(p.code, None, p.path, p.message) for p in problems]
        spec = doc.spec
        assert isinstance(spec, PlanSpec)
        size = status_.json_size(plan.get("spec"))
        if size > status_.SPEC_BUDGET:  # the status must fit beside it, in one etcd object
            what_next = (
                "pass the items by reference to something smaller (an index per item), or split "
                "them across capsule steps, each a plan of its own"
                if any(s.map is not None for s in spec.steps)
                else "run a map over the items instead of one step each, or split the plan into "
                "capsule steps"
            )
            return (
                spec,
                None,
                [
                    PlanError(
                        "limits",
                        None,
                        "spec",
                        f"the spec is {size} bytes; a Plan's spec may be at most "
                        f"{status_.SPEC_BUDGET} bytes (its status shares the object, and etcd "
                        f"stores at most 1.5 MiB): {what_next}",
                    )
                ],
            )
        capsule: CapsuleSpec | None = None
        if raw is not None:
            try:
                capsule = CapsuleSpec.model_validate(raw.get("spec") or {})
            except ValidationError as e:
                why = "; ".join(f"{p.path}: {p.message}" for p in problems_of(e, "spec"))
                return (
                    spec,
                    None,
                    [
                        PlanError(
                            "no-capsule",
                            None,
                            "capsule",
                            f"Capsule {cname!r} cannot be used: {why}",
                        )
                    ],
                )
        children: dict[str, CapsuleSpec] = {}
        for n, t in (targets or {}).items():
            with contextlib.suppress(ValidationError):  # refused when its own plans run
                if t is not None:
                    children[n] = CapsuleSpec.model_validate(t.get("spec") or {})
        errors = validate(
            spec, lambda n: capsule if n == cname else children.get(n), self.policy, self.budget
        )
        return spec, capsule, errors

    # -- the run's reading and report: kept per run, forgotten when it ends ----------------------

    def _close(self, ref: manifests.PlanRef) -> None:
        """The run ended: its Jobs and pods are not read again (RunObjects.close)."""
        self._reader.close(ref)
        self._reports.forget((ref.namespace, ref.name))  # its report is written

    def check_all(self) -> None:
        """Trust no cached run (this replica starts leading: list each run once first)."""
        self._reader.check_all()
        self._reports.clear()

    def check(self, namespace: str, name: str) -> None:
        """The next reconcile of this Plan lists its run's objects instead of trusting the
        cache (the resync asks this: a deletion a watch did not deliver is found within it)."""
        self._reader.check((namespace, name))

    def _answers(
        self,
        run: Run,
        previous: dict[str, Any],
        meta: dict[str, Any],
        rid: str,
        events: Recorder,
        now: float,
    ) -> list[asks_.Waiting]:
        """Settle the questions that got an answer (or passed their deadline); the rest wait."""
        annotations = meta.get("annotations") or {}
        flying = set(run.in_flight_attempts())
        still: list[asks_.Waiting] = []
        for w in asks_.waiting(previous):
            if (w.step_id, w.attempt) not in flying:
                continue
            outcome = asks_.judge(w, annotations, rid, now)
            if isinstance(outcome, asks_.Outcome):
                run.finish_attempt(
                    w.step_id, w.attempt, outcome.status, outcome.output, outcome.error, now
                )
                continue
            if isinstance(outcome, str):
                events(
                    "AnswerRejected", f"step {w.step_id}: {outcome}", warning=True, step=w.step_id
                )
                w = replace(w, rejected=annotations.get(manifests.answer_annotation(w.step_id)))
            still.append(w)
        return still

    def _ask(
        self, d: Dispatch, capsule: CapsuleSpec, plan: str, events: Recorder, now: float
    ) -> asks_.Waiting:
        w = asks_.start(d, now, self._timeout(d.step, capsule))
        fields = ", ".join((w.spec.get("outputSchema") or {}).get("properties") or {})
        events(
            "AskWaiting",
            f"step {d.step.id} asks: {w.spec.get('prompt')!s:.300} -- answer with: kubectl plan "
            f"answer {plan} {d.step.id} --set KEY=VALUE (fields: {fields}) or --decline; "
            f"unanswered until {status_.rfc3339(w.deadline)}, then whenUnanswered "
            f"({w.spec.get('whenUnanswered', 'fail')}) applies",
            step=d.step.id,
        )
        return w

    def _timeout(self, step: Step, capsule: CapsuleSpec) -> int:
        """One deadline rule for a Job's run time and an ask's wait: the step's timeout (or the
        Capsule's default), bounded by the Capsule's and the operator's maximum."""
        return min(
            step.timeout_seconds or capsule.default_timeout_seconds or DEFAULT_TIMEOUT_SECONDS,
            capsule.max_timeout_seconds or self.policy.max_timeout_seconds,
            self.policy.max_timeout_seconds,
        )

    # -- act ------------------------------------------------------------------------------------

    async def _stop_other_runs(self, ref: manifests.PlanRef) -> None:
        """A new run (new generation or re-run): stop the in-flight objects of earlier runs."""
        other = ref.other_runs_selector()
        for job in owned(await self.kube.list_jobs(ref.namespace, other), ref.uid):
            await self.kube.delete_job(ref.namespace, job["metadata"]["name"])
        other_children = ref.other_runs_children_selector()
        for child in owned(await self.kube.list_plans(ref.namespace, other_children), ref.uid):
            await self.kube.delete_plan(ref.namespace, child["metadata"]["name"])
        for pvc in owned(await self.kube.list_pvcs(ref.namespace, other), ref.uid):
            await self.kube.delete_pvc(ref.namespace, pvc["metadata"]["name"])
        for chunk in owned(await self.kube.list_plan_reports(ref.namespace, other), ref.uid):
            await self.kube.delete_plan_report(ref.namespace, chunk["metadata"]["name"])

    async def _workspace(self, ref: manifests.PlanRef, spec: PlanSpec) -> str | None:
        """The claim mounted at /workspace in every step pod of this run, if the plan has one."""
        ws = spec.workspace
        if ws is None:
            return None
        if ws.claim_name:
            return ws.claim_name
        body = manifests.workspace_claim(ref, ws.size or "1Gi", ws.storage_class_name)
        try:
            await self.kube.create_pvc(ref.namespace, body)
        except ApiError as e:
            if not e.already_exists:
                raise
        return str(body["metadata"]["name"])

    async def _dispatch(
        self,
        ref: manifests.PlanRef,
        d: Dispatch,
        capsule: CapsuleSpec,
        spec: PlanSpec,
        events: Recorder,
        claim: str | None,
    ) -> str | None:
        """Create the attempt's Job or child Plan; returns a refusal (nothing created) or None.
        An ask creates nothing: it waits in status.asks (reconciler.asks)."""
        if d.kind == "ask":
            return None
        if d.kind == "capsule":
            body_or_refusal = await self._child(ref, d, capsule, spec)
        else:
            body_or_refusal = self._job(ref, d, capsule, claim)
        if isinstance(body_or_refusal, str):
            return body_or_refusal
        try:
            if d.kind == "capsule":
                await self.kube.create_plan(ref.namespace, body_or_refusal)
                events(
                    "DelegationStarted",
                    f"step {d.step.id} delegates to capsule {d.step.capsule} "
                    f"as plan {body_or_refusal['metadata']['name']}",
                    step=d.step.id,
                    child=body_or_refusal["metadata"]["name"],
                )
            else:
                job = await self.kube.create_job(ref.namespace, body_or_refusal)
                if self.runs is not None:  # the next reconcile sees it even before the watch
                    self.runs.seen("job", "ADDED", job)
        except ApiError as e:
            if e.already_exists:  # created before a restart: adopt it, if it is ours
                return await self._adopt(ref, d, body_or_refusal)
            if e.refused_by_admission:
                return f"refused by the cluster's admission policy: {e.message}"
            if e.status in (400, 403, 422):  # the request itself is refused: retrying cannot help
                what = "child Plan" if d.kind == "capsule" else "Job"
                return f"the cluster refused the step's {what}: {e.message}"
            raise  # transient (conflict, throttling, server error): the queue retries
        return None

    async def _adopt(self, ref: manifests.PlanRef, d: Dispatch, body: dict[str, Any]) -> str | None:
        """An object with the attempt's name exists: ours (made before a restart) when this Plan
        is its controller; anything else squats the name, and the attempt fails saying so."""
        name = body["metadata"]["name"]
        if d.kind == "capsule":
            existing = await self.kube.get_plan(ref.namespace, name)
        else:
            existing = await self.kube.get_job(ref.namespace, name)
        if existing is None or controller_uid(existing) == ref.uid:
            return None  # ours, or gone again: the next reconcile sees which
        what = "Plan" if d.kind == "capsule" else "Job"
        return (
            f"a {what} named {name} already exists and is not this Plan's (its controller is "
            "another object): planops does not adopt it; delete it and re-run the plan"
        )

    def _job(
        self, ref: manifests.PlanRef, d: Dispatch, capsule: CapsuleSpec, claim: str | None
    ) -> dict[str, Any] | str:
        if d.kind == "tool" and capsule.tool(d.step.tool or "") is None:
            return f"call denied: tool {d.step.tool!r} is no longer in the Capsule's inventory"
        if d.kind == "shell" and shell_words(d.step.shell or "")[0] not in capsule.shell.allow:
            return "call denied: the binary is no longer in the Capsule's shell.allow"
        image = manifests.step_image(d, capsule)
        if image is None:
            return (
                "call denied: no image for this step (set the Capsule's image or the step's image)"
            )
        if not image_allowed(image, capsule, self.policy):
            return f"call denied: image {image!r} is not allowed by the Capsule and the operator"
        timeout = self._timeout(d.step, capsule)
        return manifests.job(ref, d, capsule, image, timeout_seconds=timeout, workspace_claim=claim)

    async def _child(
        self, ref: manifests.PlanRef, d: Dispatch, capsule: CapsuleSpec, spec: PlanSpec
    ) -> dict[str, Any] | str:
        target = d.step.capsule or ""
        if target not in capsule.spawn.allow:
            return f"call denied: capsule {target!r} is not in the Capsule's spawn.allow"
        lineage = (*ref.lineage, capsule_name(spec))
        if target in lineage:
            return (
                f"call denied: capsule {target!r} already runs above this step (cycle: "
                f"{' -> '.join([*lineage, target])})"
            )
        if ref.depth + 1 >= MAX_DEPTH:
            return f"call denied: plans nest at most {MAX_DEPTH} deep"
        raw = await self.kube.get_capsule(ref.namespace, target)
        plan_spec = ((raw or {}).get("spec") or {}).get("plan")
        if plan_spec is None:
            return f"capsule {target!r} does not exist or has no plan"
        parent = replace(ref, lineage=tuple(lineage))
        return manifests.child_plan(parent, d, target, plan_spec)

    async def _advance(
        self, p: _Pass, claim: str | None, refused: list[AttemptFact]
    ) -> tuple[Decision, list[Dispatch], list[StepRecord]]:
        """Decide and dispatch until nothing more is ready: a dispatch the cluster refuses (an
        admission policy) fails its attempt at once, which may make other steps ready (its
        retry, an onError). Refused attempts are added to `refused`."""
        run, now = p.run, p.now
        dispatched: list[Dispatch] = []
        new_settled: list[StepRecord] = []
        while True:
            decision = run.decide(now)
            new_settled += decision.settled
            refusals = await bounded(
                [
                    self._dispatch(p.ref, d, p.capsule, p.spec, p.events, claim)
                    for d in decision.dispatch
                ],
                CREATE_CONCURRENCY,
            )
            refusal_made = False
            for d, refusal in zip(decision.dispatch, refusals, strict=True):
                if refusal is None:
                    dispatched.append(d)
                    continue
                refusal_made = True
                metrics.calls_denied.inc()
                p.events(
                    "CallDenied",
                    f"step {d.step.id} attempt {d.attempt}: {refusal}",
                    warning=True,
                    step=d.step.id,
                    attempt=d.attempt,
                )
                run.finish_attempt(d.step.id, d.attempt, "failed", None, refusal, now)
                refused.append(AttemptFact(d.step.id, d.attempt, now, "failed", now, None, refusal))
            if not refusal_made:
                return decision, dispatched, new_settled

    async def _cancel(self, p: _Pass, why: str, reason: str = "Cancelled") -> None:
        """`kubectl plan cancel` (reason Cancelled) or the plan's activeDeadlineSeconds passed
        (DeadlineExceeded): stop what runs, report it as failed, end the plan."""
        ref, spec, run, previous, events, now = p.ref, p.spec, p.run, p.previous, p.events, p.now
        label = "cancelled" if reason == "Cancelled" else "stopped"
        objects = {(o.step_id, o.attempt): o for o in p.observed}
        cancelled = []
        for step_id, attempt in run.in_flight_attempts():
            obj = objects.get((step_id, attempt))
            if obj is not None and obj.kind == "job":
                await self.kube.delete_job(ref.namespace, obj.object_name)
            elif obj is not None:
                await self.kube.delete_plan(ref.namespace, obj.object_name)
            started = obj.started_at if obj is not None else now
            cancelled.append(
                StepRecord(step_id, "failed", None, f"{label} ({why})", attempt, started, now)
            )
        self._set_running(p.key, 0)
        report = run.report()
        report = Report(report.plan_id, False, None, (*report.steps, *cancelled))
        report = await self._reports.record(
            ref, report, max(run.record_count(), finally_steps.step_count(spec)), None, previous
        )
        new = status_.running(
            report,
            total=finally_steps.step_count(spec),
            finished=True,
            dispatched_any=True,
            generation=p.generation,
            run=p.run_info,
            refused=[],
            previous=previous,
            started_at=p.started_at,
            now=now,
            cancelled=why,
            stopped_reason=reason,
            reports=self._reports.chunks(p.key),
            status_records=self.status_records,
        )
        if previous.get("phase") not in FINISHED:
            metrics.plans.labels("cancelled" if reason == "Cancelled" else "failed").inc()
            events(
                "PlanFailed",
                f"{label} ({why}); {len(cancelled)} running step(s) stopped",
                warning=True,
            )
        await self._write(p.plan, previous, new)
        await events.flush()
        self._close(ref)

    # -- report -----------------------------------------------------------------------------------

    def _announce(
        self,
        p: _Pass,
        dispatched: list[Dispatch],
        new_settled: list[StepRecord],
        report: Report,
        finished: bool,
    ) -> None:
        """The Events and metrics of what this reconcile decided, in the order it happened."""
        events, run, now, started_at = p.events, p.run, p.now, p.started_at
        settled_at = {r.step_id: r.finished_at for r in run.settled if r.finished_at is not None}
        body = BodyEvents(run.settled, new_settled)  # a big map posts summaries, not an Event each
        # settlements first: a start follows the settlements that made its step ready
        for rec in new_settled:
            reason = {"success": "StepSucceeded", "failed": "StepFailed"}.get(
                rec.status, "StepSkipped"
            )
            events(
                reason,
                f"step {rec.step_id} {rec.status}" + (f": {rec.error}" if rec.error else ""),
                warning=rec.status == "failed",
                post=body.post_settled(rec.step_id),
                step=rec.step_id,
                status=rec.status,
                attempts=rec.attempts,
            )
            kind = run.kind_of(rec.step_id)
            metrics.steps.labels(kind, rec.status).inc()
            if rec.duration is not None:
                metrics.step_duration.labels(kind).observe(rec.duration)
            if kind == "capsule" and rec.attempts:
                events(
                    "DelegationFinished",
                    f"step {rec.step_id}: child plan {rec.status}",
                    step=rec.step_id,
                )
        for d in dispatched:
            if d.attempt > 1:
                metrics.retries.inc()
            events(
                "StepStarted",
                f"step {d.step.id} attempt {d.attempt} ({d.kind})",
                post=body.post_started(d.step.id),
                step=d.step.id,
                attempt=d.attempt,
            )
            metrics.dispatch_latency.observe(max(0.0, now - _ready_at(settled_at, d, started_at)))
        for ctl, message, warning in body.summaries():
            events("BodyStepsSettled", message, warning=warning, step=ctl)
        if finished and p.previous.get("phase") not in FINISHED:
            result = "succeeded" if report.completed else "failed"
            metrics.plans.labels(result).inc()
            metrics.plan_duration.observe(max(0.0, now - started_at))
            events(
                "PlanSucceeded" if report.completed else "PlanFailed",
                f"{status_.top_level(report)}/{finally_steps.step_count(p.spec)} steps settled"
                + (f"; step {report.failed_step} stopped the plan" if report.failed_step else ""),
                warning=not report.completed,
            )

    async def _write(
        self, plan: dict[str, Any], previous: dict[str, Any], new: dict[str, Any]
    ) -> None:
        """One status patch per reconcile, and none when nothing changed. A running plan's
        `duration` alone is no change: it is refreshed with the next real one and final when the
        plan ends (a Job's Complete after its pod's success already settled the step would
        otherwise cost a patch that only says one second later)."""
        new = {k: v for k, v in new.items() if v is not None}
        old = plan.get("status") or {}
        if old == new or (
            new.get("phase") not in FINISHED
            and {**old, "duration": None} == {**new, "duration": None}
        ):
            return
        meta = plan["metadata"]
        written = await self.kube.patch_plan_status(meta["namespace"], meta["name"], new)
        metrics.status_patches.inc()
        if self.plans is not None:  # the next reconcile starts from what was written
            self.plans.seen("MODIFIED", written)
        version = (written.get("metadata") or {}).get("resourceVersion")
        if version:
            self._written[(meta["namespace"], meta["name"])] = str(version)
            while len(self._written) > VERDICTS_KEPT:
                del self._written[next(iter(self._written))]  # the oldest

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
        self._reader.check((namespace, name))
        self._reports.forget((namespace, name))


#: kinds whose attempt is an object in the cluster (a Job, a child Plan)
WITH_OBJECT = ("shell", "tool", "capsule")


def _in_flight(run: Run, previous: dict[str, Any], now: float) -> list[dict[str, Any]] | None:
    """The attempts in flight that have an object: recorded so that an object deleted behind
    the operator's back is a failed attempt (`reading.vanished`), not a step silently started
    again."""
    since = {(f["stepId"], f["attempt"]): f.get("since") for f in previous.get("inFlight") or []}
    out = [
        {"stepId": step, "attempt": attempt, "since": since.get((step, attempt)) or rfc3339(now)}
        for step, attempt in run.in_flight_attempts()
        if run.kind_of(step) in WITH_OBJECT
    ]
    return out[: status_.IN_FLIGHT_LIMIT] or None  # the status bound (reconciler.status)


def _version(obj: dict[str, Any] | None) -> Any:
    return ((obj or {}).get("metadata") or {}).get("resourceVersion")


def _depth(label: Any) -> int:
    """How deep a Plan nests (its depth label, set on child Plans). Absent: a top-level Plan. Not
    a number (edited by hand): as deep as allowed, so it can spawn no children but never stops
    its own reconcile; reading it as 0 would let an edit lift the nesting cap."""
    if label is None:
        return 0
    return (
        int(label) if isinstance(label, str) and label.isascii() and label.isdigit() else MAX_DEPTH
    )


def _ready_at(finished: dict[str, float], d: Dispatch, default: float) -> float:
    """When a dispatched step became ready: its last dependency's settlement (or the run start)."""
    return max((finished[dep] for dep in d.step.depends_on if dep in finished), default=default)
