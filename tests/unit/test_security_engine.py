"""Security: one author cannot crash or stall the engine through values the validator lets by
(deep nesting, huge quantities and list indexes, quadratic body checks)."""

from __future__ import annotations

import json
import time

import pytest

from planops.engine import Policy, Run, validate

from .helpers import capsule, plan, resolver, time_bound

BOUND_SECONDS = time_bound(3.0)


def nested(depth: int):
    value: object = "x"
    for _ in range(depth):
        value = [value]
    return value


def test_deep_nesting_is_refused_not_a_recursion_error():
    for depth in (65, 3000):
        spec = plan(
            {"id": "a", "tool": "notes", "input": {"x": nested(depth)}},
            {"id": "b", "shell": "true"},
            input={"deep": nested(depth)},
        )
        got = [(e.code, e.step, e.path) for e in validate(spec, resolver())]
        assert got == [("limits", None, "input"), ("limits", "a", "steps[0].input")]
    spec = plan({"id": "a", "tool": "notes", "input": {"x": nested(60)}})
    assert validate(spec, resolver()) == []


def test_a_huge_quantity_is_refused_not_an_overflow():
    for memory in ("1e999999999", str(2**63), "8Ei"):
        spec = plan(
            {"id": "a", "shell": "true", "resources": {"limits": {"memory": memory}}},
        )
        errors = validate(spec, resolver(default=capsule(maxResources={"memory": "1Gi"})))
        assert [(e.code, e.path) for e in errors] == [
            ("limits", "steps[0].resources.limits.memory")
        ], memory
        assert "Kubernetes holds quantities" in errors[0].message
    # an exponent and a suffix together are no quantity at all (Kubernetes' grammar)
    spec = plan({"id": "a", "shell": "true", "resources": {"limits": {"memory": "1e999999999Ki"}}})
    errors = validate(spec, resolver(default=capsule(maxResources={"memory": "1Gi"})))
    assert [(e.code, e.path) for e in errors] == [("limits", "steps[0].resources.limits.memory")]
    assert "not a non-negative quantity" in errors[0].message


def test_a_list_index_of_thousands_of_digits_fails_the_step_not_the_decider():
    spec = plan(
        {
            "id": "a",
            "tool": "notes",
            "onError": "continue",
            "input": {"y": "{{input.x." + "9" * 5000 + "}}"},
        },
        {"id": "b", "tool": "notes", "input": {"y": "{{input.x.0000000000000000000000001}}"}},
        input={"x": [1, 2]},
    )
    assert validate(spec, resolver()) == []
    run = Run("p", spec)
    decision = run.decide(0.0)
    (a,) = decision.settled
    assert (a.step_id, a.status) == ("a", "failed")
    assert "no '999" in a.error
    assert [d.input for d in decision.dispatch] == [{"y": 2}]


def test_a_body_of_thousands_of_steps_is_judged_in_linear_time():
    n = 6000
    steps = [{"id": "s0", "shell": "true"}]
    steps += [{"id": f"s{i}", "shell": "true", "dependsOn": [f"s{i - 1}"]} for i in range(1, n)]
    body = [{"id": f"b{j}", "tool": "notes", "input": {"x": "{{s0.output}}"}} for j in range(n)]
    steps.append({"id": "m", "dependsOn": [f"s{n - 1}"], "map": {"over": [1], "do": body}})
    spec = plan(*steps)
    t0 = time.process_time()
    assert validate(spec, resolver(), Policy(max_steps=100_000)) == []
    assert time.process_time() - t0 < BOUND_SECONDS


def settle_then_dispatch(spec, outputs):
    """Run `spec`: the steps named in `outputs` finish with those outputs; returns the Run and
    the decision that follows them."""
    assert validate(spec, resolver(), Policy(max_steps=100_000)) == []
    run = Run("p", spec)
    decision = run.decide(0.0)
    for d in decision.dispatch:
        run.finish_attempt(d.step.id, d.attempt, "success", outputs[d.step.id], None, 1.0)
    return run, run.decide(2.0)


BIG = "x" * 65536  # a step's default output cap


