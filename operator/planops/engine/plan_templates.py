"""Templates (PlanTemplate, ClusterPlanTemplate): one rule for what a plan from a template runs
and what a template step's child plan is, for the validator, the local runner and the cluster.

A template grants nothing: what it runs is a plan under the *caller's* Capsule, judged by the
one validator as the caller's own steps would be, so a template needing a tool, a binary, an
image or a grant that Capsule lacks is refused naming it. Its input is the caller's `input` over
the template's own (its defaults), judged against its `inputSchema` before anything runs; a key
the schema does not declare is refused (with the nearest it does), since a typo would otherwise
pass silently whenever the schema allows other keys.

Templates are found through a `TemplateResolver` (the CLI's `--template` files, the cluster's
objects or a run's recorded snapshot), by `(kind, name)`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Protocol

from pydantic import ValidationError

from planops.api.models import PlanSpec, Step
from planops.api.schema_help import nearest
from planops.api.template_models import PlanTemplateSpec
from planops.api.template_ref import TemplateRef, as_ref

#: a template's key: (kind, name)
Key = tuple[str, str]


class TemplateResolver(Protocol):
    """Finds a template by kind and name (a PlanTemplate in the plan's namespace)."""

    def __call__(self, kind: str, name: str) -> PlanTemplateSpec | None: ...


def templates(mapping: Mapping[Key, PlanTemplateSpec]) -> TemplateResolver:
    """A resolver over a fixed set (the CLI's `--template` files, a run's snapshot, tests)."""

    def resolve(kind: str, name: str) -> PlanTemplateSpec | None:
        return mapping.get((kind, name))

    return resolve


def none(kind: str, name: str) -> PlanTemplateSpec | None:
    """The resolver of an executor given no templates."""
    return None


def template_of(step: Step) -> TemplateRef | str:
    """The template a template step names, or why it names none readable."""
    try:
        return TemplateRef.model_validate(as_ref(step.template))
    except ValidationError as e:
        why = "; ".join(
            f"{'.'.join(map(str, x['loc'])) or 'template'}: {x['msg']}" for x in e.errors()
        )
        return f"template must be a PlanTemplate's name or {{kind, name}}: {why}"


def missing(ref: TemplateRef) -> str:
    """Why a template cannot be found (the refusal's message)."""
    where = "in the plan's namespace" if ref.kind == "PlanTemplate" else "in the cluster"
    return (
        f"{ref.kind} {ref.name!r} not found {where}: create it, name another, or pass "
        "--template FILE (kubectl-plan validate, graph, run --local)"
    )


def merged_input(template: PlanTemplateSpec, given: Mapping[str, Any] | None) -> dict[str, Any]:
    """What the template's run gets as input: the caller's over the template's defaults."""
    return {**(template.input or {}), **(given or {})}


def undeclared_keys(template: PlanTemplateSpec, given: Any) -> Iterator[tuple[str, str]]:
    """(key, message) for each key of the caller's input the template's inputSchema does not
    declare in `properties` (nothing when the schema declares none: its own rules judge)."""
    schema = template.input_schema
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict) or not isinstance(given, Mapping):
        return
    declared = sorted(str(k) for k in props)
    for key in given:
        if key in props:
            continue
        guess = nearest(str(key), declared)
        hint = f"did you mean `{guess}`? " if guess else ""
        yield (
            str(key),
            f"the template takes no input {key!r}: {hint}it declares "
            f"{', '.join(declared) or 'none'}",
        )


def expand(spec: PlanSpec, template: PlanTemplateSpec) -> PlanSpec:
    """The plan a Plan from a template runs: the template's steps, finally, output and
    inputSchema (and its run settings where the Plan sets none) under the Plan's Capsule and
    lifecycle, with the Plan's input over the template's defaults."""
    own = spec.dump()
    own.pop("templateRef", None)
    body = template.dump()
    body.update({k: v for k, v in own.items() if k != "input"})
    body["input"] = merged_input(template, spec.input)
    return PlanSpec.model_validate(body)


def child_spec(template: PlanTemplateSpec, capsule: str, given: Any) -> dict[str, Any]:
    """A template step's child plan (its spec, camelCase): the template under the caller's
    Capsule, with the step's rendered input over the template's defaults."""
    body = template.dump()
    body["capsule"] = capsule
    body["input"] = merged_input(template, given if isinstance(given, Mapping) else None)
    return body
