"""`finally` steps in the decider: they start once the main steps are over, whatever their
outcome, read every step's result and the outcome as `plan`, follow the main steps in the
report, and change `completed` only when one of them fails with onError: fail. A restored run
(the reconciler's form) decides the same as a live one."""

from __future__ import annotations

import json
from typing import Literal

from planops.engine import Facts, Run, decide
from planops.engine.facts import AttemptFact

from .helpers import plan


def ids(decision):
    return [d.step.id for d in decision.dispatch]


def release(*main, **spec):
    return plan(
        *main,
        finally_=spec.pop(
            "final",
            [
                {
                    "id": "notify",
                    "tool": "notes",
                    "input": {"outcome": "$plan.status", "deploy": "$deploy.status"},
                },
            ],
        ),
        **spec,
    )


def drive(
    run: Run,
    results: dict[str, tuple[Literal["success", "failed"], str | None]],
    now: float = 0.0,
):
    """Decide and settle every dispatch with `results` (default success) until finished;
    returns the dispatched (step id, resolved input) in order."""
    seen = []
    for _ in range(50):
        decision = run.decide(now)
        if decision.finished:
            return seen
        for d in decision.dispatch:
            seen.append((d.step.id, d.input))
            status, error = results.get(d.step.id, ("success", None))
            run.finish_attempt(d.step.id, d.attempt, status, f"{d.step.id} out", error, now)
        now += 1
    raise AssertionError("did not finish")


def test_finally_steps_wait_for_every_main_step_then_run():
    run = Run("p", release({"id": "build", "shell": "true"}, {"id": "deploy", "shell": "true"}))
    first = run.decide(0)
    assert ids(first) == ["build", "deploy"] and not first.finished
    run.finish_attempt("build", 1, "success", "b", None, 1)
    assert ids(run.decide(1)) == []  # deploy still runs
    run.finish_attempt("deploy", 1, "success", "d", None, 2)
    last = run.decide(2)
    assert ids(last) == ["notify"] and not last.finished
    assert last.dispatch[0].input == {"outcome": "success", "deploy": "success"}
    run.finish_attempt("notify", 1, "success", "sent", None, 3)
    done = run.decide(3)
    assert done.finished and [r.step_id for r in done.settled] == ["notify"]
    report = run.report()
    assert report.completed and [s.step_id for s in report.steps] == ["build", "deploy", "notify"]


def test_finally_steps_run_after_a_failure_that_stopped_the_plan_and_read_the_outcome():
    spec = release(
        {"id": "build", "shell": "true"},
        {"id": "deploy", "shell": "false", "dependsOn": ["build"]},
        {"id": "smoke", "shell": "true", "dependsOn": ["deploy"]},
        final=[
            {
                "id": "notify",
                "tool": "notes",
                "input": {"outcome": "$plan.status", "why": "{{plan.json.failedStep}}"},
            },
            {"id": "only-on-failure", "shell": "true", "if": "$plan.status == 'failed'"},
            {"id": "only-on-success", "shell": "true", "if": "$plan.status == 'success'"},
        ],
    )
    run = Run("p", spec)
    seen = drive(run, {"deploy": ("failed", "exit code 1")})
    assert ("notify", {"outcome": "failed", "why": "deploy"}) in seen
    report = run.report()
    records = [(s.step_id, s.status) for s in report.steps]
    assert records[:2] == [("build", "success"), ("deploy", "failed")]  # the main steps first
    assert sorted(records[2:]) == [
        ("notify", "success"),
        ("only-on-failure", "success"),
        ("only-on-success", "skipped"),
    ]
    assert (report.completed, report.failed_step) == (False, "deploy")  # smoke never ran


def test_finally_steps_run_after_a_fired_exit():
    spec = release(
        {"id": "deploy", "exit": {"status": "success", "message": "nothing to do"}},
        final=[{"id": "notify", "shell": "true", "if": "$plan.status == 'success'"}],
    )
    run = Run("p", spec)
    seen = drive(run, {})
    assert [s for s, _ in seen] == ["notify"]
    assert run.report().completed and run.report().exit is not None


def test_a_failed_finally_step_fails_the_plan_unless_its_on_error_says_otherwise():
    for on_error, completed, failed in (("fail", False, "notify"), ("continue", True, None)):
        spec = release(
            {"id": "deploy", "shell": "true"},
            final=[{"id": "notify", "shell": "false", "onError": on_error}],
        )
        run = Run("p", spec)
        drive(run, {"notify": ("failed", "exit code 1")})
        report = run.report()
        assert (report.completed, report.failed_step) == (completed, failed), on_error


