"""Seed 2 bodies: decide, map, reduce (engine, restore, validator, local runner) and ask."""

from __future__ import annotations

import asyncio
import json
import os
import pty
import select
import subprocess
import sys
import time

import pytest
import yaml

from planops.engine import Facts, Run, validate
from planops.engine.facts import AttemptFact
from planops.runners.local import LocalRunner

from .helpers import EXAMPLE_CAPSULE, capsule, plan, resolver, run_local_cli


def codes(spec):
    return [(e.code, e.path) for e in validate(spec, resolver())]


def ids(decision):
    return [d.step.id for d in decision.dispatch]


def run_local(spec, **kw):
    runner = LocalRunner({"default": capsule()}, **kw)
    return asyncio.run(runner.run("p", spec))


def results(report):
    return {s.step_id: s for s in report.steps}


# -- map ------------------------------------------------------------------------------------------

MAP = plan(
    {
        "id": "scan",
        "map": {
            "over": "{{input.hosts}}",
            "concurrency": 2,
            "do": [
                {"id": "probe", "shell": "echo {{item}}-{{index}}-of-{{length}}"},
                {"id": "score", "shell": "echo {{probe.output}}"},
            ],
        },
    },
    {"id": "after", "dependsOn": ["scan"], "shell": "echo {{scan.count}}"},
    input={"hosts": ["a", "b", "c"]},
    output={"results": "{{scan.results}}"},
)


def test_map_runs_a_body_per_item_with_concurrency_and_results_in_input_order():
    run = Run("p", MAP)
    d = run.decide(0)
    assert ids(d) == ["scan.0.probe", "scan.1.probe"]  # concurrency 2: two items in flight
    assert d.dispatch[0].words == ["echo", "a-0-of-3"]
    run.finish_attempt("scan.1.probe", 1, "success", "b-1-of-3\n", None, 1)
    assert ids(run.decide(1)) == ["scan.1.score"]
    # values as an executor gives them: one trailing line end already dropped (outputs)
    run.finish_attempt("scan.1.score", 1, "success", "b-1-of-3\n", None, 2)
    assert ids(run.decide(2)) == ["scan.2.probe"]  # item 1 done: item 2 may start
    for sid, out in [("scan.0.probe", "a\n"), ("scan.2.probe", "c\n")]:
        run.finish_attempt(sid, 1, "success", out, None, 3)
    assert sorted(ids(run.decide(3))) == ["scan.0.score", "scan.2.score"]
    run.finish_attempt("scan.0.score", 1, "success", '{"n": 0}', None, 4)
    run.finish_attempt("scan.2.score", 1, "success", "c", None, 4)
    d = run.decide(4)
    assert ids(d) == ["after"]
    assert d.dispatch[0].words == ["echo", "3"]  # a control result read directly
    run.finish_attempt("after", 1, "success", "3\n", None, 5)
    run.decide(5)
    report = run.report()
    assert report.completed
    scan = json.loads(results(report)["scan"].output)
    assert scan == {"count": 3, "results": [{"n": 0}, "b-1-of-3\n", "c"]}
    assert report.output == {"results": [{"n": 0}, "b-1-of-3\n", "c"]}
    assert "scan.1.score" in results(report)  # body steps are reported, qualified


def test_a_failing_item_fails_the_map_naming_it_and_no_new_item_starts():
    spec = plan(
        {"id": "m", "map": {"over": [1, 2, 3], "do": {"shell": "echo {{item}}"}}},
        {"id": "z", "dependsOn": ["m"], "shell": "true"},
    )
    run = Run("p", spec)
    assert ids(run.decide(0)) == ["m.0.call"]
    run.finish_attempt("m.0.call", 1, "failed", None, "exit code 1", 1)
    assert ids(run.decide(1)) == []
    rec = results(run.report())["m"]
    assert rec.status == "failed" and "item 0 failed: step m.0.call failed" in (rec.error or "")
    assert "m.1.call" not in results(run.report()) and run.finished


