"""Reading the CLI's input files: YAML or JSON, one or many documents, Plans and Capsules.

Every problem becomes one line naming the file (and document and field): unreadable files,
malformed YAML, a file with no plan, unknown fields, wrong types. Callers exit 2 on any of them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from planops.api import CapsuleDocument, CapsuleSpec, PlanDocument, parse_document


class InputError(Exception):
    """Unusable input; `lines` are the one-line messages (file: where: what)."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


@dataclass
class Loaded:
    plans: list[tuple[str, PlanDocument]] = field(default_factory=list)  # (file, plan)
    capsules: dict[str, CapsuleSpec] = field(default_factory=dict)


def _read(path: str) -> list[Any]:
    try:
        text = Path(path).read_text() if path != "-" else _stdin()
    except OSError as e:
        raise InputError([f"{path}: cannot read: {e.strerror or e}"]) from None
    except UnicodeDecodeError:
        raise InputError([f"{path}: cannot read: not UTF-8 text"]) from None
    try:
        return [d for d in yaml.safe_load_all(text) if d is not None]
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise InputError([f"{path}: {where}malformed YAML/JSON: {problem}"]) from None


def _stdin() -> str:
    import sys  # noqa: PLC0415 - only for "-"

    return sys.stdin.read()


def load(plan_files: Iterable[str], capsule_files: Iterable[str] = ()) -> Loaded:
    """Load every document of every file; raises InputError listing all problems at once."""
    loaded = Loaded()
    problems: list[str] = []
    files = [(f, False) for f in plan_files] + [(f, True) for f in capsule_files]
    for path, capsules_only in files:
        try:
            docs = _read(path)
        except InputError as e:
            problems += e.lines
            continue
        for n, raw in enumerate(docs, 1):
            where = f"{path}" + (f" (document {n})" if len(docs) > 1 else "")
            doc, doc_problems = parse_document(raw)
            problems += [f"{where}: {p.path or '(document)'}: {p.message}" for p in doc_problems]
            if isinstance(doc, CapsuleDocument):
                if doc.name in loaded.capsules:
                    problems.append(
                        f"{where}: metadata.name: Capsule {doc.name!r} is defined twice"
                    )
                loaded.capsules[doc.name] = doc.spec
            elif isinstance(doc, PlanDocument):
                if capsules_only:
                    problems.append(
                        f"{where}: kind: --capsule expects Capsule documents, got a Plan"
                    )
                else:
                    loaded.plans.append((path, doc))
        if not docs:
            problems.append(f"{path}: the file holds no document")
    if not problems and not loaded.plans:
        names = ", ".join(plan_files) or "(no files)"
        problems.append(
            f"{names}: no plan found (expected a Plan manifest or a plan object with steps)"
        )
    if problems:
        raise InputError(problems)
    return loaded


def with_default_capsule(plan: PlanDocument, capsules: dict[str, CapsuleSpec]) -> PlanDocument:
    """A plan that names no capsule runs under the only Capsule given, if exactly one was."""
    if plan.spec.capsule is None and len(capsules) == 1 and "default" not in capsules:
        (only,) = capsules
        return PlanDocument(
            plan.plan_id, plan.spec.model_copy(update={"capsule": only}), plan.namespace
        )
    return plan
