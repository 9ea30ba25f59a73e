"""Security: input cannot inject options into a shell step's command line.

A shell word that begins with a template and renders to text starting with `-` is refused at
dispatch (a failed attempt, naming the step and the word), unless an earlier literal word of the
line is exactly `--` and no word before that `--` is an option (else the `--` may be that
option's argument: `grep -e -- {{x}}`). Decided by the engine, so the local runner and the
operator agree.
"""

from __future__ import annotations

import json

import pytest

from planops.engine import Run, validate

from .helpers import capsule, plan, resolver, run_local_cli

CAPSULE = capsule(shell={"allow": ["date", "wc", "echo", "true", "grep"]})


def first_round(spec):
    """The decider's first decision for `spec`, and the Run."""
    assert validate(spec, resolver(default=CAPSULE)) == []
    run = Run("p", spec)
    return run, run.decide(0.0)


def words_or_error(shell, **values):
    _, decision = first_round(plan({"id": "s", "shell": shell}, input=values))
    if decision.dispatch:
        return decision.dispatch[0].words
    (record,) = decision.settled
    assert record.status == "failed"
    return record.error


def test_a_template_rendering_to_an_option_is_refused_with_the_remedy():
    error = words_or_error("date {{input.when}}", when="--file=/etc/passwd")
    assert isinstance(error, str)
    assert error.startswith("step 's': argument 1 of the command line, '{{input.when}}', ")
    assert "'--file=/etc/passwd'" in error
    assert "put `--` before it in the command line" in error.lower()


@pytest.mark.parametrize(
    ("shell", "values"),
    [
        ("wc -l {{input.file}}", {"file": "--files0-from=/etc/shadow"}),
        ("wc {{input.file}}.txt", {"file": "-c"}),  # partly a template, beginning with it
        ("wc {{input.a}}{{input.b}}", {"a": "", "b": "-c"}),
        ("wc {{input.a}}-c", {"a": ""}),
        ("echo {{input.n}}", {"n": -5}),  # a typed value, as text
        ("echo {{input.dashes}} {{input.x}}", {"dashes": "--", "x": "-n"}),  # not a literal --
        ("echo x {{input.x}} --", {"x": "-n"}),  # the `--` must come before
    ],
)
def test_every_word_beginning_with_a_template_is_checked(shell, values):
    assert isinstance(words_or_error(shell, **values), str)


@pytest.mark.parametrize(
    ("shell", "values", "words"),
    [
        ("wc -- {{input.file}}", {"file": "--files0-from=x"}, ["wc", "--", "--files0-from=x"]),
        ("grep x -- {{input.f}}", {"f": "-v"}, ["grep", "x", "--", "-v"]),  # after operands
        ("wc - -- {{input.f}}", {"f": "-c"}, ["wc", "-", "--", "-c"]),  # `-` is an operand
        ("echo -- -- {{input.x}}", {"x": "-n"}, ["echo", "--", "--", "-n"]),
        ("echo {{input.a}} -- {{input.b}}", {"a": "a", "b": "-n"}, ["echo", "a", "--", "-n"]),
        ("wc -l {{input.file}}", {"file": "notes.txt"}, ["wc", "-l", "notes.txt"]),
        ("echo --name={{input.x}}", {"x": "-v"}, ["echo", "--name=-v"]),  # the author's option
        ("echo -{{input.flags}}", {"flags": "n"}, ["echo", "-n"]),  # the author's dash
        ("echo x{{input.x}}", {"x": "-n"}, ["echo", "x-n"]),
        ("echo ' {{input.x}}'", {"x": "-n"}, ["echo", " -n"]),
    ],
)
def test_operands_after_a_literal_double_dash_and_the_authors_own_options_run(shell, values, words):
    assert words_or_error(shell, **values) == words


@pytest.mark.parametrize(
    ("shell", "values"),
    [
        ("grep -e -- {{input.x}}", {"x": "-f/etc/passwd"}),  # `--` is -e's pattern
        ("wc -l -- {{input.file}}", {"file": "--files0-from=/etc/shadow"}),  # -l could take it
        ("wc --files0-from -- {{input.f}}", {"f": "-c"}),
        ("echo -{{input.flags}} -- {{input.x}}", {"flags": "e", "x": "-n"}),  # the author's dash
        ("echo --name={{input.a}} -- {{input.x}}", {"a": "", "x": "-n"}),
        ("grep -e -- -- {{input.x}}", {"x": "-v"}),  # the second `--` follows options too
    ],
)
def test_a_double_dash_after_an_option_may_be_its_argument_and_ends_nothing(shell, values):
    error = words_or_error(shell, **values)
    assert isinstance(error, str)
    assert "starts with '-'" in error


def test_the_refusal_is_a_failed_attempt_retries_and_on_error_apply():
    spec = plan(
        {"id": "s", "shell": "date {{input.when}}", "retries": 2, "onError": "continue"},
        {"id": "after", "shell": "true", "dependsOn": ["s"]},
        input={"when": "-f/etc/passwd"},
    )
    run, decision = first_round(spec)
    assert [d.step.id for d in decision.dispatch] == ["after"]  # `s` never ran; the plan goes on
    (s,) = [r for r in run.report().to_json()["steps"] if r["stepId"] == "s"]
    assert (s["status"], s["attempts"]) == ("failed", 3)


def test_a_body_step_is_named_by_its_qualified_name():
    spec = plan(
        {"id": "m", "map": {"over": "{{input.xs}}", "do": {"shell": "echo {{item}}"}}},
        input={"xs": ["ok", "-n"]},
    )
    run, decision = first_round(spec)
    assert [d.words for d in decision.dispatch] == [["echo", "ok"]]
    run.finish_attempt("m.0.call", 1, "success", "ok\n", None, 1.0)
    run.decide(1.0)
    report = run.report().to_json()
    (m,) = [r for r in report["steps"] if r["stepId"] == "m"]
    assert m["status"] == "failed"
    assert "step 'm.1.call': argument 1" in m["error"]


def test_kubectl_plan_run_local_does_not_print_etc_passwd(tmp_path):
    plan_file = tmp_path / "when.json"
    plan_file.write_text(
        json.dumps({"id": "when", "steps": [{"id": "show", "shell": "date {{input.when}}"}]})
    )
    done = run_local_cli(plan_file, "--input", "when=--file=/etc/passwd")
    assert done.returncode == 1
    (show,) = json.loads(done.stdout)["steps"]
    assert show["status"] == "failed"
    assert "root:" not in (show["output"] or "")
    assert "step 'show': argument 1" in show["error"]