def test_reduce_folds_with_the_accumulator_one_item_at_a_time():
    spec = plan(
        {
            "id": "sum",
            "reduce": {
                "over": [1, 2, 3],
                "initial": 10,
                "do": {"tool": "notes", "input": {"acc": "{{accumulator}}", "x": "{{item}}"}},
            },
        },
    )
    run = Run("p", spec)
    acc = 10
    for n in (1, 2, 3):
        d = run.decide(n)
        assert ids(d) == [f"sum.{n - 1}.call"]
        assert d.dispatch[0].input == {"acc": acc, "x": n}  # typed splices stay numbers
        acc += n
        run.finish_attempt(f"sum.{n - 1}.call", 1, "success", json.dumps(acc), None, n)
    run.decide(9)
    assert json.loads(results(run.report())["sum"].output) == {"count": 3, "result": 16}


def test_decide_runs_the_branch_the_gate_picks_and_exit_in_a_branch_ends_the_plan():
    spec = plan(
        {
            "id": "route",
            "decide": {
                "if": {"value": "{{input.n}}", "op": "gt", "to": 5},
                "then": [
                    {"id": "big", "shell": "echo big"},
                    {"id": "stop", "exit": {"status": "error", "message": "too big"}},
                ],
                "else": {"shell": "echo small"},
            },
        },
        {"id": "next", "dependsOn": ["route"], "shell": "true"},
        input={"n": 9},
    )
    run = Run("p", spec)
    assert ids(run.decide(0)) == ["route.then.big"]
    run.finish_attempt("route.then.big", 1, "success", "big\n", None, 1)
    d = run.decide(1)
    assert ids(d) == [] and d.finished
    report = run.report()
    assert report.exit is not None and report.exit.step_id == "route.then.stop"
    assert report.exit.status == "error" and not report.completed
    route = json.loads(results(report)["route"].output)
    assert route["branch"] == "then" and route["verdict"] is True
    small = Run("p", spec.model_copy(update={"input": {"n": 1}}))
    assert ids(small.decide(0)) == ["route.else.call"]


def test_decide_without_else_settles_with_a_null_result():
    run = Run(
        "p",
        plan(
            {
                "id": "d",
                "decide": {"if": {"value": 1, "op": "eq", "to": 2}, "then": {"shell": "true"}},
            }
        ),
    )
    run.decide(0)
    rec = results(run.report())["d"]
    assert json.loads(rec.output or "") == {
        "branch": "else",
        "verdict": False,
        "reason": None,
        "result": None,
    }


def test_over_that_is_not_an_array_fails_the_step_with_the_reason():
    run = Run(
        "p",
        plan(
            {"id": "m", "map": {"over": "{{input.x}}", "do": {"shell": "true"}}},
            input={"x": "nope"},
        ),
    )
    run.decide(0)
    rec = results(run.report())["m"]
    assert rec.status == "failed" and "must render to an array" in (rec.error or "")


def test_too_many_body_records_fail_the_map_before_any_item_starts():
    run = Run(
        "p",
        plan(
            {
                "id": "m",
                "map": {
                    "over": list(range(100_000)),
                    "do": [{"id": "a", "shell": "true"}, {"id": "b", "shell": "true"}],
                },
            }
        ),
    )
    assert ids(run.decide(0)) == []  # 200,001 records: one more than a run may record
    assert "at most 200000" in (results(run.report())["m"].error or "")


def test_a_map_over_100000_items_runs_them():
    run = Run(
        "p", plan({"id": "m", "map": {"over": list(range(100_000)), "do": {"shell": "true"}}})
    )
    assert ids(run.decide(0)) == ["m.0.call"]


# -- restoring from facts: what the reconciler does every time ------------------------------------


def facts_of(run):
    return Facts(tuple(run.settled), ())


def test_a_running_map_is_restored_exactly_from_facts():
    live = Run("p", MAP)
    live.decide(0)
    live.finish_attempt("scan.1.probe", 1, "success", "b\n", None, 1)
    live.decide(1)  # scan.1.score in flight; scan.0.probe in flight
    flying = live.in_flight_attempts()
    assert sorted(flying) == [("scan.0.probe", 1), ("scan.1.score", 1)]
    facts = Facts(
        tuple(live.settled),
        tuple(AttemptFact(s, a, 0.5) for s, a in flying),
    )
    again = Run.restore("p", MAP, facts)
    assert sorted(again.in_flight_attempts()) == sorted(flying)
    assert ids(again.decide(2)) == []  # nothing dispatched twice
    # a finished attempt in the facts moves it on exactly as the live run would
    facts2 = Facts(
        facts.settled,
        (
            AttemptFact("scan.0.probe", 1, 0.5, "success", 2.0, "a\n"),
            AttemptFact("scan.1.score", 1, 0.5, "success", 2.0, "B\n"),
        ),
    )
    restored = Run.restore("p", MAP, facts2)
    live.finish_attempt("scan.0.probe", 1, "success", "a\n", None, 2.0)
    live.finish_attempt("scan.1.score", 1, "success", "B\n", None, 2.0)
    assert sorted(ids(restored.decide(3))) == sorted(ids(live.decide(3)))


