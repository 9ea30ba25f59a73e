"""What a reconcile reads of its run: the attempts of its unsettled steps, as the engine's facts.

A run's settled records come from its PlanReports (reconciler.reporting); everything else is
read here: the Jobs and pods of steps not settled yet (from the watch cache when it can be
trusted, else listed, page by page), their child Plans, the log of each attempt that ended
(read once, never made up), and what the last status remembers (refused attempts, asks waiting,
attempts in flight whose object has vanished). A settled step's objects are never read again.

The reconciler (reconciler.reconcile) decides and acts on what this returns.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Container, Coroutine
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from planops.api import CapsuleSpec, PlanSpec
from planops.engine import AttemptFact, Facts, finally_steps, outputs
from planops.kube import manifests
from planops.kube.api import KubeApi
from planops.kube.cache import RunObjects, slim_run_object
from planops.kube.client import ApiError
from planops.reconciler.history import chunks as reports_
from planops.reconciler.run import asks as asks_
from planops.reconciler.run import status as status_
from planops.reconciler.run.observe import (
    Observed,
    attempt_step,
    child_attempt,
    job_attempt,
    job_ended,
    owned,
    pods_by_job,
)
from planops.reconciler.run.status import parse_rfc3339
from planops.reconciler.run.step_logs import LOG_LOST, LogStreams, StepLog

log = logging.getLogger("planops.reconciler")
T = TypeVar("T")
#: logs read at once by one reconcile (as Jobs are created: actuator.CREATE_CONCURRENCY)
READ_CONCURRENCY = 16

#: how long a finished Job's pod may be missing from a listing before it counts as gone
POD_GRACE_SECONDS = 30.0
#: how long after a step ended its log may stay unreadable (a node restarting) before the
#: output counts as lost; looked at again every core.LATER_SECONDS meanwhile
LOG_GRACE_SECONDS = 120.0
#: a resync lists a run again once this many times its last list's duration has passed
#: (RunReader.resync): its lists take at most ~1/20 of the operator's time, whatever its size
RELIST_AFTER = 20.0


@dataclass(frozen=True)
class _Later:
    """An attempt's output that cannot be read now but may be soon (see RunReader.output)."""

    reason: str


@dataclass(frozen=True)
class _Lost:
    """An attempt's output that can no longer be read (see RunReader.output)."""

    reason: str


