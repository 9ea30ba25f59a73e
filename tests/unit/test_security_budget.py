"""Security: validation has a time budget (the operator validates at admission and every
reconcile): past it, one clear error instead of an unbounded run. The clock is injected."""

from __future__ import annotations

from planops.engine import Budget, validate
from planops.engine.policy import BUDGET_EVERY

from .helpers import plan, resolver


class FakeClock:
    """Advances `step` seconds each time it is read; counts the reads."""

    def __init__(self, step: float = 1.0) -> None:
        self.now = 1000.0
        self.step = step
        self.reads = 0

    def __call__(self) -> float:
        self.reads += 1
        self.now += self.step
        return self.now


def many(n, **extra):
    return plan(*({"id": f"s{i}", "shell": "true", **extra} for i in range(n)))


def only_budget_error(errors, seconds):
    assert len(errors) == 1, errors[:3]
    (e,) = errors
    assert (e.code, e.step, e.path) == ("limits", None, "steps")
    assert e.message.startswith(f"validation took longer than its budget of {seconds:g}s: ")
    return e.message


def test_a_huge_plan_stops_with_one_clear_error():
    clock = FakeClock()
    errors = validate(many(20_000, tool="ghost"), resolver(), budget=Budget(seconds=5, clock=clock))
    message = only_budget_error(errors, 5)
    assert "a plan of 20000 steps" in message
    assert clock.reads < 20  # it stopped early: not one read per step


def test_within_the_budget_every_refusal_is_reported_as_before():
    clock = FakeClock(step=0.0)
    spec = many(3000, tool="ghost")
    with_budget = validate(spec, resolver(), budget=Budget(seconds=5, clock=clock))
    assert with_budget == validate(spec, resolver())
    assert {e.code for e in with_budget} == {"step-kind", "unknown-tool"}


def test_the_clock_is_read_once_per_256_checks():
    clock = FakeClock(step=0.0)
    n = 4096
    assert validate(many(n), resolver(), budget=Budget(seconds=5, clock=clock)) == []
    # the start, then one read per BUDGET_EVERY ticks (a step ticks in two passes)
    assert clock.reads == 1 + (2 * n) // BUDGET_EVERY


def test_body_steps_count_against_the_budget():
    body = [{"id": f"b{j}", "shell": "true"} for j in range(5000)]
    spec = plan({"id": "m", "map": {"over": [1], "do": body}})
    message = only_budget_error(
        validate(spec, resolver(), budget=Budget(seconds=3, clock=FakeClock())), 3
    )
    assert "stopped at steps[0].map.do[" in message


def laughs(depth: int) -> dict:
    """A schema whose evaluation doubles at each level: 2**depth keyword evaluations."""
    defs = {f"d{k}": {"allOf": [{"$ref": f"#/$defs/d{k + 1}"}] * 2} for k in range(depth)}
    defs[f"d{depth}"] = {"type": "string"}
    return {"$defs": defs, "$ref": "#/$defs/d0"}


def test_schema_evaluation_counts_against_the_budget():
    spec = plan({"id": "a", "shell": "true"}, inputSchema=laughs(40), input={})
    only_budget_error(validate(spec, resolver(), budget=Budget(seconds=3, clock=FakeClock())), 3)


def test_an_ask_default_checked_against_its_schema_counts_against_the_budget():
    defs = laughs(40)["$defs"]
    ok = {"type": "string", "$ref": "#/$defs/d0"}
    schema = {"type": "object", "$defs": defs, "properties": {"ok": ok}}
    spec = plan(
        {"id": "q", "ask": {"prompt": "go?", "outputSchema": schema, "default": {"ok": "y"}}}
    )
    only_budget_error(validate(spec, resolver(), budget=Budget(seconds=3, clock=FakeClock())), 3)
