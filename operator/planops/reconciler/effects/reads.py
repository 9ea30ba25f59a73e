"""What a reconcile reads: every read request of the reconcilers.

One of the three reconciler modules that talk to the API client (with effects.actuator, every
write, and reconcile.py, the shells that hand them the client: an import-linter contract keeps
it so). Reads come from the watches' caches when they hold the object (a Plan, a Capsule, a
run's Jobs and pods when trusted), else from the API server. Nothing here decides: what to do
with what was read is a pure decision (run.life, run.core, queue.admission, history.retention,
schedules.decide) and every write is the actuator's.

A run's objects come from the cache when it can be trusted: this replica listed the run since
it started leading (or created it), no resync asked for a check since, every Job that ended has
its pod at hand (no success settled without its pod's log), and no attempt in flight lacks its
Job (a list confirms a deletion before it fails a step). A resync lists a run again once
RELIST_AFTER times its last list's duration, and RELIST_FLOOR, have passed: the watches miss
nothing by construction (kube.informer), so the list only repairs what a bug lost (a run of
20,000 steps' list took a third of the operator's CPU for it). A settled step's objects are not
read again: a big run keeps thousands, and the pod garbage collector deletes many of their pods.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Container
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from planops.api import CapsuleSpec, PlanSpec, names
from planops.engine import (
    CapsuleResolver,
    Facts,
    StepRecord,
    bodies,
    capsules,
    finally_steps,
    outputs,
)
from planops.engine.plan_templates import Key as TemplateKey
from planops.engine.retry import unread_capsule
from planops.kube import manifests
from planops.kube.api import KubeApi, ScheduleApi
from planops.kube.cache import RunObjects, WatchCache, slim_unless
from planops.kube.errors import ApiError
from planops.reconciler.effects.bounded import bounded
from planops.reconciler.effects.plan_deletion import PlanDeletion
from planops.reconciler.effects.stored_logs import StoredLogs
from planops.reconciler.history import chunks, deletion
from planops.reconciler.history.replacing import OtherRuns
from planops.reconciler.queue import slots
from planops.reconciler.run import authors, lookups, moved, templating
from planops.reconciler.run import facts as facts_
from planops.reconciler.run import status as status_
from planops.reconciler.run.authors import Author
from planops.reconciler.run.observe import (
    Observed,
    attempt_step,
    child_attempt,
    job_attempt,
    job_ended,
    owned,
    pods_by_job,
)
from planops.reconciler.run.step_logs import READ_LIMIT, LogStreams

log = logging.getLogger("planops.reconciler")
Obj = dict[str, Any]
Key = tuple[str, str]
#: logs read at once by one reconcile (as Jobs are created: actuator.CREATE_CONCURRENCY)
READ_CONCURRENCY = 16
#: a resync lists a run again once this many times its last list's duration has passed,
RELIST_AFTER = 20.0
#: and at least these seconds since it was last listed or started by this replica
RELIST_FLOOR = 600.0


@dataclass(frozen=True)
class RunRead:
    """What a reconcile read of its run: the engine's facts, the attempts observed (their
    objects), and whether to look again shortly (an output not readable yet)."""

    facts: Facts
    observed: list[Observed]
    later: bool
    #: a step's output was read as one with its stderr (run.step_logs)
    merged: bool = False


@dataclass
class Reads:
    kube: KubeApi
    clock: Callable[[], float]
    #: Plans and Capsules as the watches show them (None: always ask the API)
    plans: WatchCache | None = None
    capsules: WatchCache | None = None
    #: Jobs and pods of runs as the watches show them
    runs: RunObjects | None = None
    #: stores ended attempts' full logs in the run's artifact repository (None: none)
    stored: StoredLogs | None = None
    #: Plans whose run objects the cache holds truly
    _trusted: set[Key] = field(default_factory=set)
    #: per Plan, when its run was last listed and how long that list took (resync)
    _listed: dict[Key, tuple[float, float]] = field(default_factory=dict)
    #: reads ended attempts' logs (stdout and stderr apart where the cluster can)
    logs: LogStreams = field(init=False)

    #: the artifact finalizer (with `stored` only)
    deletion: PlanDeletion | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        self.logs = LogStreams(self._fetch_log, self.clock)
        if self.stored is not None:
            self.deletion = PlanDeletion(self.kube, self.stored, self.clock)

    # -- Plans and Capsules ------------------------------------------------------------------

    async def plan(self, namespace: str, name: str, *, fresh: bool = False) -> Obj | None:
        """The Plan as the watch shows it (or as this replica last wrote it), else the API's;
        `fresh`: the API's, into the cache too (after a conflict: the cache may lag)."""
        found = None if fresh else (self.plans.get(namespace, name) if self.plans else None)
        if found is not None:
            return await self._finalized(found)
        found = await self.kube.get_plan(namespace, name)
        if fresh and found is not None and self.plans is not None:
            self.plans.seen("MODIFIED", found)
        return await self._finalized(found)

    async def _finalized(self, plan: Obj | None) -> Obj | None:
        """The Plan with the artifact finalizer, added before its run stores anything when it
        will (effects.plan_deletion); its Capsule read only while the Plan has none."""
        if plan is None or self.deletion is None or not deletion.may_want(plan):
            return plan
        meta = plan["metadata"]
        capsule = await self.capsule(meta["namespace"], slots.capsule_of(plan))
        patched = await self.deletion.ensure(plan, capsule)
        if patched is not plan and self.plans is not None:
            self.plans.seen("MODIFIED", patched)
        return patched

    async def deleted(self, plan: Obj | None) -> float | None:
        """A Plan being deleted: its stored objects (effects.plan_deletion); the seconds until
        it is looked at again, or None."""
        return await self.deletion.deleted(plan) if self.deletion is not None else None

    async def capsule(self, namespace: str, name: str) -> Obj | None:
        found = self.capsules.get(namespace, name) if self.capsules else None
        return found if found is not None else await self.kube.get_capsule(namespace, name)

    async def targets(self, namespace: str, plan: Obj, raw: Obj | None) -> dict[str, Obj | None]:
        return await lookups.targets(self.capsule, namespace, plan, raw)

    async def may_use(self, author: Author, namespace: str, capsule: str) -> tuple[bool, str]:
        """The API server's answer (a SubjectAccessReview) to whether `author` may still use
        the Capsule, and its reason."""
        return await self.kube.may_use_capsule(
            namespace, capsule, author.username, list(author.groups)
        )

    async def templates(self, namespace: str, plan: Obj) -> dict[TemplateKey, Obj | None]:
        return await templates(self.kube, namespace, plan)

    async def capsule_refusal(
        self, obj: Obj, namespace: str, capsule: str, required: bool
    ) -> authors.Refusal | None:
        """Whether the object's recorded author may still use the Capsule (run.authors: the
        question, then the API server's answer)."""
        asked = authors.question(obj, capsule, required)
        if not isinstance(asked, authors.Author):
            return asked
        allowed, why = await self.may_use(asked, namespace, capsule)
        return authors.answered(obj, asked, namespace, capsule, allowed, why)

    async def run_templates(
        self, plan: Obj, run_id: str, *, fresh: bool
    ) -> dict[TemplateKey, Obj | None]:
        """The template a run runs: the snapshot its status recorded as it started, else (a new
        run) the object as it is now (run.templating)."""
        kept = None if fresh else templating.snapshot(plan, run_id)
        return await templates(self.kube, plan["metadata"]["namespace"], plan, kept)

    async def template_refusal(
        self, plan: Obj, used: dict[TemplateKey, Obj | None], required: bool
    ) -> authors.Refusal | None:
        """Whether the Plan's recorded author may `get` each template it runs (run.templating;
        a SubjectAccessReview each, asked as for the Capsule: not where no author is recorded
        and none is `required`)."""
        asked = authors.question(plan, "the Capsule", required)
        if not isinstance(asked, authors.Author):
            return asked
        namespace = plan["metadata"]["namespace"]
        for kind, name in sorted(used):
            ns = namespace if kind == "PlanTemplate" else None
            allowed, why = await self.kube.may_access(
                templating.PLURALS[kind], "get", ns, name, asked.username, list(asked.groups)
            )
            if not allowed:
                return templating.refusal(asked, (kind, name), namespace, why)
        return None

    async def limited(self, namespace: str, wanted: set[str]) -> frozenset[str]:
        """Which of the Capsules `wanted` have a limit now (the cache, else the API server: a
        Capsule the cache has not seen is not taken as absent)."""
        found = set()
        for name in sorted(wanted):
            if slots.limit_of(await self.capsule(namespace, name)) is not None:
                found.add(name)
        return frozenset(found)

    async def capsule_queue(self, namespace: str, capsule: str) -> list[Obj]:
        """The Plans of the Capsule, listed from the API server (a quorum read, which sees every
        status written before it: the truth before a slot is taken)."""
        listed = await self.kube.list_plans(namespace, "")
        return [p for p in listed if slots.capsule_key(p) == (namespace, capsule)]

    # -- a retry: the run it retries ---------------------------------------------------------

    async def earlier_records(
        self, ref: manifests.PlanRef, previous: Obj
    ) -> tuple[list[StepRecord], bool, bool]:
        """The records of the run `previous` (the status) describes, whole: its PlanReport
        objects when the status holds a summary. Also whether it completed, and whether an exit
        ended it."""
        report = previous.get("report") or {}
        steps = report.get("steps") or []
        if report.get("reportObjects"):
            earlier = manifests.PlanRef(
                ref.namespace, ref.name, ref.uid, str(previous["run"]["id"])
            )
            listed = await self.kube.list_plan_reports(ref.namespace, chunks.selector(earlier))
            steps = chunks.records_json(listed, earlier.uid, earlier.run)
        records = [StepRecord.from_json(s) for s in steps]
        return records, bool(report.get("completed")), report.get("exit") is not None

    async def capsule_plans(self, namespace: str, spec: PlanSpec) -> CapsuleResolver:
        """The Capsules a retry of `spec` looks at (whether a kept capsule step's child plan may
        ask: engine.retry), read once each; one missing or unreadable is None (its steps run
        again)."""
        read: dict[str, CapsuleSpec | None] = {}
        while (name := unread_capsule(spec, read)) is not None:
            raw = await self.capsule(namespace, name)
            try:
                read[name] = CapsuleSpec.model_validate(raw.get("spec") or {}) if raw else None
            except ValidationError:
                read[name] = None
        return capsules({n: c for n, c in read.items() if c is not None})

    # -- a new run: the runs it replaces ----------------------------------------------------

    async def other_runs(self, ref: manifests.PlanRef, same_id: bool) -> OtherRuns:
        """The Plan's objects of runs other than `ref.run` (this Plan's own, by UID), and the
        chunks of an earlier run of the same id when `same_id`."""
        other = ref.other_runs_selector()
        ns, uid = ref.namespace, ref.uid
        return OtherRuns(
            jobs=owned(await self.kube.list_jobs(ns, other), uid),
            children=owned(await self.kube.list_plans(ns, ref.other_runs_children_selector()), uid),
            claims=owned(await self.kube.list_pvcs(ns, other), uid),
            chunks=owned(await self.kube.list_plan_reports(ns, other), uid),
            same_id=owned(await self.kube.list_plan_reports(ns, ref.selector()), uid)
            if same_id
            else [],
        )

    # -- retention ---------------------------------------------------------------------------

    async def parent(self, plan: Obj) -> Obj | None:
        """The Plan whose capsule step made `plan`, if it is a child."""
        meta = plan.get("metadata") or {}
        name = manifests.full_value(meta, names.LABEL_PARENT)
        return await self.plan(meta["namespace"], name) if name else None

    async def children(self, ref: manifests.PlanRef) -> list[Obj]:
        """The child Plans of any run of the Plan (this Plan's own, by UID)."""
        selector = f"{names.LABEL_PARENT}={manifests.label_value(ref.name)}"
        return owned(await self.kube.list_plans(ref.namespace, selector), ref.uid)

    async def run_jobs(self, ref: manifests.PlanRef) -> list[str]:
        """The names of the run's Jobs (this Plan's own, by UID), listed from the API."""
        jobs = owned(await self.kube.list_jobs(ref.namespace, ref.selector()), ref.uid)
        return sorted(j["metadata"]["name"] for j in jobs)

    # -- a run's facts -----------------------------------------------------------------------

    async def report_chunks(self, ref: manifests.PlanRef) -> list[Obj]:
        return await self.kube.list_plan_reports(ref.namespace, chunks.selector(ref))

    def trust(self, key: Key) -> None:
        """A run this reconciler starts: nothing exists yet, and its creations are written to
        the cache as they are made (as good as a list, for the resync)."""
        self._trusted.add(key)
        self._listed[key] = (self.clock(), 0.0)

    def check(self, key: Key) -> None:
        """List this Plan's run once before trusting the cache again."""
        self._trusted.discard(key)

    def check_all(self) -> None:
        self._trusted.clear()

    def resync(self, key: Key) -> None:
        """The resync's look at a run: list it again once RELIST_AFTER times its last list's
        duration, and RELIST_FLOOR, have passed since that list (the module's docstring)."""
        listed = self._listed.get(key)
        if listed is None or self.clock() - listed[0] >= max(
            RELIST_FLOOR, RELIST_AFTER * listed[1]
        ):
            self.check(key)

    def close(self, ref: manifests.PlanRef) -> None:
        """The run ended: its Jobs and pods are not read again (RunObjects.close)."""
        if self.runs is not None:
            self.runs.close((ref.namespace, manifests.label_value(ref.name), ref.run))
        self._trusted.discard((ref.namespace, ref.name))
        self._listed.pop((ref.namespace, ref.name), None)

    async def run(
        self,
        ref: manifests.PlanRef,
        spec: PlanSpec,
        capsule: CapsuleSpec,
        previous: Obj,
        written: chunks.Written,
    ) -> RunRead:
        """The run's facts for the engine (run.facts): the records its PlanReports hold
        (`written`), and an attempt for each unsettled step's Job, pod or child Plan, with its
        output read once it ended."""
        settled_ids = written.ids
        observed, cached = await self._observed(ref, spec, settled_ids)
        remembered = facts_.remembered(previous, settled_ids)
        if cached and facts_.vanished(previous, settled_ids, observed, remembered, 0.0):
            # an attempt's Job gone from the cache fails its step: a list confirms it first
            self.check((ref.namespace, ref.name))
            observed, _ = await self._observed(ref, spec, settled_ids)
        n = finally_steps.step_count(spec)
        now = self.clock()
        pending, later = facts_.pending(observed, settled_ids, now)
        cap = status_.output_cap(capsule.output_limit_bytes, n)
        reading = [o for o in pending if facts_.reads_log(o)]
        outputs = await bounded(
            [self.output(ref.namespace, o, cap, now, capsule.output_limit_bytes) for o in reading],
            READ_CONCURRENCY,
        )
        read = {(o.step_id, o.attempt): got for o, got in zip(reading, outputs, strict=True)}
        if self.stored is not None and reading:
            await self.stored.keep(ref, spec.capsule or "default", capsule, reading)
        assembled = facts_.attempts(pending, read, capsule, n, now)
        if moving := moved.steps_moving_files(spec):  # what their collectors said
            keys = moved.relative_keys(ref)
            assembled.attempts = [
                moved.apply(f, moving[f.step_id], o.collected, keys) if f.step_id in moving else f
                for f, o in zip(assembled.attempts, pending, strict=True)
            ]
        attempts = assembled.attempts + remembered
        attempts += facts_.vanished(previous, settled_ids, observed, attempts, self.clock())
        facts = Facts(tuple(written.records), tuple(attempts))
        return RunRead(facts, observed, later or assembled.later, assembled.merged)

    async def _observed(
        self, ref: manifests.PlanRef, spec: PlanSpec, settled: Container[str]
    ) -> tuple[list[Observed], bool]:
        """The attempts of unsettled steps: Jobs and pods, child Plans; whether from the cache."""
        jobs, pods, cached = await self.objects(ref, settled)
        # objects whose labels name no attempt of ours are not attempts (observe says why)
        found = [job_attempt(j, pods.get(j["metadata"]["name"])) for j in jobs]
        if bodies.makes_child_plans(spec):  # capsule and template steps, in bodies too
            listed = await self.kube.list_plans(ref.namespace, ref.children_selector())
            found += [child_attempt(c) for c in facts_.unsettled(owned(listed, ref.uid), settled)]
        return [o for o in found if o is not None], cached

    async def objects(
        self, ref: manifests.PlanRef, settled: Container[str]
    ) -> tuple[list[Obj], dict[str, Obj], bool]:
        """The run's Jobs (this Plan's own) of steps not `settled`, the pod of each, and whether
        they came from the watch's cache, trusted (the module's docstring), else listed page by
        page (slimmed as they arrive, a settled step's dropped) and the cache set right."""
        key = (ref.namespace, manifests.label_value(ref.name), ref.run)
        plan = (ref.namespace, ref.name)

        def of_settled_step(obj: Obj) -> bool:
            return attempt_step(obj) in settled

        if self.runs is not None:  # not read again: dropped from the cache (RunObjects.settle)
            self.runs.settle(key, of_settled_step)
        if self.runs is not None and plan in self._trusted:
            jobs = facts_.unsettled(owned(self.runs.of("job", key), ref.uid), settled)
            pods = pods_by_job(self.runs.of("pod", key), jobs)
            if all(j["metadata"]["name"] in pods or not job_ended(j) for j in jobs):
                return jobs, pods, True
        started = self.clock()
        listed_jobs = await self.kube.list_jobs(
            ref.namespace, ref.selector(), slim_unless("job", of_settled_step)
        )
        listed_pods = (
            await self.kube.list_pods(
                ref.namespace, ref.selector(), slim_unless("pod", of_settled_step)
            )
            if listed_jobs
            else []
        )
        ended = self.clock()
        self._listed[plan] = (ended, max(0.0, ended - started))
        if self.runs is not None:
            self.runs.replace("job", key, listed_jobs)
            self.runs.replace("pod", key, listed_pods)
            self.runs.settle(key, of_settled_step)
            self._trusted.add(plan)
        jobs = facts_.unsettled(owned(listed_jobs, ref.uid), settled)
        return jobs, pods_by_job(listed_pods, jobs) if jobs else {}, False

    async def output(
        self, namespace: str, obs: Observed, cap: int, now: float, limit: int = 0
    ) -> facts_.Output:
        """The container log, read once when the attempt settles (before any cleanup can race
        it): its output within `cap` bytes (the Capsule's `limit`, or less: the report's share)
        and its stderr's tail (run.step_logs); the termination message when the pod is gone.
        What an unreadable log means is run.facts'."""
        if obs.pod is None:
            return facts_.terminated(obs, cap)
        try:
            why = outputs.OUTPUT_LIMIT if cap == limit else outputs.REPORT_SHARE
            got = await self.logs.read(namespace, obs.pod, cap, why)
        except ApiError as e:
            gone = facts_.may_be_gone(e) and await self.kube.get_pod(namespace, obs.pod) is None
            found = facts_.log_unreadable(namespace, obs, e, gone, now, cap)
            if not isinstance(found, facts_.Later | facts_.Lost):
                log.info("log of %s/%s unavailable (%s)", namespace, obs.pod, e)
            return found
        return facts_.log_read(got)

    async def forget_plan(self, plan: Obj) -> None:
        """A Plan retention deleted: its stored objects go too (StoredLogs.forget_plan)."""
        if self.stored is not None:
            await self.stored.forget_plan(plan)

    async def forget_runs(self, plan: Obj, dropped: list[Obj], new_run: str, archive: bool) -> None:
        """Runs the history dropped: their stored objects go too (StoredLogs.forget_runs)."""
        if self.stored is not None:
            await self.stored.forget_runs(plan, dropped, new_run, archive)

    async def _fetch_log(
        self, namespace: str, pod: str, feed: Callable[[bytes], None], stream: str | None
    ) -> None:
        await self.kube.stream_log(namespace, pod, manifests.CONTAINER, feed, stream, READ_LIMIT)


