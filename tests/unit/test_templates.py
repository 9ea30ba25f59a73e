"""Seed 2 templates and input schema: every rule of this slice, through the engine and the local
runner (typed splices, step results, per-word shell rendering, output, validation codes)."""

from __future__ import annotations

import asyncio
import json

import pytest

from planops.engine import Run, validate
from planops.engine.templates import TemplateError, render
from planops.runners.local import LocalRunner

from .helpers import capsule, plan, resolver, run_local_cli

SETTLED = {
    "list": {"status": "success", "output": '{"count": 3, "names": ["a", "b"]}'},
    "log": {"status": "failed", "output": "oops"},
}


def lookup(root: str):
    return (
        {"input": {"env": "prod", "n": 2, "tags": ["x"]}}.get(root)
        if root == "input"
        else SETTLED.get(root)
    )


def test_a_whole_string_template_is_a_typed_splice():
    assert render("{{input.n}}", lookup) == 2
    assert render("{{ input.tags }}", lookup) == ["x"]
    assert render("{{list.json}}", lookup) == {"count": 3, "names": ["a", "b"]}
    assert render("{{list.json.names.1}}", lookup) == "b"


def test_templates_inside_text_are_interpolated_as_text():
    assert (
        render("env={{input.env}} n={{input.n}} tags={{input.tags}}", lookup)
        == 'env=prod n=2 tags=["x"]'
    )
    assert render({"deep": ["{{log.status}}: {{log.output}}"]}, lookup) == {
        "deep": ["failed: oops"]
    }


def test_render_errors_say_what_is_missing():
    with pytest.raises(TemplateError, match="no 'missing'"):
        render("{{input.missing}}", lookup)
    with pytest.raises(TemplateError, match="not JSON"):
        render("{{log.json}}", lookup)


def codes(spec):
    return [(e.code, e.path) for e in validate(spec, resolver())]


def test_input_is_checked_against_the_schema_with_every_violation():
    schema = {
        "type": "object",
        "required": ["env"],
        "properties": {"env": {"enum": ["dev", "prod"]}, "n": {"type": "integer", "minimum": 1}},
    }
    assert (
        codes(plan({"id": "a", "shell": "true"}, inputSchema=schema, input={"env": "dev", "n": 1}))
        == []
    )
    got = codes(plan({"id": "a", "shell": "true"}, inputSchema=schema, input={"env": "qa", "n": 0}))
    assert got == [("input-schema", "input.env"), ("input-schema", "input.n")]
    assert codes(plan({"id": "a", "shell": "true"}, inputSchema=schema)) == [
        ("input-schema", "input")
    ]


def test_an_invalid_schema_is_refused():
    assert codes(plan({"id": "a", "shell": "true"}, inputSchema={"type": "nonsense"})) == [
        ("input-schema", "inputSchema.type")
    ]


def test_template_refusals():
    got = codes(
        plan(
            {"id": "a", "shell": "echo hi"},
            {"id": "b", "tool": "notes", "input": {"x": "{{a.output}}"}},  # no dependency
            {"id": "c", "tool": "notes", "dependsOn": ["a"], "input": {"x": "{{a.stdout}}"}},
            {"id": "d", "shell": "{{input.bin}} x"},  # first word
            {
                "id": "e",
                "tool": "notes",
                "input": {"x": "{{ghost.output}}", "y": "{{item}}", "z": "{{a b}}"},
            },
            {"id": "input", "shell": "true"},  # reserved id
            output={"bad": "{{nope.output}}"},
        )
    )
    assert got == [
        ("shell-not-allowed", "steps[3].shell"),  # the literal word is not allowed either
        ("template", "steps[1].input.x"),
        ("template", "steps[2].input.x"),
        ("template", "steps[3].shell"),
        ("template", "steps[4].input.x"),
        ("template", "steps[4].input.y"),
        ("template", "steps[4].input.z"),
        ("template", "steps[5].id"),
        ("template", "output.bad"),
    ]


def test_a_transitive_dependency_is_enough():
    spec = plan(
        {"id": "a", "shell": "true"},
        {"id": "b", "shell": "true", "dependsOn": ["a"]},
        {"id": "c", "tool": "notes", "dependsOn": ["b"], "input": {"x": "{{a.output}}"}},
    )
    assert codes(spec) == []


def run_local(spec):
    records: list = []
    report = asyncio.run(
        LocalRunner({"default": capsule()}, observer=records.append).run("p", spec)
    )
    return report.to_json()


def test_through_the_local_runner_typed_input_per_word_shell_and_output():
    spec = plan(
        {"id": "list", "shell": """sh -c 'echo "{\\"count\\": 3}"'"""},
        {
            "id": "use",
            "tool": "echo-input",
            "dependsOn": ["list"],
            "input": {"env": "{{input.env}}", "n": "{{input.n}}", "count": "{{list.json.count}}"},
        },
        {
            "id": "words",
            "shell": "python3 -c 'import sys; print(len(sys.argv) - 1)' {{input.evil}}",
            "dependsOn": ["use"],
        },
        inputSchema={"type": "object", "properties": {"n": {"type": "integer"}}},
        input={"env": "prod", "n": 2, "evil": "a b; rm -rf / --force"},
        output={"count": "{{list.json.count}}", "env": "{{input.env}}", "args": "{{words.output}}"},
    )
    assert validate(spec, resolver(default=capsule())) == []
    rep = run_local(spec)
    steps = {s["stepId"]: s for s in rep["steps"]}
    assert json.loads(steps["use"]["output"]) == {"env": "prod", "n": 2, "count": 3}
    assert steps["words"]["output"] == "1"  # the value stayed one argument
    assert rep["output"] == {"count": 3, "env": "prod", "args": "1"}


def test_output_is_null_when_the_plan_did_not_complete():
    spec = plan({"id": "a", "shell": "false"}, output={"x": "{{a.status}}"})
    run = Run("p", spec)
    run.decide(0)
    run.finish_attempt("a", 1, "failed", None, "exit code 1", 1)
    run.decide(1)
    assert run.report().to_json()["output"] is None
    assert "output" not in Run("p", plan()).report().to_json()  # none declared, no key


def test_cli_input_flags_override_and_are_validated(tmp_path):
    f = tmp_path / "p.json"
    f.write_text(
        json.dumps(
            {
                "id": "x",
                "inputSchema": {
                    "type": "object",
                    "properties": {"n": {"type": "integer"}},
                    "required": ["n"],
                },
                "input": {"n": 1},
                "steps": [
                    {
                        "id": "a",
                        "tool": "echo-input",
                        "input": {"n": "{{input.n}}", "who": "{{input.who}}"},
                    }
                ],
                "output": {"n": "{{input.n}}"},
            }
        )
    )
    r = run_local_cli(f, "--input", "n=5", "--input", "who=me")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["output"] == {"n": 5} and json.loads(rep["steps"][0]["output"]) == {
        "n": 5,
        "who": "me",
    }
    r = run_local_cli(f, "--input", "n=many", "--input", "who=me")
    assert r.returncode == 2
    assert [e["code"] for e in json.loads(r.stdout)["errors"]] == ["input-schema"]
