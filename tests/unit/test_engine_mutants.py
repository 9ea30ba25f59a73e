"""Behaviours of the decider and its body runs that mutation testing found no test for
(docs/quality.md): each test here kills mutants that survived the unit suite."""

from __future__ import annotations

import json
from typing import Any

from planops.api.attempt_models import RetryBackoff
from planops.engine import Facts, Run, decide
from planops.engine.facts import AttemptFact, exit_report
from planops.engine.report import ExitReport, StepRecord

from .helpers import plan


def ids(decision: Any) -> list[str]:
    return [d.step.id for d in decision.dispatch]


def records(run: Run) -> dict[str, StepRecord]:
    return {r.step_id: r for r in run.report().steps}


def drive(run: Run, now: float = 0.0, fail: tuple[str, ...] = ()) -> float:
    """Finish every attempt in flight (those named in `fail` fail) until the run finishes."""
    while not run.decide(now).finished:
        now += 1
        for step_id, attempt in run.in_flight_attempts():
            failed = step_id in fail
            status = "failed" if failed else "success"
            output = None if failed else f"out-{step_id}"
            run.finish_attempt(step_id, attempt, status, output, "boom" if failed else None, now)
        assert now < 50
    return now


# -- the pure decide() ------------------------------------------------------------------------


def test_decide_names_the_plan_and_passes_the_capsules_backoff():
    spec = plan({"id": "a", "shell": "false", "retries": 1})
    facts = Facts(attempts=(AttemptFact("a", 1, 0.0, "failed", 10.0, None, "x"),))
    run, decision = decide("nightly", spec, facts, 11.0, RetryBackoff(duration="30s"))
    assert run.report().plan_id == "nightly"
    assert ids(decision) == [] and decision.wake_at == 40.0  # 10 s + 30 s, then due
    _, later = decide("nightly", spec, facts, 40.0, RetryBackoff(duration="30s"))
    assert [(d.step.id, d.attempt) for d in later.dispatch] == [("a", 2)]


def test_a_body_step_waits_the_backoff_of_the_run_around_it():
    spec = plan({"id": "m", "map": {"over": [1], "do": [{"id": "b", "shell": "x", "retries": 1}]}})
    run = Run("p", spec, retry_backoff=RetryBackoff(duration="5s"))
    (d,) = run.decide(0).dispatch
    run.finish_attempt(d.step.id, 1, "failed", None, "boom", 1.0)
    decision = run.decide(1.0)
    assert ids(decision) == [] and decision.wake_at == 6.0


# -- exit and filter evaluated by the decider -------------------------------------------------


def test_a_filter_that_cannot_be_evaluated_fails_its_attempt_and_is_retried():
    spec = plan(
        {
            "id": "f",
            "filter": {"over": "{{input.n}}", "where": {"value": "{{item}}", "op": "gt", "to": 1}},
            "retries": 1,
            "onError": "continue",
        },
        {"id": "after", "shell": "true", "dependsOn": ["f"]},
        input={"n": 5},
    )
    run = Run("p", spec)
    decision = run.decide(0)
    assert ids(decision) == ["after"]
    (f,) = decision.settled
    assert (f.step_id, f.status, f.attempts) == ("f", "failed", 2)  # retried once, then failed
    assert "filter.over must render to an array" in (f.error or "")


def test_an_exit_that_fires_reports_status_message_and_output():
    spec = plan(
        {"id": "a", "shell": "true"},
        {
            "id": "stop",
            "dependsOn": ["a"],
            "exit": {
                "when": {"value": "{{a.output}}", "op": "eq", "to": "out-a"},
                "status": "error",
                "message": "saw {{a.output}}",
                "output": {"got": "{{a.output}}"},
            },
        },
        {"id": "never", "shell": "true", "dependsOn": ["stop"]},
    )
    run = Run("p", spec)
    drive(run)
    stop = records(run)["stop"]
    assert stop.status == "success"
    assert json.loads(stop.output or "") == {
        "fired": True,
        "status": "error",
        "message": "saw out-a",
        "output": {"got": "out-a"},
    }
    report = run.report()
    assert report.exit == ExitReport("stop", "error", "saw out-a", {"got": "out-a"})
    assert not report.completed and "never" not in records(run)


