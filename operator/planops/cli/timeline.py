"""The order of a Plan's Events, one for every verb that lists them (`describe`'s "Recent events"
and `trace`), so the two always agree.

By time first: `eventTime` (microseconds), else `lastTimestamp`/`firstTimestamp` (seconds),
compared as instants, not as text (`...:05Z` and `...:05.120000Z` would sort the wrong way round
as strings). Then by cause: the operator records one reconcile's events together, a few
microseconds apart, and records the steps it starts before the settlements that made them ready;
so within a few seconds of a step's `StepStarted`, the settlement of a step it depends on
(`StepSucceeded`, `StepFailed`, `StepSkipped`) is moved before it. A step never starts before its
dependencies settle, so this only ever restores what happened.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from planops.api.models import PlanSpec
from planops.engine import step_kind
from planops.engine.bodies import BODY_KINDS, BodyError, bodies, parse
from planops.engine.report import parse_rfc3339

SETTLED = ("StepSucceeded", "StepFailed", "StepSkipped")
#: how far after a StepStarted a dependency's settlement is looked for (one reconcile's events)
WINDOW_SECONDS = 5.0


def when(event: dict[str, Any]) -> float:
    for key in ("eventTime", "lastTimestamp", "firstTimestamp"):
        t = parse_rfc3339(event.get(key))
        if t is not None:
            return t
    return 0.0


def shown_time(event: dict[str, Any]) -> str:
    return str(
        event.get("eventTime") or event.get("lastTimestamp") or event.get("firstTimestamp") or ""
    )


def _step(event: dict[str, Any]) -> str | None:
    """The step an event is about: its message says `step ID ...`."""
    words = str(event.get("message") or "").split(maxsplit=2)
    return words[1] if len(words) >= 2 and words[0] == "step" else None


class _Deps:
    """What a step (a top-level id, or a body step's qualified id) waits for."""

    def __init__(self, spec: PlanSpec) -> None:
        self.top = {s.id: tuple(s.depends_on) for s in spec.steps}
        main = tuple(self.top)  # a finally step starts once every main step has settled
        self.top.update({s.id: (*main, *s.depends_on) for s in spec.finally_})
        self.body: dict[str, tuple[str, dict[str, list[str]]]] = {}
        for s in spec.steps:
            kind = step_kind(s)
            if kind not in BODY_KINDS:
                continue
            ids: dict[str, list[str]] = {}
            for key, raw in bodies(kind, getattr(s, kind)).items():
                try:
                    ids[key] = [b.id for b in parse(raw)]
                except BodyError:
                    ids[key] = []
            self.body[s.id] = (kind, ids)

    def of(self, step: str) -> tuple[str, ...]:
        if step in self.top:
            return self.top[step]
        control, _, rest = step.partition(".")
        key, _, inner = rest.partition(".")
        if control not in self.body or not inner:
            return ()
        kind, ids = self.body[control]
        chain = ids.get(key if kind == "decide" else "do", [])
        if inner not in chain:
            return ()
        n = chain.index(inner)
        if n:
            return (f"{control}.{key}.{chain[n - 1]}",)
        if kind == "reduce" and key.isdigit() and int(key) > 0 and chain:
            return (f"{control}.{int(key) - 1}.{chain[-1]}",)  # items one at a time
        return self.top.get(control, ())


def order(events: Sequence[dict[str, Any]], spec: PlanSpec | None) -> list[dict[str, Any]]:
    """`events` by time, each StepStarted after the settlements of its dependencies (the
    module's doc says why); without the spec (the Plan is gone), by time alone."""
    out = sorted(events, key=when)
    if spec is None:
        return out
    deps = _Deps(spec)
    i = 0
    while i < len(out):
        event = out[i]
        step = _step(event)
        if event.get("reason") != "StepStarted" or step is None:
            i += 1
            continue
        waits = set(deps.of(step))
        limit = when(event) + WINDOW_SECONDS
        last = None
        for j in range(i + 1, len(out)):
            later = out[j]
            if when(later) > limit or later.get("reason") == "PlanStarted":
                break
            if later.get("reason") in SETTLED and _step(later) in waits:
                last = j
        if last is None:
            i += 1
            continue
        out.insert(last, out.pop(i))  # now just after that settlement; look at what moved up
    return out
