"""`finally` steps after a stop from outside, in the engine (the rule both executors call):
past activeDeadlineSeconds, and after a cancel that asks for them, the main steps in flight are
stopped and the finally steps run, within a budget of their own (finallyTimeoutSeconds) that
bounds each attempt and stops those still running when it ends. A plain cancel runs none and
stops those running. A restored run decides as the live one did."""

from __future__ import annotations

import json

import pytest

from planops.engine import AttemptFact, Facts, Run, finally_steps
from planops.engine import dispatch as rules
from planops.engine.report import Halt

from .helpers import capsule, plan

NOTIFY = {
    "id": "notify",
    "tool": "notes",
    "input": {"outcome": "$plan.status", "how": "{{plan.json}}"},
}


def ids(decision):
    return [d.step.id for d in decision.dispatch]


def deadline_spec(**spec):
    return plan(
        {"id": "build", "shell": "sleep 100"},
        {"id": "ship", "shell": "true", "dependsOn": ["build"]},
        activeDeadlineSeconds=30,
        **{"finally": spec.pop("final", [NOTIFY])},
        **spec,
    )


def test_past_the_deadline_the_main_steps_stop_and_the_finally_steps_run():
    spec = deadline_spec()
    run = Run("p", spec)
    assert ids(run.decide(0.0)) == ["build"]
    assert finally_steps.past_deadline(spec, 0.0, 29.9) is None
    halt = finally_steps.past_deadline(spec, 0.0, 31.0)
    assert halt is not None
    assert run.halt(halt, 31.0) == [("build", 1)]  # the executor stops it
    decision = run.decide(31.0)
    assert [r.step_id for r in decision.settled] == ["build"] and not decision.finished
    (notify,) = decision.dispatch
    assert notify.input["outcome"] == "failed"
    assert notify.input["how"] == {  # a typed splice: the outcome as JSON
        "completed": False,
        "failedStep": None,
        "stopped": "DeadlineExceeded",
    }
    assert notify.deadline == 30.0 + finally_steps.FINALLY_TIMEOUT_SECONDS  # from the deadline
    run.finish_attempt("notify", 1, "success", "sent", None, 40.0)
    assert run.decide(40.0).finished
    report = run.report()
    assert [(r.step_id, r.status) for r in report.steps] == [
        ("build", "failed"),
        ("notify", "success"),
    ]  # ship never ran
    assert report.steps[0].error == (
        "stopped (the plan ran longer than its activeDeadlineSeconds (30s))"
    )
    assert (report.completed, report.failed_step, report.stopped) == (False, None, (halt,))
    assert report.to_json()["stopped"] == [
        {
            "reason": "DeadlineExceeded",
            "message": "the plan ran longer than its activeDeadlineSeconds (30s)",
            "at": "1970-01-01T00:00:30.000Z",
            "steps": "main",
            "runFinally": True,
        }
    ]


def test_the_finally_budget_bounds_each_attempt_and_stops_those_running_at_its_end():
    spec = plan(
        {"id": "work", "shell": "true"},
        finallyTimeoutSeconds=60,
        **{
            "finally": [
                {"id": "clean", "shell": "sleep 100"},
                {"id": "tell", "shell": "true", "dependsOn": ["clean"]},
            ]
        },
    )
    run = Run("p", spec)
    run.decide(0.0)
    run.finish_attempt("work", 1, "success", None, None, 5.0)  # the main steps are over at 5
    decision = run.decide(7.0)
    (clean,) = decision.dispatch
    assert clean.deadline == 65.0 and decision.wake_at == 65.0
    cap = capsule()
    assert rules.attempt_timeout(clean, cap, rules.Policy(), 7.0) == 58  # not its 3600 s
    assert rules.attempt_timeout(clean, cap, rules.Policy(), 64.5) == 1  # never 0
    assert run.decide(64.0).stop == ()
    ended = run.decide(65.0)
    assert ended.stop == (("clean", 1),) and ended.finished and ended.dispatch == ()
    (record,) = ended.settled
    assert (record.step_id, record.status) == ("clean", "failed")
    assert (
        record.error
        == "stopped (the finally steps ran longer than their finallyTimeoutSeconds (60s))"
    )
    report = run.report()
    assert [r.step_id for r in report.steps] == ["work", "clean"]  # tell never started
    assert (report.completed, report.failed_step) == (False, None)
    (budget,) = report.stopped
    assert (budget.reason, budget.steps, budget.at) == ("DeadlineExceeded", "finally", 65.0)


