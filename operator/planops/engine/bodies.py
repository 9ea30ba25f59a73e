"""Seed 2 bodies: the `then` / `else` of `decide` and the `do` of `map` / `reduce`.

A body is either a single call (`{tool: x, input: ...}`, `{shell: ...}`, no id) or a list of
steps with ids "run in order". Both become a small plan of their own (the *body plan*): a single
call is one step named `call`; a list is chained, each step depending on the one before. The
decider runs one body plan per branch or item as a nested `Run` (engine.decider), so body steps
go through exactly the same dispatch, retry and report machinery as top-level steps.

Body steps are named `<control step>.<branch or item index>.<body step>` wherever they appear
outside the body (reports, Jobs, events, metrics): `route.then.call`, `scan.3.probe`.

A body step's *result* (what a map collects, what a reduce accumulates, what a decide returns) is
its output parsed as JSON when it is JSON, else its text (an output never ends with the line end
its program printed last: engine.outputs); a skipped or failed step's result is null.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from planops.api.models import PlanSpec, Step
from planops.engine.references import loads

#: Control steps that carry bodies (they may not be nested: seed 2's body rules).
BODY_KINDS = ("decide", "map", "reduce")
#: The id of a single-call body's one step.
CALL = "call"
#: Every record of a run, body steps included, counts against this: the run's PlanReport objects
#: hold them (at least 256 bytes of text each, REPORT_BUDGET in all: docs/operator.md).
MAX_RECORDS = 200_000


class BodyError(ValueError):
    """A body that cannot be read; `path` is relative to the body (`[1].shell`, `.input`)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path


def bodies(kind: str, spec: Any) -> dict[str, Any]:
    """The bodies of a control step's spec, by key (`then`, `else`, `do`); absent ones left out."""
    if not isinstance(spec, dict):
        return {}
    keys = ("then", "else") if kind == "decide" else ("do",)
    return {k: spec[k] for k in keys if spec.get(k) is not None}


def parse(body: Any) -> list[Step]:
    """The steps of a body, unchained; raises BodyError on the first thing that is not a step."""
    if isinstance(body, dict):
        if "id" in body:
            raise BodyError(".id", "a single-call body has no id (use a list of steps for ids)")
        return [_step({**body, "id": CALL}, "")]
    if isinstance(body, list):
        if not body:
            raise BodyError("", "a body lists at least one step")
        return [_step(item, f"[{n}]") for n, item in enumerate(body)]
    raise BodyError("", "a body is a single call (an object) or a list of steps")


def _step(raw: Any, path: str) -> Step:
    if not isinstance(raw, dict):
        raise BodyError(path, "expected a step (an object)")
    try:
        return Step.model_validate(raw)
    except ValidationError as e:
        err = e.errors()[0]
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"])
        raise BodyError(f"{path}{where}", err["msg"]) from None


def plan(steps: list[Step], outer: PlanSpec) -> PlanSpec:
    """The body plan: steps chained in order, the outer plan's input visible."""
    chained = [
        s
        if n == 0 or steps[n - 1].id in s.depends_on
        else s.model_copy(update={"depends_on": [steps[n - 1].id, *s.depends_on]})
        for n, s in enumerate(steps)
    ]
    return PlanSpec(steps=chained, input=outer.input)


def makes_child_plans(spec: PlanSpec) -> bool:
    """Whether a run of `spec` may make child Plans: a capsule or template step, at the top or
    in a decide/map/reduce body (a body that cannot be read makes none)."""
    for step in (*spec.steps, *spec.finally_):
        if step.capsule or step.template:
            return True
        for kind in BODY_KINDS:
            for body in bodies(kind, getattr(step, kind)).values():
                try:
                    if any(b.capsule or b.template for b in parse(body)):
                        return True
                except BodyError:
                    continue
    return False


def qualified(control: str, key: str, step: str) -> str:
    return f"{control}.{key}.{step}"


def result_value(status: str, output: str | None) -> Any:
    if status != "success" or output is None:
        return None
    try:
        return loads(output)
    except ValueError:  # not JSON, or nested too deeply to be used as a value
        return output