@dataclass
class ScheduleReads:
    """What a ScheduledPlan's (or ClusterScheduledPlan's) reconcile reads."""

    kube: ScheduleApi

    async def schedule(self, plural: str, namespace: str | None, name: str) -> Obj | None:
        return await self.kube.get_object(plural, namespace, name)

    async def namespaces(self, selector: str) -> list[str]:
        return [n["metadata"]["name"] for n in await self.kube.list_namespaces(selector)]

    async def runs(self, namespace: str, label: str, owner: Obj, kind: str) -> list[Obj]:
        """The schedule's runs in `namespace`: its own, by UID (labels can be copied)."""
        selector = f"{label}={manifests.label_value(owner['metadata']['name'])}"
        listed = await self.kube.list_plans(namespace, selector)
        return owned(listed, owner["metadata"]["uid"], kind)

    async def capsule(self, namespace: str, name: str) -> Obj | None:
        return await self.kube.get_capsule(namespace, name)

    async def targets(self, namespace: str, plan: Obj, raw: Obj | None) -> dict[str, Obj | None]:
        return await lookups.targets(self.capsule, namespace, plan, raw)

    async def plan(self, namespace: str, name: str) -> Obj | None:
        return await self.kube.get_plan(namespace, name)

    async def may_use(self, author: Author, namespace: str, capsule: str) -> tuple[bool, str]:
        return await self.kube.may_use_capsule(
            namespace, capsule, author.username, list(author.groups)
        )

    async def templates(self, namespace: str, plan: Obj) -> dict[TemplateKey, Obj | None]:
        return await templates(self.kube, namespace, plan)


async def templates(
    kube: KubeApi, namespace: str, plan: Obj, known: dict[TemplateKey, Obj | None] | None = None
) -> dict[TemplateKey, Obj | None]:
    """The templates a plan runs (its templateRef's, and those its template steps name, and
    theirs, run.templating.wanted) as the API server has them now, but those `known` (a run's
    snapshot); one read each, at most MAX_TEMPLATES. {} when it names none."""
    found = dict(known or {})
    todo = templating.wanted(plan.get("spec"))
    for obj in found.values():
        todo |= templating.wanted((obj or {}).get("spec"))
    while todo and len(found) < templating.MAX_TEMPLATES:
        kind, name = key = min(todo)
        todo.discard(key)
        if key in found:
            continue
        ns = namespace if kind == "PlanTemplate" else None
        found[key] = obj = await kube.get_object(templating.PLURALS[kind], ns, name)
        todo |= templating.wanted((obj or {}).get("spec")) - found.keys()
    return found
