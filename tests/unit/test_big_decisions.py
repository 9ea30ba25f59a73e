"""A reconcile that starts thousands of attempts at once holds what it sends, not all of it: the
decision builds no Job body (the actuator builds each as it sends it: 20,000 bodies were 92 MiB
as dicts), and the creates run as `limit` workers, not a task per create."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from planops.kube import manifests
from planops.reconciler.effects.bounded import bounded
from planops.reconciler.run import core

from .helpers import plan
from .test_reconcile_core import situation


def test_a_decision_builds_no_job_body_until_it_is_sent(monkeypatch: pytest.MonkeyPatch):
    built: list[str] = []
    real = manifests.job

    def counted(*args: Any, **kwargs: Any) -> Any:
        built.append(args[1].step.id)
        return real(*args, **kwargs)

    monkeypatch.setattr(manifests, "job", counted)
    spec = plan(*({"id": f"s{i}", "shell": "true"} for i in range(200)))
    step = core.plan_step(situation(spec))
    creates = step.decide()
    assert len(creates) == 200 and built == []
    assert creates[0].body is not None and creates[0].body["metadata"]["labels"]
    assert built == ["s0", "s0"]  # built on each read


def test_bounded_runs_the_calls_as_limit_workers_in_order_and_raises_the_error_at_the_end():
    started: list[int] = []
    tasks: list[int] = []

    async def call(i: int, fail: int | None) -> int:
        started.append(i)
        tasks.append(len(asyncio.all_tasks()))
        await asyncio.sleep(0)
        if i == fail:
            raise ValueError(f"call {i}")
        return i * 2

    async def run(n: int, fail: int | None = None) -> list[int]:
        return await bounded([call(i, fail) for i in range(n)], 4)

    assert asyncio.run(run(100)) == [i * 2 for i in range(100)]
    assert max(tasks) <= 1 + 4  # the main task and 4 workers, not a task per call
    started.clear()
    with pytest.raises(ValueError, match="call 3"):
        asyncio.run(run(50, fail=3))
    assert started == list(range(50))  # every call ran, in order, the error after them
