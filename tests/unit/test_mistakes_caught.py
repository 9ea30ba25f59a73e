"""Mistakes a new user makes, caught before anything runs (or said plainly), with the fix in the
message: an input no one declared, a shell step written for a shell, a failed step whose reason
is only its exit code, and one rule for a step's text and its value."""

from __future__ import annotations

import json

import pytest

from planops.cli import main as cli
from planops.cli import render
from planops.engine import validate
from planops.engine.shell_hints import shell_warnings

from .helpers import EXAMPLE_CAPSULE, plan, resolver


def template_errors(spec):
    return [(e.path, e.message) for e in validate(spec, resolver()) if e.code == "template"]


# -- {{input.name}} needs a declared name ---------------------------------------------------------


def test_an_input_used_without_an_input_schema_is_refused_with_the_fix():
    ((path, message),) = template_errors(plan({"id": "hi", "shell": "echo {{input.name}}"}))
    assert path == "steps[0].shell"
    assert "the plan declares no input 'name'" in message and "inputSchema" in message


def test_an_input_the_schema_does_not_name_is_refused_naming_the_schema():
    spec = plan(
        {"id": "hi", "shell": "echo {{input.name}}"},
        inputSchema={"type": "object", "properties": {"nmae": {"type": "string"}}},
        input={"nmae": "x"},
    )
    ((_, message),) = template_errors(spec)
    assert "the inputSchema has no property 'name'" in message


@pytest.mark.parametrize(
    "declared",
    [
        {"inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}}},
        {"input": {"name": "bob"}},
    ],
)
def test_an_input_declared_in_the_schema_or_given_is_accepted(declared):
    assert template_errors(plan({"id": "hi", "shell": "echo {{input.name}}"}, **declared)) == []


def test_undeclared_inputs_are_refused_in_bodies_and_the_output_too():
    spec = plan(
        {"id": "m", "map": {"over": [1], "do": {"shell": "echo {{input.who}}"}}},
        output={"x": "{{input.what}}"},
    )
    paths = [p for p, _ in template_errors(spec)]
    assert "output.x" in paths and any(p.startswith("steps[0].map.do") for p in paths)


def test_run_local_with_the_input_given_on_the_command_line_is_accepted(tmp_path, capsys):
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"id": "p", "steps": [{"id": "hi", "shell": "echo {{input.name}}"}]}))
    argv = ["run", "--local", str(f), "--capsule", EXAMPLE_CAPSULE, "-q"]
    assert cli.main(argv) == 2  # refused, nothing ran
    assert cli.main([*argv, "--input", "name=bob"]) == 0
    assert "bob" in capsys.readouterr().out


# -- a shell step is not a shell ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "shown"),
    [
        ("echo hi | wc -l", "`|`"),
        ("ls > out.txt", "`>`"),
        ("cat < in.txt", "`<`"),
        ("echo a && echo b", "`&&`"),
        ("echo a; echo b", "`;`"),
        ("echo $(date)", "`$(`"),
    ],
)
def test_shell_operators_written_unquoted_are_warned_about(line, shown):
    (w,) = shell_warnings(plan({"id": "s", "shell": line}))
    assert w.step == "s" and w.path == "steps[0].shell"
    assert w.message.startswith(f"{shown} would be passed to the program")
    assert "write a pipeline as a script step" in w.message


@pytest.mark.parametrize("line", ["echo 'a|b'", 'echo "x > y"', "echo hi", "echo $HOME"])
def test_quoted_operators_and_plain_lines_are_not_warned_about(line):
    assert shell_warnings(plan({"id": "s", "shell": line})) == []


def test_a_body_steps_shell_is_warned_about_too():
    spec = plan({"id": "m", "map": {"over": [1], "do": [{"id": "w", "shell": "echo a | b"}]}})
    (w,) = shell_warnings(spec)
    assert w.path == "steps[0].map.do[w].shell"


def test_validate_warns_but_does_not_refuse(tmp_path, capsys):
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"id": "p", "steps": [{"id": "c", "shell": "echo hi | wc -l"}]}))
    assert cli.main(["validate", str(f), "--capsule", EXAMPLE_CAPSULE]) == 0
    err = capsys.readouterr().err
    assert "warning: " in err and "`|` would be passed to the program" in err
    assert cli.main(["validate", str(f), "--capsule", EXAMPLE_CAPSULE, "-o", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["valid"] is True and [w["code"] for w in out["warnings"]] == ["not-a-shell"]


# -- a failed step's DETAIL says why --------------------------------------------------------------


def test_a_failed_steps_detail_is_its_error_and_the_last_line_it_printed():
    output = "checking...\nls: cannot access '/nope': No such file or directory\n"
    assert render.detail("exit code 2", output, 80) == (
        "exit code 2: ls: cannot access '/nope': No such file or directory"
    )
    assert render.detail("exit code 2", "") == "exit code 2"
    assert render.detail(None, "hello\nworld\n") == "hello"


def test_run_local_shows_why_a_step_failed(tmp_path, capsys):
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"id": "p", "steps": [{"id": "l", "shell": "ls /no-such-file"}]}))
    assert cli.main(["run", "--local", str(f), "--capsule", EXAMPLE_CAPSULE, "-q"]) == 1
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("l ")]
    assert "exit code 2: ls: " in row and "/no-such-file" in row


# -- one rule: output is the exact text, a result is its value -----------------------------------


def test_output_keeps_the_text_exactly_and_a_result_is_the_value(tmp_path, capsys):
    f = tmp_path / "p.json"
    f.write_text(
        json.dumps(
            {
                "id": "p",
                "steps": [
                    {"id": "say", "shell": "echo x"},
                    {"id": "each", "map": {"over": [1], "do": {"shell": "echo x"}}},
                ],
                "output": {"text": "{{say.output}}", "value": "{{each.results}}"},
            }
        )
    )
    assert cli.main(["run", "--local", str(f), "--capsule", EXAMPLE_CAPSULE, "-o", "json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["output"] == {"text": "x", "value": ["x"]}