def test_the_default_budget_and_the_plans_own():
    assert finally_steps.budget_seconds(plan()) == 600
    assert finally_steps.budget_seconds(plan(finallyTimeoutSeconds=5)) == 5


def test_a_plain_cancel_runs_no_finally_step():
    run = Run("p", deadline_spec())
    run.decide(0.0)
    cancel = finally_steps.cancelled("by alice", 3.0, run_finally=False)
    assert run.halt(cancel, 3.0) == [("build", 1)]
    decision = run.decide(3.0)
    assert decision.finished and decision.dispatch == ()
    report = run.report()
    assert [r.error for r in report.steps] == ["cancelled (by alice)"]
    assert report.stopped == (cancel,)


def test_a_plain_cancel_stops_the_finally_steps_running():
    spec = deadline_spec(final=[{"id": "clean", "shell": "sleep 100"}])
    run = Run("p", spec)
    run.decide(0.0)
    run.finish_attempt("build", 1, "failed", None, "exit code 1", 2.0)
    assert ids(run.decide(2.0)) == ["clean"]  # after the failure, as always
    cancel = finally_steps.cancelled("enough", 4.0, run_finally=False)
    assert run.halt(cancel, 4.0) == [("clean", 1)]
    decision = run.decide(4.0)
    assert decision.finished and [r.error for r in decision.settled] == ["cancelled (enough)"]
    report = run.report()
    assert (report.completed, report.failed_step) == (False, "build")
    assert [(h.reason, h.steps) for h in report.stopped] == [("Cancelled", "finally")]


def test_a_cancel_that_asks_for_them_runs_the_finally_steps():
    run = Run("p", deadline_spec())
    run.decide(0.0)
    cancel = finally_steps.cancelled("tidy up", 3.0, run_finally=True)
    run.halt(cancel, 3.0)
    (notify,) = run.decide(3.0).dispatch
    assert notify.input["how"]["stopped"] == "Cancelled"
    assert notify.deadline == 603.0


def test_a_deadline_once_the_main_steps_are_over_changes_nothing():
    spec = deadline_spec(final=[{"id": "clean", "shell": "sleep 100"}])
    run = Run("p", spec)
    run.decide(0.0)
    run.finish_attempt("build", 1, "success", None, None, 10.0)
    run.decide(10.0)
    run.finish_attempt("ship", 1, "success", None, None, 20.0)
    assert ids(run.decide(20.0)) == ["clean"]
    late = finally_steps.past_deadline(spec, 0.0, 40.0)
    assert late is not None and run.halt(late, 40.0) == []  # the finally steps have their own
    run.finish_attempt("clean", 1, "success", None, None, 50.0)
    assert run.decide(50.0).finished
    assert run.report().completed and run.report().stopped == ()


def test_a_stop_also_stops_a_running_map_and_its_items():
    spec = plan(
        {"id": "each", "map": {"over": [1, 2, 3], "concurrency": 2, "do": {"shell": "sleep 9"}}},
        activeDeadlineSeconds=10,
        **{"finally": [{"id": "clean", "shell": "true"}]},
    )
    run = Run("p", spec)
    assert ids(run.decide(0.0)) == ["each.0.call", "each.1.call"]
    halt = finally_steps.past_deadline(spec, 0.0, 10.0)
    assert halt is not None
    assert run.halt(halt, 10.0) == [("each.0.call", 1), ("each.1.call", 1)]
    decision = run.decide(10.0)
    assert ids(decision) == ["clean"]
    assert [(r.step_id, r.status, r.error) for r in decision.settled] == [
        ("each.0.call", "failed", halt.error),
        ("each.1.call", "failed", halt.error),
        ("each", "failed", halt.error),
    ]
    assert run.report().failed_step is None


