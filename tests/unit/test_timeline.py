"""A Plan's events in one order for `describe` and `trace` (cli/timeline.py): by time as
instants, and a step's start after the settlement of what it depends on (the operator records one
reconcile's starts before the settlements that made them ready)."""

from __future__ import annotations

import asyncio
import io
from argparse import Namespace
from contextlib import redirect_stdout
from typing import Any

from planops.api import PlanSpec
from planops.cli import timeline

from .fakekube import FakeKube

SPEC = {
    "steps": [
        {"id": "a", "shell": "echo a"},
        {"id": "b", "shell": "echo b", "dependsOn": ["a"]},
        {"id": "c", "shell": "echo c", "dependsOn": ["b"]},
        {
            "id": "r",
            "reduce": {
                "over": [1, 2],
                "do": [{"id": "x", "shell": "echo"}, {"id": "y", "shell": "echo"}],
            },
        },
    ]
}


def ev(t: str, reason: str, message: str) -> dict[str, Any]:
    return {
        "eventTime": f"2026-01-01T10:00:{t}Z",
        "reason": reason,
        "message": message,
        "type": "Normal",
    }


# as the operator records them: each reconcile's starts before the settlements that freed them
RECORDED = [
    ev("00.000100", "PlanStarted", "run r1 of generation 1: 4 steps"),
    ev("00.000200", "StepStarted", "step a attempt 1 (shell)"),
    ev("00.000300", "StepStarted", "step r attempt 1 (reduce)"),
    ev("03.000100", "StepStarted", "step b attempt 1 (shell)"),
    ev("03.000200", "StepSucceeded", "step a success"),
    ev("06.000100", "StepStarted", "step c attempt 1 (shell)"),
    ev("06.000200", "StepStarted", "step r.0.y attempt 1 (shell)"),
    ev("06.000300", "StepStarted", "step r.1.x attempt 1 (shell)"),
    ev("06.000400", "StepSucceeded", "step b success"),
    ev("06.000500", "StepSucceeded", "step r.0.x success"),
    ev("06.000600", "StepSucceeded", "step r.0.y success"),
    ev("09.000100", "StepSucceeded", "step c success"),
    ev("09.000200", "PlanSucceeded", "3/3 steps settled"),
]
CAUSAL = [
    "PlanStarted run",
    "StepStarted a",
    "StepStarted r",
    "StepSucceeded a",
    "StepStarted b",
    "StepSucceeded b",
    "StepStarted c",
    "StepSucceeded r.0.x",
    "StepStarted r.0.y",
    "StepSucceeded r.0.y",
    "StepStarted r.1.x",
    "StepSucceeded c",
    "PlanSucceeded 3/3",
]


def name(reason: str, message: str) -> str:
    words = message.split()
    return f"{reason} {words[1] if words[0] == 'step' else words[0]}"


def names(events: list[dict[str, Any]]) -> list[str]:
    return [name(e["reason"], e["message"]) for e in events]


def test_a_steps_start_follows_the_settlement_of_its_dependencies():
    spec = PlanSpec.model_validate(SPEC)
    shuffled = list(reversed(RECORDED))  # the API lists in no promised order
    assert names(timeline.order(shuffled, spec)) == CAUSAL
    assert names(timeline.order(shuffled, None)) == names(RECORDED)  # no spec: time alone


def test_times_compare_as_instants_not_as_text():
    whole = {"lastTimestamp": "2026-01-01T10:00:05Z", "reason": "X", "message": "later"}
    micro = ev("05.500000", "Y", "earlier? no: half a second after")
    early = ev("04.900000", "Z", "first")
    assert [e["reason"] for e in timeline.order([micro, whole, early], None)] == ["Z", "X", "Y"]


def _api(plan: dict[str, Any]) -> FakeKube:
    """The Plan and its Events, listed newest first (the API server keeps no order)."""
    kube = FakeKube()
    kube.put("plan", plan)
    kube.events += [{**e, "involvedObject": {"kind": "Plan", "name": "p"}} for e in RECORDED[::-1]]
    return kube


def test_describe_and_trace_list_the_events_in_the_same_order():
    from planops.cli.show import cmd_describe, cmd_trace  # noqa: PLC0415

    plan = {
        "metadata": {"name": "p"},
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "spec": SPEC,
    }
    out = io.StringIO()
    with redirect_stdout(out):
        asyncio.run(cmd_trace(_api(plan), Namespace(name="p", output="table"), "ns"))
    rows = [line.split(maxsplit=3) for line in out.getvalue().splitlines()[1:]]
    traced = [name(reason, message) for _, _, reason, message in rows]
    out = io.StringIO()
    with redirect_stdout(out):
        asyncio.run(cmd_describe(_api(plan), Namespace(name="p"), "ns"))
    recent = out.getvalue().split("Recent events:\n")[1].splitlines()[1:]
    described = [name(*line.split(maxsplit=2)[1:]) for line in recent]
    assert described == traced[-10:] == CAUSAL[-10:]
    assert traced == CAUSAL


def test_a_finally_steps_start_follows_the_last_main_settlement():
    spec = PlanSpec.model_validate(
        {
            "steps": [{"id": "a", "shell": "echo a"}, {"id": "b", "shell": "echo b"}],
            "finally": [{"id": "f", "shell": "echo f"}],
        }
    )
    recorded = [  # one reconcile: f's start recorded before b's settlement that freed it
        ev("00.000100", "StepStarted", "step a attempt 1 (shell)"),
        ev("00.000200", "StepStarted", "step b attempt 1 (shell)"),
        ev("01.000100", "StepSucceeded", "step a success"),
        ev("03.000100", "StepStarted", "step f attempt 1 (shell)"),
        ev("03.000200", "StepFailed", "step b failed"),
    ]
    assert names(timeline.order(recorded, spec))[-2:] == ["StepFailed b", "StepStarted f"]
