"""Seed 2 through the operator: input schema, templates, filter, exit and the plan's output, with
real Jobs (the control steps themselves are evaluated by the decider: no Job)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import Kube
from tests.e2e.conftest import plan, steps, wait_plan

pytestmark = [pytest.mark.cluster, pytest.mark.node]
SCHEMA = {
    "type": "object",
    "required": ["env"],
    "properties": {"env": {"enum": ["dev", "prod"]}, "sizes": {"type": "array"}},
}


def test_templates_filter_and_output_through_the_operator(kube: Kube, ns: str):
    kube.apply(
        plan(
            "typed",
            {
                "id": "big",
                "filter": {
                    "over": "{{input.sizes}}",
                    "where": {"value": "{{item}}", "op": "gt", "to": 2},
                },
            },
            {
                "id": "use",
                "tool": "echo-input",
                "dependsOn": ["big"],
                "input": {"env": "{{input.env}}", "big": "{{big.json.items}}"},
            },
            {
                "id": "say",
                "shell": "echo {{input.env}} has {{big.json.count}}",
                "dependsOn": ["big"],
            },
            inputSchema=SCHEMA,
            input={"env": "prod", "sizes": [1, 5, 2, 7]},
            output={"count": "{{big.json.count}}", "said": "{{say.output}}"},
        ),
        "-n",
        ns,
    )
    obj = wait_plan(kube, ns, "typed")
    rep = steps(obj)
    assert obj["status"]["phase"] == "Succeeded"
    assert json.loads(rep["use"]["output"]) == {"env": "prod", "big": [5, 7]}
    assert rep["say"]["output"] == "prod has 2\n"
    assert obj["status"]["report"]["output"] == {"count": 2, "said": "prod has 2\n"}
    jobs = {
        j["metadata"]["labels"]["planops.dev/step"]
        for j in kube.get("jobs", "-n", ns, "-l", "planops.dev/plan=typed")["items"]
    }
    assert jobs == {"use", "say"}  # the filter ran in the operator, not as a Job


def test_input_violating_the_schema_is_invalid_and_nothing_runs(kube: Kube, ns: str):
    kube.apply(
        plan(
            "bad-input",
            {"id": "a", "shell": "echo {{input.env}}"},
            inputSchema=SCHEMA,
            input={"env": "qa"},
        ),
        "-n",
        ns,
    )
    obj = wait_plan(kube, ns, "bad-input")
    assert obj["status"]["phase"] == "Invalid"
    assert [(e["code"], e["path"]) for e in obj["status"]["errors"]] == [
        ("input-schema", "input.env")
    ]


def test_an_exit_ends_the_plan_in_the_cluster(kube: Kube, ns: str):
    kube.apply(
        plan(
            "guarded",
            {
                "id": "guard",
                "exit": {
                    "when": {"value": "{{input.env}}", "op": "eq", "to": "prod"},
                    "status": "error",
                    "message": "not on {{input.env}}",
                },
            },
            {"id": "deploy", "shell": "echo deploying", "dependsOn": ["guard"]},
            input={"env": "prod"},
        ),
        "-n",
        ns,
    )
    obj = wait_plan(kube, ns, "guarded")
    report = obj["status"]["report"]
    assert obj["status"]["phase"] == "Failed"
    assert report["exit"] == {"stepId": "guard", "status": "error", "message": "not on prod"}
    assert list(steps(obj)) == ["guard"]
    assert kube.get("jobs", "-n", ns, "-l", "planops.dev/plan=guarded")["items"] == []
