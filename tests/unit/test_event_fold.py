"""A plan of one step tells its start and its end once: its step's StepStarted and its
settlement are folded into PlanStarted and PlanSucceeded/PlanFailed of the same reconcile (their
messages appended), while every JSON log line of the trace stays. Plans of more steps, finally
steps, and a retried attempt keep the step's own Events."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest

from planops.kube.events import Recorder

from .fakekube import FakeKube


def _plan(*steps: str, final: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"steps": [{"id": s, "shell": "true"} for s in steps]}
    if final:
        spec["finally"] = [{"id": "tidy", "shell": "true"}]
    return {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
        "spec": spec,
    }


def _run(plan: dict[str, Any], told: list[tuple[str, str, dict[str, Any]]]) -> FakeKube:
    async def main() -> FakeKube:
        kube = FakeKube()
        events = Recorder(kube, plan)
        for reason, message, fields in told:
            events(reason, message, **fields)
        await events.flush()
        return kube

    return asyncio.run(main())


START = [
    ("PlanStarted", "run r of generation 1: 1 steps", {}),
    ("StepStarted", "step only attempt 1 (shell)", {"step": "only", "attempt": 1}),
]
END = [
    ("StepSucceeded", "step only success", {"step": "only", "attempts": 1}),
    ("PlanSucceeded", "1/1 steps settled", {}),
]


def test_a_one_step_plan_posts_its_plan_events_only_with_the_steps_messages(
    caplog: pytest.LogCaptureFixture,
):
    with caplog.at_level(logging.INFO, logger="planops.trace"):
        kube = _run(_plan("only"), START + END)
    assert [(e["reason"], e["message"]) for e in kube.events] == [
        ("PlanStarted", "run r of generation 1: 1 steps; step only attempt 1 (shell)"),
        ("PlanSucceeded", "1/1 steps settled; step only success"),
    ]
    # the trace's log lines: every record, the step's too
    logged = [r.getMessage() for r in caplog.records if r.name == "planops.trace"]
    assert [m.split('"reason": "')[1].split('"')[0] for m in logged] == [
        "PlanStarted",
        "StepStarted",
        "StepSucceeded",
        "PlanSucceeded",
    ]


def test_a_failed_one_step_plan_tells_the_error_in_plan_failed():
    told = [
        ("StepFailed", "step only failed: exit 1", {"step": "only", "attempts": 1}),
        ("PlanFailed", "0/1 steps settled; step only stopped the plan", {}),
    ]
    kube = _run(_plan("only"), told)
    assert [(e["reason"], e["message"]) for e in kube.events] == [
        ("PlanFailed", "0/1 steps settled; step only stopped the plan; step only failed: exit 1")
    ]


@pytest.mark.parametrize(
    ("plan", "told"),
    [
        (_plan("only", "other"), START),  # two steps
        (_plan("only", final=True), START),  # a finally step
        (_plan("only"), START[1:]),  # the step's start in a reconcile of its own
        (_plan("only"), END[:1]),  # a settlement that does not end the run
    ],
)
def test_other_plans_and_lone_step_events_keep_the_steps_own_events(
    plan: dict[str, Any], told: list[tuple[str, str, dict[str, Any]]]
):
    kube = _run(plan, told)
    assert [e["reason"] for e in kube.events] == [r for r, _, _ in told]


def test_a_retried_attempt_keeps_its_step_started():
    told = [
        ("PlanStarted", "run r of generation 1: 1 steps", {}),
        ("StepStarted", "step only attempt 2 (shell)", {"step": "only", "attempt": 2}),
    ]
    assert [e["reason"] for e in _run(_plan("only"), told).events] == ["PlanStarted", "StepStarted"]
