"""Security: one author cannot crash or stall the engine through values the validator lets by
(deep nesting, huge quantities and list indexes, quadratic body checks)."""

from __future__ import annotations

import time

from planops.engine import Policy, Run, validate

from .helpers import capsule, plan, resolver

BOUND_SECONDS = 3.0


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
    for memory in ("1e999999999", "1e999999999Ki", str(2**63), "8Ei"):
        spec = plan(
            {"id": "a", "shell": "true", "resources": {"limits": {"memory": memory}}},
        )
        errors = validate(spec, resolver(default=capsule(maxResources={"memory": "1Gi"})))
        assert [(e.code, e.path) for e in errors] == [
            ("limits", "steps[0].resources.limits.memory")
        ], memory
        assert "Kubernetes quantity" in errors[0].message


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
    t0 = time.perf_counter()
    assert validate(spec, resolver(), Policy(max_steps=100_000)) == []
    assert time.perf_counter() - t0 < BOUND_SECONDS