def test_the_main_steps_failure_stays_the_failed_step_when_a_finally_step_fails_too():
    spec = release(
        {"id": "deploy", "shell": "false"},
        final=[{"id": "notify", "shell": "false"}, {"id": "clean", "shell": "true"}],
    )
    run = Run("p", spec)
    drive(run, {"deploy": ("failed", "x"), "notify": ("failed", "y")})
    assert run.report().failed_step == "deploy"


def test_finally_steps_follow_their_own_dependencies_and_read_main_results_without_one():
    spec = release(
        {"id": "deploy", "shell": "true"},
        final=[
            {"id": "clean", "shell": "true"},
            {
                "id": "notify",
                "tool": "notes",
                "dependsOn": ["clean"],
                "input": {"d": "$deploy.output", "c": "$clean.status"},
            },
        ],
    )
    run = Run("p", spec)
    seen = drive(run, {})
    assert seen[1:] == [("clean", None), ("notify", {"d": "deploy out", "c": "success"})]


def test_a_restored_run_starts_and_continues_the_finally_steps_as_the_live_one():
    spec = release({"id": "deploy", "shell": "false"})
    live = Run("p", spec)
    live.decide(0)
    live.finish_attempt("deploy", 1, "failed", None, "boom", 1)
    decision = live.decide(1)
    assert ids(decision) == ["notify"]
    facts = Facts(tuple(live.settled), (AttemptFact("notify", 1, 1.0),))
    restored, again = decide("p", spec, facts, 2)
    assert ids(again) == [] and not again.finished  # notify is in flight, not started twice
    assert restored.in_flight_attempts() == [("notify", 1)]
    assert restored.kind_of("notify") == "tool" and restored.unsettled() == ["notify"]
    restored.finish_attempt("notify", 1, "success", "ok", None, 3)
    final = restored.decide(3)
    assert final.finished and [r.step_id for r in final.settled] == ["notify"]
    report = restored.report()
    assert [s.step_id for s in report.steps] == ["deploy", "notify"]
    assert (report.completed, report.failed_step) == (False, "deploy")
    assert restored.record_count() == 2


def test_a_plan_without_finally_reports_exactly_as_before():
    run = Run("p", plan({"id": "a", "shell": "true"}))
    drive(run, {})
    assert set(run.report().to_json()) == {"planId", "completed", "failedStep", "steps"}
    assert json.dumps(run.report().to_json()["steps"][0]["stepId"]) == '"a"'


# -- the validator -------------------------------------------------------------------------


def refusals(spec):
    from planops.engine import validate  # noqa: PLC0415

    from .helpers import resolver  # noqa: PLC0415

    return [(e.code, e.step, e.path) for e in validate(spec, resolver())]


def test_a_finally_step_reads_main_steps_and_the_outcome_without_depending_on_them():
    spec = release(
        {"id": "deploy", "shell": "true"},
        final=[
            {"id": "clean", "shell": "echo {{deploy.status}} {{plan.status}}"},
            {
                "id": "notify",
                "tool": "notes",
                "dependsOn": ["clean", "deploy"],  # naming a main step is true, not needed
                "if": "$plan.status == 'failed' || $deploy.status != 'success'",
                "input": {"log": "$clean.output", "why": "{{plan.json.failedStep}}"},
            },
        ],
    )
    assert refusals(spec) == []


def test_a_finally_step_reads_an_input_the_schema_alone_declares():
    """`{{input.x}}` and `$input.x` in a finally step are judged against the plan's inputSchema,
    as in a main step (the finally steps' own plan once dropped the schema: refused)."""
    spec = release(
        {"id": "deploy", "shell": "true"},
        inputSchema={"type": "object", "properties": {"who": {"type": "string"}}},
        final=[{"id": "tell", "shell": "echo {{input.who}}", "if": "$input.who != 'nobody'"}],
    )
    assert refusals(spec) == []


