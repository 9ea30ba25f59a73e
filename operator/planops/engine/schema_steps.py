"""The budget of a JSON Schema evaluation (engine.jsonschemas evaluates; this counts), so that no
plan author can stall the operator with a schema and a value they both write:

- **A cooperative budget**: an evaluation given a `tick` calls it before every keyword it
  evaluates and every subschema it applies; `tick` may raise to stop the evaluation (the
  validator's time budget does).
- **A budget of steps** for what is checked while a plan runs (a tool's input at dispatch, an
  answer to an ask: engine.tool_inputs, engine.control), which has no time budget and must give
  the same verdict in every executor: an evaluation given `Steps(n)` counts one step per
  keyword evaluated, one more per entry of the keyword's own list or map it goes through
  (`required`, `properties`, `anyOf`...; every value inside it for the keywords that compare
  with it: `enum`, `const`, `dependentRequired`), as many more as the work a keyword does on
  the value itself (`enum`, `const`, `uniqueItems` walk it; `additionalProperties`,
  `patternProperties` and `unevaluatedProperties` match every key against every pattern;
  `pattern` reads the string), one per subschema applied to a value (an empty `items: {}`
  still visits each item: 100,000 of them, a hundred times over, took 25 s for 200 steps), and
  one per error plus one per 256 characters of its message (a message quotes the value: `false`
  or `type` applied a thousand times to an 80 KB answer made hundreds of MB of text); past `n`
  it raises `OverBudgetError`. Deterministic: a value is refused for its cost the same way by
  the operator, `run --local` and the validator.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import attrs
from jsonschema import ValidationError

Tick = Callable[[], None]
#: the evaluation's tick and steps (set by engine.jsonschemas around one evaluation)
TICK: contextvars.ContextVar[Tick | None] = contextvars.ContextVar("planops_schema_tick")


class OverBudgetError(Exception):
    """An evaluation stopped because it spent its Steps."""


@attrs.define
class Steps:
    """A budget of evaluation steps (the module's docstring): `limit` at most, `spent` so far."""

    limit: int
    spent: int = 0
    #: count each error by its message (the module's docstring); off for the meta-schema's
    #: check, whose messages quote parts of the schema alone and whose walk is the deepest (the
    #: count wraps each keyword's errors: one more frame per level)
    messages: bool = True

    def spend(self, n: int) -> None:
        self.spent += n
        if self.spent > self.limit:
            raise OverBudgetError(f"more than {self.limit} steps")

    @property
    def left(self) -> int:
        return max(0, self.limit - self.spent)


#: the steps one check made while a plan runs may spend (a tool's input at dispatch, an answer):
#: a few hundred milliseconds of the operator's CPU at most, and room for a list of a few
#: thousand items against a schema that checks each (tests/unit/test_schema_budgets.py)
RUN_STEPS = 10_000
STEPS: contextvars.ContextVar[Steps | None] = contextvars.ContextVar("planops_schema_steps")
#: the keywords whose work grows with the value they see (the module's docstring), and how
_WALKS = frozenset({"enum", "const", "uniqueItems"})
#: the keywords that go through every value inside their own (not only its entries)
_OWN = frozenset({"enum", "const", "dependentRequired"})
_KEYS = frozenset({"additionalProperties", "patternProperties", "unevaluatedProperties"})
#: characters of a string `pattern` reads per step (RE2 is linear; a step is a keyword's cost)
_PATTERN_CHARS = 4096
#: characters of an error's message per step (a message may quote the whole value)
_MESSAGE_CHARS = 256
#: the mark of an error already counted (an error passes through every keyword above it)
_COUNTED = "_planops_counted"


def _nodes(value: Any, cap: int) -> int:
    """How many JSON values `value` holds (itself included), counting stopped past `cap`."""
    count, stack = 0, [value]
    while stack and count <= cap:
        v = stack.pop()
        count += 1
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return count


def _cost(name: str, value: Any, instance: Any, schema: Any, cap: int) -> int:
    """The steps keyword `name` (with `value`, in `schema`) costs on `instance`: one, one more
    per entry of `value` it goes through (`required`, `properties`, `enum`, `anyOf`...), and the
    work it does on the instance itself (the module's docstring)."""
    if name in _OWN:
        cost = _nodes(value, cap)
    else:
        cost = 1 + (len(value) if isinstance(value, list | dict) else 0)
    if name in _WALKS:
        cost += _nodes(instance, cap)
    elif name in _KEYS and isinstance(instance, dict):
        patterns = schema.get("patternProperties") if isinstance(schema, dict) else None
        cost += len(instance) * (1 + (len(patterns) if isinstance(patterns, dict) else 0))
    elif name == "pattern" and isinstance(instance, str):
        cost += len(instance) // _PATTERN_CHARS
    return cost


def ticking(name: str, keyword: Callable[..., Any]) -> Callable[..., Any]:
    """Keyword `name` (`keyword`), ticking and counting its steps and errors (the docstring)."""

    def run(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        tick = TICK.get(None)
        if tick is not None:
            tick()
        steps = STEPS.get(None)
        if steps is None:
            return keyword(validator, value, instance, schema)
        steps.spend(_cost(name, value, instance, schema, steps.left))
        errors = keyword(validator, value, instance, schema)
        return _counted(errors, steps) if errors is not None and steps.messages else errors

    return run


def _counted(errors: Iterable[ValidationError], steps: Steps) -> Iterator[ValidationError]:
    """`errors`, each counted once (the module's docstring) where it is first seen: a message
    may quote the whole value, or a schema's whole `enum`."""
    for e in errors:
        if not getattr(e, _COUNTED, False):
            setattr(e, _COUNTED, True)
            steps.spend(1 + len(e.message) // _MESSAGE_CHARS)
        yield e


def applying(
    method: Callable[..., Any], schema_of: Callable[[Any, tuple[Any, ...], dict[str, Any]], Any]
) -> Callable[..., Any]:
    """`descend` or `iter_errors`, counting one step (and a tick) per subschema applied to a
    value: an empty subschema (`items: {}`, `propertyNames: true`) evaluates no keyword, yet
    visits every item or key. A `false` subschema's error (which quotes the whole value) is
    made here, not by a keyword: counted here (`_counted`)."""

    def apply(self: Any, instance: Any, *args: Any, **kwargs: Any) -> Any:
        tick = TICK.get(None)
        if tick is not None:
            tick()
        steps = STEPS.get(None)
        if steps is None:
            return method(self, instance, *args, **kwargs)
        steps.spend(1)
        errors = method(self, instance, *args, **kwargs)
        refuses = schema_of(self, args, kwargs) is False
        return _counted(errors, steps) if refuses and steps.messages else errors

    return apply
