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
events (`_event_documents`), anything else by the same bounded composer and checks (a
10,000-step file: ~0.1-0.2 s instead of 7-10 s). Whatever either fast path does not accept as
it is - a number JSON cannot hold, a character YAML does not allow, malformed text, any refusal -
is read again by the pure-Python reader, whose errors (text, line, column) are the ones given;
so every file means and is refused exactly as before, only sooner.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator
from typing import Any

import yaml
from yaml.composer import Composer
from yaml.constructor import SafeConstructor
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from yaml.resolver import Resolver

from planops.api import values

#: The most values a document may hold once its aliases are expanded (only checked when it uses
#: aliases): ten times a large plan's, so only an alias bomb reaches it.
MAX_EXPANDED = 1_000_000
#: Integers with more digits than this are refused (values.MAX_INT_BITS is the same bound).
MAX_DIGITS = 4000

_TAG = "tag:yaml.org,2002:"
_JSON_TAGS = {f"{_TAG}{t}" for t in ("str", "int", "float", "bool", "null", "seq", "map")}
_MERGE = f"{_TAG}merge"
_NAMES = {
    f"{_TAG}set": "a YAML set (!!set)",
    f"{_TAG}binary": "YAML binary data (!!binary)",
    f"{_TAG}timestamp": "a YAML timestamp (!!timestamp); quote it to make it a string",
    f"{_TAG}omap": "a YAML ordered map (!!omap)",
    f"{_TAG}pairs": "YAML pairs (!!pairs)",
}


class InputError(Exception):
    """Unusable input; `lines` are the one-line messages (file: where: what)."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


class _RefusedError(Exception):
    """A document that is no JSON value: where (mark, field path) and why."""

    def __init__(
        self, node: Node | None, path: values.Path, message: str, mark: Any = None
    ) -> None:
        super().__init__(message)
        self.mark = node.start_mark if node is not None else mark
        self.path = path
        self.message = message


class _Bounded(Composer):
    """The composer of both readers: it counts the nesting and notes aliases."""

    depth = 0
    aliases = False

    def compose_node(self, parent: Node | None, index: int) -> Node | None:
        if self.check_event(yaml.AliasEvent):  # type: ignore[attr-defined]
            self.aliases = True
        return super().compose_node(parent, index)

    def compose_sequence_node(self, anchor: Any) -> SequenceNode:
        self._descend()
        try:
            return super().compose_sequence_node(anchor)
        finally:
            self.depth -= 1

    def compose_mapping_node(self, anchor: Any) -> MappingNode:
        self._descend()
        try:
            return super().compose_mapping_node(anchor)
        finally:
            self.depth -= 1

    def _descend(self) -> None:
        """One more level; refused past MAX_DOCUMENT_DEPTH, before the composer recurses."""
        self.depth += 1
        if self.depth > values.MAX_DOCUMENT_DEPTH:
            mark = self.peek_event().start_mark  # type: ignore[attr-defined]
            raise _RefusedError(None, (), values.message(values.MAX_DOCUMENT_DEPTH), mark)


class _Loader(_Bounded, yaml.SafeLoader):
    """SafeLoader with kubectl's reading of plain scalars and a bounded composer: the reference
    reader (pure Python), whose errors are the ones reported."""


try:
    from yaml._yaml import CParser
except ImportError:  # PyYAML built without libyaml: the pure-Python reader only
    _CLoader: type[Any] | None = None
    _CParser: type[Any] | None = None
else:
    _CParser = CParser

    class _CLoaderImpl(_Bounded, CParser, SafeConstructor, Resolver):
        """The same composer, constructor and resolvers over libyaml's parser (events in C)."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            Composer.__init__(self)

    _CLoader = _CLoaderImpl


