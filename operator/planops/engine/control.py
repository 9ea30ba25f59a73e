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
from typing import TYPE_CHECKING, Any

from planops.engine import references, templates

if TYPE_CHECKING:
    from planops.engine import jsonschemas

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


# -- ask ---------------------------------------------------------------------------------------
# Result: {"answer": {...}, "answered": true} or, when the default was used,
# {"answer": default, "answered": false, "reason": "declined" | "unavailable"}.

ASK_FIELDS = ("prompt", "outputSchema", "whenUnanswered", "default")
_SNAKE = {"output_schema": "outputSchema", "when_unanswered": "whenUnanswered"}
PRIMITIVES = ("string", "number", "integer", "boolean")


def normalize_ask(spec: Any) -> dict[str, Any]:
    """The ask grammar in camelCase (the seed's snake_case is accepted)."""
    if not isinstance(spec, dict):
        return {}
    return {_SNAKE.get(str(k), str(k)): v for k, v in spec.items()}


def ask_problems(raw: Any, tick: jsonschemas.Tick | None = None) -> list[tuple[str, str]]:
    """Static problems of an ask step's grammar, as (field suffix, message); `tick` as for
    jsonschemas.evaluate (checking the default against the schema)."""
    from planops.engine import jsonschemas  # noqa: PLC0415 - jsonschema: only for ask steps

    if not isinstance(raw, dict):
        return [("", "expected an object {prompt, outputSchema, whenUnanswered?, default?}")]
    spec = normalize_ask(raw)
    out = [
        (f".{k}", f"unknown field (allowed: {', '.join(ASK_FIELDS)})")
        for k in spec
        if k not in ASK_FIELDS
    ]
    if not isinstance(spec.get("prompt"), str) or not spec.get("prompt"):
        out.append((".prompt", "the question is required (a non-empty string)"))
    schema = spec.get("outputSchema")
    if not isinstance(schema, dict) or schema.get("type") != "object":
        out.append((".outputSchema", 'required, and must be {"type": "object", "properties": ...}'))
        schema = None
    else:
        props = schema.get("properties")
        if not isinstance(props, dict) or not props:
            out.append((".outputSchema.properties", "list the answer's fields"))
        else:
            for name, prop in props.items():
                ok = isinstance(prop, dict) and (
                    prop.get("type") in PRIMITIVES or isinstance(prop.get("enum"), list)
                )
                if not ok:
                    out.append(
                        (
                            f".outputSchema.properties.{name}",
                            "an answer field is a string, number, integer, boolean or enum",
                        )
                    )
    mode = spec.get("whenUnanswered", "fail")
    if mode not in ("fail", "default"):
        out.append((".whenUnanswered", f"is {mode!r}; expected fail or default"))
    if mode == "default" and "default" not in spec:
        out.append((".default", "whenUnanswered: default needs a default answer"))
    if schema is not None:
        unusable = jsonschemas.schema_problems(schema, tick)
        out += [
            (".outputSchema" + "".join(f".{p}" for p in path), message)
            for path, message in unusable
        ]
        if not unusable:  # a $ref that loops or leads nowhere shows on any answer: try one
            try:
                jsonschemas.evaluate(schema, {}, tick)
            except jsonschemas.UnusableSchemaError as e:
                out.append((".outputSchema", f"cannot be applied to answers: {e}"))
                unusable = [((), str(e))]
        if unusable:
            schema = None
    if "default" in spec and schema is not None and not _has_template(spec["default"]):
        problem = answer_problem(schema, spec["default"], tick)
        if problem:
            out.append((".default", f"does not conform to outputSchema: {problem}"))
    return out


def _has_template(value: Any) -> bool:
    return next(templates.find(value), None) is not None


def render_ask(spec: Any, lookup: templates.Lookup) -> dict[str, Any]:
    """The ask as the executor sees it: prompt and default rendered."""
    out = normalize_ask(spec)
    for key in ("prompt", "default"):
        if key in out:
            out[key] = templates.render(out[key], lookup)
    return out


def answer_problem(
    schema: dict[str, Any], answer: Any, tick: jsonschemas.Tick | None = None
) -> str | None:
    """Why `answer` does not conform to the ask's outputSchema (None: it does). Evaluated by
    engine.jsonschemas (patterns on RE2, no remote references), like the plan's input, within
    the budget of a check made while a plan runs (jsonschemas.RUN_STEPS): the operator judges
    an answer on its event loop, and `kubectl plan answer` by this same rule. The schema's own
    check (jsonschemas.SCHEMA_STEPS at most) is made once per schema text."""
    from planops.engine import jsonschemas  # noqa: PLC0415 - jsonschema: only for ask steps

    unusable = jsonschemas.known_problems(schema)
    if unusable:
        return "the outputSchema cannot be used: " + "; ".join(m for _, m in unusable)
    steps = jsonschemas.Steps(jsonschemas.RUN_STEPS)
    try:
        errors = sorted(
            jsonschemas.evaluate(schema, answer, tick, steps=steps),
            key=lambda e: list(map(str, e.path)),
        )
    except jsonschemas.UnusableSchemaError as e:
        return f"the outputSchema cannot be used: {e}"
    except jsonschemas.OverBudgetError:
        return (
            f"the answer takes more than {jsonschemas.RUN_STEPS} steps to check against the "
            "question's outputSchema (the budget of a check made while a plan runs): answer "
            "with fewer fields or shorter values"
        )
    if not errors:
        return None
    return "; ".join(
        (f"{'.'.join(map(str, e.path))}: " if e.path else "") + e.message for e in errors
    )


def coerce_answer(schema: dict[str, Any], key: str, text: str) -> Any:
    """`key=text` from a command line, typed by the schema; raises ValueError."""
    props = schema.get("properties") or {}
    if key not in props:
        raise ValueError(f"the answer has no field {key!r} (fields: {', '.join(props)})")
    prop = props[key]
    kind = prop.get("type")
    if kind == "string" or (kind is None and "enum" in prop and text in prop["enum"]):
        return text
    if kind == "boolean":
        if text.lower() in ("true", "yes", "y", "1"):
            return True
        if text.lower() in ("false", "no", "n", "0"):
            return False
        raise ValueError(f"{key}: expected true or false, got {text!r}")
    if kind in ("integer", "number"):
        try:
            return int(text) if kind == "integer" else float(text)
        except ValueError:
            raise ValueError(
                f"{key}: expected {'an' if kind == 'integer' else 'a'} {kind}, got {text!r}"
            ) from None
    try:
        return references.loads(text)
    except ValueError:
        return text


def answered(answer: dict[str, Any]) -> dict[str, Any]:
    return {"answer": answer, "answered": True}


def unanswered(spec: dict[str, Any], reason: str) -> tuple[dict[str, Any] | None, str | None]:
    """(result, None) when the default applies, else (None, the step's error)."""
    if spec.get("whenUnanswered") == "default":
        return {"answer": spec.get("default"), "answered": False, "reason": reason}, None
    why = "the question was declined" if reason == "declined" else "nobody could be asked"
    return (
        None,
        f"no answer: {why}, and whenUnanswered is fail (set whenUnanswered: default "
        "and a default to keep the plan running)",
    )
