"""Reading the CLI's input files: YAML or JSON, one or many documents, Plans and Capsules.

Every problem becomes one line naming the file (and document and field): unreadable files,
malformed YAML, a file with no plan, unknown fields, wrong types. Callers exit 2 on any of them.

The text itself is read by planops.cli.yamljson (YAML and JSON as JSON values, bounded, as
kubectl reads them); this module makes files, documents and values of it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planops.api import CapsuleDocument, CapsuleSpec, PlanDocument, parse_document, values
from planops.cli import yamljson
from planops.cli.yamljson import InputError

__all__ = ["InputError", "Loaded", "input_value", "load", "load_values", "with_default_capsule"]


@dataclass
class Loaded:
    plans: list[tuple[str, PlanDocument]] = field(default_factory=list)  # (file, plan)
    capsules: dict[str, CapsuleSpec] = field(default_factory=dict)
    #: the Capsule documents as given (file, document): `submit` applies them
    capsule_documents: list[tuple[str, CapsuleDocument]] = field(default_factory=list)


def _read(path: str) -> list[Any]:
    try:
        text = Path(path).read_text() if path != "-" else _stdin()
    except OSError as e:
        raise InputError([f"{path}: cannot read: {e.strerror or e}"]) from None
    except UnicodeDecodeError:
        raise InputError([f"{path}: cannot read: not UTF-8 text"]) from None
    except ValueError as e:  # e.g. a NUL in the path
        raise InputError([f"{path!r}: cannot read: {e}"]) from None
    return yamljson.parse(path, text)


def _stdin() -> str:
    import sys  # noqa: PLC0415 - only for "-"

    return sys.stdin.read()


def load_values(path: str) -> dict[str, Any]:
    """`--input-file`: one object of input values, read by the same rules as plan files."""
    docs = _read(path)
    if len(docs) != 1 or not isinstance(docs[0], dict):
        raise InputError([f"{path}: input values must be one object"])
    problem = values.problem(docs[0])
    if problem is not None:
        where = values.dotted(problem.path) or "(document)"
        raise InputError([f"{path}: {where}: {problem.message}"])
    return docs[0]


class _NotJSONError(ValueError):
    """A JSON text that holds what JSON means nothing by (NaN, Infinity)."""


def _constant(name: str) -> Any:
    raise _NotJSONError(name)


def _float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise InputError([f"the number {text[:20]}... is too large to hold"])
    return number


def input_value(key: str, raw: str) -> Any:
    """`--input KEY=VALUE`: VALUE as JSON when it is JSON, else the text itself. A JSON value
    planops cannot hold (nested too deep, a number too large) is an InputError, not text."""
    try:
        value = json.loads(raw, parse_constant=_constant, parse_float=_float)
    except (json.JSONDecodeError, _NotJSONError):
        return raw
    except InputError as e:
        raise InputError([f"--input {key}: {e.lines[0]}"]) from None
    except ValueError:  # int(): more digits than Python reads
        raise InputError(
            [f"--input {key}: a number of more than {yamljson.MAX_DIGITS} digits"]
        ) from None
    except RecursionError:
        raise InputError([f"--input {key}: {values.message()}"]) from None
    problem = values.problem(value)
    if problem is not None:
        where = values.dotted(problem.path, f"--input {key}")
        raise InputError([f"{where}: {problem.message}"])
    return value


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
                loaded.capsule_documents.append((path, doc))
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
