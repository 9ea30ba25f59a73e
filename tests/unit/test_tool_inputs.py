"""A tool's inputSchema is a contract: no input outside it reaches the tool.

Before anything runs, the validator refuses a literal input outside the schema (code
`tool-input`, every violation with its path); an input with templates or `$id.output`
references is judged on what no rendered value can change (engine.tool_inputs) and checked in
full at dispatch, once rendered: `call denied`, the step failed, nothing started, in both
executors (the local runner, and the reconciler's core with its CallDenied Event)."""

from __future__ import annotations

import asyncio
import itertools
import json
from typing import Any

import pytest

from planops.api import CapsuleSpec
from planops.api.capsule_models import Tool
from planops.engine import Policy, Run, tool_inputs, validate
from planops.engine import dispatch as rules
from planops.engine.jsonschemas import evaluate
from planops.runners.local import LocalRunner

from .helpers import capsule, plan, resolver
from .test_reconcile_core import denied, refused_at_dispatch

DEPLOY = {
    "type": "object",
    "required": ["env", "replicas"],
    "additionalProperties": False,
    "properties": {
        "env": {"enum": ["dev", "prod"]},
        "replicas": {"type": "integer", "minimum": 1},
        "note": {"type": "string", "maxLength": 20},
    },
}


def cap(schema: Any = DEPLOY) -> CapsuleSpec:
    return capsule(
        image="busybox:1",
        tools=[
            {"name": "deploy", "command": ["cat"], "inputSchema": schema},
            {"name": "notes", "command": ["cat"]},
        ],
    )


def errors(*steps: dict[str, Any], schema: Any = DEPLOY, **spec: Any) -> list[tuple[str, str]]:
    found = validate(plan(*steps, **spec), resolver(default=cap(schema)))
    return [(e.code, e.path) for e in found]


def test_a_literal_input_outside_the_schema_is_refused_with_every_violation():
    step = {"id": "d", "tool": "deploy", "input": {"env": "qa", "replicas": 0, "force": True}}
    found = validate(plan(step), resolver(default=cap()))
    assert [(e.code, e.step, e.path) for e in found] == [
        ("tool-input", "d", "steps[0].input"),
        ("tool-input", "d", "steps[0].input.env"),
        ("tool-input", "d", "steps[0].input.replicas"),
    ]
    assert "'force' was unexpected" in found[0].message
    assert "'qa' is not one of ['dev', 'prod']" in found[1].message
    assert "0 is less than the minimum of 1" in found[2].message
    assert all("tool 'deploy'" in e.message for e in found)


def test_no_input_is_an_empty_object_to_the_schema():
    assert errors({"id": "d", "tool": "deploy"}) == [("tool-input", "steps[0].input")] * 2


def test_an_input_inside_the_schema_is_valid_and_a_tool_without_a_schema_takes_anything():
    assert errors({"id": "d", "tool": "deploy", "input": {"env": "dev", "replicas": 2}}) == []
    assert errors({"id": "d", "tool": "notes", "input": {"anything": [1]}}) == []


def test_body_steps_and_finally_steps_are_held_to_the_schema_too():
    bad = {"tool": "deploy", "input": {"env": "qa", "replicas": 1}}
    assert errors({"id": "m", "map": {"over": [1], "do": bad}}) == [
        ("tool-input", "steps[0].map.do.input.env")
    ]
    found = errors({"id": "a", "shell": "true"}, finally_=[{"id": "f", **bad}])
    assert found == [("tool-input", "finally[0].input.env")]


def test_a_tool_whose_schema_is_no_json_schema_can_take_no_input():
    found = validate(
        plan({"id": "d", "tool": "deploy", "input": {}}),
        resolver(default=cap({"type": "no-such-type"})),
    )
    assert [(e.code, e.path) for e in found] == [("tool-input", "steps[0].tool")]
    assert "not a JSON Schema" in found[0].message


# -- inputs with templates and references: judged on what no rendered value can change ---------

INPUT = {"inputSchema": {"type": "object"}, "input": {"n": 1, "s": "x", "o": {}}}
STATIC = [
    # (the step's input, the schema's properties or whole schema, the paths refused)
    ({"env": "dev", "replicas": "{{input.n}}"}, DEPLOY, []),  # a typed splice: any type
    ({"env": "dev", "replicas": "$a.output"}, DEPLOY, []),  # a reference: any text, or null
    ({"env": "dev", "replicas": "n={{input.n}}"}, DEPLOY, ["steps[1].input.replicas"]),
    ({"env": "dev", "replicas": "{{input.n}}", "x": 1}, DEPLOY, ["steps[1].input"]),
    ({"env": "{{input.s}}"}, DEPLOY, ["steps[1].input"]),  # replicas is missing
    ({"env": "qa", "replicas": "{{input.n}}"}, DEPLOY, ["steps[1].input.env"]),
    ({"env": "dev", "replicas": 1, "note": "{{input.s}} {{input.s}}"}, DEPLOY, []),  # maxLength
    ("{{input.o}}", DEPLOY, []),  # the whole input spliced
    ("$a.output", DEPLOY, []),
    (["{{input.n}}"], DEPLOY, ["steps[1].input"]),  # an array is no object
    ({"a": "{{input.n}}"}, {"enum": [{"a": 1}]}, []),  # enum reads the values
    ({"a": "{{input.n}}"}, {"not": {"required": ["a"]}}, []),  # `not` waits for dispatch
    (
        {"k": "{{input.s}}", "b": 1},
        {
            "if": {"properties": {"k": {"const": "y"}}},
            "then": {"properties": {"b": {"type": "string"}}},
        },
        [],
    ),
    (["{{input.n}}"], {"type": "array", "minItems": 2}, ["steps[1].input"]),
    (["{{input.n}}", 1, 1], {"type": "array", "uniqueItems": True}, []),
    (["{{input.n}}", "x"], {"type": "array", "items": {"type": "integer"}}, ["steps[1].input[1]"]),
    ({"a": "{{input.s}}"}, {"propertyNames": {"maxLength": 1}}, []),
    ({"ab": "{{input.s}}"}, {"propertyNames": {"maxLength": 1}}, []),  # judged at dispatch
]


