"""A light plan's run (reconciler.run.core.light: a few shell and script steps) is decided on the
event loop, any other in a worker thread; the decision is the same either way. The hand-over
costs more CPU than a small plan's decision (the operator's busiest path: every reconcile of
every running Plan), so a light plan's reconcile must not make one."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from planops.api import PlanSpec
from planops.reconciler.run import core

from .test_retry_reconcile import world


def spec(*steps: dict[str, Any], **more: Any) -> PlanSpec:
    return PlanSpec.model_validate({"steps": list(steps), **more})


def shells(n: int) -> list[dict[str, Any]]:
    return [{"id": f"s{i}", "shell": "true"} for i in range(n)]


def test_a_few_shell_and_script_steps_are_light():
    assert core.light(spec(*shells(core.LIGHT_STEPS)))
    assert core.light(spec({"id": "a", "script": "echo hi"}, {"id": "b", "shell": "true"}))


def test_many_steps_or_a_costly_kind_are_not_light():
    assert not core.light(spec(*shells(core.LIGHT_STEPS + 1)))
    # finally steps count
    assert not core.light(spec(*shells(core.LIGHT_STEPS), finally_=[{"id": "f", "shell": "true"}]))
    assert not core.light(spec({"id": "a", "shell": "true"}, {"id": "t", "tool": "x", "input": {}}))
    mapped = {"id": "m", "map": {"items": [1, 2], "do": [{"id": "x", "shell": "true"}]}}
    assert not core.light(spec(mapped))


@pytest.fixture
def handed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The functions handed to a worker thread (asyncio.to_thread), by name."""
    names: list[str] = []
    real = asyncio.to_thread

    async def counted(fn: Any, /, *args: Any, **kwargs: Any) -> Any:
        names.append(getattr(fn, "__name__", repr(fn)))
        return await real(fn, *args, **kwargs)

    monkeypatch.setattr(asyncio, "to_thread", counted)
    return names


def run_through(n: int) -> list[Any]:
    """A chain of `n` shell steps run to its end; the statuses and Jobs after each reconcile."""
    steps = [{"id": "s0", "shell": "true"}]
    steps += [{"id": f"s{i}", "shell": "true", "dependsOn": [f"s{i - 1}"]} for i in range(1, n)]
    w = world(steps)
    seen: list[Any] = [w.reconciled(), w.jobs()]
    for i in range(3):
        w.finish(f"s{i}", True)
        seen += [w.reconciled(), w.jobs()]
    return seen


def test_a_light_plan_is_decided_without_a_worker_thread(handed):
    run_through(3)
    assert "plan_step" not in handed and "decide" not in handed
    assert handed  # the count works: the judge still hands its validation over


def test_a_heavy_plan_is_decided_in_a_worker_thread(handed):
    run_through(core.LIGHT_STEPS + 1)
    assert "plan_step" in handed and "decide" in handed


def test_the_decision_is_the_same_on_the_loop_and_in_a_thread(monkeypatch):
    on_loop = run_through(3)
    monkeypatch.setattr(core, "light", lambda _spec: False)
    in_thread = run_through(3)
    assert on_loop == in_thread
    assert on_loop[-2]["phase"] == "Succeeded"
