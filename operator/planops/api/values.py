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
_SCALARS = (str, bool, type(None))


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
    reads as an endless nesting, so this also ends on cycles.
    """
    # each entry: (value, its depth, the entry of its parent, its key in the parent)
    stack: list[tuple[Any, int, Any, str | int | None]] = [(value, 0, None, None)]
    while stack:
        entry = stack.pop()
        node, depth = entry[0], entry[1]
        if isinstance(node, _SCALARS):
            continue
        if isinstance(node, int):
            if node.bit_length() > MAX_INT_BITS:
                return Found(_path(entry), "limits", "a number of more than 4,000 digits")
            continue
        if isinstance(node, float):
            if not math.isfinite(node):
                return Found(_path(entry), "schema", f"{node} is no JSON number")
            continue
        if isinstance(node, dict):
            if depth + 1 > limit:
                return Found(_path(entry), "limits", message(limit), too_deep=True)
            for key, child in node.items():
                if not isinstance(key, str):
                    return Found(_path(entry), "schema", f"a key is {_kind(key)}, not a string")
                stack.append((child, depth + 1, entry, key))
        elif isinstance(node, list):
            if depth + 1 > limit:
                return Found(_path(entry), "limits", message(limit), too_deep=True)
            stack.extend((child, depth + 1, entry, i) for i, child in enumerate(node))
        else:
            return Found(_path(entry), "schema", f"{_kind(node)} is no JSON value")
    return None


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
