"""The CRDs' structural schemas and the pydantic models agree field by field: every property of
a Plan's spec (its steps, workspace, ...), a Capsule's spec (tools, env, secret mounts, ...) and
a (Cluster)ScheduledPlan's spec, at any depth: its type, minimum/maximum, minLength/maxLength,
minItems/maxItems, enum, pattern and which fields are required. The bounds are written once,
in the models, and the CRDs are made from them (api.structural): this walk checks that none is
lost on the way. Where the two differ on purpose (a model's CRD hints, api.crd_hints) the
difference is listed below with its reason, and a listed difference that no longer exists fails
too (the list cannot go stale)."""

from __future__ import annotations

from typing import Any

import pytest

from planops.api import crd
from planops.api.capsule_models import CapsuleSpec
from planops.api.models import STEP_KINDS, Model, PlanSpec
from planops.api.schedule_models import ClusterScheduledPlanSpec, ScheduledPlanSpec
from planops.api.structural import BOUNDS

#: the step kinds that are control steps (seed 2), and the two refused (they need a model)
CONTROL_KINDS = [k for k in STEP_KINDS if k not in ("tool", "shell", "script", "capsule")]

#: the keywords compared: a node's type, every bound a CRD may carry, and what is required
KEYWORDS = ("type", *BOUNDS, "required")

_KIND = "the validator refuses a value that is no object with code `control` (the seed's code, "
_KIND += "at the field's path); the API server refuses it before"
_LOOSE = "typed loosely in the model so the validator refuses a bad value with the seed's code"
#: (path, keyword): why the CRD and the model differ there
DIFFERENCES: dict[tuple[str, str], str] = {
    **{(f"steps[].{k}", "type"): _KIND for k in CONTROL_KINDS},
    ("steps[].onError", "type"): _LOOSE + " (on-error)",
    ("steps[].onError", "enum"): _LOOSE + " (on-error)",
    (
        "steps",
        "maxItems",
    ): "the API server's bound on a stored Plan (MAX_STEPS); a plan read "
    "by kubectl-plan is bounded by the operator's Policy.max_steps (code `limits`)",
    ("", "required"): "steps may be left out beside a templateRef (its model reads them as []; a "
    "CEL rule requires one of the two in the API server)",
    ("steps[].dependsOn", "maxItems"): "the API server's bound on a stored Plan; the validator "
    "judges each entry (unknown-step) whatever their number",
    ("steps[].dependsOn[]", "maxLength"): "no step id is longer (STEP_ID_PATTERN): a longer "
    "entry is refused by the validator as unknown-step, the seed's code",
}
#: a finally step is a step: the same differences, for the same reasons
DIFFERENCES.update(
    {
        (where.replace("steps[]", "finally[]", 1), keyword): why
        for (where, keyword), why in list(DIFFERENCES.items())
        if "steps[]." in where
    }
)


def _deref(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """A pydantic property schema without $ref and without the `null` of an Optional."""
    while "$ref" in schema:
        schema = {
            **defs[schema["$ref"].rsplit("/", 1)[1]],
            **{k: v for k, v in schema.items() if k != "$ref"},
        }
    branches = [b for b in schema.get("anyOf", []) if b.get("type") != "null"]
    if branches:
        rest = {k: v for k, v in schema.items() if k != "anyOf"}
        if len(branches) == 1:
            return _deref({**rest, **branches[0]}, defs)
        return {**rest, "anyOf": [_deref(b, defs) for b in branches]}
    return schema


def _types(schema: dict[str, Any]) -> set[str]:
    if "anyOf" in schema:
        return {t for b in schema["anyOf"] for t in _types(b)}
    return {schema["type"]} if "type" in schema else set()


def _walk(model: dict[str, Any], structural: dict[str, Any], defs: dict[str, Any], path: str):
    """(path, keyword, model's value, CRD's value) for every disagreement below `path`."""
    model = _deref(model, defs)
    for keyword in KEYWORDS:
        if keyword == "type":
            mine, theirs = _types(model), _types(structural)
        elif keyword == "required":
            mine, theirs = set(model.get(keyword, ())), set(structural.get(keyword, ()))
        else:
            mine, theirs = model.get(keyword), structural.get(keyword)
        if mine != theirs:
            yield path, keyword, mine, theirs
    props = model.get("properties", {})
    if props or "properties" in structural:
        assert set(props) == set(structural.get("properties", {})), path
        for name, sub in props.items():
            yield from _walk(
                sub, structural["properties"][name], defs, f"{path}.{name}".lstrip(".")
            )
    if "items" in model or "items" in structural:
        yield from _walk(model.get("items", {}), structural.get("items", {}), defs, f"{path}[]")
    extra = model.get("additionalProperties")
    if isinstance(extra, dict) and extra:
        yield from _walk(extra, structural.get("additionalProperties", {}), defs, f"{path}{{}}")


def _spec(crd_doc: dict[str, Any]) -> dict[str, Any]:
    return crd_doc["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]


def _differences(model: type[Model], structural: dict[str, Any]) -> dict[tuple[str, str], Any]:
    schema = model.model_json_schema(by_alias=True)
    found = _walk(schema, structural, schema.get("$defs", {}), "")
    return {(path, keyword): (mine, theirs) for path, keyword, mine, theirs in found}


CRDS = [
    ("Plan", PlanSpec, lambda: _spec(crd.plan_crd())),
    ("Capsule", CapsuleSpec, lambda: _spec(crd.capsule_crd())),
    ("ScheduledPlan", ScheduledPlanSpec, lambda: _spec(crd.scheduled_crd(False))),
    ("ClusterScheduledPlan", ClusterScheduledPlanSpec, lambda: _spec(crd.scheduled_crd(True))),
]


def _prefixes(kind: str) -> tuple[str, ...]:
    """Where the Plan spec sits inside each kind's spec (its paths in DIFFERENCES are relative)."""
    return {
        "Plan": ("",),
        "Capsule": ("", "plan."),
        "ScheduledPlan": ("planTemplate.spec.",),
        "ClusterScheduledPlan": ("planTemplate.spec.",),
    }[kind]


def _expected(kind: str) -> set[tuple[str, str]]:
    out = set()
    for path, keyword in DIFFERENCES:
        for prefix in _prefixes(kind):
            out.add(((prefix + path).rstrip("."), keyword))
    return out


@pytest.mark.parametrize(("kind", "model", "structural"), CRDS, ids=[c[0] for c in CRDS])
def test_the_crd_and_the_model_agree_field_by_field(kind, model, structural):
    found = _differences(model, structural())
    unexplained = {k: v for k, v in found.items() if k not in _expected(kind)}
    assert unexplained == {}, "model vs CRD (model's value, CRD's value)"


def test_every_listed_difference_still_exists():
    seen: set[tuple[str, str]] = set()
    for kind, model, structural in CRDS:
        found = set(_differences(model, structural()))
        for path, keyword in DIFFERENCES:
            if any((p + path, keyword) in found for p in _prefixes(kind)):
                seen.add((path, keyword))
    assert set(DIFFERENCES) - seen == set()


def test_the_walk_sees_nested_bounds():
    """A bound changed deep inside (an env var's name length, in a Capsule's tools) is found."""
    structural = _spec(crd.capsule_crd())
    env = structural["properties"]["tools"]["items"]["properties"]["env"]["items"]
    env["properties"]["name"]["maxLength"] = 255
    found = _differences(CapsuleSpec, structural)
    assert found[("tools[].env[].name", "maxLength")] == (256, 255)
