"""The step budget of a check made while a plan runs (engine.jsonschemas.Steps: a tool's input at
dispatch, an answer to an ask) counts what costs time even where no keyword is evaluated:

- each subschema applied to a value: `items: {}`, `propertyNames: true`, `additionalProperties:
  {}` evaluate no keyword, yet visit every item or key (`items: {}` over 100,000 items, a
  hundred times over, took 25 s of the operator's CPU and was accepted: a budget of keywords
  saw 200 steps);
- each error by the length of its message, which quotes the value (`false` or a `type`
  mismatch applied many times to an 80 KB answer built megabytes of text, hundreds with more
  repetitions).

Such a value is over budget: the answer is rejected, the tool's call denied, and the validator
refuses a literal input, by the one function. An ordinary schema and value are judged as before.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest

from planops.engine import Policy, Run, control, jsonschemas, validate
from planops.engine import dispatch as rules
from planops.runners.local import LocalRunner

from .helpers import capsule, plan, resolver, time_bound

#: how many times an author repeats the costly subschema (the schema stays small enough for its
#: own check: jsonschemas.SCHEMA_STEPS)
TIMES = 100
ITEMS = [0] * 30_000  # as JSON, within a tool's input (tool_inputs.TOOL_INPUT_BYTES)
KEYS = {f"k{i}": 0 for i in range(5_000)}
TEXT = "x" * 80_000

#: (subschema repeated under allOf/anyOf, the value it is applied to)
EMPTY_APPLIED = {
    "items: {}": ({"allOf": [{"items": {}}] * TIMES}, ITEMS),
    "propertyNames: true": ({"allOf": [{"propertyNames": True}] * TIMES}, KEYS),
    "additionalProperties: {}": ({"allOf": [{"additionalProperties": {}}] * TIMES}, KEYS),
}
MANY_ERRORS = {
    "false under anyOf": ({"anyOf": [False] * TIMES}, TEXT),
    "type under allOf": ({"allOf": [{"type": "integer"}] * TIMES}, TEXT),
}
COSTLY = {**EMPTY_APPLIED, **MANY_ERRORS}


def _wrapped(schema: Any) -> dict[str, Any]:
    """`schema` as the schema of an object's property `v` (a tool's input is an object)."""
    return {"type": "object", "properties": {"v": schema}}


def _cpu(f: Any) -> tuple[Any, float]:
    start = time.process_time()
    got = f()
    return got, time.process_time() - start


@pytest.mark.parametrize("name", COSTLY)
def test_a_costly_value_is_over_budget_before_the_work_is_done(name: str) -> None:
    schema, value = COSTLY[name]
    assert jsonschemas.schema_problems(schema) == []

    def check() -> None:
        jsonschemas.evaluate(schema, value, steps=jsonschemas.Steps(jsonschemas.RUN_STEPS))

    start = time.process_time()
    with pytest.raises(jsonschemas.OverBudgetError):
        check()
    spent = time.process_time() - start
    print(f"{name}: over budget after {spent:.3f} s of CPU")
    assert spent < time_bound(1.0)


@pytest.mark.parametrize("name", COSTLY)
def test_an_answer_too_costly_to_check_is_rejected_for_its_cost(name: str) -> None:
    schema, value = COSTLY[name]
    why, spent = _cpu(lambda: control.answer_problem(schema, value))
    print(f"{name}: answer judged in {spent:.3f} s of CPU")
    assert why is not None and "more than" in why and "steps to check" in why, why[:200]
    assert spent < time_bound(2.0)


def _tool(schema: Any) -> Any:
    return capsule(
        image="busybox:1",
        tools=[{"name": "pick", "command": ["cat"], "inputSchema": _wrapped(schema)}],
    )


@pytest.mark.parametrize("name", EMPTY_APPLIED)
def test_a_tool_input_too_costly_to_check_is_denied_alike_everywhere(name: str) -> None:
    """The validator (a literal input), the operator's dispatch and `run --local` (a rendered
    one) give the one verdict, from the one function."""
    schema, value = EMPTY_APPLIED[name]
    cap = _tool(schema)
    spliced = plan({"id": "p", "tool": "pick", "input": "{{input.v}}"}, input={"v": {"v": value}})
    (d,) = Run("p", spliced).decide(0.0).dispatch
    why, spent = _cpu(lambda: rules.admit(d, cap, Policy(), lineage=(), depth=0, needs_image=False))
    print(f"{name}: dispatch judged in {spent:.3f} s of CPU")
    assert why is not None and why.startswith("call denied: ") and "steps to check" in why, why
    report = asyncio.run(LocalRunner({"default": cap}).run("p", spliced))
    assert [(r.status, r.error) for r in report.steps] == [("failed", why)]
    literal = plan({"id": "p", "tool": "pick", "input": {"v": value}})
    (error,) = validate(literal, resolver(default=cap))
    assert (error.code, error.path) == ("tool-input", "steps[0].input")
    assert why.removeprefix("call denied: ") in error.message


ORDINARY = {
    "type": "object",
    "required": ["version", "tags"],
    "properties": {
        "version": {"type": "string", "pattern": "^v[0-9]+$"},
        "tags": {"type": "array", "items": {"type": "string"}, "uniqueItems": True},
        "labels": {"type": "object", "additionalProperties": {"type": "string"}},
        "mode": {"enum": ["fast", "safe"]},
        "extra": {},
    },
    "additionalProperties": False,
}


def test_an_ordinary_schema_still_judges_answers_by_their_content() -> None:
    fine = {
        "version": "v3",
        "tags": [f"t{i}" for i in range(500)],
        "labels": {f"l{i}": "x" for i in range(200)},
        "mode": "safe",
        "extra": {"any": [1, 2, 3]},
    }
    assert control.answer_problem(ORDINARY, fine) is None
    wrong = {**fine, "version": 3, "mode": "slow", "tags": [1, 2]}
    why = control.answer_problem(ORDINARY, wrong)
    assert why is not None and "steps to check" not in why, why
    # a schema of many patterns is still a schema (its own check within SCHEMA_STEPS)
    patterns = {"anyOf": [{"pattern": f"^{n}$"} for n in range(1, 601)]}
    assert jsonschemas.schema_problems({"additionalProperties": patterns}) == []


def test_a_schema_too_costly_to_check_itself_is_unusable_with_a_reason() -> None:
    """A schema is an author's value too: its own check against the meta-schema has a budget
    (jsonschemas.SCHEMA_STEPS), the same in every executor."""
    schema = {"allOf": [{}] * 5_000}
    (problem,), spent = _cpu(lambda: jsonschemas.schema_problems(schema))
    print(f"schema of {len(json.dumps(schema))} bytes judged in {spent:.3f} s of CPU")
    assert problem[0] == () and f"more than {jsonschemas.SCHEMA_STEPS} steps" in problem[1]
    assert spent < time_bound(2.0)
    why = control.answer_problem(schema, 1)
    assert why is not None and why.startswith("the outputSchema cannot be used: "), why


def test_dependent_required_costs_every_name_it_lists() -> None:
    """`dependentRequired` goes through every name of every list it holds, not one per entry:
    five lists of 10,000 names are 50,000 steps (a budget of entries saw ten)."""
    names = [f"x{i}" for i in range(10_000)]
    schema = {"allOf": [{"dependentRequired": {"a": names}}] * 5}
    assert jsonschemas.schema_problems(schema) == []
    value = {"a": 0, **dict.fromkeys(names, 0)}
    with pytest.raises(jsonschemas.OverBudgetError):
        jsonschemas.evaluate(schema, value, steps=jsonschemas.Steps(jsonschemas.RUN_STEPS))
    assert jsonschemas.evaluate({"dependentRequired": {"a": names[:10]}}, value) == []