def test_a_reduce_is_restored_with_its_accumulator():
    spec = plan(
        {
            "id": "r",
            "reduce": {
                "over": [1, 2, 3],
                "initial": 0,
                "do": {"tool": "notes", "input": {"acc": "{{accumulator}}"}},
            },
        }
    )
    live = Run("p", spec)
    live.decide(0)
    live.finish_attempt("r.0.call", 1, "success", "5", None, 1)
    live.decide(1)
    live.finish_attempt("r.1.call", 1, "success", "7", None, 2)
    d = live.decide(2)
    again = Run.restore("p", spec, Facts(tuple(live.settled), (AttemptFact("r.2.call", 1, 2),)))
    assert again.in_flight_attempts() == [("r.2.call", 1)]
    assert d.dispatch[0].input == {"acc": 7}
    again.finish_attempt("r.2.call", 1, "success", "9", None, 3)
    again.decide(3)
    assert json.loads(results(again.report())["r"].output) == {"count": 3, "result": 9}
    assert [s.step_id for s in again.report().steps] == ["r.0.call", "r.1.call", "r.2.call", "r"]


# -- the validator: body rules --------------------------------------------------------------------


def test_body_rules_are_refused_with_paths():
    got = codes(
        plan(
            {"id": "a", "shell": "true"},
            {
                "id": "m",
                "map": {
                    "over": [1],
                    "do": [
                        {"id": "a", "shell": "true"},  # id reused across the plan
                        {
                            "id": "d",
                            "decide": {
                                "if": {"value": 1, "op": "eq", "to": 1},
                                "then": {"shell": "true"},
                            },
                        },
                        {"id": "e", "exit": {"status": "success"}},  # exit only in decide branches
                        {"id": "x", "shell": "nope {{accumulator}}"},  # binary and accumulator
                    ],
                },
            },
            {
                "id": "r",
                "dependsOn": ["a"],
                "reduce": {"over": [1], "do": {"shell": "echo {{m.output}}"}},
            },
            {"id": "dd", "decide": {"if": {"value": 1, "op": "eq"}, "then": 3}},
        )
    )
    assert got == [
        ("duplicate-id", "steps[1].map.do[0].id"),
        ("control", "steps[1].map.do[1].decide"),
        ("control", "steps[1].map.do[2].exit"),
        ("shell-not-allowed", "steps[1].map.do[3].shell"),
        ("template", "steps[1].map.do[3].shell"),
        ("template", "steps[2].reduce.do.shell"),
        ("gate", "steps[3].decide.if.to"),
        ("control", "steps[3].decide.then"),
    ]


def test_body_templates_see_scope_earlier_body_steps_and_the_control_steps_dependencies():
    ok = plan(
        {"id": "list", "shell": "echo"},
        {
            "id": "m",
            "dependsOn": ["list"],
            "map": {
                "over": "{{list.json}}",
                "do": [
                    {"id": "p", "shell": "echo {{item}} {{index}} {{length}} {{list.output}}"},
                    {"id": "q", "shell": "echo {{p.output}} {{input.x}}"},
                ],
            },
        },
        {"id": "s", "dependsOn": ["m"], "shell": "echo {{m.results}}"},
        input={"x": 1},  # {{input.x}} must be declared (test_mistakes_caught.py)
    )
    assert codes(ok) == []
    bad = plan({"id": "s", "shell": "echo {{s2.results}}"}, {"id": "s2", "shell": "true"})
    assert ("template", "steps[0].shell") in codes(bad)  # .results only on control steps


# -- the local runner -----------------------------------------------------------------------------


