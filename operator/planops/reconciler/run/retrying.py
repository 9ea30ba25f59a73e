"""A retry asked for by annotation (`planops.dev/retry: "<token>[:from=STEP]"`, what `kubectl plan
retry NAME [--from STEP]` writes): a new run of the Plan, seeded with the records of its last run
that it keeps (engine.retry decides which), so only what failed, what that stopped and what never
ran is run again.

Why these rules:
- A retry is asked for once per token: the status records the token each run started with
  (`run.retry`), so the same annotation never starts a second retry, and one that was present
  when a run started for another reason (a new generation, a re-run) is no request.
- Its run id is derived from the run it retries and the run's number (`retry_run_id`), and a
  run that is under way keeps its id (`run.id`), so a restarted operator continues the same run.
  A run id is never used twice within a Plan: an earlier run's PlanReports, history entry and
  archive row are keyed by it, and a second run of that id would replace the first's or never
  be archived (its `status.archived` mark already said so).
- Every new run (a generation, a re-run, a retry) counts one more in `run.serial`, and its id
  hashes that number (manifests.run_id; a retry's also the run it retries, and another prefix,
  so no full run's id spells it): a re-run value or a token used again, or the annotation taken
  away, is a new run under a new id, never an earlier run's again (its answers, its history
  entry, its PlanReports and its archive row stay its own). Nothing an author writes is hashed:
  a run id is ten hex digits (40 bits), and with the re-run value or the token in the hash an
  author could search for one that names an id the Plan had. An id the status knows (the
  current run, the history) is skipped by counting on, should ten digits collide by chance.
  The count lives in the status, which only the operator writes, and is derived from it alone:
  a restarted operator or a new leader that reads the same status computes the same id.
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
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from planops.api import PlanSpec, names
from planops.engine import CapsuleResolver, Facts, StepRecord
from planops.engine.retry import RetryRefused, plan_retry
from planops.kube import manifests
from planops.reconciler.effects.intents import Told
from planops.reconciler.history import run_history
from planops.reconciler.run.judging import Judgement

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
    uid, known = meta["uid"], set(run_history.run_ids(previous))
    if not same:  # a new generation or re-run: a full run; the annotation is no request
        n, rid = _new(lambda k: manifests.run_id(uid, generation, k), previous, known)
        return Choice(rid, {"serial": n} | ({"retry": token_of(value)} if value else {}))
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
    of_run = str(before["id"])
    n, new_rid = _new(lambda k: retry_run_id(uid, generation, of_run, k), previous, known)
    info = {"serial": n, "retry": token, "retryOf": of_run} | (
        {"retryFrom": from_step} if from_step else {}
    )
    return Choice(new_rid, info, Request(token, from_step, of_run))


def _new(name: Callable[[int], str], previous: dict[str, Any], known: set[str]) -> tuple[int, str]:
    """A new run's number (one more than the status counts) and its id (`name` of the number),
    counting on past an id the status knows (a chance collision of ten hex digits)."""
    n = serial(previous) + 1
    while (rid := name(n)) in known:
        n += 1
    return n, rid


def child_requests(
    plan: dict[str, Any], previous: dict[str, Any], told: Told
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A capsule step's child Plan takes no re-run and no retry: its runs are its parent's step
    attempts, inside its parent's run (and, on a Capsule with a limit, inside the slot an
    ancestor holds: queue.slots). A re-run, which needs no `use`, once took a child out of
    that slot and into the queue, where two such children could wait for ever for the slots
    their parents hold. Returns the Plan's metadata without those annotations, and the status to
    build on: a request not refused yet is refused now, with a RerunRefused Warning Event (told
    to `told`), and recorded (`run.ignored`: written with the reconcile's status) so that it is
    told once."""
    meta = plan["metadata"]
    notes = meta.get("annotations") or {}
    asked = ", ".join(
        f"{k}={token_of(notes[k])}" for k in (names.ANNOTATION_RERUN, ANNOTATION) if notes.get(k)
    )
    run = previous.get("run") or {}
    if asked and run and run.get("ignored") != asked:
        parent = manifests.full_value(meta, names.LABEL_PARENT)
        step = manifests.full_value(meta, names.LABEL_STEP)
        told(
            REASON_CHILD_REFUSED,
            f"{asked[:300]}: not taken: this Plan is the child of step {step} of Plan {parent}, "
            f"and its runs are its parent's (re-run Plan {parent}, or retry it with --from "
            f"{step})",
            warning=True,
        )
        previous = {**previous, "run": {**run, "ignored": asked}}
    kept = {k: v for k, v in notes.items() if k not in (names.ANNOTATION_RERUN, ANNOTATION)}
    return {**meta, "annotations": kept}, previous


