"""A JSON Schema checked while a plan runs has a budget: a tool's input at dispatch (against the
Capsule's inputSchema) and an answer to an ask (against the plan's outputSchema) are evaluated on
the operator's event loop, which serves every tenant's Plans, the admission webhook and the
health probe. Without a bound, one answer annotation (a plan author's act) took a minute of CPU
per 27 KB against a 7 KB schema (ten minutes for a 256 KiB answer: the liveness probe restarts
the operator, which judges the same answer again: a restart loop), and one tool step's rendered
input of 1.7 MiB took 15 s (46 s when every item failed). Now:

- a tool's input is at most TOOL_INPUT_BYTES as JSON (the tool reads it from PLANOPS_INPUT, and
  Linux refuses to start a program with a longer environment string: larger never ran anyway);
- each check spends at most a fixed number of weighted schema steps (engine.jsonschemas.Steps:
  one per keyword evaluated, more for the keywords whose work grows with the value); past it,
  the tool's attempt is `call denied` and the answer is rejected (the question keeps waiting),
  with one message that says why. The same function decides in both executors and in the
  validator (a literal input dispatch would deny is refused before anything runs).

Each test bounds the CPU the check takes (helpers.time_bound), and fails without the budget."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

from planops.api.capsule_models import Tool
from planops.engine import Policy, Run, control, tool_inputs, validate
from planops.engine import dispatch as rules
from planops.kube import manifests
from planops.runners.local import LocalRunner

from .helpers import capsule, plan, resolver, time_bound
from .test_reconcile_core import denied, refused_at_dispatch
from .test_retry_reconcile import world

#: a schema a plan author (an ask's outputSchema) or a Capsule owner (a tool's inputSchema) may
#: write: each property is tried against 600 anchored patterns, and only the last matches
HEAVY = {
    "type": "object",
    "properties": {"k": {"type": "string"}},
    "additionalProperties": {"anyOf": [{"pattern": f"^{n}$"} for n in range(1, 601)]},
}
#: a value that satisfies HEAVY, each of its 1,000 properties after 600 patterns: 600,000 steps
#: (~9 s of CPU without a budget)
COSTLY = {f"k{i}": "600" for i in range(1000)}


def _cpu(f: Any) -> tuple[Any, float]:
    start = time.process_time()
    got = f()
    return got, time.process_time() - start


def test_an_answer_too_costly_to_check_is_rejected_at_once_and_the_question_waits():
    ask = {"prompt": "which?", "outputSchema": HEAVY}
    deploy = {"id": "deploy", "shell": "true", "dependsOn": ["approve"]}
    w = world([{"id": "approve", "ask": ask}, deploy])
    status = w.reconciled()
    (asked,) = status["asks"]
    given = {"run": status["run"]["id"], "question": asked["question"], "answer": COSTLY}
    w.annotate(manifests.answer_annotation("approve"), json.dumps(given))
    status, spent = _cpu(w.reconciled)
    assert spent < time_bound(2.0), f"one answer took {spent:.1f} s of the operator's CPU"
    (why,) = w.events("AnswerRejected")
    assert "more than" in why and "steps to check" in why, why
    assert [a["stepId"] for a in status["asks"]] == ["approve"] and "deploy" not in w.step_jobs()
    # an answer within the budget settles the question
    given["answer"] = {"k": "x", "other": "1"}
    w.annotate(manifests.answer_annotation("approve"), json.dumps(given))
    w.reconciled()
    assert "deploy" in w.step_jobs()


def test_the_cli_and_the_operator_judge_an_answer_by_the_one_rule():
    why, spent = _cpu(lambda: control.answer_problem(HEAVY, COSTLY))
    assert spent < time_bound(2.0)
    assert why is not None and "more than" in why and "steps to check" in why
    assert control.answer_problem(HEAVY, {"k": "x", "other": "1"}) is None


def heavy_capsule(**tool: Any) -> Any:
    return capsule(
        image="busybox:1",
        tools=[{"name": "pick", "command": ["cat"], "inputSchema": HEAVY, **tool}],
    )


SPLICED = plan({"id": "p", "tool": "pick", "input": "{{input.choice}}"}, input={"choice": COSTLY})


def test_a_tool_input_too_costly_to_check_is_denied_at_dispatch_in_both_executors():
    assert validate(SPLICED, resolver(default=heavy_capsule())) == []  # judged once rendered
    (d,) = Run("p", SPLICED).decide(0.0).dispatch
    why, spent = _cpu(
        lambda: rules.admit(d, heavy_capsule(), Policy(), lineage=(), depth=0, needs_image=False)
    )
    assert spent < time_bound(2.0), f"one dispatch took {spent:.1f} s of the operator's CPU"
    assert why is not None and why.startswith("call denied: ")
    assert "more than" in why and "steps to check" in why, why
    _, intents = refused_at_dispatch(SPLICED, heavy_capsule())
    assert denied(intents) == why
    report = asyncio.run(LocalRunner({"default": heavy_capsule()}).run("p", SPLICED))
    assert [(r.status, r.error) for r in report.steps] == [("failed", why)]


def test_the_validator_refuses_a_literal_input_that_dispatch_would_deny_for_its_cost():
    literal = plan({"id": "p", "tool": "pick", "input": COSTLY})
    (error,) = validate(literal, resolver(default=heavy_capsule()))
    assert (error.code, error.path) == ("tool-input", "steps[0].input")
    (d,) = Run("p", literal).decide(0.0).dispatch
    why = rules.admit(d, heavy_capsule(), Policy(), lineage=(), depth=0, needs_image=False)
    assert why is not None and why.removeprefix("call denied: ") in error.message


def test_a_tool_input_longer_than_an_environment_variable_can_hold_is_denied():
    """Linux starts no program with an environment string of 128 KiB or more (E2BIG): the
    tool's PLANOPS_INPUT. Denied before any schema work, with or without a schema."""
    big = {"text": "y" * tool_inputs.TOOL_INPUT_BYTES}
    plain = capsule(image="busybox:1", tools=[{"name": "pick", "command": ["cat"]}])
    for cap in (heavy_capsule(), plain):
        spliced = plan({"id": "p", "tool": "pick", "input": "{{input.big}}"}, input={"big": big})
        (d,) = Run("p", spliced).decide(0.0).dispatch
        why = rules.admit(d, cap, Policy(), lineage=(), depth=0, needs_image=False)
        assert why is not None and f"at most {tool_inputs.TOOL_INPUT_BYTES} bytes" in why, why
        report = asyncio.run(LocalRunner({"default": cap}).run("p", spliced))
        assert [(r.status, r.error) for r in report.steps] == [("failed", why)]
        literal = plan({"id": "p", "tool": "pick", "input": big})
        found = validate(literal, resolver(default=cap))
        assert [(e.code, e.path) for e in found][:1] == [("tool-input", "steps[0].input")]
        assert f"at most {tool_inputs.TOOL_INPUT_BYTES} bytes" in found[0].message
    fits = {"text": "y" * (tool_inputs.TOOL_INPUT_BYTES - len('{"text": ""}'))}
    assert len(json.dumps(fits)) == tool_inputs.TOOL_INPUT_BYTES
    tool = Tool.model_validate({"name": "t", "command": ["x"]})
    assert tool_inputs.refusal(tool, fits) is None


