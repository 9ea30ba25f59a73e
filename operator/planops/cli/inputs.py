"""Reading the CLI's input files: YAML or JSON, one or many documents, Plans and Capsules.

Every problem becomes one line naming the file (and document and field): unreadable files,
malformed YAML, a file with no plan, unknown fields, wrong types. Callers exit 2 on any of them.

The text itself is read by planops.cli.yamljson (YAML and JSON as JSON values, bounded, as
kubectl reads them); this module makes files, documents and values of it.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from planops.api import CapsuleDocument, CapsuleSpec, PlanDocument, values
from planops.api.documents import TemplateDocument, parse_leniently
from planops.api.template_models import PlanTemplateSpec
from planops.cli import yamljson
from planops.cli.positions import Positions
from planops.cli.yamljson import InputError
from planops.engine import templates

__all__ = [
    "FileProblem",
    "InputError",
    "Loaded",
    "given_inputs",
    "input_value",
    "load",
    "load_values",
    "position",
    "unknown_inputs",
    "with_default_capsule",
    "with_inputs",
]


@dataclass
class Loaded:
    plans: list[tuple[str, PlanDocument]] = field(default_factory=list)  # (file, plan)
    capsules: dict[str, CapsuleSpec] = field(default_factory=dict)
    #: the Capsule documents as given (file, document): `submit` applies them
    capsule_documents: list[tuple[str, CapsuleDocument]] = field(default_factory=list)
    #: what `load(lenient=True)` found wrong (else it raised)
    problems: list[FileProblem] = field(default_factory=list)
    #: where each plan came from (its file's positions, document, spec's path), as `plans`
    origins: list[tuple[Positions, int, str]] = field(default_factory=list)
    #: PlanTemplates and ClusterPlanTemplates (`--template` files, or beside a plan), by
    #: (kind, name)
    templates: dict[tuple[str, str], PlanTemplateSpec] = field(default_factory=dict)
    #: the template documents as given (file, document)
    template_documents: list[tuple[str, TemplateDocument]] = field(default_factory=list)


def _read(path: str) -> list[Any]:
    return yamljson.parse(path, _text(path))


def _text(path: str) -> str:
    try:
        return Path(path).read_text() if path != "-" else _stdin()
    except OSError as e:
        raise InputError([f"{path}: cannot read: {e.strerror or e}"]) from None
    except UnicodeDecodeError:
        raise InputError([f"{path}: cannot read: not UTF-8 text"]) from None
    except ValueError as e:  # e.g. a NUL in the path
        raise InputError([f"{path!r}: cannot read: {e}"]) from None


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


#: "FILE: line L, column C: what" (the reader's one-line errors): its line and column
_AT = re.compile(r"^.*?: line (\d+), column (\d+): ")


@dataclass(frozen=True)
class FileProblem:
    """A problem of a file or of one of its documents, as `validate -o json` reports it: `code`
    is `schema` (structure) or `unreadable` (the file itself); line and column when known."""

    file: str
    where: str  # the file, and which document when it holds several
    path: str
    message: str
    code: str = "schema"
    line: int | None = None
    column: int | None = None
    plan: str | None = None

    def text(self) -> str:
        """The one-line form (`error: ...` on stderr)."""
        if self.code == "unreadable":
            return self.message
        return f"{self.where}: {self.path or '(document)'}: {self.message}"

    def to_json(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "step": None,
            "path": self.path,
            "message": self.message,
            "plan": self.plan,
            "file": self.file,
            "line": self.line,
            "column": self.column,
        }


def _unreadable(path: str, line: str) -> FileProblem:
    at = _AT.match(line)
    return FileProblem(
        path,
        path,
        "",
        line,
        "unreadable",
        int(at.group(1)) if at else None,
        int(at.group(2)) if at else None,
    )


def load(
    plan_files: Iterable[str],
    capsule_files: Iterable[str] = (),
    lenient: bool = False,
    template_files: Iterable[str] = (),
) -> Loaded:
    """Load every document of every file; raises InputError listing all problems at once. With
    `lenient`, the problems are in `Loaded.problems` instead, and a plan whose schema errors
    leave the rest readable is loaded too (its fields the schema refused dropped), so the
    validator judges it: `validate` reports every error at once. Templates come from
    `template_files` (`--template`) and from the plan files themselves."""
    loaded = Loaded()
    problems: list[FileProblem] = []
    capsule_at: dict[str, str] = {}  # where each Capsule was read first
    files = [(f, "") for f in plan_files] + [(f, "Capsule") for f in capsule_files]
    files += [(f, "template") for f in template_files]
    for path, only in files:
        capsules_only = only == "Capsule"
        try:
            text = _text(path)
            docs = yamljson.parse(path, text)
        except InputError as e:
            problems += [_unreadable(path, line) for line in e.lines]
            continue
        positions = Positions(text)
        for n, raw in enumerate(docs, 1):
            where = f"{path}" + (f" (document {n})" if len(docs) > 1 else "")
            doc, doc_problems = parse_leniently(raw)
            name = doc.plan_id if isinstance(doc, PlanDocument) else None
            for p in doc_problems:
                at = positions.locate(n - 1, p.path)
                line, column = at if at else (None, None)
                problems.append(
                    FileProblem(path, where, p.path, p.message, p.code, line, column, name)
                )
            if only == "template" and not isinstance(doc, TemplateDocument) and doc is not None:
                wrong = "--template expects PlanTemplate or ClusterPlanTemplate documents"
                problems.append(FileProblem(path, where, "kind", wrong))
            elif isinstance(doc, TemplateDocument) and (lenient or not doc_problems):
                _add_template(loaded, problems, path, where, doc)
            elif isinstance(doc, CapsuleDocument) and (lenient or not doc_problems):
                if doc.name in capsule_at:  # refused, whichever file: neither one wins
                    first = capsule_at[doc.name]
                    again = f"Capsule {doc.name!r} is defined twice (also in {first})"
                    problems.append(FileProblem(path, where, "metadata.name", again))
                capsule_at.setdefault(doc.name, where)
                loaded.capsules[doc.name] = doc.spec
                loaded.capsule_documents.append((path, doc))
            elif isinstance(doc, PlanDocument) and (lenient or not doc_problems):
                if capsules_only:
                    problems.append(
                        FileProblem(
                            path, where, "kind", "--capsule expects Capsule documents, got a Plan"
                        )
                    )
                else:
                    loaded.plans.append((path, doc))
                    loaded.origins.append((positions, n - 1, _spec_prefix(raw)))
        if not docs:
            problems.append(FileProblem(path, path, "", "the file holds no document"))
    if not problems and not loaded.plans:
        names = ", ".join(plan_files) or "(no files)"
        problems.append(
            FileProblem(
                names,
                names,
                "",
                f"{names}: no plan found (expected a Plan manifest or a plan object with steps)",
                "unreadable",
            )
        )
    if problems and not lenient:
        raise InputError([p.text() for p in problems])
    loaded.problems = problems
    return loaded


def _add_template(
    loaded: Loaded, problems: list[FileProblem], path: str, where: str, doc: TemplateDocument
) -> None:
    key = (doc.kind, doc.name)
    if key in loaded.templates:  # refused, whichever file: neither one wins
        again = f"{doc.kind} {doc.name!r} is defined twice"
        problems.append(FileProblem(path, where, "metadata.name", again))
    loaded.templates[key] = doc.spec
    loaded.template_documents.append((path, doc))


def _spec_prefix(raw: Any) -> str:
    """Where a plan's spec is in its document: the validator's paths start there."""
    kind = raw.get("kind") if isinstance(raw, dict) else None
    if kind in ("ScheduledPlan", "ClusterScheduledPlan"):
        return "spec.planTemplate.spec."
    return "spec." if kind == "Plan" else ""


def position(loaded: Loaded, index: int, path: str) -> tuple[int, int] | None:
    """The line and column of a validator's `path` in the file of the index-th plan."""
    positions, document, prefix = loaded.origins[index]
    return positions.locate(document, prefix + path)


