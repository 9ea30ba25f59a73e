"""A retry asked for by annotation (`planops.dev/retry: "<token>[:from=STEP]"`, what `kubectl plan
retry NAME [--from STEP]` writes): a new run of the Plan, seeded with the records of its last run
that it keeps (engine.retry decides which), so only what failed, what that stopped and what never
ran is run again.

Why these rules:
- A retry is asked for once per token: the status records the token each run started with
  (`run.retry`), so the same annotation never starts a second retry, and one that was present
  when a run started for another reason (a new generation, a re-run) is no request.
- Its run id is derived from the run it retries and the token (`retry_run_id`), and a run that
  is under way keeps its id (`run.id`), so a restarted operator continues the same run. A run id
  is never used twice within a Plan: an earlier run's PlanReports, history entry and archive row
  are keyed by it, and a second run of that id would replace the first's or never be archived.
  So a token used again (t1, t2, t1) names a new run (it retries another run), a re-run value
  cannot spell a retry's id (another hash input), and a retry whose id the status already knows
  (current run or history) is refused.
- Every new run (a generation, a re-run, a retry) counts one more in `run.serial`, and a full
  run's id hashes that number (manifests.run_id): a re-run value used again, or the annotation
  taken away, is a new run under a new id, never an earlier run's again (its answers, its
  history entry, its PlanReports and its archive row stay its own). The count lives in the
  status, which only the operator writes, and is derived from it alone: a restarted operator or
  a new leader that reads the same status computes the same id.
- It waits for the run it retries to end: a token written while a run is under way is taken up
  when that run ends.
- The earlier run's records are read before anything of it is stopped (its PlanReports go when
  the new run starts): the status, and its PlanReport objects when the status holds a summary.
- A retry the engine refuses (nothing failed and no --from, a --from naming no main step) starts
  nothing: a RetryRefused Warning Event says why, and the status records the token as seen.
- Whether the Plan's recorded author may still use its Capsule is asked before a retried run
  starts, as before a re-run (the reconcile's author check: a retry is no new spec).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from planops.api import CapsuleSpec, PlanSpec, names
from planops.engine import CapsuleResolver, Facts, StepRecord, capsules
from planops.engine.retry import RetryRefused, plan_retry, unread_capsule
from planops.kube import manifests
from planops.kube.api import KubeApi
from planops.kube.events import Recorder
from planops.reconciler.effects.writing import StatusWriter
from planops.reconciler.history import chunks as reports_
from planops.reconciler.history import replacing as earlier_runs
from planops.reconciler.history import run_history
from planops.reconciler.run.judging import Verdict

ANNOTATION = names.ANNOTATION_RETRY
REASON_STARTED = "RetryStarted"
REASON_REFUSED = "RetryRefused"
#: a re-run or retry asked of a capsule step's child Plan (child_requests)
REASON_CHILD_REFUSED = "RerunRefused"


@dataclass(frozen=True)
class Request:
    """A retry to start now: the annotation's token, its --from step, and the run it retries."""

    token: str
    from_step: str | None
    of_run: str
    #: why it is refused before anything is read (its run id is one the Plan already had)
    refusal: str | None = None


@dataclass(frozen=True)
class Choice:
    """The run a reconcile is about: its id, what its status records of the retry annotation,
    and the retry to start (None: no new retry)."""

    rid: str
    info: dict[str, Any] = field(default_factory=dict)
    request: Request | None = None
    #: a retried run that has not started (it waited for a slot of its Capsule): it starts from
    #: the records of the run it retries, read again (that run is in status.history now)
    reseed: bool = False


#: the longest retry token or re-run value the status and Events repeat as it was written (an
#: annotation may be 256 KiB)
MAX_TOKEN = 128


def parse(value: str) -> tuple[str, str | None]:
    """`<token>[:from=STEP]` -> (token, STEP or None). The whole value is the token's identity:
    the same token with another --from is another request. A value longer than MAX_TOKEN is
    known by its beginning and its digest."""
    _, sep, rest = value.partition(":from=")
    return token_of(value), (rest or None) if sep else None


def token_of(value: str) -> str:
    """An annotation's value (the retry token, the re-run value) as the status and Events repeat
    it: itself, or past MAX_TOKEN its beginning and its digest (distinct values stay distinct)."""
    if len(value) <= MAX_TOKEN:
        return value
    return value[:64] + "...sha256:" + hashlib.sha256(value.encode()).hexdigest()[:32]


