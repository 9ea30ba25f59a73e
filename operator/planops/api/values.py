"""What a plan's values may be: JSON values, nested at most `MAX_DEPTH` deep, checked without
recursion.

Why a depth limit: every walk of a plan's values recurses once (or more) per level of nesting:
the reference and template walks, rendering, pydantic, `json.dumps`, jsonschema. Python stops a
recursion at about 1,000 frames, so a value nested ~1,000 deep would crash the validator (the
admission webhook answers 500, the reconcile is retried forever and never writes a status) or,
past it, the decider and the runners. Such a value is refused instead, before any of those walks
sees it, by `problem`, which keeps its own stack and so works at any depth.

Why 64 (per value: a step's `input`, a control step's grammar, the plan's `input`, `output` and
`inputSchema`): real plans nest a handful of levels (a JSON Schema of objects of objects is about
ten). The most expensive walk is jsonschema checking a schema, about eight frames per level
(`{"not": {"not": ...}}`): 64 levels stay near 530 frames, inside Python's default limit of 1,000
with room for the operator's own stack (asyncio, kopf, the webhook server; the tests leave 250
frames for it). A whole document adds the plan language's own structure above its values
(`spec.planTemplate.spec.steps[i].map.do[j]` is nine levels), hence `MAX_DOCUMENT_DEPTH`.

The same walk refuses what has no JSON meaning (values from a Python caller; the CLI refuses them
with a line and column when it reads YAML): an integer too long to be written out (Python refuses
to print one of more than ~4,300 digits, so `json.dumps` and every message would fail on it),
NaN and the infinities (`json.dumps` writes them as `NaN`, which no JSON reader takes), keys that
are not strings, and types JSON does not have (dates, sets, bytes).
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple

#: The deepest a plan's value may nest (objects and arrays inside each other).
MAX_DEPTH = 64
#: The deepest a whole document may nest: its values plus the plan language's structure.
MAX_DOCUMENT_DEPTH = MAX_DEPTH + 16
#: Integers longer than this (in bits, ~4,200 digits) cannot be printed by Python: refused.
MAX_INT_BITS = 14_000

Path = tuple[str | int, ...]


class Found(NamedTuple):
    """What is wrong, where (the path from the value checked), and the validator's code."""

    path: Path
    code: str
    message: str
    too_deep: bool = False


def problem(value: Any, limit: int = MAX_DEPTH) -> Found | None:
    """The first thing that makes `value` no JSON value planops holds: code `limits` for an
    object or array nested deeper than `limit` levels (`{}` is one level, `"x"` none) and for a
    number too large to mean anything, `schema` for what JSON does not have. None when `value`
    is fine.

    Iterative, so it works at any depth; a cyclic value (a Python caller, a YAML alias cycle)
    reads as an endless nesting, so this also ends on cycles. It runs over every value of every
    plan, so the common cases cost no function calls: exact classes are compared first, scalars
    are judged where they are met, and only objects and arrays go on the stack.
    """
    if not _container(value):
        wrong = _scalar(value)
        return Found((), *wrong) if wrong is not None else None
    # each entry: (object or array, its depth, the entry of its parent, its key in the parent)
    stack: list[tuple[Any, int, Any, str | int | None]] = [(value, 1, None, None)]
    push, pop = stack.append, stack.pop
    while stack:
        entry = pop()
        node, depth = entry[0], entry[1]
        if depth > limit:
            return Found(_path(entry), "limits", message(limit), too_deep=True)
        is_dict = node.__class__ is dict or (node.__class__ is not list and isinstance(node, dict))
        for key, child in node.items() if is_dict else enumerate(node):
            if is_dict and key.__class__ is not str and not isinstance(key, str):
                return Found(_path(entry), "schema", f"a key is {_kind(key)}, not a string")
            cls = child.__class__
            if cls is str or child is None or cls is bool:
                continue
            if cls is dict or cls is list:
                push((child, depth + 1, entry, key))
            elif (cls is int and -_BIG < child < _BIG) or (cls is float and child - child == 0.0):
                continue  # a float minus itself is 0 unless it is NaN or infinite
            elif _container(child):
                push((child, depth + 1, entry, key))
            elif (wrong := _scalar(child)) is not None:
                return Found((*_path(entry), key), *wrong)
    return None


_BIG = 1 << MAX_INT_BITS


def _container(value: Any) -> bool:
    cls = value.__class__
    return cls is dict or cls is list or isinstance(value, dict | list)


def _scalar(value: Any) -> tuple[str, str] | None:
    """(code, message) for a value that is neither an object nor an array, None if it is fine."""
    if isinstance(value, str | bool) or value is None:
        return None
    if isinstance(value, int):
        return None if value.bit_length() <= MAX_INT_BITS else ("limits", _TOO_LONG)
    if isinstance(value, float):
        return None if math.isfinite(value) else ("schema", f"{value} is no JSON number")
    return "schema", f"{_kind(value)} is no JSON value"


_TOO_LONG = "a number of more than 4,000 digits"


def _kind(value: Any) -> str:
    name = type(value).__name__
    return f"an {name}" if name[:1] in "aeiou" else f"a {name}"


def _path(entry: Any) -> Path:
    parts: list[str | int] = []
    while entry[2] is not None:
        parts.append(entry[3])
        entry = entry[2]
    return tuple(reversed(parts))


def dotted(parts: Path, prefix: str = "") -> str:
    """`parts` as a field path, the validator's spelling: `steps[0].input.a`."""
    out = prefix
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out


def message(limit: int = MAX_DEPTH) -> str:
    """What is wrong with a value (or, at MAX_DOCUMENT_DEPTH, a document) nested too deep."""
    if limit == MAX_DEPTH:
        return f"nested deeper than {limit} levels (the most planops accepts in a plan's value)"
    return f"nested deeper than {limit} levels (a plan's values nest at most {MAX_DEPTH} deep)"
