"""`if` reads the plan's input: `$input.NAME`, a top-level key of the input, compared as text
(a string as it is, any other value as JSON), never rendered again. A `{{...}}` in an `if` was
never rendered (the step compared the template's own text and was skipped, silently): the
validator refuses it, pointing at `$input.NAME` and `decide`. Both executors get it through the
engine: the local runner and the reconciler's core."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from planops.engine import Run, validate
from planops.engine.conditions import ConditionSyntaxError, Input, MissingInput, evaluate, parse
from planops.reconciler.run import core
from planops.runners.local import LocalRunner

from .helpers import capsule, plan, resolver
from .test_reconcile_core import situation

SCHEMA = {"type": "object", "properties": {"env": {"type": "string"}, "dry": {"type": "boolean"}}}


def gated(condition: str, **spec: Any) -> Any:
    spec.setdefault("inputSchema", SCHEMA)
    return plan({"id": "deploy", "shell": "echo deploying", "if": condition}, **spec)


def test_input_operands_compare_as_text():
    given = {"env": "prod", "dry": True, "n": 3, "tags": ["a"], "none": None}
    assert evaluate(parse("$input.env == 'prod'"), {}.get, given)
    assert evaluate(parse("$input.dry == 'true' && $input.n == '3'"), {}.get, given)
    assert evaluate(parse("$input.tags == '[\"a\"]' && $input.none == 'null'"), {}.get, given)
    assert evaluate(parse("$input.n < '4'"), {}.get, given)
    with pytest.raises(MissingInput, match=r"\$input.gone: the plan's input has no 'gone'"):
        evaluate(parse("$input.gone == ''"), {}.get, given)


def test_an_input_value_is_compared_never_resolved_or_rendered_again():
    given = {"v": "$a.status", "w": "'x' == 'x'"}
    assert evaluate(parse("$input.v == '$a.status'"), {}.get, given)  # no step `a` is read
    assert not evaluate(parse("$input.w == 'x'"), {}.get, given)


def test_input_reads_a_top_level_key_only():
    assert parse("$input.my-key == 'x'").terms[0].terms[0].left == Input("my-key")
    with pytest.raises(ConditionSyntaxError, match="one top-level key"):
        parse("$input.a.b == 'x'")


@pytest.mark.parametrize(("env", "status"), [("prod", "success"), ("dev", "skipped")])
def test_both_executors_run_or_skip_the_step_by_the_input(env: str, status: str):
    spec = gated("$input.env == 'prod'", input={"env": env})
    assert validate(spec, resolver()) == []
    report = asyncio.run(LocalRunner({"default": capsule()}).run("p", spec))
    assert [(r.step_id, r.status) for r in report.steps] == [("deploy", status)]
    step = core.plan_step(situation(spec))
    creates = step.decide()
    assert [c.dispatch.step.id for c in creates] == (["deploy"] if status == "success" else [])
    if status == "skipped":
        assert [(r.step_id, r.status) for r in step.run.report().steps] == [("deploy", "skipped")]


def test_an_input_declared_but_not_given_fails_the_step_and_its_retry_asks_again():
    spec = plan(
        {"id": "deploy", "shell": "echo deploying", "if": "$input.env == 'prod'", "retries": 1},
        inputSchema=SCHEMA,
    )
    assert validate(spec, resolver()) == []
    decision = Run("p", spec).decide(0.0)
    assert decision.dispatch == ()  # never started without its condition
    ((record),) = decision.settled
    assert (record.status, record.attempts) == ("failed", 2)
    assert record.error == "$input.env: the plan's input has no 'env'"


def test_a_condition_that_could_not_be_evaluated_is_evaluated_again_at_the_retry():
    """An unsettled reference fails the attempt; the retry must not start the step without its
    condition (it did: the condition was asked once per step, not per attempt)."""
    spec = plan(
        {"id": "x", "shell": "sleep 1"},
        {"id": "s", "shell": "true", "if": "$x.status == 'failed'", "retries": 1},
    )
    decision = Run("p", spec).decide(0.0)
    assert [d.step.id for d in decision.dispatch] == ["x"]
    assert [(r.step_id, r.status, r.attempts) for r in decision.settled] == [("s", "failed", 2)]


def test_a_template_in_an_if_is_refused_pointing_at_input_and_decide():
    (error,) = validate(gated("'{{input.env}}' == 'prod'", input={"env": "prod"}), resolver())
    assert (error.code, error.step, error.path) == ("condition", "deploy", "steps[0].if")
    assert "{{input.env}} in an `if` is never rendered" in error.message
    assert "$input.NAME" in error.message and "decide" in error.message
    # unquoted, too (before: a syntax error that did not say why)
    (error,) = validate(gated("{{input.env}} == 'prod'", input={"env": "prod"}), resolver())
    assert error.code == "condition" and "$input.NAME" in error.message


def test_an_undeclared_input_is_refused_before_anything_runs():
    (error,) = validate(gated("$input.evn == 'prod'"), resolver())
    assert (error.code, error.path) == ("condition", "steps[0].if")
    assert error.message.startswith("$input.evn: the plan declares no input 'evn'")
    # given in input is declared too (kubectl-plan --input evn=...)
    assert (
        validate(gated("$input.evn == 'x'", inputSchema=None, input={"evn": "x"}), resolver()) == []
    )


def test_body_steps_read_the_plans_input_too():
    spec = plan(
        {
            "id": "m",
            "map": {"over": [1, 2], "do": {"shell": "echo {{item}}", "if": "$input.env == 'prod'"}},
        },
        inputSchema=SCHEMA,
        input={"env": "dev"},
    )
    assert validate(spec, resolver()) == []
    report = asyncio.run(LocalRunner({"default": capsule()}).run("p", spec))
    assert {r.step_id: r.status for r in report.steps} == {
        "m.0.call": "skipped",
        "m.1.call": "skipped",
        "m": "success",
    }


def test_a_step_may_not_be_named_input():
    spec = plan({"id": "input", "shell": "true"}, {"id": "b", "shell": "true"})
    (error,) = validate(spec, resolver())
    assert (error.code, error.path) == ("template", "steps[0].id")
    assert "`$input.NAME` in an `if` reads the plan's input" in error.message