# Plain scalars as kubectl reads them: no timestamps, no sexagesimal numbers, no `=` (PyYAML's
# `value` tag, which it cannot even construct); an exponent needs no dot (JSON's `1e5`).
_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag in (f"{_TAG}bool", f"{_TAG}null", _MERGE)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    f"{_TAG}int",
    re.compile(r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$"),
    list("-+0123456789"),
)
_Loader.add_implicit_resolver(
    f"{_TAG}float",
    re.compile(
        r"^(?:[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)
if _CLoader is not None:
    _CLoader.yaml_implicit_resolvers = _Loader.yaml_implicit_resolvers


def _children(node: Node) -> Iterator[tuple[Node, str | int]]:
    if isinstance(node, SequenceNode):
        yield from ((child, i) for i, child in enumerate(node.value))
    elif isinstance(node, MappingNode):
        for key, child in node.value:
            yield child, key.value if isinstance(key, ScalarNode) else "?"


def _check_scalar(loader: Any, node: ScalarNode, path: values.Path) -> None:
    if node.tag == f"{_TAG}int" and len(node.value) > MAX_DIGITS:
        raise _RefusedError(
            node, path, f"a number of {len(node.value)} digits (at most {MAX_DIGITS})"
        )
    if node.tag == f"{_TAG}float":
        try:
            number = loader.construct_yaml_float(node)
        except ValueError:
            raise _RefusedError(node, path, f"{node.value[:20]!r} is not a number") from None
        if not math.isfinite(number):
            raise _RefusedError(
                node, path, f"{node.value[:20]} has no JSON meaning (quote it for the text)"
            )


def _check_node(loader: Any, node: Node, path: values.Path) -> None:
    """The node itself: a JSON type, string keys."""
    if node.tag not in _JSON_TAGS:
        what = _NAMES.get(node.tag, f"the YAML tag {node.tag}")
        raise _RefusedError(
            node, path, f"{what} has no JSON meaning: a plan file holds JSON values"
        )
    if isinstance(node, ScalarNode):
        _check_scalar(loader, node, path)
    elif isinstance(node, MappingNode):
        for key, _ in node.value:
            if isinstance(key, ScalarNode) and key.tag in (f"{_TAG}str", _MERGE):
                continue
            if isinstance(key, ScalarNode):
                kind = key.tag.removeprefix(_TAG)
                why = f"the key {key.value!r} reads as {kind}, not a string: quote it"
            else:
                why = "a key is an object or an array: keys are strings"
            raise _RefusedError(key, path, why)


_STR = f"{_TAG}str"
#: the path to a node, as a linked list (part, parent's link): made into a Path on an error only
_Link = tuple[str | int, "_Link"] | None


def _check_tree(loader: Any, root: Node) -> None:
    """_check_document for a document without aliases (each node once; the composer bounded
    its depth): every node checked in the same order, so the same one is refused first."""
    stack: list[tuple[Node, _Link]] = [(root, None)]
    pop, push = stack.pop, stack.append
    while stack:
        node, link = pop()
        if node.tag == _STR and node.__class__ is ScalarNode:
            continue
        try:
            _check_node(loader, node, ())
        except _RefusedError as e:
            parts: list[str | int] = []
            while link is not None:
                part, link = link
                parts.append(part)
            e.path = tuple(reversed(parts))
            raise
        if isinstance(node, SequenceNode):
            for i, child in enumerate(node.value):
                push((child, (i, link)))
        elif isinstance(node, MappingNode):
            for key, child in node.value:
                push((child, (key.value if isinstance(key, ScalarNode) else "?", link)))


def _check_document(loader: Any, root: Node) -> None:
    """Every node of a composed document, through its aliases, without recursion: JSON types
    only (`_check_node`), no alias cycle, at most MAX_DOCUMENT_DEPTH levels and (with aliases)
    MAX_EXPANDED values once expanded. Sizes are counted once per node, so a bomb is caught in
    time proportional to the file, not to its expansion."""
    if not loader.aliases:
        _check_tree(loader, root)
        return
    done: dict[int, tuple[int, int]] = {}  # node -> (values once expanded, depth)
    open_: set[int] = set()  # nodes on the current path: meeting one again is a cycle
    stack: list[tuple[Node, values.Path, bool]] = [(root, (), False)]
    while stack:
        node, path, finished = stack.pop()
        key = id(node)
        if finished:
            open_.discard(key)
            below = [done[id(child)] for child, _ in _children(node)]
            size = 1 + sum(s for s, _ in below)
            depth = 0 if isinstance(node, ScalarNode) else 1 + max((d for _, d in below), default=0)
            if loader.aliases and size > MAX_EXPANDED:
                raise _RefusedError(
                    node,
                    path,
                    f"its YAML aliases expand to more than {MAX_EXPANDED:,} values (an alias "
                    "bomb?): write the values out",
                )
            if depth > values.MAX_DOCUMENT_DEPTH:
                raise _RefusedError(node, path, values.message(values.MAX_DOCUMENT_DEPTH))
            done[key] = (min(size, MAX_EXPANDED + 1), depth)
            continue
        if key in done:
            continue
        if key in open_:
            raise _RefusedError(
                node, path, "a YAML alias refers to a value that contains it (a cycle)"
            )
        _check_node(loader, node, path)
        open_.add(key)
        stack.append((node, path, True))
        stack.extend((child, (*path, part), False) for child, part in _children(node))


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


def _json_documents(text: str) -> list[Any] | None:
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
_SCALARS = {f"{_TAG}{t}" for t in ("str", "int", "float", "bool", "null")}
_CONSTRUCTOR = SafeConstructor()


def _scalar(event: Any) -> Any:
    """A scalar event's value, resolved as the reference reader resolves it (its own resolver
    tables, its own constructors); _NotPlainError for whatever it would refuse or tag."""
    if event.anchor is not None or event.tag is not None:
        raise _NotPlainError
    value = event.value
    if not event.implicit[0]:  # quoted (or a block scalar): a string
        return value
    resolvers = _Loader.yaml_implicit_resolvers.get(value[:1], ())  # "" for "": null's
    tag = next((tag for tag, regexp in resolvers if regexp.match(value)), None)
    if tag is None:
        return value  # no resolver: a string
    if tag not in _SCALARS or (tag == f"{_TAG}int" and len(value) > MAX_DIGITS):
        raise _NotPlainError
    result = _CONSTRUCTOR.yaml_constructors[tag](_CONSTRUCTOR, ScalarNode(tag, value))
    if tag == f"{_TAG}float" and not math.isfinite(result):
        raise _NotPlainError
    return result


def _event_documents(text: str) -> list[Any] | None:
    """The documents of a YAML text built straight from libyaml's events, without nodes: for a
    text without aliases, anchors or tags, whose keys are strings and whose values need no
    refusal - a plan as people write it. It means what the composer path makes of it (the
    same resolvers and constructors, the last of repeated keys, the same depth bound, counted
    without recursion); None at anything else, which the composer path then reads (and
    refuses with its line and column). Three times faster than composing: no node per value,
    no recursion, one pass."""
    assert _CParser is not None
    parser = _CParser(text)
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


def _documents(text: str) -> list[Any]:
    """The documents of a YAML/JSON text, each checked before it is constructed: by the fast
    readers when they can, else (and for every error) by the reference reader."""
    fast = _json_documents(text)
    if fast is not None:
        return fast
    if _CLoader is not None and "\t" not in text:  # a tab: see _NOT_AS_JSON
        fast = _event_documents(text)
        if fast is not None:
            return fast
        try:
            return _compose(_CLoader(text))
        except (yaml.YAMLError, _RefusedError, RecursionError, ValueError):
            pass  # read again below: its errors are the ones reported
    return _compose(_Loader(text))


def _compose(loader: Any) -> list[Any]:
    docs = []
    try:
        while loader.check_node():
            root = loader.get_node()
            if root is None:
                continue
            _check_document(loader, root)
            loader.aliases = False
            docs.append(loader.construct_document(root))
    finally:
        loader.dispose()
    return [d for d in docs if d is not None]


def parse(path: str, text: str) -> list[Any]:
    try:
        return _documents(text)
    except _RefusedError as e:
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
