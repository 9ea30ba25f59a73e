"""kubectl-plan's fast readers: a JSON text read by `json` (C), a plain YAML text built straight
from libyaml's events. Each returns None for whatever it does not read exactly as the reference
reader (planops.cli.yaml_reader) does, which then reads it and gives its errors.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

import yaml
from yaml.constructor import SafeConstructor
from yaml.nodes import ScalarNode

from planops.api import values
from planops.cli.yaml_reader import LIBYAML_PARSER, MAX_DIGITS, TAG, Loader

#: Where the YAML reader reads a JSON text otherwise than `json` does, which leaves the text to
#: it: a character YAML does not allow in a stream (PyYAML's Reader.NON_PRINTABLE); a tab (the
#: pure-Python reader refuses one between tokens) or a line break YAML folds in a string (NEL,
#: LS, PS); a UTF-16 surrogate escape (YAML decodes the halves one by one); a key whose colon
#: is on another line (no simple key to YAML).
_NOT_AS_JSON = re.compile(
    "[^\x0a\x0d\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]"
    '|\\\\u[dD][89a-fA-F]|"[ \r\n]*[\r\n][ \r\n]*:'
)
#: A longer key may not be a YAML simple key (1,024 characters as written, escapes included)
_LONG_KEY = 160


class _NotSameError(Exception):
    """The JSON reader would not read this text exactly as the YAML reader does."""


def _json_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_DIGITS:
        raise _NotSameError
    return int(text)


def _json_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise _NotSameError
    return number


def _json_constant(name: str) -> Any:
    raise _NotSameError  # NaN, Infinity: no JSON values


def _json_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    for key, _ in pairs:
        if len(key) > _LONG_KEY:
            raise _NotSameError
    return dict(pairs)  # a repeated key: the last one, as the YAML reader keeps it


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` nests more than `limit` levels (no recursion)."""
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        children = v.values() if isinstance(v, dict) else v if isinstance(v, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((c, depth + 1) for c in children if isinstance(c, dict | list))
    return False


def json_documents(text: str) -> list[Any] | None:
    """The document of a JSON text read by `json`, when that is what the YAML reader would
    make of it; None to leave the text to the YAML reader (not JSON, or JSON it refuses)."""
    head = text.lstrip(" \t\r\n")[:1]
    if head not in ("{", "[") or _NOT_AS_JSON.search(text):
        return None
    try:
        doc = json.loads(
            text,
            parse_int=_json_int,
            parse_float=_json_float,
            parse_constant=_json_constant,
            object_pairs_hook=_json_object,
        )
    except (ValueError, RecursionError, _NotSameError):
        return None
    if _deeper_than(doc, values.MAX_DOCUMENT_DEPTH):
        return None  # the YAML reader refuses it, with the line
    return [doc]


class _NotPlainError(Exception):
    """Something the event reader leaves to the composer (an alias, a tag, a refusal)."""


#: the scalar tags the event reader constructs; anything else is left to the composer
_SCALARS = {f"{TAG}{t}" for t in ("str", "int", "float", "bool", "null")}
_CONSTRUCTOR = SafeConstructor()


def _scalar(event: Any) -> Any:
    """A scalar event's value, resolved as the reference reader resolves it (its own resolver
    tables, its own constructors); _NotPlainError for whatever it would refuse or tag."""
    if event.anchor is not None or event.tag is not None:
        raise _NotPlainError
    value = event.value
    if not event.implicit[0]:  # quoted (or a block scalar): a string
        return value
    resolvers = Loader.yaml_implicit_resolvers.get(value[:1], ())  # "" for "": null's
    tag = next((tag for tag, regexp in resolvers if regexp.match(value)), None)
    if tag is None:
        return value  # no resolver: a string
    if tag not in _SCALARS or (tag == f"{TAG}int" and len(value) > MAX_DIGITS):
        raise _NotPlainError
    result = _CONSTRUCTOR.yaml_constructors[tag](_CONSTRUCTOR, ScalarNode(tag, value))
    if tag == f"{TAG}float" and not math.isfinite(result):
        raise _NotPlainError
    return result


def event_documents(text: str) -> list[Any] | None:
    """The documents of a YAML text built straight from libyaml's events, without nodes: for a
    text without aliases, anchors or tags, whose keys are strings and whose values need no
    refusal - a plan as people write it. It means what the composer path makes of it (the
    same resolvers and constructors, the last of repeated keys, the same depth bound, counted
    without recursion); None at anything else, which the composer path then reads (and
    refuses with its line and column). Three times faster than composing: no node per value,
    no recursion, one pass."""
    assert LIBYAML_PARSER is not None
    parser = LIBYAML_PARSER(text)
    get = parser.get_event
    docs: list[Any] = []
    #: open collections: (the collection, its key waiting for a value or _KEY: a key is next)
    stack: list[tuple[Any, Any]] = []
    try:
        get()  # StreamStartEvent
        while not isinstance(get(), yaml.StreamEndEvent):  # a DocumentStartEvent
            root: Any = _KEY
            while True:
                event = get()
                kind = event.__class__
                if kind is yaml.ScalarEvent:
                    value: Any = _scalar(event)
                elif kind is yaml.MappingStartEvent or kind is yaml.SequenceStartEvent:
                    if event.anchor is not None or event.tag is not None:
                        raise _NotPlainError
                    if len(stack) >= values.MAX_DOCUMENT_DEPTH:
                        raise _NotPlainError
                    value = {} if kind is yaml.MappingStartEvent else []
                elif kind is yaml.MappingEndEvent or kind is yaml.SequenceEndEvent:
                    value, _ = stack.pop()
                    if not stack:
                        root = value
                        break
                    continue
                else:  # an alias
                    raise _NotPlainError
                if stack:
                    parent, key = stack[-1]
                    if parent.__class__ is list:
                        parent.append(value)
                    elif key is _KEY:
                        if value.__class__ is not str:
                            raise _NotPlainError  # a key that is no string: refused
                        stack[-1] = (parent, value)
                        continue
                    else:
                        parent[key] = value
                        stack[-1] = (parent, _KEY)
                if kind is not yaml.ScalarEvent:
                    stack.append((value, _KEY))
                elif not stack:
                    root = value
                    break
            get()  # DocumentEndEvent
            docs.append(root)
    except (yaml.YAMLError, _NotPlainError, ValueError):
        return None
    finally:
        parser.dispose()
    return [d for d in docs if d is not None]


#: no key read yet in a mapping (the next scalar is a key)
_KEY = object()