@pytest.mark.parametrize(("value", "schema", "refused"), STATIC, ids=[str(c[0]) for c in STATIC])
def test_an_input_with_templates_is_refused_early_only_where_no_rendering_can_change_it(
    value: Any, schema: Any, refused: list[str]
):
    steps = (
        {"id": "a", "shell": "true"},
        {"id": "d", "tool": "deploy", "dependsOn": ["a"], "input": value},
    )
    found = validate(plan(*steps, **INPUT), resolver(default=cap(schema)))
    assert [e.path for e in found] == refused, found
    assert all(e.code == "tool-input" for e in found)


def test_a_text_template_is_a_string_and_says_so():
    (error,) = validate(
        plan(
            {"id": "d", "tool": "deploy", "input": {"env": "dev", "replicas": "{{input.n}}x"}},
            **INPUT,
        ),
        resolver(default=cap()),
    )
    assert error.message.startswith("text with a template is a string, not of type 'integer'")


#: values a rendered string may become (a typed splice: any JSON value)
CANDIDATES: list[Any] = [None, 0, 1, 2, -1, "", "x", "dev", "y", True, [], [1], {}, {"a": 1}]


@pytest.mark.parametrize(("value", "schema", "refused"), STATIC, ids=[str(c[0]) for c in STATIC])
def test_no_early_refusal_of_an_input_that_some_rendering_satisfies(
    value: Any, schema: Any, refused: list[str]
):
    """The early verdict is sound: if any rendering of the templates (from a spread of JSON
    values; text templates render to text) satisfies the schema, nothing was refused."""
    tool = Tool.model_validate({"name": "t", "command": ["x"], "inputSchema": schema})
    skeleton, unknowns = tool_inputs._skeleton(value)
    paths = list(unknowns)
    choices = [
        [c for c in CANDIDATES if isinstance(c, str)] if unknowns[p] == "text" else CANDIDATES
        for p in paths
    ]
    satisfiable = False
    for values in itertools.product(*choices):
        rendered = json.loads(json.dumps(skeleton))
        for p, v in zip(paths, values, strict=True):
            if not p:
                rendered = v
                continue
            holder = rendered
            for k in p[:-1]:
                holder = holder[k]
            holder[p[-1]] = v
        if not evaluate(schema, rendered):
            satisfiable = True
            break
    static = list(tool_inputs.static_violations(tool, value))
    assert not (satisfiable and static), (static, "refused, though a rendering satisfies it")


# -- at dispatch, once rendered: call denied, in both executors ---------------------------------

RENDERED = plan(
    {"id": "d", "tool": "deploy", "input": {"env": "{{input.env}}", "replicas": "{{input.n}}"}},
    inputSchema={"type": "object"},
    input={"env": "qa", "n": "three"},
)
WHY = (
    "call denied: the input does not satisfy tool 'deploy''s inputSchema: input.env: 'qa' is not "
    "one of ['dev', 'prod']; input.replicas: 'three' is not of type 'integer'"
)


def test_a_rendered_input_is_valid_before_it_renders():
    assert validate(RENDERED, resolver(default=cap())) == []


def test_the_rendered_input_is_refused_at_dispatch_by_the_one_rule():
    (d,) = Run("p", RENDERED).decide(0.0).dispatch
    assert rules.admit(d, cap(), Policy(), lineage=(), depth=0, needs_image=False) == WHY
    good = d._replace(input={"env": "dev", "replicas": 2})
    assert rules.admit(good, cap(), Policy(), lineage=(), depth=0, needs_image=False) is None
    # the tool gets {} for no input: {} is what is checked
    empty = d._replace(input=None)
    assert "'env' is a required property" in (
        rules.admit(empty, cap(), Policy(), lineage=(), depth=0, needs_image=False) or ""
    )


def test_the_local_runner_fails_the_step_and_starts_nothing(tmp_path):
    started = tmp_path / "started"
    c = capsule(
        tools=[{"name": "deploy", "command": ["touch", str(started)], "inputSchema": DEPLOY}]
    )
    report = asyncio.run(LocalRunner({"default": c}).run("p", RENDERED))
    (record,) = report.steps
    assert (record.status, record.error) == ("failed", WHY)
    assert not started.exists()


def test_the_reconciler_creates_no_job_and_tells_call_denied():
    step, intents = refused_at_dispatch(RENDERED, cap())
    assert intents.status["phase"] == "Failed"
    assert denied(intents) == WHY
    assert [r.error for r in step.run.report().steps] == [WHY]


def test_a_refusal_lists_at_most_ten_violations_and_counts_the_rest():
    schema = {"type": "object", "additionalProperties": {"type": "integer"}}
    tool = Tool.model_validate({"name": "t", "command": ["x"], "inputSchema": schema})
    why = tool_inputs.refusal(tool, {f"k{i:02}": "x" for i in range(15)})
    assert why is not None and why.endswith("(and 5 more)") and why.count("input.k") == 10
