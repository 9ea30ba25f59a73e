"""A tool's `inputSchema`: the input the tool takes, as its Capsule's owner wrote it (a Draft
2020-12 JSON Schema, evaluated by engine.jsonschemas: regexes on RE2, no remote `$ref`). A tool
is how a Capsule puts a risky program behind a contract, so no input outside the schema ever
reaches it:

- **Before anything runs** (the validator: `kubectl-plan validate`, the admission webhook, the
  reconciler): a step's literal input is checked in full, every violation with its path.
- **At dispatch** (engine.dispatch.admit, for both executors): the input as rendered (templates,
  `$id.output` references) is checked again before the tool starts; outside the schema, the
  attempt is `call denied` and nothing starts.

**What a check may cost.** The dispatch check runs on the operator's event loop, which serves
every tenant, so it is bounded twice, the same in every executor: the input is at most
TOOL_INPUT_BYTES as JSON (the tool reads it from PLANOPS_INPUT, and Linux starts no program whose
environment holds a longer string: such an input never ran), and its evaluation spends at most
jsonschemas.RUN_STEPS steps (jsonschemas.Steps). Past either, the attempt is `call denied`
saying which. The validator applies both to a literal input (what it accepts, dispatch accepts).

**An input with templates or references** is judged before anything runs on what no rendered
value can change (`static_violations`), and in full at dispatch. A string that is exactly one
template (a typed splice) or a whole reference may become any JSON value, so nothing about it is
judged early; a string with a template inside text is a string whatever it renders to, so only
its type is. An object or array that holds such a value keeps what the plan wrote of it (a
value renders in place: keys and items are never added or removed): its type, its keys
(`required`, `additionalProperties`, `dependentRequired`) and its size (`min/maxProperties`,
`min/maxItems`); the keywords that read its values (`enum`, `const`, `uniqueItems`, `contains`,
`anyOf`, `oneOf`, `not`, `propertyNames`' subschemas) wait for dispatch. Literal values inside
are judged as usual, except where the schema reaches them through `if`/`then`/`else` or
`unevaluatedProperties`/`unevaluatedItems`: which branch applies may depend on a rendered
value. So the validator never refuses an input that could render into the schema, and what it
cannot judge, dispatch does.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Literal

from planops.api.capsule_models import Tool
from planops.engine import references, templates

if TYPE_CHECKING:
    from jsonschema import ValidationError

    from planops.engine import jsonschemas

Path = tuple[str | int, ...]
#: a rendered value that may become any JSON value, or a string whose text is not known yet
Unknown = Literal["any", "text"]
Tick = Callable[[], None]

#: keywords whose verdict on an object or array depends on its keys and size only
_SHAPE = frozenset(
    {"type", "required", "additionalProperties", "minProperties", "maxProperties"}
    | {"minItems", "maxItems", "dependentRequired"}
)
#: schema keywords that choose what applies by the values they see
_CHOOSING = frozenset({"if", "then", "else", "unevaluatedProperties", "unevaluatedItems"})
#: a dispatch refusal lists at most this many violations
SHOWN = 10
#: the longest input a tool takes, as JSON: Linux refuses an environment string (PLANOPS_INPUT=
#: and the value, and its end) of 128 KiB or more (MAX_ARG_STRLEN, execve's E2BIG)
TOOL_INPUT_BYTES = 128 * 1024 - len("PLANOPS_INPUT=") - 1


def schema_problems(tool: Tool) -> list[tuple[Path, str]]:
    """Why the tool's inputSchema is no JSON Schema (cached by its text); [] when it is one."""
    if tool.input_schema is None:
        return []
    from planops.engine import jsonschemas  # noqa: PLC0415 - jsonschema: only for tools that have a schema

    return jsonschemas.known_problems(tool.input_schema)


def where(path: Path) -> str:
    """A path inside a value as the validator writes field paths: `.key`, `[index]`."""
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)


def unusable(tool: Tool) -> str | None:
    """Why the tool can take no input at all: its inputSchema is no JSON Schema."""
    problems = schema_problems(tool)
    if not problems:
        return None
    at, message = problems[0]
    inside = f" (inputSchema{where(at)}: {message})"
    return f"tool {tool.name!r} has an inputSchema that is not a JSON Schema{inside}"


@functools.lru_cache(maxsize=256)
def _evaluator(
    schema_json: str,
) -> Callable[[Any, Tick | None, jsonschemas.Steps | None], list[ValidationError]]:
    from planops.engine import jsonschemas  # noqa: PLC0415 - jsonschema: only for tools that have a schema

    return jsonschemas.evaluator(json.loads(schema_json))


def _evaluate(
    schema: Any, value: Any, tick: Tick | None, steps: jsonschemas.Steps | None = None
) -> list[ValidationError]:
    """Every violation, by path; raises jsonschemas.UnusableSchemaError, OverBudgetError (past
    `steps`) or what `tick` raises. The schema's validator is built once per schema text."""
    errors = _evaluator(json.dumps(schema, sort_keys=True))(value, tick, steps)
    return sorted(errors, key=lambda e: [str(p) for p in e.absolute_path])


def too_long(value: Any) -> str | None:
    """Why the input (None: `{}`) is too long for a tool to be given, or None."""
    size = len(json.dumps({} if value is None else value))
    if size <= TOOL_INPUT_BYTES:
        return None
    return (
        f"the input is {size} bytes as JSON, and a tool takes at most {TOOL_INPUT_BYTES} bytes "
        "(its PLANOPS_INPUT environment variable: Linux starts no program with a longer one)"
    )