def serial(previous: dict[str, Any]) -> int:
    """How many runs the Plan's status counts (status.run.serial: its current run's number; 0
    before the first run, and for a run started before runs were counted)."""
    n = (previous.get("run") or {}).get("serial")
    return n if isinstance(n, int) and not isinstance(n, bool) and n > 0 else 0


def choose(meta: dict[str, Any], previous: dict[str, Any], generation: int, rerun: str) -> Choice:
    """The run for this Plan now, given its annotations and its status. Pure."""
    value = (meta.get("annotations") or {}).get(ANNOTATION, "")
    before = previous.get("run") or {}
    same = (
        bool(before.get("id"))
        and before.get("generation") == generation
        and (before.get("rerun") or "") == token_of(rerun)
    )
    number = {"serial": serial(previous) + 1}  # a new run's: one more than the status counts
    if not same:  # a new generation or re-run: a full run; the annotation is no request
        rid = manifests.run_id(meta["uid"], generation, rerun, number["serial"])
        return Choice(rid, number | ({"retry": token_of(value)} if value else {}))
    kept = {
        k: before[k]
        for k in ("serial", "retry", "retryOf", "retryFrom", "ignored")
        if before.get(k)
    }
    if token_of(value) in ("", before.get("retry") or "") or not names.ended(previous.get("phase")):
        # nothing new asked (or taken away: nothing to undo), or the run is under way
        unstarted = bool(before.get("retryOf")) and not before.get("startedAt")
        return Choice(str(before["id"]), kept, reseed=unstarted)
    token, from_step = parse(value)
    new_rid = retry_run_id(meta["uid"], generation, rerun, str(before["id"]), token)
    if new_rid in run_history.run_ids(previous):
        why = f"its run id {new_rid} is one this Plan already ran (a run id is never used twice)"
        return Choice(new_rid, kept, Request(token, from_step, str(before["id"]), why))
    info = (
        number
        | {"retry": token, "retryOf": before["id"]}
        | ({"retryFrom": from_step} if from_step else {})
    )
    return Choice(new_rid, info, Request(token, from_step, str(before["id"])))