def retry_run_id(uid: str, generation: int, of_run: str, serial: int) -> str:
    """The id of a retry of run `of_run` that is the Plan's run number `serial`: 10 hex digits
    like every run id, hashed from a JSON list of its own prefix (a full run's starts with
    `["run"`), with nothing an author writes (not the token: the module's docstring)."""
    text = json.dumps(["retry-of", uid, generation, of_run, serial])
    return hashlib.sha256(text.encode()).hexdigest()[:10]


@dataclass(frozen=True)
class Earlier:
    """What a retry read of the run it retries (effects.reads): its records, whether it
    completed and whether an exit ended it, and the Capsules its capsule steps name."""

    records: list[StepRecord]
    completed: bool
    exited: bool
    capsules: CapsuleResolver

    @classmethod
    def of_status(cls, status: dict[str, Any], capsules_: CapsuleResolver) -> Earlier:
        """An earlier run read back whole (run_history.earlier_status)."""
        report = status.get("report") or {}
        records = [StepRecord.from_json(s) for s in report.get("steps") or []]
        return cls(
            records, bool(report.get("completed")), report.get("exit") is not None, capsules_
        )


@dataclass(frozen=True)
class Refused:
    """A retry refused: why, and the status that records its token as seen."""

    why: str
    status: dict[str, Any]


def seed(
    choice: Choice,
    previous: dict[str, Any],
    judged: Judgement,
    earlier: Earlier | None,
    told: Told,
) -> Facts | Refused:
    """What the reconcile's run starts from: nothing for a run that is no retry; for a new retry,
    the records of the retried run it keeps (engine.retry decides which), read before the
    earlier run is stopped, with a RetryStarted Event; for a retried run that waited before it
    started (it waited for a slot of its Capsule), the same from the run it retries as the
    history keeps it (nothing when the history no longer has it: then every step runs).
    Refused (RetryRefused, told here) when the engine refuses the retry, or the plan is refused
    now: the ended run stays."""
    request = choice.request
    if request is None and not choice.reseed:
        return Facts()
    spec, _, errors = judged
    if choice.reseed:
        return _reseed(choice, previous, spec if not errors else None, earlier)
    assert request is not None
    try:
        if spec is None or errors or earlier is None:  # refused before anything runs
            raise RetryRefused(
                f"the plan is refused now, nothing runs: {'; '.join(str(e) for e in errors[:3])}"
            )
        retry = plan_retry(
            spec,
            earlier.records,
            completed=earlier.completed,
            exited=earlier.exited,
            from_step=request.from_step,
            capsules=earlier.capsules,
        )
    except RetryRefused as e:
        why = f"retry {request.token} of run {request.of_run}: {e}"
        told(REASON_REFUSED, why, warning=True)
        return Refused(why, {**previous, "run": {**previous["run"], "retry": request.token}})
    again = ", ".join(retry.rerun) or "none of the main steps"
    told(
        REASON_STARTED,
        f"run {choice.rid} retries run {request.of_run}: {len(retry.kept)} steps kept, "
        f"running again: {again}",
        run=choice.rid,
    )
    return retry.facts


def _reseed(
    choice: Choice, previous: dict[str, Any], spec: PlanSpec | None, earlier: Earlier | None
) -> Facts:
    if earlier is None or spec is None:
        return Facts()
    before = previous.get("run") or {}
    try:
        retry = plan_retry(
            spec,
            earlier.records,
            completed=earlier.completed,
            exited=earlier.exited,
            from_step=before.get("retryFrom"),
            capsules=earlier.capsules,
        )
    except RetryRefused:
        return Facts()
    return retry.facts


def retried(choice: Choice, previous: dict[str, Any]) -> str | None:
    """The run whose records the reconcile's run starts from (None: it starts from nothing):
    what a retry reads before it decides (effects.reads)."""
    if choice.reseed:
        return str((previous.get("run") or {}).get("retryOf"))
    if choice.request is not None:
        return choice.request.of_run
    return None
