"""Where step pods run is the Capsule owner's choice (nodeSelector, tolerations), in Kubernetes'
own shapes and checked by Kubernetes' own rules, twice: by the model the operator reads a Capsule
with (a bad one makes plans under it refused, saying why) and by the CRD's schema (the API server
refuses the Capsule itself). A plan cannot set either."""

from __future__ import annotations

import re
from typing import Any

import pytest
from pydantic import ValidationError

from planops.api import CapsuleSpec, Step, crd, structural

from .helpers import capsule

BAD_TOLERATIONS = [
    ({"operator": "Equal", "value": "x"}, "without a key must have operator Exists"),
    ({"key": "a", "operator": "Exists", "value": "x"}, "operator Exists takes no value"),
    ({"key": "a", "effect": "NoSchedule", "tolerationSeconds": 5}, "needs effect NoExecute"),
    ({"key": "a b"}, "is not a label key"),
    ({"key": "UPPER.example/x"}, "is not a label key"),
    ({"key": "a", "value": "-x"}, "string should match pattern"),
    ({"key": "a", "operator": "Lt"}, "input should be 'exists' or 'equal'"),
    ({"key": "a", "effect": "NoRun"}, "input should be 'noschedule'"),
]


@pytest.mark.parametrize(("toleration", "why"), BAD_TOLERATIONS)
def test_a_toleration_kubernetes_would_refuse_is_refused_saying_why(
    toleration: dict[str, Any], why: str
):
    with pytest.raises(ValidationError) as e:
        capsule(tolerations=[toleration])
    assert why.lower() in str(e.value).lower(), str(e.value)


@pytest.mark.parametrize(
    ("selector", "why"),
    [
        ({"a b": "x"}, "nodeSelector key 'a b' is not a label key"),
        ({"example.com/": "x"}, "is not a label key"),
        ({"x" * 64: "x"}, "is not a label key"),
        ({("a" * 250) + ".example/zone": "x"}, "is not a label key"),
        ({"zone": "a/b"}, "nodeSelector zone: 'a/b' is not a label value"),
        ({"zone": "x" * 64}, "is not a label value"),
    ],
)
def test_a_node_selector_of_non_labels_is_refused_saying_why(selector: dict[str, str], why: str):
    with pytest.raises(ValidationError) as e:
        capsule(nodeSelector=selector)
    assert why in str(e.value), str(e.value)


def test_good_placement_is_kept_as_written():
    c = capsule(
        nodeSelector={"type": "kwok", "topology.kubernetes.io/zone": "", "k": "a.b-c_d"},
        tolerations=[{"operator": "Exists"}, {"key": "a", "value": "b", "effect": "NoExecute"}],
    )
    assert c.node_selector == {"type": "kwok", "topology.kubernetes.io/zone": "", "k": "a.b-c_d"}
    assert c.dump()["tolerations"] == [
        {"operator": "Exists"},
        {"key": "a", "value": "b", "effect": "NoExecute"},
    ]
    assert CapsuleSpec.model_validate(c.dump()) == c


def test_a_plan_step_cannot_choose_its_node():
    for field in ("nodeSelector", "tolerations", "node_selector", "affinity", "nodeName"):
        with pytest.raises(ValidationError, match="Extra inputs are not permitted"):
            Step.model_validate({"id": "s", "shell": "true", field: {"type": "kwok"}})
    step = structural.schema(Step)["properties"]
    assert not {"nodeSelector", "tolerations", "affinity", "nodeName"} & set(step)


def _spec_schema() -> dict[str, Any]:
    versions = crd.capsule_crd()["spec"]["versions"]
    return versions[0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]  # type: ignore[no-any-return]


def test_the_crd_checks_the_same_shapes():
    schema = _spec_schema()
    sel = schema["nodeSelector"]
    assert sel["additionalProperties"]["maxLength"] == 63 and sel["maxProperties"] == 64
    value = re.compile(sel["additionalProperties"]["pattern"])
    assert value.fullmatch("kwok") and value.fullmatch("") and not value.fullmatch("a/b")
    (key_rule,) = sel["x-kubernetes-validations"]
    key = re.compile(re.search(r"k\.matches\(r'(.*)'\)\)$", key_rule["rule"]).group(1))  # type: ignore[union-attr]
    assert key.fullmatch("example.com/pool") and not key.fullmatch("a b")
    tol = schema["tolerations"]["items"]
    assert tol["properties"]["operator"]["enum"] == ["Exists", "Equal"]
    assert tol["properties"]["effect"]["enum"] == ["NoSchedule", "PreferNoSchedule", "NoExecute"]
    rules = " ".join(r["rule"] for r in tol["x-kubernetes-validations"])
    for field in ("tolerationSeconds", "value", "key"):
        assert f"self.{field}" in rules