def test_exit_report_of_a_record_without_output_or_status():
    ok = StepRecord("e", "success", None, None, 1, 0.0, 1.0)
    assert exit_report("e", ok) is None  # an output dropped from a large status: not fired
    fired = ok._replace(output=json.dumps({"fired": True}))
    assert exit_report("e", fired) == ExitReport("e", "success", None, None)
    assert exit_report("e", fired._replace(status="failed")) is None


# -- bodies -----------------------------------------------------------------------------------


def test_a_body_steps_seed1_reference_reads_the_enclosing_run():
    spec = plan(
        {"id": "build", "shell": "true"},
        {
            "id": "m",
            "dependsOn": ["build"],
            "map": {
                "over": [1],
                "do": [{"id": "use", "tool": "notes", "input": {"b": "$build.output"}}],
            },
        },
    )
    run = Run("p", spec)
    (b,) = run.decide(0).dispatch
    run.finish_attempt("build", 1, "success", "artifact", None, 1)
    (use,) = run.decide(1).dispatch
    assert use.step.id == "m.0.use" and use.input == {"b": "artifact"}
    assert b.step.id == "build"


def test_kinds_of_body_steps_by_qualified_name():
    spec = plan(
        {
            "id": "m",
            "map": {"over": [1], "do": [{"id": "t", "tool": "notes"}, {"id": "s", "shell": "x"}]},
        },
        {
            "id": "d",
            "decide": {
                "if": {"value": 1, "op": "eq", "to": 1},
                "then": [{"id": "q", "capsule": "c", "input": "go"}],
                "else": {"ask": {"prompt": "?"}},
            },
        },
        {"id": "plain", "tool": "notes"},
    )
    run = Run("p", spec)
    assert run.kind_of("m.0.t") == "tool" and run.kind_of("m.7.s") == "shell"
    assert run.kind_of("d.then.q") == "capsule"
    assert run.kind_of("plain") == "tool" and run.kind_of("m") == "map"
    for unknown in ("m.0.nope", "plain.0.t", "nope.0.t", "d.other.q"):
        assert run.kind_of(unknown) == "shell"


def test_a_decide_reports_its_branch_and_the_branchs_last_result():
    spec = plan(
        {
            "id": "d",
            "decide": {
                "if": {"value": 2, "op": "gt", "to": 1},
                "then": [{"id": "x", "shell": "a"}, {"id": "y", "shell": "b", "dependsOn": ["x"]}],
                "else": {"shell": "c"},
            },
        }
    )
    run = Run("p", spec)
    drive(run)
    result = json.loads(records(run)["d"].output or "")
    assert result == {"branch": "then", "verdict": True, "reason": None, "result": "out-d.then.y"}


def test_a_map_stopped_by_the_plan_says_how_far_it_got():
    spec = plan(
        {"id": "bad", "shell": "false"},
        {"id": "m", "map": {"over": [1, 2, 3], "do": [{"id": "b", "shell": "x"}]}},
    )
    run = Run("p", spec)
    assert ids(run.decide(0)) == ["bad", "m.0.b"]
    run.finish_attempt("m.0.b", 1, "success", "one", None, 1.0)
    run.decide(1.0)  # item 1 starts
    run.finish_attempt("bad", 1, "failed", None, "no", 2.0)
    run.finish_attempt("m.1.b", 1, "success", "two", None, 3.0)
    assert run.decide(3.0).finished
    m = records(run)["m"]
    assert (m.status, m.finished_at) == ("failed", 3.0)
    assert m.error == "map stopped with 2 of 3 items done: the plan stopped"


def test_a_running_control_step_restored_keeps_its_start_and_attempt():
    spec = plan(
        {"id": "m", "map": {"over": [1, 2], "do": [{"id": "b", "shell": "x"}]}},
    )
    facts = Facts(
        settled=(StepRecord("m.0.b", "success", "one", None, 1, 5.0, 6.0),),
        attempts=(
            AttemptFact("m.0.b", 1, 5.0, "success", 6.0, "one"),
            AttemptFact("m.1.b", 1, 7.0),
        ),
    )
    run, decision = decide("p", spec, facts, 8.0)
    assert ids(decision) == [] and decision.settled == ()  # nothing new, nothing announced again
    assert run.in_flight_attempts() == [("m.1.b", 1)]
    run.finish_attempt("m.1.b", 1, "success", "two", None, 9.0)
    decision = run.decide(9.0)
    assert decision.finished
    m = records(run)["m"]
    assert (m.attempts, m.started_at, m.finished_at) == (1, 5.0, 9.0)
    assert json.loads(m.output or "") == {"count": 2, "results": ["one", "two"]}
    assert [r.step_id for r in decision.settled] == ["m.1.b", "m"]


