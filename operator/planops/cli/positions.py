"""Where a field path is in a file: the line and column of `spec.steps[1].dependOn`, so an error
points at the text to fix (an editor jumps there; `validate -o json` carries them).

Only asked when there are errors to report: the file is composed again by the reference reader
(planops.cli.yaml_reader, which keeps every node's mark), once per file. A path that is not in
the file (a missing field) points at the object it is missing from.
"""

from __future__ import annotations

import re
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from planops.cli import yaml_reader

_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def parts(path: str) -> list[str | int]:
    """`spec.steps[0].id` -> ["spec", "steps", 0, "id"]."""
    return [int(index) if index else name for name, index in _PART.findall(path)]


class Positions:
    """The documents of one file's text, composed once, asked for positions."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._roots: list[Node] | None = None

    def _documents(self) -> list[Node]:
        if self._roots is None:
            roots: list[Node] = []
            loader: Any = yaml_reader.Loader(self.text)
            try:
                while loader.check_node():
                    root = loader.get_node()
                    if root is None or (isinstance(root, ScalarNode) and root.tag.endswith("null")):
                        continue  # as the reader drops them: document numbers stay the same
                    roots.append(root)
            except (yaml.YAMLError, yaml_reader.RefusedError, RecursionError, ValueError):
                pass  # positions of the documents before it, if any
            finally:
                loader.dispose()
            self._roots = roots
        return self._roots

    def locate(self, document: int, path: str) -> tuple[int, int] | None:
        """The 1-based (line, column) of `path` in the `document`-th document (0-based), or of
        the deepest object on the way to it; None when the file cannot say."""
        roots = self._documents()
        if not 0 <= document < len(roots):
            return None
        node: Node = roots[document]
        mark = node.start_mark
        for part in parts(path):
            if isinstance(node, MappingNode) and isinstance(part, str):
                found = next(((k, v) for k, v in node.value if k.value == part), None)
                if found is None:
                    break
                mark = found[0].start_mark  # the key: where the field is written
                node = found[1]
            elif isinstance(node, SequenceNode) and isinstance(part, int):
                if part >= len(node.value):
                    break
                node = node.value[part]
                mark = node.start_mark
            else:
                break
        return mark.line + 1, mark.column + 1
