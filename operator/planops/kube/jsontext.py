"""JSON from the API server, read whatever its nesting: one deep object never stops the others.

The API server accepts objects nested up to 10,000 levels, but Python's `json.loads` recurses
once per level and raises RecursionError near 1,000. A Plan whose `spec.input` nests 1,200 levels
(7 KB) therefore made every list and watch answer holding it unreadable: the operator's watch of
Plans, `kubectl plan get`, the UI, for every Plan of the namespace, not only that one.

`loads` reads with the fast C decoder and, only when that runs out of stack, cuts every object or
array nested deeper than CUT_DEPTH levels (replaced by the string CUT, found with a regular
expression, no recursion) and reads the rest. The deep object is then still there, with a value
no plan may hold (values nest at most 64 deep, api.values), so the validator refuses it with a
clear error (`Invalid`, an Event) and every other object is read as it is. CUT_DEPTH is above what
a valid document nests (api.values.MAX_DOCUMENT_DEPTH) and far below Python's limit, leaving room
for the recursive walks the operator and kopf make of an object (copies, diffs).
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

CUT_DEPTH = 100
CUT = f"planops: nested deeper than {CUT_DEPTH} levels: not read"
#: a JSON string (escapes included) or a bracket: everything else cannot change the depth
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]')


def loads(text: str | bytes | bytearray) -> Any:
    """`json.loads`, but a value nested too deeply for it is cut at CUT_DEPTH (see above)."""
    try:
        return json.loads(text)
    except RecursionError:
        return json.loads(cut_deep(text if isinstance(text, str) else bytes(text).decode()))


def loads_typed(text: str | bytes | bytearray) -> Any:
    """A built-in kind's JSON (a Job, a pod, a namespace), read with orjson: ~40 % less CPU than
    `json` for the operator's busiest reads, its informers' watch events (docs/performance.md).
    Only for kinds whose every field the API server types: they nest a few levels, and hold no
    integer past 64 bits and no NaN, where orjson would read differently (an integer past 64
    bits as a float) or stop. A custom resource (a Plan's `spec.input` holds any JSON) is read
    with `loads`."""
    return orjson.loads(text)


def cut_deep(text: str) -> str:
    """`text` with every object or array that opens deeper than CUT_DEPTH replaced by CUT."""
    out: list[str] = []
    depth, last, cut_from = 0, 0, -1
    for m in _TOKEN.finditer(text):
        token = m.group()
        if token[0] == '"':
            continue
        if token in "[{":
            depth += 1
            if depth == CUT_DEPTH + 1 and cut_from < 0:
                cut_from = m.start()
            continue
        if depth == CUT_DEPTH + 1 and cut_from >= 0:
            out += [text[last:cut_from], json.dumps(CUT)]
            last, cut_from = m.end(), -1
        depth -= 1
    out.append(text[last:])
    return "".join(out)
