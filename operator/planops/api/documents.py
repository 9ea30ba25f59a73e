"""Turn parsed documents (dicts from YAML/JSON or from the API) into typed Plans and Capsules.

Accepted: `Plan`, `Capsule`, `ScheduledPlan`, `ClusterScheduledPlan`, `PlanTemplate` and
`ClusterPlanTemplate` manifests (and `PlanTrigger`s, read only against their schema), a bare
seed-format plan object (`{"id": ..., "steps": [...]}`, snake_case or camelCase), and a seed-2
plan file (`{"identifier": ..., "steps": [{"id", "tool_name", "input"}]}`, converted by
`planops.api.seed2`). Structural problems come back as
`Problem`s with a dotted field path, never as exceptions, so callers can report all of them.

A document is first checked to be JSON values nested at most `values.MAX_DOCUMENT_DEPTH` deep
(`planops.api.values` says why): nothing below, pydantic included, walks a deeper one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from pydantic import BaseModel, ValidationError

from planops.api import names, schema_help, seed2, values
from planops.api.capsule_models import CapsuleSpec
from planops.api.models import STEP_KINDS, PlanSpec, SeedPlan
from planops.api.schedule_models import ClusterScheduledPlanSpec, ScheduledPlanSpec
from planops.api.template_models import PlanTemplateSpec
from planops.api.trigger_models import PlanTriggerSpec

API_GROUP = names.GROUP
API_VERSION = names.API_VERSION


@dataclass(frozen=True)
class Problem:
    """A structural problem of a document: where (dotted path) and what; `code` is the
    validator's code for it (`limits` for a document nested too deep)."""

    path: str
    message: str
    code: str = "schema"


@dataclass(frozen=True)
class PlanDocument:
    """A plan to validate or run; for a (Cluster)ScheduledPlan, its planTemplate and `schedule`."""

    plan_id: str
    spec: PlanSpec
    namespace: str | None = None
    schedule: ScheduledPlanSpec | None = None
    #: the manifest's metadata.generateName: `plan_id` is then that prefix, and the API server
    #: completes the name when the Plan is created
    generate_name: bool = False
    #: the manifest's metadata.labels and .annotations, kept so `submit` creates them too
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class CapsuleDocument:
    name: str
    spec: CapsuleSpec
    namespace: str | None = None


@dataclass(frozen=True)
class TemplateDocument:
    """A PlanTemplate or ClusterPlanTemplate (api.template_models)."""

    kind: str
    name: str
    spec: PlanTemplateSpec
    namespace: str | None = None


@dataclass(frozen=True)
class TriggerDocument:
    """A PlanTrigger (api.trigger_models): read and judged against its schema; the receiver
    runs it (planops.triggers), the CLI's verbs for plans do not."""

    name: str
    spec: PlanTriggerSpec
    namespace: str | None = None


Document = PlanDocument | CapsuleDocument | TemplateDocument | TriggerDocument

KINDS: dict[
    str, type[PlanSpec] | type[CapsuleSpec] | type[ScheduledPlanSpec] | type[PlanTriggerSpec]
] = {
    "Plan": PlanSpec,
    "Capsule": CapsuleSpec,
    "ScheduledPlan": ScheduledPlanSpec,
    "ClusterScheduledPlan": ClusterScheduledPlanSpec,
    "PlanTemplate": PlanTemplateSpec,
    "ClusterPlanTemplate": PlanTemplateSpec,
    "PlanTrigger": PlanTriggerSpec,
}


def _path(loc: tuple[int | str, ...], prefix: str) -> str:
    out = prefix
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out


#: pydantic's type errors: what the field must be (the CRD's type, which the API server holds)
_TYPES = {
    "int_type": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "string_type": "a string",
    "bool_type": "a boolean",
    "dict_type": "an object",
    "model_type": "an object",
    "list_type": "an array",
}


