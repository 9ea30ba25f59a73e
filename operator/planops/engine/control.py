"""Seed 2 control steps the decider evaluates itself (no Job, no process): `exit` and `filter`,
and the gate grammar `{value, op, to}` they share.

    gate ops: eq, ne (any JSON value); gt, lt, gte, lte (numbers); empty, not_empty (arrays,
    strings, objects, null; no `to`); contains (substring, or array membership)

Result shapes (the step's output, as JSON text, usable as `{{id.json...}}`):
- exit (not fired): {"passed": true}; fired: the plan ends (see decider)
- filter: {"count", "items": [...], "dropped": [...], "dropped_count"} in input order
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from planops.engine import templates

OPS = ("eq", "ne", "gt", "lt", "gte", "lte", "empty", "not_empty", "contains")
UNARY = ("empty", "not_empty")


class GateError(ValueError):
    """A gate that cannot be evaluated on these values (e.g. gt on a string)."""


def gate_problems(gate: Any) -> list[tuple[str, str]]:
    """Static problems of a gate, as (field suffix, message)."""
    if not isinstance(gate, dict):
        return [("", "a gate is an object {value, op, to}")]
    out = []
    extra = set(gate) - {"value", "op", "to"}
    if extra:
        out.append((f".{sorted(extra)[0]}", "unknown field (a gate has value, op, to)"))
    if "value" not in gate:
        out.append((".value", "required field is missing"))
    op = gate.get("op")
    if op not in OPS:
        out.append((".op", f"op is {op!r}; expected one of {', '.join(OPS)}"))
    elif op in UNARY and "to" in gate:
        out.append((".to", f"{op} takes no `to`"))
    elif op not in UNARY and "to" not in gate:
        out.append((".to", f"{op} needs `to`"))
    return out


def _number(v: Any, op: str) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise GateError(f"{op} compares numbers; got {v!r}")
    return float(v)


def holds(gate: dict[str, Any], lookup: templates.Lookup) -> bool:
    """Evaluate a gate, rendering its templates (typed splices keep numbers numeric)."""
    value = templates.render(gate.get("value"), lookup)
    op = gate["op"]
    to = templates.render(gate.get("to"), lookup)
    if op == "eq":
        return bool(value == to)
    if op == "ne":
        return bool(value != to)
    if op in ("gt", "lt", "gte", "lte"):
        a, b = _number(value, op), _number(to, op)
        return bool({"gt": a > b, "lt": a < b, "gte": a >= b, "lte": a <= b}[op])
    if op in UNARY:
        if value is not None and not isinstance(value, str | list | dict):
            raise GateError(f"{op} applies to arrays, strings, objects and null; got {value!r}")
        return bool((not value) == (op == "empty"))
    if isinstance(value, str):  # contains
        return isinstance(to, str) and to in value
    if isinstance(value, list):
        return to in value
    raise GateError(f"contains applies to a string or an array; got {value!r}")


@dataclass(frozen=True)
class ExitOutcome:
    fired: bool
    status: str  # success | error
    message: str | None
    output: Any


def evaluate_exit(spec: dict[str, Any], lookup: templates.Lookup) -> ExitOutcome:
    when = spec.get("when")
    fired = True if when is None else holds(when, lookup)
    message = templates.render(spec.get("message"), lookup) if fired else None
    output = templates.render(spec.get("output"), lookup) if fired and "output" in spec else None
    return ExitOutcome(fired, spec.get("status", "success"), message, output)


def evaluate_filter(spec: dict[str, Any], lookup: templates.Lookup) -> dict[str, Any]:
    items = templates.render(spec.get("over"), lookup)
    if not isinstance(items, list):
        raise GateError(f"filter.over must render to an array; got {type(items).__name__}")
    kept: list[Any] = []
    dropped: list[Any] = []
    for index, item in enumerate(items):

        def scoped(root: str, item: Any = item, index: int = index) -> Any:
            return (
                {"item": item, "index": index}.get(root)
                if root in ("item", "index")
                else lookup(root)
            )

        (kept if holds(spec["where"], scoped) else dropped).append(item)
    return {"count": len(kept), "items": kept, "dropped": dropped, "dropped_count": len(dropped)}