def test_local_runner_map_reduce_decide_end_to_end():
    spec = plan(
        {
            "id": "scan",
            "map": {"over": ["x", "y"], "concurrency": 2, "do": {"shell": "echo {{item}}"}},
        },
        {
            "id": "total",
            "dependsOn": ["scan"],
            "reduce": {
                "over": "{{scan.results}}",
                "initial": "",
                "do": {
                    "shell": 'python3 -c "import sys; print(sys.argv[1] + sys.argv[2])" '
                    "{{accumulator}} {{item}}"
                },
            },
        },
        {
            "id": "route",
            "dependsOn": ["total"],
            "decide": {
                "if": {"value": "{{total.result}}", "op": "eq", "to": "xy"},
                "then": {"shell": "echo yes"},
                "else": {"shell": "echo no"},
            },
        },
        output={"joined": "{{total.result}}", "branch": "{{route.branch}}"},
    )
    assert codes(spec) == []
    report = run_local(spec)
    assert report.completed, report.to_json()
    assert report.output == {"joined": "xy", "branch": "then"}
    assert results(report)["route.then.call"].output == "yes"


# -- ask ------------------------------------------------------------------------------------------

ASK = {
    "prompt": "Deploy {{input.env}}?",
    "outputSchema": {
        "type": "object",
        "properties": {
            "ok": {"type": "boolean"},
            "n": {"type": "integer"},
            "tier": {"enum": ["gold", "silver"]},
        },
        "required": ["ok"],
    },
}


def ask_file(tmp_path, env, then_shell):
    """A plan file: the ask step `confirm`, then a shell step `go` using its answer (keys kept in
    order: the prompt asks the fields in the schema's order)."""
    f = tmp_path / "p.yaml"
    steps = [
        {"id": "confirm", "ask": ASK},
        {"id": "go", "dependsOn": ["confirm"], "shell": then_shell},
    ]
    f.write_text(
        yaml.safe_dump({"id": "p", "input": {"env": env}, "steps": steps}, sort_keys=False)
    )
    return f


def ask_plan(**ask):
    return plan(
        {"id": "confirm", "ask": {**ASK, **ask}},
        {"id": "go", "dependsOn": ["confirm"], "shell": "echo {{confirm.answer.ok}}"},
        input={"env": "prod"},
    )


def test_ask_grammar_is_checked():
    got = codes(
        plan(
            {
                "id": "a",
                "ask": {
                    "prompt": "",
                    "outputSchema": {"type": "object", "properties": {"x": {"type": "array"}}},
                    "whenUnanswered": "default",
                },
            },
            {
                "id": "b",
                "ask": {
                    "prompt": "q",
                    "output_schema": ASK["outputSchema"],
                    "when_unanswered": "default",
                    "default": {"ok": "yes"},
                },
            },
        )
    )
    assert got == [
        ("control", "steps[0].ask.prompt"),
        ("control", "steps[0].ask.outputSchema.properties.x"),
        ("control", "steps[0].ask.default"),
        ("control", "steps[1].ask.default"),
    ]


def test_ask_answered_on_the_command_line_is_typed_by_the_schema():
    report = run_local(ask_plan(), answers={"confirm": {"ok": "yes", "n": "3", "tier": "gold"}})
    assert report.completed
    result = json.loads(results(report)["confirm"].output)
    assert result == {"answer": {"ok": True, "n": 3, "tier": "gold"}, "answered": True}
    assert results(report)["go"].output == "true"


def test_a_bad_answer_fails_the_step_saying_why():
    report = run_local(ask_plan(), answers={"confirm": {"tier": "bronze", "ok": "true"}})
    err = results(report)["confirm"].error or ""
    assert not report.completed and "bronze" in err


def test_unanswered_ask_fails_or_takes_its_default():
    report = run_local(ask_plan())
    assert "whenUnanswered is fail" in (results(report)["confirm"].error or "")
    report = run_local(ask_plan(whenUnanswered="default", default={"ok": False}))
    assert json.loads(results(report)["confirm"].output) == {
        "answer": {"ok": False},
        "answered": False,
        "reason": "unavailable",
    }


def test_the_asker_gets_the_rendered_prompt_and_a_decline_takes_the_default():
    seen = []

    async def asker(step, spec):
        seen.append((step, spec["prompt"]))

    report = run_local(ask_plan(whenUnanswered="default", default={"ok": True}), asker=asker)
    assert seen == [("confirm", "Deploy prod?")]
    assert json.loads(results(report)["confirm"].output)["reason"] == "declined"


