"""Security: a step's definition is rendered in one pass.

Each string of a step's definition is either a whole-string seed-1 reference (`$a.output`,
resolved and never scanned again) or a template string (rendered once). A value that a reference
or a template yields is never rendered again: otherwise a step output (or the plan's input)
carrying `{{other.output}}` reads a step the validator saw no dependency on.
"""

from __future__ import annotations

import json

from planops.engine import Run, validate

from .helpers import capsule, plan, resolver, run_local_cli

PLANTED = "{{unrelated.output}}"
SECRET = "SECRET\n"


def echo(d):
    """What the simulated executor answers: shell steps echo their arguments, tools their input,
    an ask is answered yes."""
    if d.kind == "shell":
        return SECRET if d.step.id == "unrelated" else " ".join(d.words[1:]) + "\n"
    if d.kind == "ask":
        return json.dumps({"answer": {"ok": True}, "answered": True})
    return json.dumps(d.input)


def drive(spec):
    """Run `spec` to the end with simulated steps; (dispatches by step id, report)."""
    assert validate(spec, resolver(default=capsule())) == []
    run = Run("p", spec)
    seen = {}
    now = 0.0
    while True:
        decision = run.decide(now)
        for d in decision.dispatch:
            seen[d.step.id] = d
        if decision.finished:
            return seen, run.report()
        now += 1
        for d in decision.dispatch:  # every round finishes all it started
            run.finish_attempt(d.step.id, d.attempt, "success", echo(d), None, now)


UNRELATED = {"id": "unrelated", "shell": "echo SECRET"}
PLANTER = {"id": "a", "shell": "echo {{input.x}}"}


def base(*steps, **spec):
    """`unrelated` and `a` run first (the simulation settles both before anything else starts);
    `a` echoes the planted text; nothing depends on `unrelated`."""
    return plan(UNRELATED, PLANTER, *steps, input={"x": PLANTED, **spec.pop("input", {})}, **spec)


def test_a_reference_to_an_output_carrying_a_template_is_not_rendered_again():
    spec = base(
        {
            "id": "b",
            "tool": "notes",
            "dependsOn": ["a"],
            "input": {"fromRef": "$a.output", "t": "{{a.status}}"},
        }
    )
    seen, report = drive(spec)
    assert seen["b"].input == {"fromRef": PLANTED + "\n", "t": "success"}
    assert report.completed


def test_an_input_value_carrying_a_template_is_not_rendered_again():
    spec = base(
        {
            "id": "b",
            "tool": "notes",
            "input": {"whole": "{{input.x}}", "text": "x={{input.x}}", "deep": ["{{input}}"]},
        }
    )
    seen, _ = drive(spec)
    assert seen["b"].input == {
        "whole": PLANTED,
        "text": f"x={PLANTED}",
        "deep": [{"x": PLANTED}],
    }
    assert seen["a"].words == ["echo", PLANTED]


def test_a_reference_in_a_map_body_and_the_items_are_not_rendered_again():
    spec = base(
        {
            "id": "m",
            "dependsOn": ["a"],
            "map": {
                "over": "{{input.items}}",
                "do": [
                    {"id": "p", "shell": "echo {{input.x}}"},
                    {"id": "u", "tool": "notes", "input": {"r": "$p.output", "i": "{{item}}"}},
                ],
            },
        },
        input={"items": [PLANTED, {"k": PLANTED}]},
    )
    seen, report = drive(spec)
    assert seen["m.0.u"].input == {"r": PLANTED + "\n", "i": PLANTED}
    assert seen["m.1.u"].input == {"r": PLANTED + "\n", "i": {"k": PLANTED}}
    assert report.completed


def test_a_reduce_accumulator_is_not_rendered_again():
    spec = base(
        {
            "id": "r",
            "dependsOn": ["a"],
            "reduce": {
                "over": ["one"],
                "initial": "{{input.x}}",
                "do": {"tool": "notes", "input": {"acc": "{{accumulator}}"}},
            },
        }
    )
    seen, _ = drive(spec)
    assert seen["r.0.call"].input == {"acc": PLANTED}


def test_a_decide_branch_is_rendered_once():
    spec = base(
        {
            "id": "d",
            "dependsOn": ["a"],
            "decide": {
                "if": {"value": "{{input.x}}", "op": "contains", "to": "unrelated"},
                "then": [
                    {"id": "p", "shell": "echo {{input.x}}"},
                    {"id": "u", "tool": "notes", "input": {"r": "$p.output", "x": "{{a.output}}"}},
                ],
            },
        }
    )
    seen, _ = drive(spec)
    assert seen["d.then.u"].input == {"r": PLANTED + "\n", "x": PLANTED + "\n"}


def test_an_ask_prompt_and_default_are_rendered_once():
    spec = base(
        {
            "id": "q",
            "dependsOn": ["a"],
            "ask": {
                "prompt": "continue with {{input.x}} after {{a.output}}?",
                "outputSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
                "whenUnanswered": "default",
                "default": {"ok": True, "why": "{{input.x}}"},
            },
        }
    )
    seen, _ = drive(spec)
    assert seen["q"].input["prompt"] == f"continue with {PLANTED} after {PLANTED}\n?"
    assert seen["q"].input["default"] == {"ok": True, "why": PLANTED}


def test_filter_exit_and_the_plan_output_are_rendered_once():
    spec = base(
        {
            "id": "f",
            "dependsOn": ["a"],
            "filter": {
                "over": ["{{input.x}}", "{{a.output}}"],
                "where": {"value": "{{item}}", "op": "contains", "to": "unrelated"},
            },
        },
        {
            "id": "e",
            "dependsOn": ["f"],
            "exit": {"status": "success", "message": "{{input.x}}", "output": "{{f.items}}"},
        },
    )
    _, report = drive(spec)
    assert report.exit.message == PLANTED
    assert report.output == [PLANTED, PLANTED + "\n"]
    spec = base(output={"o": "{{a.output}}", "i": "{{input.x}}"})
    _, report = drive(spec)
    assert report.output == {"o": PLANTED + "\n", "i": PLANTED}


def test_the_reported_repro_through_kubectl_plan_run_local(tmp_path):
    """The review's repro, exactly: `b` does not depend on `unrelated`, whose output it used to
    receive through `a`'s output."""
    plan_file = tmp_path / "repro.json"
    plan_file.write_text(
        json.dumps(
            {
                "id": "repro",
                "input": {"x": PLANTED},
                "steps": [
                    {"id": "unrelated", "shell": "echo SECRET"},
                    {"id": "a", "shell": "echo {{input.x}}"},
                    {
                        "id": "b",
                        "tool": "echo-input",
                        "dependsOn": ["a"],
                        "input": {"fromRef": "$a.output", "t": "{{a.status}}"},
                    },
                ],
            }
        )
    )
    done = run_local_cli(plan_file)
    assert done.returncode == 0, done.stderr
    steps = {s["stepId"]: s for s in json.loads(done.stdout)["steps"]}
    assert json.loads(steps["b"]["output"]) == {"fromRef": PLANTED, "t": "success"}
    assert "SECRET" not in steps["b"]["output"]
