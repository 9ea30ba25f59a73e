"""The committed CRDs are what planops.api.crd generates, and they cover the models' fields."""

from pathlib import Path

from planops.api import crd
from planops.api.models import CapsuleSpec, PlanSpec, Step

ROOT = Path(__file__).resolve().parents[2]


def test_committed_crds_are_current():
    """Both copies: crds/ (kubectl apply) and the Helm chart's files/crds/."""
    for where in crd.OUTPUTS:
        for name, text in crd.render().items():
            assert (ROOT / where / name).read_text() == text, (
                f"{where}/{name} is stale: python -m planops.api.crd"
            )


def _props(schema: dict) -> set[str]:
    return set(schema["properties"])


def test_every_model_field_is_in_the_schema_with_a_description():
    step = crd.step_schema()
    assert {f.alias or n for n, f in Step.model_fields.items()} == _props(step)
    plan = crd.plan_spec_schema("x")
    assert {f.alias or n for n, f in PlanSpec.model_fields.items()} == _props(plan)
    cap = crd.capsule_spec_schema()
    assert {f.alias or n for n, f in CapsuleSpec.model_fields.items()} == _props(cap)
    for schema in (step, plan, cap):
        assert all(p.get("description") for p in schema["properties"].values())


def test_a_step_stores_no_defaults():
    # A default in the step schema is stored in every step of every Plan (a 20,000-step plan
    # of short shell steps doubled in size); the models apply defaults when a spec is read.
    def defaults(schema: object, path: str) -> list[str]:
        if isinstance(schema, dict):
            found = [path] if "default" in schema else []
            return found + [p for k, v in schema.items() for p in defaults(v, f"{path}.{k}")]
        if isinstance(schema, list):
            return [p for i, v in enumerate(schema) for p in defaults(v, f"{path}[{i}]")]
        return []

    assert defaults(crd.step_schema(), "step") == []
    assert Step.model_validate({"id": "a", "shell": "true"}).retries == 0
    assert Step.model_validate({"id": "a", "shell": "true"}).on_error == "fail"