@pytest.mark.skipif(sys.platform != "linux", reason="pseudo-terminals")
def test_the_interactive_prompt_on_a_real_terminal(tmp_path):
    """kubectl-plan run --local on a pseudo-terminal: the prompt appears, a wrong value is asked
    again, the typed answer flows into the next step."""

    f = ask_file(tmp_path, "prod", "echo answer={{confirm.answer.n}}")
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "planops.cli.main",
            "run",
            "--local",
            str(f),
            "--capsule",
            EXAMPLE_CAPSULE,
        ],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        close_fds=True,
    )
    os.close(slave)
    seen = b""

    def expect(text: bytes, timeout: float = 30) -> None:
        nonlocal seen
        end = time.monotonic() + timeout
        while text not in seen:
            assert time.monotonic() < end, seen.decode(errors="replace")
            if select.select([master], [], [], 0.5)[0]:
                try:
                    seen += os.read(master, 4096)
                except OSError:
                    break

    try:
        expect(b"Deploy prod?")
        expect(b"ok (boolean): ")
        os.write(master, b"yes\n")
        expect(b"n (integer): ")
        os.write(master, b"many\n")
        expect(b"expected an integer")
        os.write(master, b"7\n")
        expect(b"tier (gold|silver): ")
        os.write(master, b"\n")
        expect(b"answer=7")
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
        os.close(master)


def test_answer_flags_on_the_command_line(tmp_path):
    f = ask_file(tmp_path, "dev", "echo {{confirm.answer.tier}}")
    done = run_local_cli(f, "--answer", "confirm.ok=true", "--answer", "confirm.tier=silver")
    assert done.returncode == 0, done.stderr
    steps = {s["stepId"]: s for s in json.loads(done.stdout)["steps"]}
    assert steps["go"]["output"] == "silver"
    bad = run_local_cli(f, "--answer", "confirm-ok")
    assert bad.returncode == 2 and "STEP.KEY=VALUE" in bad.stderr
    unanswered = run_local_cli(f)  # no terminal: nobody can be asked, whenUnanswered is fail
    assert unanswered.returncode == 1
    assert "nobody could be asked" in unanswered.stdout


def test_an_exit_fired_in_a_branch_is_restored_and_nothing_more_starts():
    spec = plan(
        {"id": "slow", "shell": "sleep 9"},
        {
            "id": "route",
            "decide": {
                "if": {"value": 1, "op": "eq", "to": 1},
                "then": {"exit": {"status": "success", "message": "done early"}},
            },
        },
        {"id": "after", "dependsOn": ["route"], "shell": "true"},
    )
    live = Run("p", spec)
    assert ids(live.decide(0)) == ["slow"]  # the branch's exit fired at once
    assert live.exited is not None and live.exited.step_id == "route.then.call"
    again = Run.restore("p", spec, Facts(tuple(live.settled), (AttemptFact("slow", 1, 0),)))
    assert again.exited == live.exited
    assert ids(again.decide(1)) == []  # `after` never starts
    again.finish_attempt("slow", 1, "success", None, None, 2)
    assert again.decide(2).finished and again.report().exit.message == "done early"


def test_a_plan_stopped_while_an_item_owes_a_retry_still_finishes():
    spec = plan(
        {"id": "bad", "shell": "false"},
        {"id": "m", "map": {"over": [1, 2], "do": {"shell": "true", "retries": 3}}},
    )
    run = Run("p", spec)
    assert ids(run.decide(0)) == ["bad", "m.0.call"]
    run.finish_attempt("m.0.call", 1, "failed", None, "exit code 1", 1)  # a retry is owed
    run.finish_attempt("bad", 1, "failed", None, "exit code 1", 1)  # the plan stops
    d = run.decide(2)
    assert ids(d) == [] and d.finished  # the retry never starts; the plan does not hang
    assert results(run.report())["m"].status == "failed"


def test_every_record_has_its_kind_for_metrics_body_steps_included():
    run = Run("p", MAP)
    assert run.kind_of("scan") == "map" and run.kind_of("after") == "shell"
    assert run.kind_of("scan.2.probe") == "shell"
    spec = plan(
        {
            "id": "d",
            "decide": {
                "if": {"value": 1, "op": "eq", "to": 1},
                "then": {"tool": "notes"},
                "else": [{"id": "q", "ask": ASK}],
            },
        },
    )
    run = Run("p", spec)
    assert run.kind_of("d.then.call") == "tool" and run.kind_of("d.else.q") == "ask"
    assert run.kind_of("d.nope.x") == "shell"


