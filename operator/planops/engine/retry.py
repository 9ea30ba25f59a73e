"""Retry from the failure (Argo's `retry`): a new run of a plan that keeps what an earlier run of
the same plan achieved and runs again only what did not succeed.

Why a module of its own: a retried run is an ordinary run restored from facts
(`Run.restore`), so no scheduling rule changes; all a retry adds is *which* of the earlier
records it keeps. That choice is made here, once, for both executors (the local runner's
`--retry REPORT.json` and the operator's retry annotation).

The rules:
- A main step's record is **kept** when the step succeeded, or was skipped by a false `if`
  (no error), and nothing it waits for (`dependsOn`) or reads (`$id.output` / `$id.status`)
  runs again. Its output is kept, so the steps that run again read it as before.
- Everything else **runs again**: failed steps, steps skipped by `onError: skip`, attempts a
  cancel or the deadline stopped, steps that never ran, and every step that waits for or reads
  one of those (transitively: a step is never kept on top of a result that changes).
- `from_step` (`--from STEP`) runs that step again though it succeeded, and so everything that
  depends on it (the same closure).
- A body step's control step (decide / map / reduce) runs again whole, all its items, when its
  own record is not a success or any of its body records failed (an item under
  `onError: continue`); when kept, its body records are kept with it. filter and exit steps are
  steps like any other. A capsule step runs again as a new child plan (whole).
- `finally` steps always run again (their records are never kept): they clean up after this run.
- An `ask` step always asks again (its record, the answer, is never kept), and so does a control
  step with an `ask` in its body: an answer approves one run, never a retried one, whoever asks
  for the retry (a retry with --from would otherwise run an approved action again on an old
  approval). A capsule step runs again when its child plan may ask: the target Capsule's `plan`
  has an `ask` (in a step, a body, or further down through its own capsule steps), or the
  Capsule cannot be read (`capsules`, the executor's resolver, does not find it, or none is
  given). Kept, its output would carry an approval given in another Capsule, for another run.
- Settle order: the kept records come first, in their original order, then the new ones as
  they settle (the retried run's report reads as the earlier run's kept part, continued).
- Refused: a retry of a run that succeeded (or that an exit step ended) without `from_step`:
  nothing failed; a report naming steps the plan does not have; `from_step` naming no main step.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from planops.api.capsule_models import CapsuleSpec
from planops.api.models import PlanSpec, Step
from planops.engine import references
from planops.engine.facts import Facts
from planops.engine.policy import CapsuleResolver
from planops.engine.report import StepRecord
from planops.engine.shape import shape_of

BODY_KINDS = ("decide", "map", "reduce")
#: a reference inside an `if` (its operands are parsed later; a text scan finds them all)
_IF_REFERENCE = re.compile(r"\$([A-Za-z_][A-Za-z0-9_-]*)\.(?:output|status)\b")


class RetryRefused(ValueError):  # noqa: N818 - reads as what happened, like the seed's refusals
    """The earlier run cannot be retried as asked (the message says why and what to do)."""


@dataclass(frozen=True)
class Retry:
    """What a retried run starts from: the kept records as facts (settle order), and the main
    steps that run again (declaration order)."""

    facts: Facts
    rerun: tuple[str, ...]
    kept: tuple[str, ...]


def spec_digest(spec: PlanSpec) -> str:
    """sha256 of the spec as canonical JSON (camelCase, defaults left out, sorted keys): equal
    plans, equal digests, however they were written (a default spelled out or not)."""
    text = json.dumps(spec.dump(), sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()


def plan_retry(
    spec: PlanSpec,
    records: Sequence[StepRecord],
    *,
    completed: bool,
    exited: bool = False,
    from_step: str | None = None,
    capsules: CapsuleResolver | None = None,
) -> Retry:
    """The retry of an earlier run of `spec` whose report held `records` (settle order).
    `completed` / `exited`: that report's verdict (an exit step ended it); `capsules`: the
    Capsules the capsule steps name (their plans may ask; None: every capsule step is taken to
    ask). Raises RetryRefused."""
    main = [s.id for s in spec.steps]
    index = {sid: i for i, sid in enumerate(main)}
    finals = {s.id for s in spec.finally_}
    strangers = sorted(
        {r.step_id for r in records if r.step_id.partition(".")[0] not in index.keys() | finals}
    )
    if strangers:
        raise RetryRefused(
            f"the report is not of this plan: it records step(s) {', '.join(strangers[:5])}, "
            "which the plan does not have"
        )
    if from_step is not None and from_step not in index:
        where = "a finally step (they always run again)" if from_step in finals else "no step"
        if "." in from_step:
            where = "a body step (name its control step)"
        raise RetryRefused(f"--from {from_step[:64]}: {where} of this plan's main steps")
    if from_step is None and completed:
        raise RetryRefused(
            "the run succeeded: nothing failed to retry (--from STEP runs a step again, and "
            "what depends on it)"
        )
    if from_step is None and exited:
        raise RetryRefused(
            "an exit step ended the run: nothing failed to retry (--from STEP runs a step "
            "again, and what depends on it)"
        )
    rerun = _rerun(spec, index, records, from_step, _Asks(capsules))
    kept = tuple(
        r
        for r in records
        if r.step_id.partition(".")[0] in index and index[r.step_id.partition(".")[0]] not in rerun
    )
    return Retry(
        Facts(settled=kept),
        tuple(main[i] for i in sorted(rerun)),
        tuple(main[i] for i in range(len(main)) if i not in rerun),
    )


def _rerun(
    spec: PlanSpec,
    index: dict[str, int],
    records: Sequence[StepRecord],
    from_step: str | None,
    asks: _Asks,
) -> set[int]:
    """The main steps that run again: those not kept as they were, closed over what waits for
    or reads them."""
    own: dict[int, StepRecord] = {}
    body_failed: set[int] = set()
    for r in records:
        top, dot, _ = r.step_id.partition(".")
        i = index.get(top)
        if i is None:
            continue
        if dot:
            if r.status == "failed":
                body_failed.add(i)
        else:
            own[i] = r
    roots = {
        i
        for i in range(len(spec.steps))
        if not _keepable(own.get(i))
        or (i in body_failed and _is_body_control(spec, i))
        or asks.step(spec.steps[i])
    }
    if from_step is not None:
        roots.add(index[from_step])
    readers = _readers(spec, index)
    rerun: set[int] = set()
    todo = list(roots)
    while todo:
        i = todo.pop()
        if i in rerun:
            continue
        rerun.add(i)
        todo.extend(d for d in readers[i] if d not in rerun)
    return rerun


def _keepable(record: StepRecord | None) -> bool:
    if record is None:
        return False
    return record.status == "success" or (record.status == "skipped" and not record.error)


class _Asks:
    """Whether a step may ask: it is an `ask`, has one in its body (decide / map / reduce), or
    calls a Capsule whose plan may (a capsule step, or a capsule call in a body), through the
    Capsules' own capsule steps. A Capsule that cannot be read may ask; one met again on the way
    down (a cycle, which dispatch refuses) adds nothing. Each Capsule is looked at once."""

    def __init__(self, capsules: CapsuleResolver | None) -> None:
        self.capsules = capsules
        self.known: dict[str, bool] = {}

    def step(self, step: Step) -> bool:
        if step.ask is not None or (step.capsule is not None and self.capsule(step.capsule)):
            return True
        return any(self.body(getattr(step, k)) for k in BODY_KINDS)

    def body(self, value: Any) -> bool:
        """An `ask` step, or a call of a Capsule that may ask, among the (loosely typed) body
        steps of `value`; a step's `input` is data, not steps, and is not searched."""
        if isinstance(value, list):
            return any(self.body(v) for v in value)
        if not isinstance(value, dict):
            return False
        if "id" in value and value.get("ask") is not None:
            return True
        if isinstance(value.get("capsule"), str) and self.capsule(value["capsule"]):
            return True
        return any(self.body(v) for k, v in value.items() if k != "input")

    def capsule(self, name: str) -> bool:
        if name in self.known:
            return self.known[name]
        self.known[name] = False  # met again below it: a cycle adds nothing
        found = self.capsules(name) if self.capsules is not None else None
        child = found.plan if found is not None else None
        asks = found is None or (
            child is not None and any(self.step(s) for s in (*child.steps, *child.finally_))
        )
        self.known[name] = asks
        return asks