def too_costly(tool: Tool) -> str:
    """Why an input whose check passed its budget (jsonschemas.RUN_STEPS) is refused."""
    from planops.engine import jsonschemas  # noqa: PLC0415 - jsonschema: only for tools that have a schema

    return (
        f"the input takes more than {jsonschemas.RUN_STEPS} steps to check against tool "
        f"{tool.name!r}'s inputSchema (the budget of a check made while a plan runs): give the "
        "tool a smaller input"
    )


def refusal(tool: Tool, value: Any) -> str | None:
    """Dispatch's verdict on the input as rendered (None: the tool takes it). The tool gets
    `{}` for no input, so `{}` is what is checked."""
    if (long := too_long(value)) is not None:
        return long
    if tool.input_schema is None:
        return None
    bad = unusable(tool)
    if bad is not None:
        return f"{bad}: it can take no input"
    from planops.engine import jsonschemas  # noqa: PLC0415 - jsonschema: only for tools that have a schema

    steps = jsonschemas.Steps(jsonschemas.RUN_STEPS)
    try:
        errors = _evaluate(tool.input_schema, {} if value is None else value, None, steps)
    except jsonschemas.UnusableSchemaError as e:
        return f"tool {tool.name!r}'s inputSchema cannot be evaluated on this input: {e}"
    except jsonschemas.OverBudgetError:
        return too_costly(tool)
    if not errors:
        return None
    shown = "; ".join(f"input{where(tuple(e.absolute_path))}: {e.message}" for e in errors[:SHOWN])
    more = f" (and {len(errors) - SHOWN} more)" if len(errors) > SHOWN else ""
    return f"the input does not satisfy tool {tool.name!r}'s inputSchema: {shown}{more}"


def _unknown(text: str) -> Unknown | None:
    """What a string of a step's input is before it is rendered (None: literal)."""
    if text.startswith("$") and references.parse(text) is not None:
        return "any"
    if "{{" not in text or next(templates.scan(text), None) is None:
        return None
    return "any" if templates.is_splice(text) else "text"


def _skeleton(value: Any) -> tuple[Any, dict[Path, Unknown]]:
    """The value with every rendered string replaced (a placeholder of the right type where it
    is known: "" for text), and where those were."""
    unknowns: dict[Path, Unknown] = {}

    def copy(v: Any, path: Path) -> Any:
        if isinstance(v, str):
            kind = _unknown(v)
            if kind is None:
                return v
            unknowns[path] = kind
            return "" if kind == "text" else None
        if isinstance(v, dict):
            return {k: copy(x, (*path, k)) for k, x in v.items()}
        if isinstance(v, list):
            return [copy(x, (*path, i)) for i, x in enumerate(v)]
        return v

    return copy(value, ()), unknowns


def _described(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    return "an array" if isinstance(value, list) else repr(value)


def _judged(e: ValidationError, unknowns: dict[Path, Unknown], holders: set[Path]) -> str | None:
    """The message of a violation that no rendered value can change; None when one could."""
    if any(k in _CHOOSING for k in e.absolute_schema_path if isinstance(k, str)):
        return None
    at = tuple(e.absolute_path)
    for n in range(len(at) + 1):
        kind = unknowns.get(at[:n])
        if kind is not None:  # at or under a rendered value
            if kind == "text" and n == len(at) and e.validator == "type":
                return f"text with a template is a string, not of type {e.validator_value!r}"
            return None
    if at not in holders:
        return str(e.message)
    if e.validator not in _SHAPE:
        return None
    if e.validator == "type":
        return f"{_described(e.instance)} is not of type {e.validator_value!r}"
    if e.validator in ("minProperties", "maxProperties", "minItems", "maxItems"):
        what = "properties" if "Properties" in str(e.validator) else "items"
        bound = "at least" if str(e.validator).startswith("min") else "at most"
        size = len(e.instance) if isinstance(e.instance, dict | list) else 0
        return f"has {size} {what}; the schema takes {bound} {e.validator_value}"
    return str(e.message)


def static_violations(
    tool: Tool, value: Any, tick: Tick | None = None
) -> Iterator[tuple[Path, str]]:
    """What the validator refuses of a step's input before anything runs: every violation of a
    literal input; of an input with templates or references, those no rendered value can
    change (the module's rule). Raises jsonschemas.UnusableSchemaError. The schema must have
    passed `schema_problems`."""
    skeleton, unknowns = _skeleton({} if value is None else value)
    # each unknown renders to at least 1 character where its placeholder (null, "") has 2 to 4
    if len(json.dumps(skeleton)) - 3 * len(unknowns) > TOOL_INPUT_BYTES:
        yield (), str(too_long(skeleton))
        return
    if tool.input_schema is None:
        return
    from planops.engine import jsonschemas  # noqa: PLC0415 - jsonschema: only for tools that have a schema

    # a literal input is judged within the dispatch check's budget too; with rendered values
    # the cost is known only once they are (the validator's own time budget bounds this)
    steps = None if unknowns else jsonschemas.Steps(jsonschemas.RUN_STEPS)
    try:
        errors = _evaluate(tool.input_schema, skeleton, tick, steps)
    except jsonschemas.OverBudgetError:
        yield (), too_costly(tool)
        return
    holders = {u[:n] for u in unknowns for n in range(len(u))}
    for e in errors:
        message = _judged(e, unknowns, holders) if unknowns else str(e.message)
        if message is not None:
            yield tuple(e.absolute_path), message