# -- a failed body step is a failure like any other (issue 41) -----------------------------------

FAILING_BODIES = {
    "a map's body fails": {"id": "m", "map": {"over": [1], "do": {"shell": "false"}}},
    "a decide's then fails": {
        "id": "d",
        "decide": {"if": {"value": 1, "op": "eq", "to": 1}, "then": {"shell": "false"}},
    },
    "a reduce's body step retries, then fails": {
        "id": "r",
        "reduce": {"over": [1, 2], "do": [{"id": "x", "shell": "false", "retries": 1}]},
    },
}


@pytest.mark.parametrize("step", FAILING_BODIES.values(), ids=list(FAILING_BODIES))
def test_a_failed_body_step_fails_its_control_step_in_the_local_runners_report(step):
    records: list[dict] = []
    report = run_local(plan(step), observer=records.append)
    ctl = step["id"]
    by = results(report)
    assert not report.completed and report.failed_step == ctl
    assert by[ctl].status == "failed" and "failed: step " in (by[ctl].error or "")
    body = [r for r in report.steps if r.step_id.startswith(f"{ctl}.")]
    assert [(r.status, r.error) for r in body] == [("failed", "exit code 1")]
    retried = [r for r in records if r["event"] == "plan_step_retry"]
    assert [(r["stepId"], r["attempt"]) for r in retried] == ([("r.0.x", 1)] if ctl == "r" else [])


def test_whether_a_body_step_is_settled_is_answered_by_its_item():
    spec = plan({"id": "m", "map": {"over": [1, 2], "do": {"shell": "true", "retries": 1}}})
    run = Run("p", spec)
    assert ids(run.decide(0)) == ["m.0.call"]
    assert not run.is_settled("m.0.call") and not run.is_settled("m.1.call")
    run.finish_attempt("m.0.call", 1, "failed", None, "exit code 1", 1)
    assert not run.is_settled("m.0.call")  # its retry follows
    assert ids(run.decide(1)) == ["m.0.call"]
    run.finish_attempt("m.0.call", 2, "failed", None, "exit code 1", 2)
    assert run.is_settled("m.0.call")
    run.decide(2)
    assert run.is_settled("m") and run.is_settled("m.0.call") and run.is_settled("m.1.call")
    with pytest.raises(KeyError):
        run.is_settled("nope.0.call")


def test_a_body_step_owing_a_retry_in_a_stopped_plan_is_settled():
    spec = plan(
        {"id": "bad", "shell": "false"},
        {"id": "m", "map": {"over": [1, 2], "do": {"shell": "true", "retries": 3}}},
    )
    run = Run("p", spec)
    run.decide(0)
    run.finish_attempt("bad", 1, "failed", None, "exit code 1", 1)  # the plan stops
    run.finish_attempt("m.0.call", 1, "failed", None, "exit code 1", 1)
    assert run.is_settled("m.0.call")  # the retry it owed never starts


def test_run_local_prints_the_report_of_a_plan_whose_body_step_failed(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text(
        "apiVersion: planops.dev/v1alpha1\nkind: Plan\nmetadata: {name: m}\n"
        "spec:\n  steps:\n  - {id: m, map: {over: [1], do: {shell: 'false'}}}\n"
    )
    r = run_local_cli(f)
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    report = json.loads(r.stdout)
    assert report["failedStep"] == "m"
    assert [(s["stepId"], s["status"]) for s in report["steps"]] == [
        ("m.0.call", "failed"),
        ("m", "failed"),
    ]


def test_a_finally_maps_failing_body_step_retries_and_fails_it_locally():
    spec = plan(
        {"id": "a", "shell": "true"},
        **{"finally": [{"id": "m", "map": {"over": [1], "do": {"shell": "false", "retries": 1}}}]},
    )
    records: list[dict] = []
    report = run_local(spec, observer=records.append)
    assert report.failed_step == "m"
    assert [(s.step_id, s.status, s.attempts) for s in report.steps] == [
        ("a", "success", 1),
        ("m.0.call", "failed", 2),
        ("m", "failed", 1),
    ]
    assert [r["stepId"] for r in records if r["event"] == "plan_step_retry"] == ["m.0.call"]
