"""The vocabulary planops and the cluster share is written in one place, planops.api.names: no
other module of the package spells a `planops.dev/` label or annotation key (or the
`answer.planops.dev/` prefix) in its code. A key spelled twice can drift: a label written under
one spelling and read under another matches nothing, silently. Docstrings may name keys."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from planops.api import names

PACKAGE = Path(__file__).resolve().parents[2] / "operator" / "planops"
HOME = PACKAGE / "api" / "names.py"
#: a key: `planops.dev/...` (or `answer.planops.dev/...`) at the start of a text or after a
#: character that cannot be part of a domain name (`plan.planops.dev/NAME`, kubectl's way to name
#: an object, is no key)
KEY = re.compile(r"(?:^|[^\w.-])(?:answer\.)?" + re.escape(names.KEY_PREFIX))


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are statements (docstrings), not values."""
    return {
        id(node.value)
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
    }


def key_literals(path: Path, root: Path = PACKAGE) -> list[str]:
    """`file:line: text` of every string in the code of `path` that spells a key."""
    tree = ast.parse(path.read_text())
    skip = _docstrings(tree)
    return [
        f"{path.relative_to(root)}:{node.lineno}: {node.value!r}"
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant)
        and isinstance(node.value, str)
        and id(node) not in skip
        and KEY.search(node.value)
    ]


def test_no_module_but_api_names_spells_a_key():
    found = [hit for p in sorted(PACKAGE.rglob("*.py")) if p != HOME for hit in key_literals(p)]
    assert found == [], "read the key from planops.api.names"


def test_the_check_sees_keys_in_values_and_f_strings_but_not_in_docstrings(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        '"""Reads `planops.dev/plan` (a docstring may name it)."""\n'
        'PARENT = "planops.dev/parent"\n'
        'def answer(step): return f"answer.planops.dev/{step}"\n'
        'def shown(name): return f"plan.planops.dev/{name} created"\n'
    )
    hits = key_literals(probe, tmp_path)
    assert [h.split(": ", 1)[0] for h in hits] == ["probe.py:2", "probe.py:3"]


def test_the_keys_are_under_the_one_prefix():
    keys = [v for k, v in vars(names).items() if k.startswith(("LABEL_", "ANNOTATION_"))]
    assert keys and all(
        k.startswith(names.KEY_PREFIX) or k == names.ANNOTATION_ANSWER_PREFIX for k in keys
    )
    assert set(names.RESERVED_LABELS) <= set(keys) and set(names.RESERVED_ANNOTATIONS) <= set(keys)
