"""Retry from the failure (engine.retry): which steps a retried run keeps and which run again,
for each outcome a step can have, --from's closure, control and finally steps, settle order,
and the refusals. Runs are driven through the one decider (engine.Run) with scripted results."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from planops.engine import Run, StepRecord
from planops.engine.report import Report
from planops.engine.retry import RetryRefused, plan_retry, spec_digest

from . import helpers
from .helpers import plan

Outcome = Callable[[str, int], str]


def drive(run: Run, outcome: Outcome) -> tuple[Report, list[str]]:
    """Run to the end: every dispatched attempt succeeds unless `outcome` says "failed".
    Returns the report and the attempts dispatched (step ids, in order)."""
    dispatched: list[str] = []
    now = 1.0
    while True:
        decision = run.decide(now)
        if decision.finished and not decision.dispatch:
            return run.report(), dispatched
        assert decision.dispatch, "a run that waits for nothing must dispatch"
        for d in decision.dispatch:
            sid = d.step.id
            dispatched.append(sid)
            now += 1
            status = outcome(sid, d.attempt)
            run.finish_attempt(
                sid,
                d.attempt,
                "failed" if status == "failed" else "success",
                f"out:{sid}",
                "boom" if status == "failed" else None,
                now,
            )


def fails(*ids: str) -> Outcome:
    return lambda sid, _attempt: "failed" if sid in ids else "success"


def retried(spec, first: Report, from_step: str | None = None) -> tuple[Report, list[str]]:
    r = plan_retry(
        spec,
        first.steps,
        completed=first.completed,
        exited=first.exit is not None,
        from_step=from_step,
    )
    return drive(Run.restore("p", spec, r.facts), fails())


CHAIN = plan(
    {"id": "a", "shell": "true"},
    {"id": "b", "shell": "true", "dependsOn": ["a"]},
    {"id": "c", "shell": "true", "dependsOn": ["b"]},
    {"id": "side", "shell": "true"},
)


def statuses(report: Report) -> list[tuple[str, str]]:
    return [(s.step_id, s.status) for s in report.steps]


def test_a_failed_step_and_what_it_stopped_run_again_and_succeeded_steps_are_kept():
    first, _ = drive(Run("p", CHAIN), fails("b"))
    assert not first.completed and first.failed_step == "b"
    report, dispatched = retried(CHAIN, first)
    assert sorted(dispatched) == ["b", "c"]  # a and side are not run again; c never ran
    assert report.completed
    kept = {s.step_id: s for s in first.steps if s.status == "success"}
    for s in report.steps:
        if s.step_id in kept:
            assert s == kept[s.step_id]  # the record and its output as they were


def test_the_retried_report_lists_kept_records_first_in_their_order_then_new_ones():
    first, _ = drive(Run("p", CHAIN), fails("b"))
    report, _ = retried(CHAIN, first)
    kept = [s.step_id for s in first.steps if s.status == "success"]
    assert [s.step_id for s in report.steps][: len(kept)] == kept
    assert [s.step_id for s in report.steps][len(kept) :] == ["b", "c"]


def test_a_retried_step_reads_the_kept_output_of_a_step_it_depends_on():
    spec = plan(
        {"id": "a", "shell": "true"},
        {"id": "b", "tool": "t", "dependsOn": ["a"], "input": {"v": "$a.output"}},
    )
    first, _ = drive(Run("p", spec), fails("b"))
    r = plan_retry(spec, first.steps, completed=False)
    run = Run.restore("p", spec, r.facts)
    (d,) = run.decide(100).dispatch
    assert d.step.id == "b" and d.input == {"v": "out:a"} and d.attempt == 1


@pytest.mark.parametrize(
    ("step", "expect_rerun"),
    [
        ({"id": "x", "shell": "true", "onError": "skip"}, True),  # skipped after failing
        ({"id": "x", "shell": "true", "onError": "continue"}, True),  # failed, plan went on
        ({"id": "x", "shell": "true", "if": "'1' == '2'"}, False),  # skipped by its `if`
    ],
)
def test_what_reruns_for_each_outcome(step, expect_rerun):
    spec = plan(
        {"id": "a", "shell": "true"},
        step,
        {"id": "z", "shell": "true", "dependsOn": ["a"]},
        {"id": "boom", "shell": "true", "dependsOn": ["z"]},
    )
    first, _ = drive(Run("p", spec), fails("x", "boom"))
    r = plan_retry(spec, first.steps, completed=first.completed)
    assert ("x" in r.rerun) is expect_rerun
    assert "boom" in r.rerun and "a" in r.kept and "z" in r.kept


def test_steps_never_dispatched_after_a_stop_run_again():
    spec = plan(
        {"id": "t1", "tool": "t"},
        {"id": "t2", "tool": "t"},
        {"id": "t3", "tool": "t"},
    )
    first, _ = drive(Run("p", spec), fails("t1"))
    assert [s.step_id for s in first.steps] == ["t1"]  # t2, t3 absent: never dispatched
    report, dispatched = retried(spec, first)
    assert dispatched == ["t1", "t2", "t3"] and report.completed


def test_a_cancelled_attempt_runs_again():
    first = Report(
        "p",
        False,
        None,
        (
            StepRecord("a", "success", "x", None, 1, 0.0, 1.0),
            StepRecord("b", "failed", None, "cancelled (by x)", 1, 0.0, 2.0),
        ),
    )
    r = plan_retry(CHAIN, first.steps, completed=False)
    assert r.rerun == ("b", "c", "side") and r.kept == ("a",)


def test_a_step_that_reads_a_rerun_steps_result_runs_again_though_it_does_not_wait_for_it():
    spec = plan(
        {"id": "a", "shell": "true"},
        {"id": "r", "tool": "t", "if": "$a.status == 'success'"},  # reads a, no dependsOn
        {"id": "q", "tool": "t", "input": {"x": "$a.output"}},
    )
    records = (
        StepRecord("a", "failed", None, "e", 1, 0.0, 1.0),
        StepRecord("r", "skipped", None, None, 0, 0.0, 1.0),
        StepRecord("q", "success", "x", None, 1, 0.0, 1.0),
    )
    r = plan_retry(spec, records, completed=False)
    assert r.rerun == ("a", "r", "q")


def test_from_reruns_a_succeeded_step_and_everything_that_depends_on_it_transitively():
    first, _ = drive(Run("p", CHAIN), fails("c"))
    r = plan_retry(CHAIN, first.steps, completed=False, from_step="a")
    assert r.rerun == ("a", "b", "c") and r.kept == ("side",)
    report, dispatched = retried(CHAIN, first, from_step="a")
    assert sorted(dispatched) == ["a", "b", "c"] and report.completed


def test_from_on_a_succeeded_run_reruns_only_the_closure():
    first, _ = drive(Run("p", CHAIN), fails())
    report, dispatched = retried(CHAIN, first, from_step="b")
    assert sorted(dispatched) == ["b", "c"] and report.completed
    assert [s.step_id for s in report.steps][:2] == [
        s.step_id for s in first.steps if s.step_id in ("a", "side")
    ]


def test_a_retry_of_a_succeeded_run_without_from_is_refused():
    first, _ = drive(Run("p", CHAIN), fails())
    with pytest.raises(RetryRefused, match="succeeded: nothing failed"):
        plan_retry(CHAIN, first.steps, completed=True)


def test_a_retry_of_a_run_an_exit_ended_without_from_is_refused():
    with pytest.raises(RetryRefused, match="exit step ended"):
        plan_retry(CHAIN, (), completed=False, exited=True)


def test_a_report_naming_steps_the_plan_does_not_have_is_refused():
    records = (StepRecord("elsewhere", "success", None, None, 1, 0.0, 1.0),)
    with pytest.raises(RetryRefused, match=r"not of this plan.*elsewhere"):
        plan_retry(CHAIN, records, completed=False)


@pytest.mark.parametrize(
    ("name", "why"),
    [("nope", "no step"), ("scan.0.x", "body step"), ("cleanup", "finally step")],
)
def test_from_must_name_a_main_step(name, why):
    spec = plan(*CHAIN.dump()["steps"], **{"finally": [{"id": "cleanup", "shell": "true"}]})
    with pytest.raises(RetryRefused, match=why):
        plan_retry(spec, (), completed=False, from_step=name)


def test_finally_steps_always_run_again_and_their_old_records_are_dropped():
    spec = plan(*CHAIN.dump()["steps"], **{"finally": [{"id": "cleanup", "shell": "true"}]})
    first, dispatched = drive(Run("p", spec), fails("b"))
    assert "cleanup" in dispatched and "cleanup" in [s.step_id for s in first.steps]
    r = plan_retry(spec, first.steps, completed=False)
    assert all(s.step_id != "cleanup" for s in r.facts.settled)
    report, again = drive(Run.restore("p", spec, r.facts), fails())
    assert sorted(again) == ["b", "c", "cleanup"] and report.completed
    assert report.steps[-1].step_id == "cleanup"


def test_a_map_reruns_whole_when_one_of_its_items_failed_and_is_kept_with_its_items_otherwise():
    spec = plan(
        {"id": "a", "shell": "true"},
        {
            "id": "each",
            "map": {"over": [1, 2, 3], "do": {"shell": "echo {{item}}", "onError": "continue"}},
        },
        {"id": "last", "shell": "true", "dependsOn": ["each"]},
        {"id": "boom", "shell": "true", "dependsOn": ["last"]},
    )
    first, _ = drive(Run("p", spec), fails("each.1.call", "boom"))
    body = [s for s in first.steps if s.step_id.startswith("each.")]
    each = next(s for s in first.steps if s.step_id == "each")
    r = plan_retry(spec, first.steps, completed=first.completed)
    # the item's failure was continued past: the map succeeded, and still runs again whole
    assert each.status == "success" and any(s.status == "failed" for s in body)
    assert r.rerun == ("each", "last", "boom")
    assert all(not s.step_id.startswith("each") for s in r.facts.settled)
    # all items succeeded: the map and its item records are kept
    first2, _ = drive(Run("p", spec), fails("boom"))
    r2 = plan_retry(spec, first2.steps, completed=first2.completed)
    assert r2.rerun == ("boom",)
    assert [s.step_id for s in r2.facts.settled] == [
        s.step_id for s in first2.steps if s.step_id != "boom"
    ]
    report, again = drive(Run.restore("p", spec, r2.facts), fails())
    assert again == ["boom"] and report.completed


def test_retried_attempts_start_again_at_one_and_kept_records_keep_their_attempts():
    spec = plan(
        {"id": "a", "shell": "true", "retries": 1},
        {"id": "b", "shell": "true", "retries": 1, "dependsOn": ["a"]},
    )
    first, _ = drive(Run("p", spec), lambda sid, n: "failed" if sid == "b" or n == 1 else "success")
    a = next(s for s in first.steps if s.step_id == "a")
    assert a.attempts == 2
    report, dispatched = retried(spec, first)
    assert dispatched == ["b"]
    assert {s.step_id: s.attempts for s in report.steps} == {"a": 2, "b": 1}


def test_the_spec_digest_ignores_spelled_out_defaults_and_sees_a_changed_step():
    same = plan({"id": "a", "shell": "true", "onError": "fail", "retries": 0})
    assert spec_digest(plan({"id": "a", "shell": "true"})) == spec_digest(same)
    assert spec_digest(plan({"id": "a", "shell": "false"})) != spec_digest(same)


ASK = {
    "prompt": "deploy?",
    "outputSchema": {"type": "object", "properties": {"ok": {"type": "string"}}},
}
APPROVED = plan(
    {"id": "approve", "ask": ASK},
    {"id": "deploy", "shell": "true", "dependsOn": ["approve"]},
    {"id": "verify", "shell": "true", "dependsOn": ["deploy"]},
    {"id": "side", "shell": "true"},
)


def _succeeded(*ids: str) -> tuple[StepRecord, ...]:
    return tuple(StepRecord(sid, "success", {"ok": "yes"}, None, 1, 0.0, 1.0) for sid in ids)


def test_an_answer_never_carries_over_to_a_retry_with_from():
    records = _succeeded("approve", "deploy", "verify", "side")
    r = plan_retry(APPROVED, records, completed=True, from_step="deploy")
    assert r.rerun == ("approve", "deploy", "verify") and r.kept == ("side",)
    assert [s.step_id for s in r.facts.settled] == ["side"]  # no answer among the kept facts


def test_a_retry_of_a_failure_after_an_answer_asks_again():
    records = (
        *_succeeded("approve", "deploy", "side"),
        StepRecord("verify", "failed", None, "boom", 1, 0.0, 1.0),
    )
    r = plan_retry(APPROVED, records, completed=False)
    assert r.rerun == ("approve", "deploy", "verify") and r.kept == ("side",)


def test_a_control_step_with_an_ask_in_its_body_runs_again_whole():
    spec = plan(
        {
            "id": "d",
            "decide": {
                "if": {"value": 1, "op": "eq", "to": 2},
                "then": {"tool": "notes"},
                "else": [{"id": "q", "ask": ASK}],
            },
        },
        {
            "id": "m",
            "decide": {
                "if": {"value": 1, "op": "eq", "to": 1},
                "then": {"tool": "notes", "input": {"id": "data", "ask": "not a step"}},
            },
        },
        {"id": "boom", "shell": "true"},
    )
    records = (
        *_succeeded("d", "d.else.q", "m", "m.then.call"),
        StepRecord("boom", "failed", None, "boom", 1, 0.0, 1.0),
    )
    r = plan_retry(spec, records, completed=False)
    assert r.rerun == ("d", "boom") and r.kept == ("m",)


# -- capsule steps whose child plan asks (an approval given in another Capsule) ----------------

GATE = helpers.capsule(plan={"steps": [{"id": "approve", "ask": ASK}]})
QUIET = helpers.capsule(plan={"steps": [{"id": "work", "shell": "true"}]})
GATED = plan(
    {"id": "approval", "capsule": "gate", "input": "ship it?"},
    {"id": "deploy", "shell": "true", "dependsOn": ["approval"]},
    {"id": "build", "capsule": "quiet", "input": "build"},
)


def test_a_capsule_step_whose_child_plan_asks_runs_again_and_one_that_does_not_is_kept():
    records = _succeeded("approval", "deploy", "build")
    capsules = helpers.resolver(gate=GATE, quiet=QUIET)
    r = plan_retry(GATED, records, completed=True, from_step="deploy", capsules=capsules)
    assert r.rerun == ("approval", "deploy") and r.kept == ("build",)


def test_an_ask_further_down_or_in_a_body_or_an_unknown_capsule_runs_again():
    via = helpers.capsule(
        plan={"steps": [{"id": "m", "map": {"over": [1], "do": {"capsule": "gate"}}}]}
    )
    looped = helpers.capsule(plan={"steps": [{"id": "x", "capsule": "looped"}]})  # a cycle
    spec = plan(
        {"id": "deep", "capsule": "via"},
        {
            "id": "body",
            "decide": {"if": {"value": 1, "op": "eq", "to": 1}, "then": {"capsule": "gate"}},
        },
        {"id": "gone", "capsule": "nowhere"},
        {"id": "loop", "capsule": "looped"},
        {"id": "last", "shell": "true"},
    )
    records = _succeeded("deep", "body", "gone", "loop", "last")
    capsules = helpers.resolver(gate=GATE, via=via, looped=looped)
    r = plan_retry(spec, records, completed=True, from_step="last", capsules=capsules)
    assert r.rerun == ("deep", "body", "gone", "last") and r.kept == ("loop",)
    # without the Capsules (an executor that cannot read them) every capsule step runs again
    r = plan_retry(spec, records, completed=True, from_step="last")
    assert r.kept == ()
