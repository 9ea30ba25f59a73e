"""What the models hand their CRDs beyond types and bounds (api.crd_hints), as the real API
server holds it: the CEL rules (a step's one kind, an env var's one source, Kubernetes' toleration
rules, nodeSelector's keys) refuse what the offline reader refuses, with the rule's message; the
defaults a model marks are stored and no others (a step stores none); and `kubectl explain`
prints the models' text. Server-side dry runs: nothing is created."""

from __future__ import annotations

import json
from typing import Any

import pytest

from planops.api import parse_document, structural
from planops.api.capsule_models import CapsuleSpec
from planops.api.models import Step
from planops.engine import validate
from tests.conftest import Kube
from tests.unit.helpers import resolver

pytestmark = pytest.mark.cluster

TOOL = {"name": "t", "command": ["true"]}


def _plan(step: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": {"name": "rules", "namespace": "default"},
        "spec": {"steps": [{"id": "a", **step}]},
    }


def _capsule(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Capsule",
        "metadata": {"name": "rules", "namespace": "default"},
        "spec": spec,
    }


def _env(**var: Any) -> dict[str, Any]:
    return _capsule(tools=[{**TOOL, "env": [{"name": "X", **var}]}])


def _dry_run(kube: Kube, doc: dict[str, Any]) -> tuple[bool, str, dict[str, Any]]:
    """(accepted, the server's refusal, the object as it would be stored)."""
    run = kube.run(
        "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(doc), check=False
    )
    return run.returncode == 0, run.stderr, json.loads(run.stdout) if run.returncode == 0 else {}


def _refused_offline(doc: dict[str, Any]) -> bool:
    parsed, problems = parse_document(doc)
    if problems:
        return True
    assert parsed is not None
    return doc["kind"] == "Plan" and bool(validate(parsed.spec, resolver()))  # type: ignore[union-attr]


CEL_CASES = [
    (_plan({"tool": "notes", "shell": "true"}), "a step declares exactly one of"),
    (_plan({}), "a step declares exactly one of"),
    (
        _env(value="1", valueFrom={"secretKeyRef": {"name": "s", "key": "k"}}),
        "exactly one of value or valueFrom",
    ),
    (
        _env(
            valueFrom={
                "secretKeyRef": {"name": "s", "key": "k"},
                "configMapKeyRef": {"name": "c", "key": "k"},
            }
        ),
        "exactly one of secretKeyRef or configMapKeyRef",
    ),
    (
        _capsule(tools=[{**TOOL, "env": [{"name": "PLANOPS_X", "value": "1"}]}]),
        "names starting with PLANOPS_ are set by planops",
    ),
    (
        _capsule(tolerations=[{"key": "k", "tolerationSeconds": 5}]),
        "tolerationSeconds needs effect NoExecute",
    ),
    (
        _capsule(tolerations=[{"key": "k", "operator": "Exists", "value": "v"}]),
        "operator Exists takes no value",
    ),
    (_capsule(tolerations=[{"value": "v"}]), "without a key, operator is Exists"),
    (_capsule(nodeSelector={"a b": "x"}), "every key is a label key"),
    # a step's own env (a shell or script step's) and a Capsule's volumes (issue 43)
    (
        _plan({"script": "true", "env": [{"name": "PLANOPS_INPUT", "value": "{}"}]}),
        "names starting with PLANOPS_ are set by planops",
    ),
    (
        _plan(
            {
                "shell": "echo",
                "env": [
                    {
                        "name": "X",
                        "value": "1",
                        "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}},
                    }
                ],
            }
        ),
        "exactly one of value or valueFrom",
    ),
    (_plan({"script": "true", "shell": "echo"}), "a step declares exactly one of"),
    (
        _capsule(volumes=[{"name": "v", "emptyDir": {}, "configMap": {"name": "c"}}]),
        "a volume is exactly one of configMap, secret, emptyDir, persistentVolumeClaim",
    ),
    (_capsule(volumes=[{"name": "v"}]), "a volume is exactly one of"),
]


@pytest.mark.parametrize(("doc", "message"), CEL_CASES, ids=[m for _, m in CEL_CASES])
def test_the_models_cel_rules_refuse_on_the_server_what_the_reader_refuses(
    kube: Kube, crds: None, doc: dict[str, Any], message: str
):
    accepted, refusal, _ = _dry_run(kube, doc)
    assert not accepted and message in refusal, refusal
    assert _refused_offline(doc)


def test_the_rules_let_a_right_object_through(kube: Kube, crds: None):
    for doc in (
        _plan({"tool": "notes"}),
        _env(valueFrom={"configMapKeyRef": {"name": "c", "key": "k"}}),
        _capsule(
            tolerations=[{"key": "k", "effect": "NoExecute", "tolerationSeconds": 5}],
            nodeSelector={"example.com/pool": "batch"},
        ),
        _plan({"shell": "echo hi", "env": [{"name": "X", "value": "a $(HOME) value"}]}),
        _plan(
            {
                "shell": "echo hi",
                "env": [{"name": "LDFLAGS", "value": "-s"}, {"name": "MYPATH", "value": "/x"}],
            }
        ),
        _capsule(
            scripts={"allow": ["sh"]},
            env={"secrets": ["ci"]},
            volumes=[
                {"name": "c", "emptyDir": {"sizeLimit": "1Gi"}},
                {"name": "p", "persistentVolumeClaim": {"claimName": "p"}, "readOnly": True},
            ],
        ),
    ):
        accepted, refusal, _ = _dry_run(kube, doc)
        assert accepted, refusal
        assert not _refused_offline(doc)


def test_only_the_marked_defaults_are_stored(kube: Kube, crds: None):
    _, _, plan = _dry_run(kube, _plan({"shell": "true"}))
    assert plan["spec"]["steps"] == [{"id": "a", "shell": "true"}]  # a step stores none
    _, _, capsule = _dry_run(kube, _capsule(tolerations=[{"key": "k"}]))
    assert capsule["spec"] == {
        "tolerations": [{"key": "k", "operator": "Equal", "value": ""}],
        "outputLimitBytes": 65536,
        "automountServiceAccountToken": False,
    }
    spec = {"schedule": "@daily", "planTemplate": {"spec": {"steps": []}}}
    scheduled = {**_capsule(), "kind": "ScheduledPlan", "spec": spec}
    _, _, stored = _dry_run(kube, scheduled)
    assert {k: v for k, v in stored["spec"].items() if k not in spec} == {
        "concurrencyPolicy": "Allow",
        "suspend": False,
        "successfulRunsHistoryLimit": 3,
        "failedRunsHistoryLimit": 1,
    }


def _words(text: str) -> str:
    return " ".join(text.split())


@pytest.mark.parametrize(
    ("field", "text"),
    [
        ("plans.spec.steps.onError", structural.schema(Step)["properties"]["onError"]),
        (
            "capsules.spec.tools.env.valueFrom.secretKeyRef.name",
            {"description": "The Secret's name."},
        ),
        ("capsules.spec.tolerations", structural.schema(CapsuleSpec)["properties"]["tolerations"]),
    ],
    ids=["onError", "secretKeyRef.name", "tolerations"],
)
def test_kubectl_explain_prints_the_models_text(
    kube: Kube, crds: None, field: str, text: dict[str, Any]
):
    shown = _words(kube.run("explain", field).stdout)
    assert _words(text["description"]) in shown, shown