def test_a_restored_stopped_run_decides_and_reports_as_the_live_one():
    spec = deadline_spec(final=[NOTIFY, {"id": "clean", "shell": "sleep 100"}])
    live = Run("p", spec)
    live.decide(0.0)
    halt = finally_steps.past_deadline(spec, 0.0, 31.0)
    assert halt is not None
    live.halt(halt, 31.0)
    first = live.decide(31.0)
    assert ids(first) == ["notify", "clean"]
    live.finish_attempt("notify", 1, "success", "sent", None, 33.0)
    live.decide(33.0)
    # what the reconciler reads back: the records, the attempts in flight, the stop it wrote
    facts = Facts(tuple(live.settled), (AttemptFact("clean", 1, 31.0),))
    restored = Run.restore("p", spec, facts)
    held = Halt.from_json(halt.to_json())
    assert held is not None
    assert restored.halt(held, held.at) == []  # nothing more to stop
    assert restored.decide(34.0) == live.decide(34.0)
    assert restored.report() == live.report()
    assert restored.wake_at() == live.wake_at() == 630.0
    for run in (live, restored):  # the budget ends alike
        assert run.decide(630.0).stop == (("clean", 1),)
    assert restored.report() == live.report()


def test_a_stop_without_finally_steps_ends_the_run_at_once():
    spec = plan({"id": "a", "shell": "sleep 100"}, activeDeadlineSeconds=5)
    run = Run("p", spec)
    run.decide(0.0)
    halt = finally_steps.past_deadline(spec, 0.0, 6.0)
    assert halt is not None
    run.halt(halt, 6.0)
    assert run.decide(6.0).finished


# -- the local runner: the same rule, processes killed ----------------------------------------


def test_run_local_stops_a_plan_at_its_deadline_runs_its_finally_steps_and_exits_1(tmp_path):
    import time  # noqa: PLC0415

    from .helpers import run_local_cli  # noqa: PLC0415

    plan_file = tmp_path / "late.yaml"
    plan_file.write_text(
        json.dumps(
            {
                "apiVersion": "planops.dev/v1alpha1",
                "kind": "Plan",
                "metadata": {"name": "late"},
                "spec": {
                    "activeDeadlineSeconds": 1,
                    "steps": [
                        {"id": "slow", "shell": "sleep 30"},
                        {"id": "never", "shell": "echo never", "dependsOn": ["slow"]},
                    ],
                    "finally": [
                        {"id": "tell", "shell": "echo {{plan.status}} {{plan.json.stopped}}"}
                    ],
                },
            }
        )
    )
    began = time.monotonic()
    r = run_local_cli(plan_file)
    assert time.monotonic() - began < 20  # not the 30 s of the step it stopped
    assert r.returncode == 1, r.stderr  # Failed, as the cluster's DeadlineExceeded
    report = json.loads(r.stdout)
    steps = {s["stepId"]: s for s in report["steps"]}
    assert set(steps) == {"slow", "tell"}
    assert (
        steps["slow"]["error"]
        == "stopped (the plan ran longer than its activeDeadlineSeconds (1s))"
    )
    assert steps["tell"]["output"] == "failed DeadlineExceeded"
    assert (report["completed"], report["failedStep"]) == (False, None)
    assert [h["reason"] for h in report["stopped"]] == ["DeadlineExceeded"]


def test_the_local_runner_kills_finally_steps_past_their_budget(tmp_path):
    import asyncio  # noqa: PLC0415
    import os  # noqa: PLC0415

    from planops.runners.local import LocalRunner  # noqa: PLC0415

    pidfile = tmp_path / "pid"
    spec = plan(
        {"id": "work", "shell": "true"},
        finallyTimeoutSeconds=1,
        **{
            "finally": [
                {"id": "clean", "shell": f"sh -c 'echo $$ > {pidfile}; exec sleep 30'"},
                {"id": "after", "shell": "true", "dependsOn": ["clean"]},
            ]
        },
    )
    records: list[dict] = []
    runner = LocalRunner({"default": capsule()}, observer=records.append)
    report = asyncio.run(runner.run("p", spec))
    assert [(s.step_id, s.status) for s in report.steps] == [
        ("work", "success"),
        ("clean", "failed"),
    ]
    assert report.steps[1].error == (
        "stopped (the finally steps ran longer than their finallyTimeoutSeconds (1s))"
    )
    assert not report.completed and [h.steps for h in report.stopped] == ["finally"]
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):  # killed and reaped
        os.kill(pid, 0)
    notices = [r["message"] for r in records if r["event"] == "notice"]
    assert notices == [
        "stopped (the finally steps ran longer than their finallyTimeoutSeconds (1s))"
    ]