def _wrong_type(expected: str, given: Any) -> str:
    """`must be an integer, got the string "3"` (and, for a number in quotes, the fix)."""
    kinds = {str: "the string", bool: "the boolean", int: "the integer", float: "the number"}
    kind = next((k for t, k in kinds.items() if type(given) is t), None)
    if kind is None:
        got = (
            "an array"
            if isinstance(given, list)
            else "an object"
            if isinstance(given, dict)
            else "null"
        )
    else:
        shown = json.dumps(given)
        got = f"{kind} {shown if len(shown) <= 40 else shown[:39] + '…'}"
    hint = ""
    if isinstance(given, str) and expected in ("an integer", "a number") and _number(given):
        hint = " (write it without quotes)"
    return f"must be {expected}, got {got}{hint}"


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def problems_of(
    error: ValidationError, prefix: str = "", model: type[BaseModel] | None = None
) -> list[Problem]:
    """One Problem per pydantic error, with a readable message (an unknown field of `model`
    names the nearest field it has)."""
    problems = []
    for err in error.errors():
        loc = tuple(err["loc"])
        if err["type"] == "extra_forbidden":
            message = schema_help.unknown_field_message(model, loc) if model else "unknown field"
        elif err["type"] == "missing":
            message = "required field is missing"
        elif err["type"] in _TYPES:
            message = _wrong_type(_TYPES[err["type"]], err.get("input"))
        else:
            message = str(err["msg"])
            if message.startswith("Value error, "):
                message = message[len("Value error, ") :]
        problems.append(Problem(_path(loc, prefix), message))
    return problems


@dataclass
class _Meta:
    name: str | None = None
    namespace: str | None = None
    generate_name: bool = False
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)


def _strings(meta: dict[str, Any], key: str, problems: list[Problem]) -> dict[str, str]:
    """metadata.labels / .annotations: a map of strings, as Kubernetes takes them."""
    got = meta.get(key)
    if got is None:
        return {}
    if not isinstance(got, dict) or not all(isinstance(v, str) for v in got.values()):
        problems.append(Problem(f"metadata.{key}", "must be a map of strings"))
        return {}
    return dict(got)


def _meta(doc: dict[str, Any], generate_name: bool) -> tuple[_Meta, list[Problem]]:
    """metadata: a name (or, for a Plan, a generateName the API server completes), a
    namespace, and the labels and annotations `submit` keeps."""
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        return _Meta(), [Problem("metadata", "must be an object with a name")]
    out = _Meta()
    problems: list[Problem] = []
    name, prefix, namespace = meta.get("name"), meta.get("generateName"), meta.get("namespace")
    if isinstance(name, str) and name:
        out.name = name
    elif generate_name and name is None and isinstance(prefix, str) and prefix:
        out.name, out.generate_name = prefix, True
    elif generate_name and name is None and prefix is not None:
        problems.append(Problem("metadata.generateName", "must be a non-empty string"))
    else:
        problems.append(Problem("metadata.name", "required field is missing"))
    if namespace is not None and not isinstance(namespace, str):
        problems.append(Problem("metadata.namespace", "must be a string"))
    elif namespace is not None:
        out.namespace = namespace
    out.labels = _strings(meta, "labels", problems)
    out.annotations = _strings(meta, "annotations", problems)
    return out, problems


#: Keys whose value is one of a plan's values: the depth rule is the validator's from there.
VALUE_KEYS = frozenset(
    ("input", "output", "inputSchema", "input_schema", "onError", "on_error", *STEP_KINDS)
)


def _values_problem(doc: Any) -> Problem | None:
    """A document that holds what is no JSON value, or nests deeper than MAX_DOCUMENT_DEPTH. The
    path names the plan's value that is too deep (`spec.steps[0].input`) when there is one."""
    found = values.problem(doc, values.MAX_DOCUMENT_DEPTH)
    if found is None:
        return None
    if not found.too_deep:
        return Problem(values.dotted(found.path), found.message, found.code)
    cut = next((n + 1 for n, part in enumerate(found.path) if part in VALUE_KEYS), None)
    if cut is not None:
        value = doc
        for part in found.path[:cut]:
            value = value[part]
        inner = values.problem(value)
        if inner is not None and inner.too_deep:
            return Problem(values.dotted(found.path[:cut]), inner.message, inner.code)
    keep = values.MAX_DOCUMENT_DEPTH - values.MAX_DEPTH
    return Problem(values.dotted(found.path[:keep]), found.message, found.code)