def test_one_plans_dispatch_checks_never_hold_the_event_loop():
    """Within its budget one check is cheap, but a plan may have thousands of tool steps ready at
    once, each checked at dispatch: the reconcile's core (restoring the run, judging answers,
    deciding and checking what starts) runs in a worker thread, so the event loop, which serves
    every other Plan, the admission webhook and the health probe, keeps running meanwhile."""
    steps = [
        {
            "id": f"p{i}",
            "tool": "pick",
            "onError": "continue",
            "input": {"choice": "{{input.choice}}", "n": i},
        }
        for i in range(60)
    ]
    tool = {
        "name": "pick",
        "command": ["cat"],
        "inputSchema": {"type": "object", "properties": {"choice": HEAVY}},
    }
    w = world(steps, tools=[tool])
    w.plan["spec"]["input"] = {"choice": COSTLY}
    gaps: list[float] = []

    async def both() -> None:
        done = asyncio.Event()

        async def ticker() -> None:
            last = time.monotonic()
            while not done.is_set():
                await asyncio.sleep(0.01)
                now = time.monotonic()
                gaps.append(now - last)
                last = now

        ticking = asyncio.create_task(ticker())
        try:
            await w.reconciler.reconcile("ns", "p")
        finally:
            done.set()
            await ticking

    asyncio.run(both())
    assert len(w.events("CallDenied")) == 60
    assert max(gaps) < 1.0, f"the event loop was held {max(gaps):.1f} s by one Plan's reconcile"