@dataclass
class RunReader:
    kube: KubeApi
    clock: Callable[[], float]
    #: Jobs and pods of runs as the watches show them (handlers.job_event / pod_event)
    runs: RunObjects | None = None
    #: Plans whose run objects the cache holds truly (objects)
    _trusted: set[tuple[str, str]] = field(default_factory=set)
    #: per Plan, when its run was last listed and how long that list took (resync)
    _listed: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)
    #: reads ended attempts' logs (stdout and stderr apart where the cluster can)
    logs: LogStreams = field(init=False)
    #: the Plans with a step whose output was read as one with its stderr since `merged`
    _merged: set[tuple[str, str]] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.logs = LogStreams(self.kube, self.clock)

    def trust(self, key: tuple[str, str]) -> None:
        """A run this reconciler starts: nothing exists yet, and its creations are written to
        the cache as they are made."""
        self._trusted.add(key)

    def check(self, key: tuple[str, str]) -> None:
        """List this Plan's run once before trusting the cache again."""
        self._trusted.discard(key)

    def check_all(self) -> None:
        self._trusted.clear()

    def resync(self, key: tuple[str, str]) -> None:
        """The resync's look at a run: list it again (a deletion no watch delivered is found)
        once RELIST_AFTER times its last list's duration has passed since that list. A small
        run lists in milliseconds, so at every resync; a run of 20,000 steps takes seconds of
        the operator's CPU to list and decode its Jobs (its settled steps' too: a selector
        cannot leave them out), which at every resync was a third of what the operator spent
        on such a plan, to confirm what the watches had shown. Its lists stay a small share of
        the operator's time whatever the run's size; a missed deletion is found a few minutes
        later at most (every event the watches deliver is read at once, as before)."""
        listed = self._listed.get(key)
        if listed is None or self.clock() - listed[0] >= RELIST_AFTER * listed[1]:
            self.check(key)

    def close(self, ref: manifests.PlanRef) -> None:
        """The run ended: its Jobs and pods are not read again (RunObjects.close)."""
        if self.runs is not None:
            self.runs.close((ref.namespace, manifests.label_value(ref.name), ref.run))
        self._trusted.discard((ref.namespace, ref.name))
        self._listed.pop((ref.namespace, ref.name), None)
        self._merged.discard((ref.namespace, ref.name))

    def merged(self, ref: manifests.PlanRef) -> bool:
        """Whether the last `facts` read a step's output as one with its stderr (the cluster
        could not read the log's streams apart: status.report.stderrInOutput)."""
        key = (ref.namespace, ref.name)
        found = key in self._merged
        self._merged.discard(key)
        return found

    async def facts(
        self,
        ref: manifests.PlanRef,
        spec: PlanSpec,
        capsule: CapsuleSpec,
        previous: dict[str, Any],
        written: reports_.Written,
    ) -> tuple[Facts, list[Observed], bool]:
        """The run's facts for the engine: the records its PlanReports hold (`written`), and an
        attempt for each unsettled step's Job, pod or child Plan, with its output read once it
        ended; and whether to look again shortly (an output not readable yet)."""
        settled, settled_ids = tuple(written.records), written.ids
        jobs, pods = await self.objects(ref, settled_ids)
        # objects whose labels name no attempt of ours are not attempts (observe says why)
        found = [job_attempt(j, pods.get(j["metadata"]["name"])) for j in jobs]
        if any(s.capsule is not None for s in (*spec.steps, *spec.finally_)):
            children = await self.kube.list_plans(ref.namespace, ref.children_selector())
            found += [child_attempt(c) for c in unsettled(owned(children, ref.uid), settled_ids)]
        observed = [o for o in found if o is not None]
        n = finally_steps.step_count(spec)
        cap = status_.output_cap(capsule.output_limit_bytes, n)
        attempts: list[AttemptFact] = []
        now = self.clock()
        later = False  # an attempt to look at again shortly (its output not readable yet)
        pending = []
        for o in observed:
            if o.step_id in settled_ids:
                continue
            if (
                o.kind == "job"
                and o.status == "success"
                and o.pod is None
                and now - (o.finished_at or now) < POD_GRACE_SECONDS
            ):
                # a Job done but its pod not listed (yet): not settled without its output; past
                # POD_GRACE the pod is taken as gone (output says so)
                o, later = replace(o, status=None), True
            pending.append(o)
        logs = await bounded(
            [
                self.output(ref.namespace, o, cap, now, capsule.output_limit_bytes)
                for o in pending
                if o.kind == "job" and o.status
            ],
            READ_CONCURRENCY,
        )
        read = iter(logs)
        for obs in pending:
            got = next(read) if obs.kind == "job" and obs.status else obs.output
            status, error = obs.status, obs.error
            output: str | None = None
            stderr: str | None = None
            if isinstance(got, _Later):  # still in flight: looked at again shortly
                log.info("%s", got.reason)
                status, later = None, True
            elif isinstance(got, _Lost):
                status, error = "failed", error or got.reason
            elif isinstance(got, StepLog):
                if got.merged:
                    self._merged.add((ref.namespace, ref.name))
                output, stderr = got.output, got.stderr
            else:
                output = got
            if obs.stuck:
                await self.kube.delete_job(ref.namespace, obs.object_name)
            out, err, stderr = status_.cap_step(
                output, error, capsule.output_limit_bytes, n, stderr
            )
            finished = (obs.finished_at or self.clock()) if status else None
            attempts.append(
                AttemptFact(
                    obs.step_id,
                    obs.attempt,
                    obs.started_at,
                    status,
                    finished,
                    out,
                    err,
                    never_ran=obs.never_ran and status == "failed",
                    stderr=stderr,
                )
            )
        for r in previous.get("refusedAttempts") or []:
            if r["stepId"] not in settled_ids:
                t = status_.parse_rfc3339(r.get("startedAt")) or 0.0
                attempts.append(
                    AttemptFact(
                        r["stepId"],
                        int(r["attempt"]),
                        t,
                        "failed",
                        status_.parse_rfc3339(r.get("finishedAt")) or t,
                        None,
                        r.get("error"),
                    )
                )
        attempts += [w.fact() for w in asks_.waiting(previous) if w.step_id not in settled_ids]
        attempts += vanished(previous, settled_ids, observed, attempts, self.clock())
        return Facts(settled, tuple(attempts)), observed, later

    async def objects(
        self, ref: manifests.PlanRef, settled: Container[str]
    ) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
        """The run's Jobs (this Plan's own) of steps not `settled`, and the pod of each, from the
        watch's cache when it can be trusted, else listed (and the cache set right from the
        list). Trusted: this reconciler listed the run since it started (or created the run
        itself), no resync asked for a check since, and every such Job that ended has its pod at
        hand (a success is never settled without its pod's log because a pod event is late).

        A settled step's objects are not read again: a big run keeps thousands of them, and the
        pods of many are gone (the pod garbage collector deletes terminated pods past 12,500 in
        the cluster), which must not make every later reconcile list the whole run."""
        key = (ref.namespace, manifests.label_value(ref.name), ref.run)
        plan = (ref.namespace, ref.name)

        def of_settled_step(obj: dict[str, Any]) -> bool:
            return attempt_step(obj) in settled

        if self.runs is not None:  # not read again: dropped from the cache (RunObjects.settle)
            self.runs.settle(key, of_settled_step)
        if self.runs is not None and plan in self._trusted:
            jobs = unsettled(owned(self.runs.of("job", key), ref.uid), settled)
            pods = pods_by_job(self.runs.of("pod", key), jobs)
            if all(
                j["metadata"]["name"] in pods or not job_ended(j) for j in jobs
            ):  # otherwise: list, below
                return jobs, pods
        # slimmed page by page as they arrive: a big run's whole objects are never held at once
        started = self.clock()
        listed_jobs = await self.kube.list_jobs(ref.namespace, ref.selector(), _slim_job)
        listed_pods = (
            await self.kube.list_pods(ref.namespace, ref.selector(), _slim_pod)
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
        jobs = unsettled(owned(listed_jobs, ref.uid), settled)
        return jobs, pods_by_job(listed_pods, jobs) if jobs else {}

    async def output(
        self, namespace: str, obs: Observed, cap: int, now: float, limit: int = 0
    ) -> StepLog | str | _Lost | _Later | None:
        """The container log, read once when the attempt settles (before any cleanup can race
        it): its output within `cap` bytes (the Capsule's `limit`, or less: the report's share)
        and its stderr's tail (reconciler.step_logs); the termination message when the pod is
        gone.

        An output is never made up. When the log cannot be read now (the kubelet restarting
        answers 404 for a pod it does not know yet, or cannot be reached) the attempt stays in
        flight and is looked at again (`_Later`), for up to LOG_GRACE_SECONDS after it ended;
        when the log is gone for good (the pod deleted, the node's runtime lost the file, the
        node silent past the grace) a successful attempt fails saying so (`_Lost`)."""
        if obs.pod is not None:
            try:
                why = outputs.OUTPUT_LIMIT if cap == limit else outputs.REPORT_SHARE
                got = await self.logs.read(namespace, obs.pod, cap, why)
            except ApiError as e:
                # a failed attempt is settled by its error; its log is only a bonus
                gone = obs.status != "success" or (
                    e.not_found and await self.kube.get_pod(namespace, obs.pod) is None
                )
                if not gone:
                    if now - (obs.finished_at or now) < LOG_GRACE_SECONDS:
                        return _Later(f"log of {namespace}/{obs.pod} not readable yet: {e}")
                    if obs.status == "success":
                        return _Lost(
                            f"its output could not be read: the node did not serve the log "
                            f"for {LOG_GRACE_SECONDS:g}s after the step ended ({e.message[:300]})"
                        )
                log.info("log of %s/%s unavailable (%s)", namespace, obs.pod, e)
            else:
                text = got.output or ""
                if text.startswith(LOG_LOST):  # what the kubelet answers without a log file
                    return _Lost(f"its output is gone: the node lost the container's log ({text})")
                return got
        if obs.termination_message is None and obs.status == "success":
            return _Lost("its output is gone: the pod was deleted before its log was read")
        # the last lines of the log the kubelet kept (FallbackToLogsOnError), made a value alike
        return outputs.output_value(outputs.Capture.of(obs.termination_message, cap), cap)


async def bounded(calls: list[Coroutine[Any, Any, T]], limit: int) -> list[T]:
    """Await `calls` with at most `limit` in flight, in order; results in order. The first error
    propagates after every call has ended (nothing is left running behind a failed reconcile).
    `limit` workers take the calls one after another: 20,000 creates are 16 tasks, not 20,000
    (each a task and a started frame waiting its turn)."""
    results: list[Any] = [None] * len(calls)
    errors: list[Exception] = []
    todo = iter(enumerate(calls))

    async def worker() -> None:
        for i, call in todo:
            try:
                results[i] = await call
            except Exception as e:
                errors.append(e)

    await asyncio.gather(*(worker() for _ in range(min(limit, len(calls)))))
    if errors:
        raise errors[0]
    return results


def vanished(
    previous: dict[str, Any],
    settled_ids: set[str],
    observed: list[Observed],
    known: list[AttemptFact],
    now: float,
) -> list[AttemptFact]:
    """Attempts the last status had in flight whose Job or child Plan is gone (deleted by hand,
    or by anyone with the rights): they failed, so retries and onError apply as for any
    failure, and the step is never started again as the same attempt."""
    seen = {(o.step_id, o.attempt) for o in observed} | {(f.step_id, f.attempt) for f in known}
    out = []
    for f in previous.get("inFlight") or []:
        key = (str(f.get("stepId")), int(f.get("attempt") or 0))
        if key[0] in settled_ids or key in seen:
            continue
        started = parse_rfc3339(f.get("since")) or now
        out.append(
            AttemptFact(
                key[0],
                key[1],
                started,
                "failed",
                now,
                None,
                "its Job (or child Plan) was deleted before the attempt finished",
            )
        )
    return out


def unsettled(objs: list[dict[str, Any]], settled: Container[str]) -> list[dict[str, Any]]:
    """The Jobs or child Plans of steps not settled (read from the step label alone)."""
    return [o for o in objs if attempt_step(o) not in settled]


def _slim_job(obj: dict[str, Any]) -> dict[str, Any]:
    return slim_run_object("job", obj)


def _slim_pod(obj: dict[str, Any]) -> dict[str, Any]:
    return slim_run_object("pod", obj)