def with_default_capsule(plan: PlanDocument, capsules: dict[str, CapsuleSpec]) -> PlanDocument:
    """A plan that names no capsule runs under the only Capsule given, if exactly one was."""
    if plan.spec.capsule is None and len(capsules) == 1 and "default" not in capsules:
        (only,) = capsules
        return replace(plan, spec=plan.spec.model_copy(update={"capsule": only}))
    return plan


def given_inputs(input_file: str | None, items: Iterable[str]) -> dict[str, Any]:
    """`--input-file F`, then each `--input KEY=VALUE` over it; raises InputError."""
    given: dict[str, Any] = {}
    if input_file:
        given.update(load_values(input_file))
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise InputError([f"--input {item!r}: expected KEY=VALUE"])
        given[key] = input_value(key, raw)
    return given


def with_inputs(plan: PlanDocument, given: dict[str, Any]) -> PlanDocument:
    """The plan with the given values over its `spec.input`: the validator then judges them
    against `inputSchema` as it judges the file's own input (one code path)."""
    if not given:
        return plan
    merged = {**(plan.spec.input or {}), **given}
    return replace(plan, spec=plan.spec.model_copy(update={"input": merged}))


def unknown_inputs(plan: PlanDocument, given: dict[str, Any]) -> list[str]:
    """The given keys that are typos, one line each: named neither by the inputSchema's
    `properties` nor by any `{{input.KEY}}` the plan reads. A schema with no `properties` (or
    that takes other keys by `patternProperties` or an `additionalProperties` schema) names no
    set of keys: nothing is unknown to it. Otherwise a key outside both is refused
    (`--input evn=prod`), even when JSON Schema's default would let it through unseen."""
    schema = plan.spec.input_schema
    if not isinstance(schema, dict) or not isinstance(schema.get("properties"), dict):
        return []
    if "patternProperties" in schema or schema.get("additionalProperties") not in (None, False):
        return []
    known = list(schema["properties"])
    read = {
        t.path[0]
        for _, t in templates.find(plan.spec.dump())
        if isinstance(t, templates.Template) and t.root == "input" and t.path
    }
    names = ", ".join(known) or "none"
    return [
        f"plan {plan.plan_id}: --input {key}: the plan's inputSchema has no such input "
        f"(inputs: {names})"
        for key in given
        if key not in known and key not in read
    ]
