"""YAML and JSON text as JSON values, read the way kubectl reads them, every problem one line.

A plan's values are JSON values (they reach tools as JSON and the cluster stores them as JSON),
so a file is read the way Kubernetes reads YAML (kubectl converts YAML to JSON), and what has no
JSON meaning is refused here, with its line, column and field, instead of passing `validate` and
crashing `run` later:

- Plain scalars mean what they mean to kubectl: `2024-01-01` and `12:30` stay strings (PyYAML
  would make a date and the sexagesimal 750), `1e5` is a number as in JSON, and `=` is text.
- Refused: explicit tags without a JSON meaning (`!!set`, `!!binary`, `!!timestamp`, `!!omap`,
  `!!pairs`, any `!custom` tag); keys that are not strings (`1:`, `null:`, `on:` - quote them);
  `.nan`, `.inf` and floats too large to hold (JSON has no NaN or infinity); integers of more
  than 4,000 digits (Python will not even print one).
- Aliases (`&a` ... `*a`, and merge keys `<<: *a`) are accepted, as kubectl accepts them, so a
  manifest that `kubectl apply` takes is judged the same here; but a document whose aliases
  expand to more than `MAX_EXPANDED` values (an "alias bomb": nine aliases of nine aliases of ...)
  and an alias cycle (`&a [*a]`, which kubectl refuses too) are refused before anything expands
  them. Aliased values are shared, not copied; nothing in planops changes a plan's values.
- Nesting: at most `values.MAX_DOCUMENT_DEPTH` levels, counted while the file is composed (the
  YAML composer recurses, and would itself overflow Python's stack at ~500 levels), and through
  aliases; the validator then holds each value to `values.MAX_DEPTH`.

Fast, with one meaning: a JSON text is read by `json` (C), and YAML is parsed by libyaml (the C
parser in PyYAML's wheels): a text without aliases, anchors or tags is built straight from its
events (`fast_readers.event_documents`), anything else by the same bounded composer and checks (a
10,000-step file: ~0.1-0.2 s instead of 7-10 s). Whatever either fast path does not accept as
it is - a number JSON cannot hold, a character YAML does not allow, malformed text, any refusal -
is read again by the pure-Python reader (`yaml_reader`), whose errors (text, line, column) are
the ones given; so every file means and is refused exactly as before, only sooner.
"""

from __future__ import annotations

from typing import Any

import yaml

from planops.api import values
from planops.cli import fast_readers, yaml_reader
from planops.cli.yaml_reader import MAX_DIGITS, MAX_EXPANDED, RefusedError

__all__ = ["MAX_DIGITS", "MAX_EXPANDED", "InputError", "documents", "parse"]


class InputError(Exception):
    """Unusable input; `lines` are the one-line messages (file: where: what)."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


def documents(text: str) -> list[Any]:
    """The documents of a YAML/JSON text, each checked before it is constructed: by the fast
    readers when they can, else (and for every error) by the reference reader."""
    fast = fast_readers.json_documents(text)
    if fast is not None:
        return fast
    if yaml_reader.CLoader is not None and "\t" not in text:  # a tab: see fast_readers._NOT_AS_JSON
        fast = fast_readers.event_documents(text)
        if fast is not None:
            return fast
        try:
            return yaml_reader.compose(yaml_reader.CLoader(text))
        except (yaml.YAMLError, RefusedError, RecursionError, ValueError):
            pass  # read again below: its errors are the ones reported
    return yaml_reader.compose(yaml_reader.Loader(text))


def parse(path: str, text: str) -> list[Any]:
    try:
        return documents(text)
    except RefusedError as e:
        where = values.dotted(e.path)
        field = f"{where}: " if where else ""
        line = f"line {e.mark.line + 1}, column {e.mark.column + 1}"
        raise InputError([f"{path}: {line}: {field}{e.message}"]) from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise InputError([f"{path}: {where}malformed YAML/JSON: {problem}"]) from None
    except (RecursionError, ValueError) as e:  # not expected past the checks: still one line
        raise InputError([f"{path}: cannot read: {type(e).__name__}: {str(e)[:200]}"]) from None
