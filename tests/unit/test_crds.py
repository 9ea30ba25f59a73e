"""The committed CRDs are what planops.api.crd generates from the models, every field of the
models is in them with the text `kubectl explain` prints, and a step stores no defaults."""

import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from planops.api import crd, structural
from planops.api.capsule_models import CapsuleSpec
from planops.api.models import Model, PlanSpec, Step
from planops.api.schedule_models import ClusterScheduledPlanSpec

ROOT = Path(__file__).resolve().parents[2]


def test_committed_crds_are_current():
    """Both copies: crds/ (kubectl apply) and the Helm chart's files/crds/."""
    for where in crd.OUTPUTS:
        for name, text in crd.render().items():
            assert (ROOT / where / name).read_text() == text, (
                f"{where}/{name} is stale: python -m planops.api.crd"
            )


def _fields(model: type[Model]) -> set[str]:
    return {f.alias or n for n, f in model.model_fields.items()}


def _undescribed(schema: dict[str, Any], path: str) -> list[str]:
    """The properties, at any depth, without a description."""
    found = []
    for name, sub in (schema.get("properties") or {}).items():
        found += [] if sub.get("description") else [f"{path}.{name}"]
        found += _undescribed(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        found += _undescribed(schema["items"], f"{path}[]")
    return found


def test_every_model_field_is_in_the_crds_with_a_description():
    for model in (Step, PlanSpec, CapsuleSpec, ClusterScheduledPlanSpec):
        assert _fields(model) == set(structural.schema(model)["properties"]), model.__name__
    for name, text in crd.render().items():
        root = yaml.safe_load(text)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        assert root["description"]
        assert _undescribed(root, name) == []


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

    assert defaults(structural.schema(Step), "step") == []
    assert Step.model_validate({"id": "a", "shell": "true"}).retries == 0
    assert Step.model_validate({"id": "a", "shell": "true"}).on_error == "fail"


def test_the_stored_defaults_are_the_ones_the_models_mark():
    """Only the defaults a model marks (crd_hints) are in the CRDs: a Capsule's output limit and
    token mount, a toleration's fields, a ScheduledPlan's policy, suspend and history limits."""
    found = set()

    def walk(schema: object, path: str) -> None:
        if isinstance(schema, dict):
            if "default" in schema:
                found.add((path, repr(schema["default"])))
            for k, v in schema.items():
                walk(v, f"{path}.{k}" if k not in ("properties", "items") else path)

    walk(crd.capsule_crd()["spec"]["versions"][0]["schema"], "capsule")
    walk(crd.scheduled_crd(True)["spec"]["versions"][0]["schema"], "cspl")
    assert found == {
        ("capsule.openAPIV3Schema.spec.outputLimitBytes", "65536"),
        ("capsule.openAPIV3Schema.spec.automountServiceAccountToken", "False"),
        ("capsule.openAPIV3Schema.spec.tolerations.key", "''"),
        ("capsule.openAPIV3Schema.spec.tolerations.operator", "'Equal'"),
        ("capsule.openAPIV3Schema.spec.tolerations.value", "''"),
        ("cspl.openAPIV3Schema.spec.concurrencyPolicy", "'Allow'"),
        ("cspl.openAPIV3Schema.spec.suspend", "False"),
        ("cspl.openAPIV3Schema.spec.successfulRunsHistoryLimit", "3"),
        ("cspl.openAPIV3Schema.spec.failedRunsHistoryLimit", "1"),
    }


def test_the_operator_and_the_cli_load_no_generator():
    """What the runtime counts with is in api.limits and the models: the operator and
    kubectl-plan start without the CRD generator (import-linter's contract sees the static
    imports; this sees whatever they load)."""
    code = (
        "import sys, planops.main, planops.cli.main; "
        "print(sorted(m for m in sys.modules if m in GENERATORS))"
    ).replace(
        "GENERATORS", repr(("planops.api.crd", "planops.api.structural", "planops.reference"))
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