def test_what_finally_steps_may_not_do_is_refused_before_anything_runs():
    spec = release(
        {"id": "deploy", "shell": "true", "dependsOn": ["notify"]},
        {
            "id": "report",
            "tool": "notes",
            "input": {"x": "$notify.output", "y": "{{notify.output}}"},
        },
        {"id": "plan", "shell": "true"},
        final=[
            {"id": "notify", "shell": "true"},
            {"id": "deploy", "shell": "true"},
            {"id": "stop", "exit": {"status": "error"}},
            {"id": "a", "shell": "echo {{b.output}}"},  # b is no dependency of a
            {"id": "b", "shell": "true", "dependsOn": ["c"]},
            {"id": "c", "shell": "true", "dependsOn": ["b"]},
            {"id": "d", "shell": "nope"},
        ],
    )
    assert sorted(refusals(spec)) == sorted(
        [
            ("finally", "deploy", "steps[0].dependsOn[0]"),
            ("finally", "report", "steps[1].input.x"),
            ("template", "report", "steps[1].input.y"),
            ("finally", "plan", "steps[2].id"),
            ("duplicate-id", "deploy", "finally[1].id"),
            ("finally", "stop", "finally[2].exit"),
            ("template", "a", "finally[3].shell"),
            ("cycle", "b", "finally[4].dependsOn"),
            ("shell-not-allowed", "d", "finally[6].shell"),
        ]
    )


def test_finally_steps_count_toward_the_operators_step_limit():
    from planops.engine import Policy, validate  # noqa: PLC0415

    from .helpers import resolver  # noqa: PLC0415

    spec = release({"id": "a", "shell": "true"}, final=[{"id": "b", "shell": "true"}])
    assert [e.code for e in validate(spec, resolver(), Policy(max_steps=1))] == ["limits"]


def test_a_finally_steps_values_are_bounded_like_a_main_steps():
    deep: object = "x"
    for _ in range(70):
        deep = [deep]
    spec = release(
        {"id": "a", "shell": "true"}, final=[{"id": "b", "tool": "notes", "input": {"v": deep}}]
    )
    assert [(c, p) for c, _, p in refusals(spec)] == [("limits", "finally[0].input")]


# -- the local runner ------------------------------------------------------------------------


def test_the_release_example_runs_its_finally_steps_after_the_failed_deploy_locally():
    from .helpers import EXAMPLE_CAPSULE, run_local_cli  # noqa: PLC0415

    example = EXAMPLE_CAPSULE.replace("capsule.yaml", "release-finally.yaml")
    r = run_local_cli(example)
    assert r.returncode == 1, r.stderr  # the plan did not complete
    report = json.loads(r.stdout)
    assert (report["completed"], report["failedStep"]) == (False, "deploy")
    steps = {s["stepId"]: s for s in report["steps"]}
    assert [s["stepId"] for s in report["steps"]][:2] == ["build", "deploy"]
    assert set(steps) == {"build", "deploy", "notify", "cleanup"}  # smoke never ran
    # the notes tool echoes its JSON input (sh's echo turns the error's \n into a line break)
    note = json.loads(steps["notify"]["output"].removeprefix("note - "), strict=False)
    assert (note["outcome"], note["failedStep"], note["deploy"]) == ("failed", "deploy", "failed")
    assert "no-such-release" in note["error"]
    assert steps["cleanup"]["output"] == "removing the preview environment"


def test_the_local_runner_traces_finally_steps_like_any_step():
    import asyncio  # noqa: PLC0415

    from planops.runners.local import LocalRunner  # noqa: PLC0415

    from .helpers import capsule  # noqa: PLC0415

    records: list[dict] = []
    runner = LocalRunner({"default": capsule()}, observer=records.append)
    spec = release(
        {"id": "deploy", "shell": "false", "retries": 1},
        final=[{"id": "notify", "shell": "echo done", "retries": 1}],
    )
    report = asyncio.run(runner.run("p", spec))
    assert [(s.step_id, s.status, s.attempts) for s in report.steps] == [
        ("deploy", "failed", 2),
        ("notify", "success", 1),
    ]
    started = [r["stepId"] for r in records if r["event"] == "plan_step_start"]
    assert started == ["deploy", "deploy", "notify"]
    assert [r["event"] for r in records][-2:] == ["plan_step", "plan_end"]


def test_a_run_restored_after_its_finally_steps_settled_reports_them_and_is_finished():
    spec = release(
        {"id": "deploy", "shell": "true"},
        final=[{"id": "clean", "shell": "true"}, {"id": "notify", "shell": "false"}],
    )
    live = Run("p", spec)
    drive(live, {"notify": ("failed", "exit code 1")})
    restored, decision = decide("p", spec, Facts(tuple(live.settled), ()), 10)
    assert decision.finished and decision.dispatch == ()
    assert restored.report() == live.report()
    assert (restored.report().completed, restored.report().failed_step) == (False, "notify")