class _Unread(Exception):  # noqa: N818 - a signal, not an error
    def __init__(self, name: str) -> None:
        self.name = name


def unread_capsule(spec: PlanSpec, read: Mapping[str, CapsuleSpec | None]) -> str | None:
    """A Capsule whose plan the retry of `spec` looks at (plan_retry's `capsules`) that `read`
    (name -> the Capsule, None when there is none) does not hold: an executor that reads
    Capsules one request at a time (the operator) reads it and asks again, until None."""

    def resolve(name: str) -> CapsuleSpec | None:
        if name not in read:
            raise _Unread(name)
        return read[name]

    asks = _Asks(resolve)
    try:
        for step in spec.steps:
            asks.step(step)
    except _Unread as e:
        return e.name
    return None


def _is_body_control(spec: PlanSpec, i: int) -> bool:
    step = spec.steps[i]
    return any(getattr(step, kind) is not None for kind in BODY_KINDS)


def _readers(spec: PlanSpec, index: dict[str, int]) -> list[set[int]]:
    """For each step, the steps that wait for it (dependsOn) or read its result ($id refs in
    `input` or `if`): what must run again when it does."""
    graph = shape_of(spec).graph
    readers: list[set[int]] = [set(graph.dependents[i]) for i in range(len(spec.steps))]
    for j, step in enumerate(spec.steps):
        named = {ref.step for _, ref in references.walk(step.input)}
        if step.if_:
            named.update(m.group(1) for m in _IF_REFERENCE.finditer(step.if_))
        for sid in named:
            i = index.get(sid)
            if i is not None and i != j:
                readers[i].add(j)
    return readers
