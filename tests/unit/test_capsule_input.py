"""Capsule plans take input: a capsule step's task text reaches its child plan as
`input.objective` (refused up front when the child's inputSchema cannot take it), and the child's
`output` comes back as the step's output, the same in the local runner and in the cluster."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from planops.engine import delegation, validate
from planops.kube import manifests
from planops.reconciler.run.observe import child_attempt
from planops.runners.local import LocalRunner

from .helpers import capsule, plan, resolver

#: a release plan that needs its objective (and a version its own input gives)
RELEASE = {
    "inputSchema": {
        "type": "object",
        "required": ["objective", "version"],
        "properties": {"objective": {"type": "string", "minLength": 3}, "version": {}},
    },
    "input": {"version": "1.2"},
    "steps": [{"id": "say", "shell": "echo {{input.objective}} {{input.version}}"}],
    "output": {"said": "{{say.output}}", "version": "{{input.version}}"},
}


def caps(child_plan: dict[str, Any]) -> dict[str, Any]:
    return {"default": capsule(spawn={"allow": ["rel"]}), "rel": capsule(plan=child_plan)}


def refusals(spec, capsules) -> list[tuple[str, str | None, str]]:
    return [(e.code, e.step, e.path) for e in validate(spec, resolver(**capsules))]


def test_a_task_text_the_child_plans_schema_accepts_is_valid():
    for text in ("ship it", {"objective": "ship it"}):
        spec = plan({"id": "go", "capsule": "rel", "input": text})
        assert refusals(spec, caps(RELEASE)) == []


def test_a_child_plan_whose_schema_cannot_take_an_objective_is_refused_before_anything_runs():
    closed = {
        **RELEASE,
        "inputSchema": {"type": "object", "additionalProperties": False, "properties": {}},
        "input": {},
    }
    needs_more = {**RELEASE, "input": {}}  # version required, nobody gives it
    not_a_string = {
        **RELEASE,
        "inputSchema": {"type": "object", "properties": {"objective": {"type": "integer"}}},
    }
    for child in (closed, needs_more, not_a_string):
        errors = validate(
            plan(
                {"id": "go", "capsule": "rel", "input": "$other.output"},
                {"id": "other", "shell": "true"},
            ),
            resolver(**caps(child)),
        )
        assert [(e.code, e.step, e.path) for e in errors] == [
            ("capsule-plan-input", "go", "steps[0].input")
        ], child
        assert "'rel'" in errors[0].message and "input.objective" in errors[0].message


def test_a_literal_task_text_is_judged_by_the_whole_schema_a_computed_one_by_its_type():
    short = plan({"id": "go", "capsule": "rel", "input": "no"})  # minLength 3
    assert refusals(short, caps(RELEASE)) == [("capsule-plan-input", "go", "steps[0].input")]
    later = plan(
        {"id": "other", "shell": "true"},
        {"id": "go", "capsule": "rel", "input": "$other.output", "dependsOn": ["other"]},
    )
    assert refusals(later, caps(RELEASE)) == []  # its length is known only at dispatch


def test_a_target_outside_spawn_allow_or_unknown_is_left_to_dispatch():
    spec = plan({"id": "go", "capsule": "rel", "input": "x"})
    closed = {**RELEASE, "inputSchema": {"type": "object", "additionalProperties": False}}
    assert refusals(spec, {"default": capsule(), "rel": capsule(plan=closed)}) == []
    assert refusals(spec, {"default": capsule(spawn={"allow": ["rel"]})}) == []


def test_a_child_plan_with_a_broken_input_schema_is_refused_with_the_new_code():
    broken = {**RELEASE, "inputSchema": {"type": "no-such-type"}}
    spec = plan({"id": "go", "capsule": "rel", "input": "ship it"})
    assert refusals(spec, caps(broken)) == [("capsule-plan-input", "go", "steps[0].input")]


def test_the_local_runner_gives_the_text_as_input_objective_and_takes_the_childs_output():
    runner = LocalRunner(
        {
            "default": capsule(spawn={"allow": ["rel"]}),
            "rel": capsule(plan=RELEASE, shell={"allow": ["echo"]}),
        }
    )
    spec = plan(
        {"id": "go", "capsule": "rel", "input": {"objective": "ship-it"}},
        {"id": "use", "shell": "echo {{go.json.version}}", "dependsOn": ["go"]},
    )
    report = asyncio.run(runner.run("p", spec))
    steps = {s.step_id: s for s in report.steps}
    assert report.completed, report
    assert json.loads(steps["go"].output or "") == {"said": "ship-it 1.2", "version": "1.2"}
    assert steps["use"].output == "1.2"


def test_a_child_plan_without_an_output_still_gives_its_last_steps_output():
    assert delegation.delegated_output({"steps": [{"output": "a"}, {"output": "b"}]}) == "b"
    assert delegation.delegated_output({"steps": [], "output": {"x": 1}}) == '{"x": 1}'
    assert delegation.delegated_output({"steps": [{"output": "a"}], "output": None}) is None
    deep: Any = []
    for _ in range(100_000):  # a hand-edited status: never raises
        deep = [deep]
    assert delegation.delegated_output({"output": deep}) is None


def test_the_child_plan_manifest_carries_the_objective_over_its_declared_input():
    from planops.api.models import Step  # noqa: PLC0415
    from planops.engine import Dispatch  # noqa: PLC0415

    step = Step.model_validate({"id": "go", "capsule": "rel", "input": {"objective": "x"}})
    ref = manifests.PlanRef("ns", "p", "uid-1", "run1")
    declared = {"steps": [], "input": {"version": "1", "objective": "old"}}
    child = manifests.child_plan(
        ref, Dispatch(step, 1, "capsule", {"objective": "new"}), "rel", declared
    )
    assert child["spec"]["input"] == {"version": "1", "objective": "new"}
    hand_edited = manifests.child_plan(
        ref, Dispatch(step, 1, "capsule", "t"), "rel", {"steps": [], "input": "not an object"}
    )
    assert hand_edited["spec"]["input"] == {"objective": "t"}


def test_the_reconciler_reads_a_succeeded_child_plans_output_as_the_steps():
    from planops.api.models import Step  # noqa: PLC0415
    from planops.engine import Dispatch  # noqa: PLC0415

    step = Step.model_validate({"id": "go", "capsule": "rel", "input": "x"})
    ref = manifests.PlanRef("ns", "p", "uid-1", "run1")
    child = manifests.child_plan(ref, Dispatch(step, 1, "capsule", "x"), "rel", {"steps": []})
    child["metadata"]["creationTimestamp"] = "2024-01-01T00:00:00Z"
    child["status"] = {
        "phase": "Succeeded",
        "report": {"steps": [{"stepId": "say", "output": "last"}], "output": {"v": "1.2"}},
    }
    observed = child_attempt(child)
    assert observed is not None and observed.status == "success"
    assert observed.output == '{"v": "1.2"}'


def test_a_plan_author_sets_only_the_objective_of_a_child_plans_input():
    """The rest of the child's input is the Capsule owner's: a step's input with other keys is
    refused (capsule-input), and whatever a dispatch hands over, only `objective` is taken."""
    spec = plan({"id": "go", "capsule": "rel", "input": {"objective": "x", "version": "evil"}})
    assert refusals(spec, caps(RELEASE)) == [("capsule-input", "go", "steps[0].input")]
    smuggled = {"objective": "ship it", "version": "evil", "steps": []}
    assert delegation.child_input({"version": "1.2"}, delegation.objective(smuggled)) == {
        "version": "1.2",
        "objective": "ship it",
    }
    assert delegation.objective({"objective": 7}) == "" and delegation.objective(None) == ""
