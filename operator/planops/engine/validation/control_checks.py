"""Seed 2 control steps' fields. Which fields a decide, map, reduce, exit or filter step takes,
which it needs, and what their values may be are JSON Schemas (SCHEMAS), evaluated by the
project's own evaluator (engine.jsonschemas: RE2 patterns, no remote references); each
violation becomes a `control` refusal at the field's path, with the message the schema's
`errorMessage` gives (or "required field is missing" / "unknown field (allowed: ...)"). What
no schema says well stays code: the gate grammar (engine.control.gate_problems), the ask
grammar (engine.control.ask_problems), and the refusal of steps that need a language model."""

from __future__ import annotations

import functools
import json
from typing import Any

from planops.api.models import NEEDS_A_MODEL, Step
from planops.engine import control
from planops.engine.validation.checker import Checker

_ITEMS = {"type": ["string", "array"], "errorMessage": "a template (or a list) of the items"}
_ANY: dict[str, Any] = {}


def _object(required: list[str], properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "errorMessage": "expected an object",
        "required": required,
        "properties": properties,
        "additionalProperties": False,
    }


#: each control step's fields, as Draft 2020-12 schemas (`errorMessage` is planops' keyword for
#: the refusal's message; `{value!r}` in it is the value refused). The order of `properties` is
#: the order of the "allowed:" list in an unknown field's refusal.
SCHEMAS: dict[str, dict[str, Any]] = {
    "decide": _object(["if", "then"], {"if": _ANY, "then": _ANY, "else": _ANY}),
    "map": _object(
        ["over", "do"],
        {
            "over": _ITEMS,
            "do": _ANY,
            "concurrency": {
                "type": "integer",
                "minimum": 1,
                "maximum": 1000,
                "errorMessage": "an integer from 1 to 1000",
            },
        },
    ),
    "reduce": _object(["over", "do"], {"over": _ITEMS, "do": _ANY, "initial": _ANY}),
    "exit": _object(
        ["status"],
        {
            "when": _ANY,
            "status": {
                "enum": ["success", "error"],
                "errorMessage": "status is {value!r}; expected success or error",
            },
            "message": _ANY,
            "output": _ANY,
        },
    ),
    "filter": _object(["over", "where"], {"over": _ITEMS, "where": _ANY}),
}
#: the fields holding a gate, judged by engine.control.gate_problems
GATES = {"decide": "if", "exit": "when", "filter": "where"}


#: subschema keywords that assert nothing (a field under only these accepts any value)
_ANNOTATIONS = frozenset({"errorMessage"})
#: one value of each JSON type: a field whose subschema asserts only its type is judged the same
#: on it as on the field's value
_WITNESS: dict[type, Any] = {str: "", list: [], dict: {}, bool: False, type(None): None}


def _reduced(kind: str, value: Any) -> Any:
    """`value` with each field replaced by what its subschema can tell apart: nothing (None)
    for a field it accepts whatever it holds, a value of the same type for a field it only
    types; the rest kept. The schemas judge the reduced value exactly as the value (the
    messages quote only fields kept), so refusals are computed once per distinct reduction."""
    if not isinstance(value, dict):
        return value.__class__.__name__
    fields = SCHEMAS[kind]["properties"]
    out = {}
    for key, v in value.items():
        schema = fields.get(key)
        if schema is not None and schema.keys() <= _ANNOTATIONS:
            v = None
        elif schema is not None and schema.keys() <= _ANNOTATIONS | {"type"}:
            v = _WITNESS.get(v.__class__, v)
        out[key] = v
    return out


def field_problems(kind: str, value: Any) -> list[tuple[str, str]]:
    """The violations of SCHEMAS[kind] by `value`, as (field suffix, message), in this order:
    not an object; missing fields (in `required` order); unknown fields (sorted); fields'
    values (in `properties` order).

    jsonschema takes ~70 µs per value even on these small schemas (a dozen times the
    hand-written checks they replace); a plan's control steps mostly share a few shapes, so
    each distinct reduced value (_reduced) is evaluated once per process."""
    reduced = _reduced(kind, value)
    if not isinstance(reduced, dict):
        return _evaluate(kind, value)
    return list(_memo(kind, json.dumps(reduced)))


@functools.lru_cache(maxsize=4096)
def _memo(kind: str, reduced: str) -> tuple[tuple[str, str], ...]:
    return tuple(_evaluate(kind, json.loads(reduced)))


def _evaluate(kind: str, value: Any) -> list[tuple[str, str]]:
    """The violations of SCHEMAS[kind] by `value`, as (field suffix, message), in this order:
    not an object; missing fields (in `required` order); unknown fields (sorted); fields'
    values (in `properties` order)."""
    from planops.engine import jsonschemas  # noqa: PLC0415 - jsonschema: only for control steps

    schema = SCHEMAS[kind]
    fields = list(schema["properties"])
    found: dict[str, tuple[tuple[int, int, str], str]] = {}  # suffix: (rank, message)
    for e in jsonschemas.evaluate(schema, value, python_types=True):
        if e.absolute_path:
            key = str(e.absolute_path[0])
            field = schema["properties"][key]
            message = str(field.get("errorMessage", e.message)).format(value=value[key])
            found.setdefault(f".{key}", ((3, fields.index(key), ""), message))
        elif e.validator == "type":
            found.setdefault("", ((0, 0, ""), str(schema["errorMessage"])))
        elif e.validator == "required":
            for n, key in enumerate(schema["required"]):
                if key not in value:
                    found.setdefault(f".{key}", ((1, n, ""), "required field is missing"))
        elif e.validator == "additionalProperties":
            allowed = ", ".join(fields)
            for key in sorted(set(value) - set(fields)):
                found.setdefault(f".{key}", ((2, 0, key), f"unknown field (allowed: {allowed})"))
        else:  # no such keyword at the top of SCHEMAS: a schema added without its mapping
            raise AssertionError(f"SCHEMAS[{kind!r}]: no refusal for {e.validator!r}")
    return [(suffix, message) for suffix, (_, message) in sorted(found.items(), key=_rank)]


def _rank(item: tuple[str, tuple[tuple[int, int, str], str]]) -> tuple[int, int, str]:
    return item[1][0]


def check_control(c: Checker, step: Step, path: str) -> None:
    """Seed 2 control steps: exit and filter are run by planops; the rest are refused clearly."""
    for kind in NEEDS_A_MODEL:
        if getattr(step, kind) is not None:
            c.add(
                "unsupported",
                step.id,
                f"{path}.{kind}",
                f"{kind} needs a language model, which "
                "planops does not run: delegate open-ended work to a capsule step (a Capsule's "
                "plan can run any agent image)",
            )
    if step.ask is not None:
        for suffix, message in control.ask_problems(step.ask, tick=lambda: c.tick(path)):
            c.add("control", step.id, f"{path}.ask{suffix}", message)
    for kind in SCHEMAS:
        value = getattr(step, kind)
        if value is None:
            continue
        for suffix, message in field_problems(kind, value):
            c.add("control", step.id, f"{path}.{kind}{suffix}", message)
        gate = GATES.get(kind)
        if gate is not None and isinstance(value, dict) and gate in value:
            for suffix, message in control.gate_problems(value[gate]):
                c.add("gate", step.id, f"{path}.{kind}.{gate}{suffix}", message)
