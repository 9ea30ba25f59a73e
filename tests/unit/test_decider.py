"""The decider: every scheduling sentence of seed 1, plus properties over random plans."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from planops.engine import Facts, Run, decide
from planops.engine.facts import AttemptFact

from ..hypothesis_profiles import examples
from .helpers import plan


def ids(decision):
    return [d.step.id for d in decision.dispatch]


def test_a_step_without_depends_on_is_ready_immediately():
    run = Run("p", plan({"id": "a", "shell": "true"}, {"id": "b", "shell": "true"}))
    assert ids(run.decide(0)) == ["a", "b"]


def test_shell_and_capsule_steps_that_do_not_depend_on_each_other_run_at_the_same_time():
    run = Run(
        "p",
        plan(
            {"id": "a", "shell": "true"},
            {"id": "b", "capsule": "c", "input": "x"},
            {"id": "c", "shell": "true"},
        ),
    )
    assert ids(run.decide(0)) == ["a", "b", "c"]


def test_tool_steps_are_dispatched_one_at_a_time_even_without_dependencies():
    run = Run(
        "p",
        plan(
            {"id": "t1", "tool": "notes"},
            {"id": "t2", "tool": "notes"},
            {"id": "s", "shell": "true"},
        ),
    )
    assert ids(run.decide(0)) == ["t1", "s"]
    run.finish_attempt("t1", 1, "success", "x", None, 1)
    assert ids(run.decide(1)) == ["t2"]


def test_parallelism_caps_steps_in_flight():
    run = Run("p", plan(*[{"id": f"s{i}", "shell": "true"} for i in range(5)], parallelism=2))
    assert ids(run.decide(0)) == ["s0", "s1"]
    run.finish_attempt("s0", 1, "success", None, None, 1)
    assert ids(run.decide(1)) == ["s2"]


def test_a_step_waits_until_its_dependencies_settle_whatever_their_status():
    run = Run(
        "p",
        plan(
            {"id": "a", "shell": "false", "onError": "continue"},
            {"id": "b", "shell": "true", "dependsOn": ["a"]},
        ),
    )
    assert ids(run.decide(0)) == ["a"]
    run.finish_attempt("a", 1, "failed", None, "exit code 1", 1)
    d = run.decide(1)
    assert ids(d) == ["b"] and [r.status for r in d.settled] == ["failed"]


def test_references_are_substituted_at_dispatch_with_the_real_result():
    run = Run(
        "p",
        plan(
            {"id": "build", "shell": "true"},
            {
                "id": "r",
                "tool": "notes",
                "dependsOn": ["build"],
                "input": {"log": "$build.output", "s": ["$build.status"]},
            },
        ),
    )
    run.decide(0)
    run.finish_attempt("build", 1, "success", "ok\n", None, 1)
    (d,) = run.decide(1).dispatch
    assert d.input == {"log": "ok\n", "s": ["success"]}


def test_a_reference_to_a_step_that_has_not_settled_fails_the_referring_step():
    """'References never imply ordering': without dependsOn, the referent may not have settled."""
    run = Run(
        "p",
        plan(
            {"id": "slow", "shell": "sleep 1"},
            {"id": "r", "tool": "notes", "input": {"x": "$slow.output"}, "onError": "continue"},
        ),
    )
    d = run.decide(0)
    assert ids(d) == ["slow"]
    (rec,) = d.settled
    assert (rec.step_id, rec.status, rec.attempts) == ("r", "failed", 1)
    assert "has not settled" in rec.error


def test_a_false_if_settles_the_step_skipped_without_dispatch():
    run = Run(
        "p",
        plan(
            {"id": "a", "shell": "true"},
            {"id": "b", "shell": "true", "dependsOn": ["a"], "if": "$a.status == 'failed'"},
            {"id": "c", "shell": "true", "dependsOn": ["b"]},
        ),
    )
    run.decide(0)
    run.finish_attempt("a", 1, "success", None, None, 1)
    d = run.decide(1)
    assert ids(d) == ["c"]  # b skipped at once, which makes c ready in the same decision
    assert [(r.step_id, r.status, r.attempts) for r in d.settled] == [
        ("a", "success", 1),
        ("b", "skipped", 0),
    ]


def test_an_if_naming_an_unsettled_step_fails_the_step():
    run = Run(
        "p",
        plan(
            {"id": "slow", "shell": "true"},
            {"id": "b", "shell": "true", "if": "$slow.status == 'success'", "onError": "continue"},
        ),
    )
    d = run.decide(0)
    assert [(r.step_id, r.status) for r in d.settled] == [("b", "failed")]


def test_retries_dispatch_again_before_on_error_applies():
    """'retries: 2 dispatches the step up to three times.'"""
    run = Run("p", plan({"id": "a", "shell": "false", "retries": 2}))
    for attempt in (1, 2, 3):
        (d,) = run.decide(attempt).dispatch
        assert d.attempt == attempt
        run.finish_attempt("a", attempt, "failed", None, "exit code 1", attempt + 0.5)
    d = run.decide(4)
    assert d.dispatch == () and d.finished
    assert [(r.status, r.attempts) for r in d.settled] == [("failed", 3)]
    assert run.report().failed_step == "a"


def test_a_retry_that_succeeds_settles_success():
    run = Run("p", plan({"id": "a", "shell": "x", "retries": 1}))
    run.decide(0)
    run.finish_attempt("a", 1, "failed", None, "boom", 1)
    run.decide(1)
    run.finish_attempt("a", 2, "success", "ok", None, 2)
    d = run.decide(2)
    assert [(r.status, r.attempts, r.started_at, r.finished_at) for r in d.settled] == [
        ("success", 2, 0, 2)
    ]


def test_on_error_fail_stops_the_plan_and_undispatched_steps_are_absent():
    run = Run(
        "p",
        plan(
            {"id": "a", "shell": "false"},
            {"id": "long", "shell": "sleep 5"},
            {"id": "b", "shell": "true", "dependsOn": ["a"]},
        ),
    )
    assert ids(run.decide(0)) == ["a", "long"]
    run.finish_attempt("a", 1, "failed", None, "exit code 1", 1)
    d = run.decide(1)
    assert d.dispatch == () and not d.finished  # `long` is in flight: it still settles
    run.finish_attempt("long", 1, "success", None, None, 2)
    d = run.decide(2)
    assert d.finished
    report = run.report().to_json()
    assert report["completed"] is False and report["failedStep"] == "a"
    assert [s["stepId"] for s in report["steps"]] == ["a", "long"]  # b never dispatched: absent


def test_on_error_skip_settles_skipped_and_the_plan_continues():
    run = Run(
        "p",
        plan(
            {"id": "a", "shell": "false", "onError": "skip"},
            {"id": "b", "shell": "true", "dependsOn": ["a"]},
        ),
    )
    run.decide(0)
    run.finish_attempt("a", 1, "failed", "out", "exit code 1", 1)
    d = run.decide(1)
    assert ids(d) == ["b"]
    assert [(r.status, r.error) for r in d.settled] == [("skipped", "exit code 1")]


def test_on_error_continue_settles_failed_and_the_plan_continues_and_completes():
    run = Run("p", plan({"id": "a", "shell": "false", "onError": "continue"}))
    run.decide(0)
    run.finish_attempt("a", 1, "failed", None, "exit code 1", 1)
    assert run.decide(1).finished
    rep = run.report()
    assert rep.completed and rep.failed_step is None and rep.steps[0].status == "failed"


def test_the_report_lists_steps_in_the_order_they_settled():
    run = Run(
        "p", plan({"id": "a", "shell": "x"}, {"id": "b", "shell": "x"}, {"id": "c", "shell": "x"})
    )
    run.decide(0)
    for sid, t in (("c", 1), ("a", 2), ("b", 3)):
        run.finish_attempt(sid, 1, "success", None, None, t)
    run.decide(4)
    assert [s.step_id for s in run.report().steps] == ["c", "a", "b"]


def test_an_empty_plan_completes_having_done_nothing():
    run = Run("p", plan())
    assert run.decide(0).finished and run.report().completed


def test_stale_and_repeated_results_are_ignored():
    run = Run("p", plan({"id": "a", "shell": "x", "retries": 1}))
    run.decide(0)
    run.finish_attempt("a", 1, "failed", None, "e", 1)
    run.finish_attempt("a", 1, "success", None, None, 1)  # repeated report of attempt 1
    (d,) = run.decide(1).dispatch
    assert d.attempt == 2


def test_the_pure_form_restores_from_facts_and_decides_the_same():
    spec = plan(
        {"id": "a", "shell": "x"},
        {"id": "t1", "tool": "notes"},
        {"id": "t2", "tool": "notes"},
        {"id": "b", "shell": "x", "dependsOn": ["a"], "retries": 1},
    )
    live = Run("p", spec)
    live.decide(0)
    live.finish_attempt("a", 1, "success", "A", None, 1)
    first = live.decide(1)
    facts = Facts(
        settled=tuple(live.settled),
        attempts=(AttemptFact("t1", 1, 0.0), AttemptFact("b", 1, 1.0, "failed", 2.0, None, "boom")),
    )
    _, pure = decide("p", spec, facts, 2.0)
    live.finish_attempt("b", 1, "failed", None, "boom", 2.0)
    assert ids(first) == ["b"]
    assert ids(pure) == ids(live.decide(2.0)) == ["b"]  # retry; t2 still waits for t1


# -- properties over random plans ------------------------------------------------------------


@st.composite
def random_plans(draw):
    n = draw(st.integers(0, 25))
    steps = []
    for i in range(n):
        kind = draw(st.sampled_from(["tool", "shell", "capsule"]))
        deps = draw(st.lists(st.integers(0, max(i - 1, 0)), max_size=3)) if i else []
        step = {
            "id": f"s{i}",
            "dependsOn": sorted({f"s{d}" for d in deps}),
            "retries": draw(st.integers(0, 2)),
            "onError": draw(st.sampled_from(["fail", "skip", "continue"])),
        }
        step[kind] = "notes" if kind == "tool" else "true" if kind == "shell" else "c"
        if kind == "capsule":
            step["input"] = "x"
        if draw(st.booleans()) and i:
            step["if"] = f"$s{draw(st.integers(0, i - 1))}.status != 'failed'"
        steps.append(step)
    return plan(*steps, parallelism=draw(st.none() | st.integers(1, 4)))


@settings(max_examples=examples(200), deadline=None)
@given(spec=random_plans(), seed=st.integers(0, 2**32))
def test_properties_dependencies_first_one_tool_at_a_time_and_termination(spec, seed):
    rng = random.Random(seed)
    run = Run("p", spec)
    by_id = {s.id: s for s in spec.steps}
    in_flight: list[tuple[str, int]] = []
    now, rounds = 0.0, 0
    while True:
        rounds += 1
        assert rounds < 10_000, "the plan must terminate"
        d = run.decide(now)
        for disp in d.dispatch:
            for dep in disp.step.depends_on:
                assert run.is_settled(dep), "dispatched before a dependency settled"
            in_flight.append((disp.step.id, disp.attempt))
        tools = [s for s, _ in in_flight if by_id[s].tool is not None]
        assert len(tools) <= 1, "two tool steps of one plan in flight"
        if spec.parallelism is not None:
            assert len(in_flight) <= spec.parallelism
        if d.finished:
            assert in_flight == []
            break
        assert in_flight, "not finished, yet nothing in flight: the run would hang"
        now += 1
        sid, attempt = in_flight.pop(rng.randrange(len(in_flight)))
        run.finish_attempt(sid, attempt, rng.choice(["success", "failed"]), None, None, now)
    rep = run.report()
    assert len({s.step_id for s in rep.steps}) == len(rep.steps)
    if rep.failed_step is None:
        assert rep.completed and len(rep.steps) == len(spec.steps)