def parse_document(doc: Any) -> tuple[Document | None, list[Problem]]:
    """Parse one document; returns (document, []) or (None, problems)."""
    parsed, problems = parse_leniently(doc)
    return (None, problems) if problems else (parsed, [])


def parse_leniently(doc: Any) -> tuple[Document | None, list[Problem]]:
    """Parse one document; with problems, the document too when what is left once the fields
    the schema refused are dropped still reads (schema_help.salvage): every error at once, the
    validator's next to the schema's. Whoever gets problems refuses the document."""
    if not isinstance(doc, dict):
        return None, [Problem("", f"expected an object, got {type(doc).__name__}")]
    not_values = _values_problem(doc)
    if not_values is not None:
        return None, [not_values]
    if seed2.is_seed2(doc):
        doc, converted = seed2.convert(doc)
        if converted:
            return None, [Problem(path, message) for path, message in converted]
    kind = doc.get("kind")
    if kind is None and "steps" in doc:
        try:
            seed = SeedPlan.model_validate(doc)
            seed_problems = []
        except ValidationError as e:
            seed_problems = problems_of(e, "", SeedPlan)
            salvaged = schema_help.salvage(SeedPlan, doc, e)
            if not isinstance(salvaged, SeedPlan):
                return None, seed_problems
            seed = salvaged
        plan = PlanSpec.model_validate(seed.model_dump(exclude={"id"}))
        return PlanDocument(seed.id, plan), seed_problems
    if kind not in KINDS:
        expected = ", ".join(KINDS)
        return None, [
            Problem("kind", f"expected kind {expected} (or a bare plan with steps), got {kind!r}")
        ]
    problems: list[Problem] = []
    api_version = doc.get("apiVersion")
    if api_version != API_VERSION:
        problems.append(Problem("apiVersion", f"expected {API_VERSION}, got {api_version!r}"))
    meta, meta_problems = _meta(doc, generate_name=kind == "Plan")
    name, namespace = meta.name, meta.namespace
    problems += meta_problems
    top = ["apiVersion", "kind", "metadata", "spec", "status"]
    for k in sorted(set(doc) - set(top)):
        guess = schema_help.nearest(k, top)
        problems.append(
            Problem(k, f"unknown field: did you mean `{guess}`?" if guess else "unknown field")
        )
    spec_raw = doc.get("spec")
    if not isinstance(spec_raw, dict):
        problems.append(Problem("spec", "required field is missing (must be an object)"))
        return None, problems
    model = KINDS[kind]
    try:
        spec = model.model_validate(spec_raw)
    except ValidationError as e:
        problems += problems_of(e, "spec", model)
        salvaged = schema_help.salvage(model, spec_raw, e)
        if salvaged is None:
            return None, problems
        spec = salvaged  # type: ignore[assignment]
    if name is None:
        return None, problems
    if isinstance(spec, ScheduledPlanSpec):
        return PlanDocument(name, spec.plan_template.spec, namespace, schedule=spec), problems
    if isinstance(spec, PlanTemplateSpec):
        return TemplateDocument(kind, name, spec, namespace), problems
    if isinstance(spec, PlanTriggerSpec):
        return TriggerDocument(name, spec, namespace), problems
    if isinstance(spec, PlanSpec):
        found = PlanDocument(name, spec, namespace, generate_name=meta.generate_name)
        return replace(found, labels=meta.labels, annotations=meta.annotations), problems
    assert isinstance(spec, CapsuleSpec)
    return CapsuleDocument(name, spec, namespace), problems