def test_a_reduce_restored_after_its_first_item_carries_the_accumulator():
    spec = plan(
        {
            "id": "r",
            "reduce": {
                "over": [1, 2],
                "initial": 0,
                "do": [{"id": "add", "tool": "notes", "input": {"acc": "{{accumulator}}"}}],
            },
        },
    )
    facts = Facts(
        settled=(StepRecord("r.0.add", "success", "10", None, 1, 1.0, 2.0),),
        attempts=(AttemptFact("r.0.add", 1, 1.0, "success", 2.0, "10"),),
    )
    _, decision = decide("p", spec, facts, 3.0)
    (d,) = decision.dispatch
    assert d.step.id == "r.1.add" and d.input == {"acc": 10}


def test_a_control_step_settled_or_in_flight_is_not_restored_from_body_facts_again():
    spec = plan({"id": "m", "map": {"over": [1], "do": [{"id": "b", "shell": "x"}]}})
    settled = StepRecord(
        "m", "success", json.dumps({"count": 1, "results": ["one"]}), None, 1, 0.0, 2.0
    )
    facts = Facts(
        settled=(StepRecord("m.0.b", "success", "one", None, 1, 0.0, 1.0), settled),
        attempts=(AttemptFact("m.0.b", 1, 0.0, "success", 1.0, "one"),),
    )
    run, decision = decide("p", spec, facts, 3.0)
    assert decision.finished and run.report().completed
    assert [r.step_id for r in run.report().steps] == ["m.0.b", "m"]


def test_unsettled_lists_the_steps_not_settled_in_declaration_order():
    run = Run(
        "p", plan({"id": "a", "shell": "x"}, {"id": "b", "shell": "x"}, {"id": "c", "shell": "x"})
    )
    run.decide(0)
    run.finish_attempt("b", 1, "success", None, None, 1)
    assert run.unsettled() == ["a", "c"]


def test_record_count_is_what_the_run_has_and_will_have_at_every_stage():
    spec = plan(
        {
            "id": "m",
            "map": {
                "over": [1, 2, 3],
                "do": [{"id": "a", "shell": "x"}, {"id": "b", "shell": "y", "dependsOn": ["a"]}],
            },
        },
        {"id": "other", "shell": "z"},
    )
    run = Run("p", spec)
    assert run.record_count() == 2  # nothing started: the top-level steps
    now = 0.0
    seen = []
    while not run.decide(now).finished:
        seen.append(run.record_count())
        now += 1
        for step_id, attempt in run.in_flight_attempts():
            run.finish_attempt(step_id, attempt, "success", None, None, now)
    assert set(seen) == {8} and run.record_count() == 8  # 2 + 3 items x 2 body steps
    assert len(run.report().steps) == 8


def test_a_failed_branch_or_item_is_named_in_its_control_steps_error():
    decide_spec = plan(
        {
            "id": "d",
            "decide": {
                "if": {"value": 1, "op": "eq", "to": 1},
                "then": [{"id": "x", "shell": "f"}],
            },
            "onError": "continue",
        }
    )
    run = Run("p", decide_spec)
    drive(run, fail=("d.then.x",))
    assert records(run)["d"].error == "branch then failed: step d.then.x failed (boom)"
    map_spec = plan(
        {
            "id": "m",
            "map": {"over": [1, 2], "do": [{"id": "x", "shell": "f"}]},
            "onError": "continue",
        }
    )
    run = Run("p", map_spec)
    drive(run, fail=("m.0.x",))
    assert records(run)["m"].error == "item 0 failed: step m.0.x failed (boom)"


def test_a_report_for_a_body_that_is_over_is_ignored():
    spec = plan({"id": "m", "map": {"over": [1], "do": [{"id": "x", "shell": "f"}]}})
    run = Run("p", spec)
    drive(run)
    for stale in ("m.0.x", "m.5.x", "nope.0.x"):
        run.finish_attempt(stale, 1, "failed", None, "late", 99.0)  # no error, no change
    assert run.report().completed and records(run)["m.0.x"].status == "success"
