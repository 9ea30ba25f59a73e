"""The CEL of a PlanTrigger (`filter`, `input`), evaluated with a cost limit.

The library is cel-python (celpy, PyPI `cel-python`): maintained (Cloud Custodian's), pure
Python (no native wheel to build), regexes on RE2 (linear time). No Python CEL library exposes a
cost limit (cel-python none; Google's `cel-expr-python`, cel-cpp's wrapper, neither its cost
tracker nor its iteration limit; `common-expression-language`, cel-rust's, neither), so the cost
is bounded here, around celpy's tree-walking evaluator, in two meters that every evaluation
shares with the comprehensions (`map`, `filter`, `all`, `exists`, `exists_one`) inside it:

- steps: every node evaluated (each comprehension iteration evaluates its body's nodes again) is
  one step; at STEPS_MAX the evaluation stops with CostExceeded. This bounds time: the work per
  step is bounded by the sizes below.
- bytes: every value a node produces is charged its size (characters of a string, bytes,
  entries of a list or map), references to the payload too; at BYTES_MAX it stops. This bounds
  memory and the work inside one step: an operator's result is at most the sum of its operands'
  sizes, which were charged, so no single step allocates more than twice what was charged.
  A regex match is charged its text and pattern before it runs (RE2, linear in the text).
  The functions whose work is deep in their operands (equality and ordering, `in`, `contains`,
  `string()`: DEEP) are charged their operands' whole size before they run, every element and
  character: a node's value is charged shallowly (a map of two entries is 2, however large its
  entries), so `body == body` would otherwise compare the whole payload for 2 bytes.

The expression itself is bounded before it is parsed (CEL_MAX_CHARS characters, NEST_MAX open
brackets deep: the parser and the evaluator recurse), and the payload by the receiver's body
limit. The cost is a fixed function of (expression, payload): the same delivery gets the same
answer on every replica, and a test (tests/unit/test_trigger_cel.py) measures the time the
limit allows.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import celpy
import lark
from celpy import celtypes
from celpy.adapter import json_to_cel
from celpy.celparser import CELParseError
from celpy.evaluation import CELEvalError, Evaluator, base_functions, function_matches

from planops.api.trigger_models import CEL_MAX_CHARS

#: node evaluations (of celpy's parse tree: about 10 to 20 for a node of CEL's syntax) all the
#: expressions of one delivery may make together: about 0.4 s of one core here (measured in
#: tests/unit/test_trigger_cel.py); `body.commits.all(c, c.message.size() < 100)` over 2,000
#: commits fits
STEPS_MAX = 50_000
#: characters / entries of the values the expressions of one delivery may produce together
BYTES_MAX = 4 << 20
#: brackets open at once in an expression ((, [, {)
NEST_MAX = 24


class CelError(ValueError):
    """An expression that cannot be compiled, or whose evaluation failed (a missing field, a
    type error): the message says which and why."""


class CostExceeded(CelError):  # noqa: N818 (the CEL name of the refusal)
    """An evaluation that ran past its cost limit."""


@dataclass
class Meter:
    """The cost one delivery's expressions have spent together."""

    steps: int = 0
    size: int = 0

    def charge(self, steps: int, size: int) -> None:
        self.steps += steps
        self.size += size
        if self.steps > STEPS_MAX:
            raise _Stop(f"the expression ran past its cost limit ({STEPS_MAX} evaluation steps)")
        if self.size > BYTES_MAX:
            raise _Stop(
                f"the expression ran past its cost limit ({BYTES_MAX} bytes of values produced)"
            )


class _Stop(BaseException):
    """Raised through celpy, which turns some exceptions into CEL error values that `||`, `&&`
    and `exists` may drop: a BaseException is caught by none of its handlers."""


def _size(value: Any) -> int:
    if isinstance(value, (str, bytes, list, dict, tuple)):
        return len(value)
    return 0


#: CEL's functions whose work grows with the whole of their operands, not their top level
DEEP = ("_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_", "_in_", "contains", "string")


def deep_size(value: Any, cap: int) -> int:
    """The size of `value` with everything inside it (each node 1, a string or bytes its
    length), counted up to a little past `cap` (without recursion: the value is the sender's)."""
    total, stack = 0, [value]
    while stack and total <= cap:
        node = stack.pop()
        if isinstance(node, dict):
            stack += node.keys()
            stack += node.values()
        elif isinstance(node, (list, tuple)):
            stack += node
        total += max(1, len(node)) if isinstance(node, (str, bytes)) else 1
    return total