@pytest.mark.parametrize(
    "step",
    [
        {"tool": "notes", "input": {"t": "{{a.output}}" * 40}},  # 2.6 MB of text
        {"tool": "notes", "input": {"t": ["{{a.output}}"] * 40}},  # as typed splices
        {"tool": "notes", "input": {"t": ["$a.output"] * 40}},  # as seed-1 references
        {"tool": "notes", "input": {"t": ["{{a.json}}"] * 40}},  # as JSON values
        {"shell": "echo" + " {{a.output}}" * 40},  # as words
    ],
)
def test_a_value_named_too_often_fails_the_step_instead_of_filling_memory(step):
    spec = plan(
        {"id": "a", "shell": "true"},
        {"id": "b", "dependsOn": ["a"], **step},
    )
    _, decision = settle_then_dispatch(spec, {"a": json.dumps(BIG)})
    assert decision.dispatch == ()
    (b,) = [r for r in decision.settled if r.step_id == "b"]
    assert b.status == "failed"
    assert "more than 2097152 characters" in b.error


def test_a_big_value_named_once_still_renders():
    spec = plan(
        {"id": "a", "shell": "true"},
        {"id": "b", "tool": "notes", "dependsOn": ["a"], "input": {"t": "{{a.output}}"}},
    )
    big = "y" * (1 << 20)
    _, decision = settle_then_dispatch(spec, {"a": big})
    assert [d.input for d in decision.dispatch] == [{"t": big}]


def test_a_json_output_is_parsed_once_however_often_it_is_named():
    doc = json.dumps({"k": 1, "pad": ["z" * 100] * 10_000})  # 1 MB
    spec = plan(
        {"id": "a", "shell": "true"},
        {"id": "b", "tool": "notes", "dependsOn": ["a"], "input": ["{{a.json.k}}"] * 5000},
        {
            "id": "f",
            "dependsOn": ["a"],
            "filter": {
                "over": list(range(3000)),
                "where": {"value": "{{a.json.k}}", "op": "eq", "to": 1},
            },
        },
    )
    t0 = time.process_time()
    _, decision = settle_then_dispatch(spec, {"a": doc})
    assert time.process_time() - t0 < BOUND_SECONDS
    assert [d.input for d in decision.dispatch] == [[1] * 5000]
    (f,) = [r for r in decision.settled if r.step_id == "f"]
    assert json.loads(f.output)["count"] == 3000


DEEP_JSON = "[" * 100_000 + "]" * 100_000


def test_a_step_printing_deeply_nested_json_fails_a_template_not_the_decider():
    spec = plan(
        {"id": "a", "shell": "true"},
        {"id": "b", "tool": "notes", "dependsOn": ["a"], "input": {"x": "{{a.json}}"}},
    )
    _, decision = settle_then_dispatch(spec, {"a": DEEP_JSON})
    (b,) = [r for r in decision.settled if r.step_id == "b"]
    assert b.status == "failed"
    assert "is not JSON (nested more than 64 levels deep)" in b.error


def test_a_body_step_printing_deeply_nested_json_gives_its_text_as_result():
    spec = plan({"id": "m", "map": {"over": [1], "do": {"shell": "true"}}})
    run, _ = settle_then_dispatch(spec, {"m.0.call": DEEP_JSON})
    (m,) = [r for r in run.report().steps if r.step_id == "m"]
    assert m.status == "success"
    assert json.loads(m.output)["results"] == [DEEP_JSON]


def test_an_answer_annotation_nested_deeply_is_rejected_not_a_crash():
    from planops.reconciler.run import asks  # noqa: PLC0415 - the operator's side of asks

    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    w = asks.Waiting("q", 1, {"prompt": "go?", "outputSchema": schema}, 0.0, 100.0)
    raw = '{"run": "r1", "answer": {"ok": true, "x": ' + DEEP_JSON + "}}"
    outcome = asks.judge(w, {asks.answer_annotation("q"): raw}, "r1", 1.0)
    assert outcome == "the answer annotation is not JSON (use kubectl plan answer)"
