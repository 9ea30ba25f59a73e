"""Validation and scheduling stay linear in the plan's size.

The template checks: a step whose template names a step it
waits for only through others (`{{s0.output}}` at the end of a chain) is answered by one pass
over the graph for all templates (Graph.waits_for), not by a walk of each step's ancestors (that
was quadratic: 2,000 such steps took ~0.5 s to validate, 10,000 took ~12 s). A map's items: each
decision advances the items still running, and a body step's result finds its item by key,
never by a scan of all the items (that was quadratic in the items).

NOT a timing test: it counts the function calls (Python and builtin) that validation makes,
which do not depend on the machine's load, at two sizes four times apart. Linear work makes about
4x the calls; the quadratic walk made ~16x. The bound (6x) leaves room for what grows a little
faster than linear without letting a quadratic pass."""

from __future__ import annotations

import cProfile
import pstats
from typing import Any

import pytest

from planops.engine import Policy, Run, validate
from planops.engine.dag import Graph

from .helpers import plan, resolver

SMALL, LARGE = 250, 1000
BOUND = 6.0


def chain(n: int, back: int) -> list[dict[str, Any]]:
    """s0 <- s1 <- ... each step names the step `back` before it (0: the first step)."""
    steps: list[dict[str, Any]] = [{"id": "s0", "shell": "echo hi"}]
    for i in range(1, n):
        named = f"s{max(i - back, 0)}" if back else "s0"
        steps.append(
            {"id": f"s{i}", "dependsOn": [f"s{i - 1}"], "shell": f"echo {{{{{named}.output}}}}"}
        )
    return steps


def map_chain(n: int) -> list[dict[str, Any]]:
    """The same through bodies: each map's body names the first step."""
    steps: list[dict[str, Any]] = [{"id": "s0", "shell": "echo hi"}]
    for i in range(1, n):
        body = [{"id": f"b{i}", "shell": "echo {{s0.output}} {{item}}"}]
        steps.append({"id": f"s{i}", "dependsOn": [f"s{i - 1}"], "map": {"over": [1], "do": body}})
    return steps


def counted(work: Any) -> int:
    """The function calls `work()` makes (Python and builtin): the same on any machine."""
    profile = cProfile.Profile()
    profile.enable()
    work()
    profile.disable()
    return int(pstats.Stats(profile).total_calls)  # type: ignore[attr-defined]


def calls(steps: list[dict[str, Any]]) -> int:
    spec = plan(*steps)
    errors: list[Any] = []
    n = counted(lambda: errors.extend(validate(spec, resolver(), Policy(max_steps=100_000))))
    assert errors == []
    return n


@pytest.mark.parametrize(
    "shape",
    [
        pytest.param(lambda n: chain(n, 0), id="each-names-the-first"),
        pytest.param(lambda n: chain(n, 2), id="each-names-two-back"),
        pytest.param(map_chain, id="bodies-name-the-first"),
    ],
)
def test_validating_templates_that_name_ancestors_grows_linearly(shape: Any):
    small, large = calls(shape(SMALL)), calls(shape(LARGE))
    assert large / small < BOUND, (small, large)


def test_a_template_naming_a_step_it_does_not_wait_for_is_still_refused():
    steps = chain(50, 0)
    steps.append({"id": "lone", "shell": "echo {{s3.output}}"})  # waits for nothing
    steps.append(
        {
            "id": "side",
            "dependsOn": ["lone"],
            "map": {"over": [1], "do": [{"id": "inner", "shell": "echo {{s1.output}}"}]},
        }
    )
    errors = validate(plan(*steps), resolver())
    assert sorted((e.code, e.step, e.path) for e in errors) == [
        ("template", "lone", "steps[50].shell"),
        ("template", "side.do.inner", "steps[51].map.do[0].shell"),
    ]
    messages = sorted(e.message for e in errors)
    assert "{{s1.output}} uses step 's1', which the map step 'side' does not depend" in messages[0]
    assert "{{s3.output}} uses step 's3', which this step does not depend on" in messages[1]


def test_waits_for_answers_every_pair_and_walks_what_is_in_a_cycle():
    graph = Graph.build(
        ["a", "b", "c", "d", "x", "y", "z"],
        [[], ["a"], ["b"], ["a"], ["y"], ["x", "a"], ["y"]],  # x <-> y: a cycle; z behind it
    )
    asked = [(2, 0), (2, 3), (3, 0), (0, 2), (6, 0), (6, 4), (6, 2), (1, 1)]
    assert graph.waits_for(asked) == {(2, 0), (3, 0), (6, 0), (6, 4)}
    assert graph.waits_for([]) == set()
    assert graph.order() == [0, 1, 3, 2]


def run_map(items: int) -> None:
    spec = plan(
        {
            "id": "m",
            "map": {
                "over": list(range(items)),
                "concurrency": 4,
                "do": [{"id": "b", "shell": "echo {{item}}"}],
            },
        }
    )
    run, now = Run("p", spec), 0.0
    while not run.decide(now).finished:
        now += 1
        for step_id, attempt in run.in_flight_attempts():
            run.finish_attempt(step_id, attempt, "success", "x", None, now)
    assert run.report().completed


def test_running_a_map_grows_linearly_with_its_items():
    """200 -> 1,600 items (8x): ~8x the calls; scanning every item at each decision made ~20x."""
    small, large = counted(lambda: run_map(200)), counted(lambda: run_map(1600))
    assert large / small < 12, (small, large)