async def child_requests(
    plan: dict[str, Any], previous: dict[str, Any], status: StatusWriter, events: Recorder
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A capsule step's child Plan takes no re-run and no retry: its runs are its parent's step
    attempts, inside its parent's run (and, on a Capsule with a limit, inside the slot an
    ancestor holds: reconciler.slots). A re-run, which needs no `use`, once took a child out of
    that slot and into the queue, where two such children could wait for ever for the slots
    their parents hold. Returns the Plan's metadata without those annotations, and its status;
    a request not refused yet is refused now, with a RerunRefused Warning Event, and recorded
    (`run.ignored`) so that it is told once."""
    meta = plan["metadata"]
    notes = meta.get("annotations") or {}
    asked = ", ".join(
        f"{k}={token_of(notes[k])}" for k in (names.ANNOTATION_RERUN, ANNOTATION) if notes.get(k)
    )
    run = previous.get("run") or {}
    if asked and run and run.get("ignored") != asked:
        parent = manifests.full_value(meta, names.LABEL_PARENT)
        step = manifests.full_value(meta, names.LABEL_STEP)
        events(
            REASON_CHILD_REFUSED,
            f"{asked[:300]}: not taken: this Plan is the child of step {step} of Plan {parent}, "
            f"and its runs are its parent's (re-run Plan {parent}, or retry it with --from "
            f"{step})",
            warning=True,
        )
        previous = {**previous, "run": {**run, "ignored": asked}}
        await status.write(plan, previous)
        await events.flush()
    kept = {k: v for k, v in notes.items() if k not in (names.ANNOTATION_RERUN, ANNOTATION)}
    return {**meta, "annotations": kept}, previous


def retry_run_id(uid: str, generation: int, rerun: str, of_run: str, token: str) -> str:
    """The id of the retry `token` of run `of_run`: 10 hex digits like every run id, hashed from
    a JSON list (a run's own id hashes text that starts with the Plan's uid, never `[`), so no
    re-run value spells it, and a token used again retries another run, under another id."""
    text = json.dumps(["retry-of", uid, generation, rerun, of_run, token])
    return hashlib.sha256(text.encode()).hexdigest()[:10]


async def earlier_records(
    kube: KubeApi, ref: manifests.PlanRef, previous: dict[str, Any]
) -> tuple[list[StepRecord], bool, bool]:
    """The records of the run `previous` (the status) describes, whole: its PlanReport objects
    when the status holds a summary. Also whether it completed, and whether an exit ended it."""
    report = previous.get("report") or {}
    steps = report.get("steps") or []
    if report.get("reportObjects"):
        earlier = manifests.PlanRef(ref.namespace, ref.name, ref.uid, str(previous["run"]["id"]))
        listed = await kube.list_plan_reports(ref.namespace, reports_.selector(earlier))
        steps = reports_.records_json(listed, earlier.uid, earlier.run)
    records = [StepRecord.from_json(s) for s in steps]
    return records, bool(report.get("completed")), report.get("exit") is not None


async def seed(
    kube: KubeApi,
    judge: Callable[..., Awaitable[Verdict]],
    status: StatusWriter,
    plan: dict[str, Any],
    choice: Choice,
    events: Recorder,
) -> Facts | None:
    """What the reconcile's run starts from: nothing for a run that is no new retry, else the
    records the retried run keeps, read before the earlier run is stopped. None: the retry is
    refused (the Event and the status are written here). A Plan invalid now starts from nothing
    (the reconcile reports it, as for any run)."""
    request = choice.request
    if choice.reseed:
        return await _reseed(kube, judge, plan)
    if request is None:
        return Facts()
    meta, previous = plan["metadata"], plan.get("status") or {}
    spec, _, errors = await judge(plan, reuse=True)
    try:
        if request.refusal:
            raise RetryRefused(request.refusal)
        if spec is None or errors:  # refused before anything runs; the ended run stays
            raise RetryRefused(
                f"the plan is refused now, nothing runs: {'; '.join(str(e) for e in errors[:3])}"
            )
        ref = manifests.PlanRef(meta["namespace"], meta["name"], meta["uid"], choice.rid)
        records, completed, exited = await earlier_records(kube, ref, previous)
        retry = plan_retry(
            spec,
            records,
            completed=completed,
            exited=exited,
            from_step=request.from_step,
            capsules=await capsule_plans(kube, ref.namespace, spec),
        )
    except RetryRefused as e:
        events(REASON_REFUSED, f"retry {request.token} of run {request.of_run}: {e}", warning=True)
        await status.write(plan, {**previous, "run": {**previous["run"], "retry": request.token}})
        await events.flush()
        return None
    again = ", ".join(retry.rerun) or "none of the main steps"
    events(
        REASON_STARTED,
        f"run {choice.rid} retries run {request.of_run}: {len(retry.kept)} steps kept, "
        f"running again: {again}",
        run=choice.rid,
    )
    return retry.facts


async def _reseed(
    kube: KubeApi, judge: Callable[..., Awaitable[Verdict]], plan: dict[str, Any]
) -> Facts:
    """The kept records of a retried run that waited before it started, from the run it
    retries as status.history keeps it (nothing when the history no longer has it: then every
    step runs)."""
    before = (plan.get("status") or {}).get("run") or {}
    earlier = await earlier_runs.earlier_run(kube, plan, str(before["retryOf"]))
    spec, _, errors = await judge(plan, reuse=True)
    if earlier is None or spec is None or errors:
        return Facts()
    report = earlier.get("report") or {}
    records = [StepRecord.from_json(s) for s in report.get("steps") or []]
    try:
        retry = plan_retry(
            spec,
            records,
            completed=bool(report.get("completed")),
            exited=report.get("exit") is not None,
            from_step=before.get("retryFrom"),
            capsules=await capsule_plans(kube, str(plan["metadata"]["namespace"]), spec),
        )
    except RetryRefused:
        return Facts()
    return retry.facts


async def capsule_plans(kube: KubeApi, namespace: str, spec: PlanSpec) -> CapsuleResolver:
    """The Capsules the retry of `spec` looks at (whether a kept capsule step's child plan may
    ask: engine.retry), read from the API once each; one that is missing or cannot be read is
    None (its steps run again)."""
    read: dict[str, CapsuleSpec | None] = {}
    while (name := unread_capsule(spec, read)) is not None:
        raw = await kube.get_capsule(namespace, name)
        try:
            read[name] = CapsuleSpec.model_validate(raw.get("spec") or {}) if raw else None
        except ValidationError:
            read[name] = None
    return capsules({n: c for n, c in read.items() if c is not None})