class _Metered(Evaluator):
    """celpy's evaluator, charging each node it evaluates to the shared meter."""

    meter: Meter

    def _visit_tree(self, tree: lark.Tree[Any]) -> Any:
        # lark's Interpreter reaches every node (visit, visit_children) through this
        self.meter.charge(1, 0)
        value = super()._visit_tree(tree)
        self.meter.charge(0, _size(value))
        return value

    def sub_evaluator(self, ast: lark.Tree[Any]) -> Evaluator:
        sub = _Metered(ast, activation=self.activation)
        sub.meter = self.meter
        return sub


def _nesting(text: str) -> int:
    """The deepest bracket nesting of `text`, outside string literals (roughly: a quote inside
    a string only makes the count larger, never smaller)."""
    depth = deepest = 0
    for ch in re.sub(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"", "", text):
        if ch in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in ")]}":
            depth -= 1
    return deepest


@functools.cache
def _environment() -> celpy.Environment:
    """celpy's environment (building its parser takes about a second: once)."""
    return celpy.Environment()


@functools.lru_cache(maxsize=512)
def compile_expression(text: str) -> lark.Tree[Any]:
    """The parsed expression; CelError naming what is wrong (too long, too deep, not CEL)."""
    if len(text) > CEL_MAX_CHARS:
        raise CelError(f"longer than {CEL_MAX_CHARS} characters")
    if _nesting(text) > NEST_MAX:
        raise CelError(f"brackets nested deeper than {NEST_MAX}")
    try:
        return _environment().compile(text)
    except CELParseError as e:
        raise CelError(f"not a CEL expression: {_first_line(e)}") from None


def _first_line(e: BaseException) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:200]


def to_cel(value: Any) -> Any:
    """A JSON value as CEL's types."""
    return json_to_cel(value)


def evaluate(text: str, activation: Mapping[str, Any], meter: Meter | None = None) -> Any:
    """`text` evaluated over `activation` (CEL values: to_cel), as plain JSON values, charged to
    `meter` (a delivery's, shared by its expressions); CelError when it fails, CostExceeded when
    the meter runs past its limit."""
    ast = compile_expression(text)
    meter = meter if meter is not None else Meter()

    def matches(subject: Any, pattern: Any) -> Any:
        meter.charge(1, _size(subject) + _size(pattern))
        return function_matches(subject, pattern)

    def charged(name: str) -> Any:
        function = base_functions[name]

        def deep(*args: Any) -> Any:
            meter.charge(0, sum(deep_size(a, BYTES_MAX - meter.size) for a in args))
            return function(*args)

        return deep

    functions = {
        **base_functions,
        **{name: charged(name) for name in DEEP},
        "matches": matches,
    }
    evaluator = _Metered(ast, activation=celpy.evaluation.Activation(functions=functions))
    evaluator.meter = meter
    try:
        value = evaluator.evaluate(dict(activation))
    except _Stop as e:
        raise CostExceeded(str(e)) from None
    except CELEvalError as e:
        raise CelError(_first_line(e)) from None
    except RecursionError:
        raise CelError("nested too deeply to evaluate") from None
    return _plain(value)


def _plain(value: Any) -> Any:
    """A CEL value as JSON (booleans, numbers, strings, lists, maps with string keys)."""
    if isinstance(value, CELEvalError):
        raise CelError(_first_line(value))
    if isinstance(value, celtypes.BoolType):
        return bool(value)
    if isinstance(value, (celtypes.IntType, celtypes.UintType)):
        return int(value)
    if isinstance(value, float):  # celtypes.DoubleType, and what its arithmetic returns
        if not math.isfinite(value):
            raise CelError(f"{value} is not a JSON number")
        return float(value)
    if isinstance(value, (celtypes.StringType, str)):
        return str(value)
    if isinstance(value, celtypes.BytesType):
        raise CelError("bytes are not JSON: convert them with string()")
    if isinstance(value, (celtypes.ListType, list)):
        return [_plain(v) for v in value]
    if isinstance(value, (celtypes.MapType, dict)):
        return {str(k): _plain(v) for k, v in value.items()}
    if value is None:
        return None
    return str(value)
