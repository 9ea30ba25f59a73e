"""Capsule plans take input, in the cluster: a capsule step's text reaches the child Plan as
`spec.input.objective`, a child plan that requires it runs, its `output` is the step's output,
and a child plan that cannot take an objective refuses the parent before anything runs."""

from __future__ import annotations

import json

import pytest

from tests.conftest import Kube
from tests.e2e.conftest import capsule, plan, steps, wait_plan

pytestmark = [pytest.mark.cluster, pytest.mark.node]

RELEASE_PLAN = {
    "inputSchema": {
        "type": "object",
        "required": ["objective", "version"],
        "properties": {"objective": {"type": "string", "minLength": 3}, "version": {}},
    },
    "input": {"version": "1.2.0"},
    "steps": [{"id": "tag", "shell": "echo tagging {{input.version}}: {{input.objective}}"}],
    "output": {"tagged": "{{input.version}}", "log": "{{tag.output}}"},
}


def test_a_capsule_steps_text_is_its_child_plans_objective_and_the_childs_output_its_own(
    kube: Kube, ns: str, busybox: str
):
    kube.apply(capsule(busybox, name="release", plan=RELEASE_PLAN), "-n", ns)
    kube.apply(capsule(busybox, name="default", spawn={"allow": ["release"]}), "-n", ns)
    kube.apply(
        plan(
            "ship",
            {"id": "rel", "capsule": "release", "input": {"objective": "ship the fix"}},
            {
                "id": "after",
                "tool": "echo-input",
                "dependsOn": ["rel"],
                "input": {"got": "$rel.output", "version": "{{rel.json.tagged}}"},
            },
        ),
        "-n",
        ns,
    )
    obj = wait_plan(kube, ns, "ship", timeout=180)
    assert obj["status"]["phase"] == "Succeeded", obj["status"]
    rep = steps(obj)
    assert json.loads(rep["rel"]["output"]) == {
        "tagged": "1.2.0",
        "log": "tagging 1.2.0: ship the fix",
    }
    after = json.loads(rep["after"]["output"])
    assert after["version"] == "1.2.0" and json.loads(after["got"])["tagged"] == "1.2.0"
    (child,) = kube.get("plans", "-n", ns, "-l", "planops.dev/parent=ship")["items"]
    assert child["spec"]["input"] == {"version": "1.2.0", "objective": "ship the fix"}
    assert child["status"]["report"]["output"]["tagged"] == "1.2.0"


def test_a_child_plan_that_cannot_take_an_objective_refuses_its_parent_before_anything_runs(
    kube: Kube, ns: str, busybox: str
):
    closed = {
        "inputSchema": {"type": "object", "additionalProperties": False, "properties": {}},
        "steps": [{"id": "x", "shell": "echo never"}],
    }
    kube.apply(capsule(busybox, name="closed", plan=closed), "-n", ns)
    kube.apply(capsule(busybox, name="default", spawn={"allow": ["closed"]}), "-n", ns)
    kube.apply(plan("refused", {"id": "go", "capsule": "closed", "input": "do it"}), "-n", ns)
    obj = wait_plan(kube, ns, "refused", phases=("Invalid",))
    assert [(e["code"], e["step"]) for e in obj["status"]["errors"]] == [
        ("capsule-plan-input", "go")
    ]
    assert kube.get("plans", "-n", ns, "-l", "planops.dev/parent=refused")["items"] == []
