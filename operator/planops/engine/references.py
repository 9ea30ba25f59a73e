"""Seed-1 references: `$<step id>.output` and `$<step id>.status`.

A reference is recognised only where it is the *whole* of a string (anywhere inside `input`, at any
depth) and as an operand of an `if` condition. It is resolved at dispatch time to the referenced
step's real result; a reference to a step that has not settled fails the referring step (the
caller decides that: `resolve_input` raises `UnsettledReference`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

#: `$id.field` where id follows the step-id rule; field is any word (only two are valid).
REFERENCE = re.compile(r"^\$([A-Za-z_][A-Za-z0-9_-]*)\.([A-Za-z0-9_]+)$")
FIELDS = ("output", "status")


@dataclass(frozen=True)
class Reference:
    step: str
    field: str

    def __str__(self) -> str:
        return f"${self.step}.{self.field}"


class UnsettledReference(Exception):  # noqa: N818 - reads as a fact, like KeyError
    """A reference names a step that has not settled (yet)."""

    def __init__(self, ref: Reference) -> None:
        super().__init__(f"reference {ref} names step {ref.step!r}, which has not settled")
        self.ref = ref


def parse(text: str) -> Reference | None:
    m = REFERENCE.match(text)
    return Reference(m.group(1), m.group(2)) if m else None


def strings(value: Any, path: str) -> Iterator[tuple[str, str]]:
    """Every string inside a JSON value, at any depth, with its field path (`.key`, `[index]`).
    The one walk shared by references and templates."""
    if isinstance(value, str):
        yield path, value
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from strings(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from strings(v, f"{path}[{i}]")


#: How deeply a JSON value may nest (containers in containers) wherever the engine meets one: a
#: plan's fields (the validator refuses deeper ones) and what steps print (`loads`). The walks
#: over values recurse; a RecursionError would escape the validator and the decider.
MAX_DEPTH = 64
_CONTAINERS = (dict, list)


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether `value` nests more than `limit` containers deep (iteratively: no recursion)."""
    if value.__class__ not in _CONTAINERS:
        return False
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if depth > limit:
            return True
        children = v.values() if isinstance(v, dict) else v
        stack += [(c, depth + 1) for c in children if c.__class__ in _CONTAINERS]
    return False


def loads(text: str) -> Any:
    """JSON text that a step printed (or a person answered), parsed; raises ValueError when it
    is not JSON or nests more than MAX_DEPTH deep (`[` * 100000 made json.loads raise
    RecursionError out of the decider, on every reconcile)."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise ValueError(f"nested more than {MAX_DEPTH} levels deep") from None
    if too_deep(value):
        raise ValueError(f"nested more than {MAX_DEPTH} levels deep")
    return value


def walk(value: Any, path: str = "input") -> Iterator[tuple[str, Reference]]:
    """Every reference inside a JSON value (a whole string), with its field path."""
    for where, text in strings(value, path):
        ref = parse(text)
        if ref is not None:
            yield where, ref


#: Looks up a settled step's (status, output); None when the step has not settled.
Lookup = Callable[[str], "tuple[str, str | None] | None"]


def resolve(ref: Reference, lookup: Lookup) -> str | None:
    settled = lookup(ref.step)
    if settled is None:
        raise UnsettledReference(ref)
    status, output = settled
    return status if ref.field == "status" else output


def resolve_input(value: Any, lookup: Lookup) -> Any:
    """`value` with every whole-string reference replaced by its result (a new value)."""
    if isinstance(value, str):
        ref = parse(value)
        return resolve(ref, lookup) if ref is not None else value
    if isinstance(value, Mapping):
        return {k: resolve_input(v, lookup) for k, v in value.items()}
    if isinstance(value, list):
        return [resolve_input(v, lookup) for v in value]
    return value
