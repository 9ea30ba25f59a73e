"""The reference YAML reader of kubectl-plan: libyaml's or PyYAML's parser under one bounded
composer, plain scalars resolved as kubectl resolves them, and every node checked for a JSON
meaning before anything is constructed (the rules: planops.cli.yamljson). Its errors - the
refused node's line, column and field path - are the ones kubectl-plan reports.
"""

from __future__ import annotations

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

TAG = "tag:yaml.org,2002:"
_JSON_TAGS = {f"{TAG}{t}" for t in ("str", "int", "float", "bool", "null", "seq", "map")}
_MERGE = f"{TAG}merge"
_NAMES = {
    f"{TAG}set": "a YAML set (!!set)",
    f"{TAG}binary": "YAML binary data (!!binary)",
    f"{TAG}timestamp": "a YAML timestamp (!!timestamp); quote it to make it a string",
    f"{TAG}omap": "a YAML ordered map (!!omap)",
    f"{TAG}pairs": "YAML pairs (!!pairs)",
}


class RefusedError(Exception):
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
            raise RefusedError(None, (), values.message(values.MAX_DOCUMENT_DEPTH), mark)


class Loader(_Bounded, yaml.SafeLoader):
    """SafeLoader with kubectl's reading of plain scalars and a bounded composer: the reference
    reader (pure Python), whose errors are the ones reported."""


try:
    from yaml._yaml import CParser
except ImportError:  # PyYAML built without libyaml: the pure-Python reader only
    CLoader: type[Any] | None = None
    LIBYAML_PARSER: type[Any] | None = None
else:
    LIBYAML_PARSER = CParser

    class _CLoaderImpl(_Bounded, CParser, SafeConstructor, Resolver):
        """The same composer, constructor and resolvers over libyaml's parser (events in C)."""

        def __init__(self, stream: str) -> None:
            CParser.__init__(self, stream)
            SafeConstructor.__init__(self)
            Resolver.__init__(self)
            Composer.__init__(self)

    CLoader = _CLoaderImpl


# Plain scalars as kubectl reads them: no timestamps, no sexagesimal numbers, no `=` (PyYAML's
# `value` tag, which it cannot even construct); an exponent needs no dot (JSON's `1e5`).
Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag in (f"{TAG}bool", f"{TAG}null", _MERGE)]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
Loader.add_implicit_resolver(
    f"{TAG}int",
    re.compile(r"^(?:[-+]?0b[0-1_]+|[-+]?0[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$"),
    list("-+0123456789"),
)
Loader.add_implicit_resolver(
    f"{TAG}float",
    re.compile(
        r"^(?:[-+]?[0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
    ),
    list("-+0123456789."),
)
if CLoader is not None:
    CLoader.yaml_implicit_resolvers = Loader.yaml_implicit_resolvers


def _children(node: Node) -> Iterator[tuple[Node, str | int]]:
    if isinstance(node, SequenceNode):
        yield from ((child, i) for i, child in enumerate(node.value))
    elif isinstance(node, MappingNode):
        for key, child in node.value:
            yield child, key.value if isinstance(key, ScalarNode) else "?"


def _check_scalar(loader: Any, node: ScalarNode, path: values.Path) -> None:
    if node.tag == f"{TAG}int" and len(node.value) > MAX_DIGITS:
        raise RefusedError(
            node, path, f"a number of {len(node.value)} digits (at most {MAX_DIGITS})"
        )
    if node.tag == f"{TAG}float":
        try:
            number = loader.construct_yaml_float(node)
        except ValueError:
            raise RefusedError(node, path, f"{node.value[:20]!r} is not a number") from None
        if not math.isfinite(number):
            raise RefusedError(
                node, path, f"{node.value[:20]} has no JSON meaning (quote it for the text)"
            )


def _check_node(loader: Any, node: Node, path: values.Path) -> None:
    """The node itself: a JSON type, string keys."""
    if node.tag not in _JSON_TAGS:
        what = _NAMES.get(node.tag, f"the YAML tag {node.tag}")
        raise RefusedError(node, path, f"{what} has no JSON meaning: a plan file holds JSON values")
    if isinstance(node, ScalarNode):
        _check_scalar(loader, node, path)
    elif isinstance(node, MappingNode):
        for key, _ in node.value:
            if isinstance(key, ScalarNode) and key.tag in (f"{TAG}str", _MERGE):
                continue
            if isinstance(key, ScalarNode):
                kind = key.tag.removeprefix(TAG)
                why = f"the key {key.value!r} reads as {kind}, not a string: quote it"
            else:
                why = "a key is an object or an array: keys are strings"
            raise RefusedError(key, path, why)


_STR = f"{TAG}str"
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
        except RefusedError as e:
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
                raise RefusedError(
                    node,
                    path,
                    f"its YAML aliases expand to more than {MAX_EXPANDED:,} values (an alias "
                    "bomb?): write the values out",
                )
            if depth > values.MAX_DOCUMENT_DEPTH:
                raise RefusedError(node, path, values.message(values.MAX_DOCUMENT_DEPTH))
            done[key] = (min(size, MAX_EXPANDED + 1), depth)
            continue
        if key in done:
            continue
        if key in open_:
            raise RefusedError(
                node, path, "a YAML alias refers to a value that contains it (a cycle)"
            )
        _check_node(loader, node, path)
        open_.add(key)
        stack.append((node, path, True))
        stack.extend((child, (*path, part), False) for child, part in _children(node))


def compose(loader: Any) -> list[Any]:
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
