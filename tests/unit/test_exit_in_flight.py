"""An `exit` ends a plan as the language doc says: nothing new is dispatched, steps in flight
finish. A map or reduce in flight finishes the items it started, starts no new one, and is
recorded skipped (the exit ended the plan, not it); `run --local` prints the exit's message and
the plan's output."""

from __future__ import annotations

import json

import pytest

from planops.cli import main as cli
from planops.engine import Run

from .helpers import EXAMPLE_CAPSULE, plan

REDUCE_AND_EXIT = plan(
    {
        "id": "sum",
        "reduce": {"over": [1, 2, 3], "initial": 0, "do": {"shell": "echo {{item}}"}},
    },
    {"id": "gate", "shell": "true"},
    {
        "id": "stop",
        "dependsOn": ["gate"],
        "exit": {"status": "error", "message": "quota exceeded", "output": {"why": "quota"}},
    },
)


def test_a_reduce_in_flight_when_an_exit_fires_finishes_its_item_and_is_not_blamed():
    run = Run("p", REDUCE_AND_EXIT)
    assert sorted(d.step.id for d in run.decide(0).dispatch) == ["gate", "sum.0.call"]
    run.finish_attempt("gate", 1, "success", "", None, 1)
    d = run.decide(1)  # the exit fires while the reduce's first item runs
    assert not d.dispatch and not d.finished
    assert "sum" in run.unsettled()
    run.finish_attempt("sum.0.call", 1, "success", "1\n", None, 2)
    d = run.decide(2)
    assert not d.dispatch and d.finished  # no second item started
    report = run.report()
    records = {s.step_id: s for s in report.steps}
    assert records["sum.0.call"].status == "success"  # the item in flight finished
    assert records["sum"].status == "skipped"
    assert "1 of 3 items done: exit step 'stop' ended the plan" in (records["sum"].error or "")
    assert report.failed_step is None
    assert report.exit is not None and report.exit.message == "quota exceeded"
    assert not report.completed and report.output == {"why": "quota"}


def test_run_local_text_says_which_exit_ended_the_plan_with_its_message_and_output(
    tmp_path, capsys: pytest.CaptureFixture[str]
):
    f = tmp_path / "p.yaml"
    f.write_text(
        json.dumps(
            {
                "id": "ctrl",
                "steps": [
                    {
                        "id": "stop",
                        "exit": {
                            "status": "error",
                            "message": "quota exceeded",
                            "output": {"n": 1},
                        },
                    }
                ],
            }
        )
    )
    rc = cli.main(["run", "--local", str(f), "--capsule", EXAMPLE_CAPSULE, "-q"])
    out = capsys.readouterr().out
    assert rc == 4
    assert "plan ctrl: ended by exit step 'stop' (error): quota exceeded (1 step settled)" in out
    assert 'output: {"n": 1}' in out


def test_run_local_text_prints_a_completed_plans_output_and_counts_steps_in_the_plural(
    tmp_path, capsys: pytest.CaptureFixture[str]
):
    f = tmp_path / "p.yaml"
    f.write_text(
        json.dumps(
            {
                "id": "two",
                "steps": [{"id": "a", "shell": "echo hi"}, {"id": "b", "shell": "echo ho"}],
                "output": {"said": "{{a.output}}"},
            }
        )
    )
    rc = cli.main(["run", "--local", str(f), "--capsule", EXAMPLE_CAPSULE, "-q"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "plan two: completed (2 steps settled)" in out
    assert 'output: {"said": "hi"}' in out
