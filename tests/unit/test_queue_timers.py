"""The work queue's wake-up timers (kube.queue.Coalescer): one per key, the earliest asked
for. Each reconcile answers with its next wake-up; a timer for each answer, never cancelled, grew
the operator by ~400 bytes for every label edit of a finished Plan whose TTL was years away
(until the TTL fell: up to 68 years). A deleted object's timer goes with it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from planops.handlers.config import Config
from planops.handlers.wiring import Operator
from planops.kube.queue import Coalescer

from .fakekube import FakeKube
from .test_retention import world

KEY = ("ns", "p")
#: ttlSecondsAfterFinished's largest value: ~68 years
YEARS = 2**31 - 1


def _timers() -> list[asyncio.TimerHandle]:
    """The timers the running loop holds and has not cancelled (every one costs memory until it
    fires)."""
    loop = asyncio.get_running_loop()
    return [h for h in loop._scheduled if not h.cancelled()]  # type: ignore[attr-defined]


async def _settled(q: Coalescer) -> None:
    """Until the queue has run what was put."""
    while q.pending or q.running:
        await asyncio.sleep(0)


def test_a_thousand_label_edits_of_a_finished_plan_with_a_ttl_leave_one_timer():
    w = world([{"id": "a", "shell": "echo a"}], ttlSecondsAfterFinished=YEARS)
    w.reconcile()
    w.end("a")
    w.reconcile()
    assert w.status()["phase"] == "Succeeded"

    async def edits() -> tuple[int, float]:
        q = Coalescer(w.reconciler.reconcile, workers=1)
        q.start()
        for k in range(1000):
            plan = w.kube.get("plan", "ns", "p")
            assert plan is not None
            plan["metadata"]["labels"] = {"edit": str(k)}  # the watch shows each edit
            q.put(KEY)
            await _settled(q)
        held = _timers()
        due = max(h.when() for h in held) - asyncio.get_running_loop().time()
        await q.stop()
        return len(held), due

    held, due = asyncio.run(edits())
    assert held == 1
    assert due > YEARS - 60  # the TTL's wake-up, not lost either


def _answers(*delays: float | None) -> tuple[Callable[..., Awaitable[float | None]], list[Any]]:
    """A reconcile answering `delays` in turn (then None), recording when it ran."""
    ran: list[Any] = []
    left = list(delays)

    async def fn(*key: str) -> float | None:
        ran.append(key)
        return left.pop(0) if left else None

    return fn, ran


def test_the_earliest_wake_up_asked_for_wins_and_fires():
    fn, ran = _answers(100.0, 0.05, 50.0)

    async def scenario() -> tuple[float, int]:
        q = Coalescer(fn, workers=1)
        q.start()
        loop = asyncio.get_running_loop()
        q.put(KEY)  # asks for 100 s
        await _settled(q)
        q.put(KEY)  # asks for 0.05 s: sooner, it replaces the 100 s
        await _settled(q)
        soonest = q.timers[KEY].when() - loop.time()
        held = len(_timers())
        await asyncio.sleep(0.2)  # it fired: a reconcile, which asked for 50 s
        await _settled(q)
        await q.stop()
        return soonest, held

    soonest, held = asyncio.run(scenario())
    assert soonest < 0.06 and held == 1
    assert len(ran) == 3


def test_a_later_wake_up_does_not_replace_an_earlier_one():
    fn, _ = _answers(0.05, 3600.0)

    async def scenario() -> float:
        q = Coalescer(fn, workers=1)
        q.start()
        q.put(KEY)
        await _settled(q)
        q.put(KEY)  # asks for an hour: the 0.05 s stays (it answers with the next one)
        await _settled(q)
        left = q.timers[KEY].when() - asyncio.get_running_loop().time()
        await q.stop()
        return left

    assert asyncio.run(scenario()) < 0.06


def test_a_failed_reconciles_retry_is_the_keys_one_timer():
    calls = 0

    async def failing(*key: str) -> float | None:
        nonlocal calls
        calls += 1
        if calls == 1:
            return float(YEARS)
        raise RuntimeError("the API is down")

    async def scenario() -> tuple[int, float]:
        q = Coalescer(failing, workers=1, max_backoff=0.01)
        q.start()
        q.put(KEY)
        await _settled(q)
        q.put(KEY)  # fails: the retry, sooner, replaces the years-away timer
        await _settled(q)
        held = len(_timers())
        left = q.timers[KEY].when() - asyncio.get_running_loop().time()
        await q.stop()
        return held, left

    held, left = asyncio.run(scenario())
    assert held == 1 and left <= 0.5


def test_a_deleted_objects_timer_is_cancelled_and_a_reconcile_under_way_asks_for_none():
    gate = asyncio.Event()

    async def slow(*key: str) -> float | None:
        await gate.wait()
        return 3600.0

    async def scenario() -> tuple[int, int]:
        q = Coalescer(slow, workers=1)
        q.start()
        gate.set()
        q.put(KEY)
        await _settled(q)
        assert len(q.timers) == 1
        q.forget(KEY)  # deleted
        after_forget = len(_timers())
        gate.clear()
        q.put(KEY)  # a reconcile under way when the deletion comes
        while not q.running:
            await asyncio.sleep(0)
        q.forget(KEY)
        gate.set()
        await _settled(q)
        await asyncio.sleep(0)
        held = len(_timers())
        await q.stop()
        return after_forget, held

    assert asyncio.run(scenario()) == (0, 0)


def test_the_plan_watchs_deletion_event_drops_the_plans_timer():
    fn, _ = _answers(3600.0)
    plan = {"metadata": {"namespace": "ns", "name": "p", "uid": "u"}, "status": {}}

    async def scenario() -> int:
        op = Operator(Config())
        op.assemble(FakeKube())
        op.queue = Coalescer(fn, workers=1)
        op.queue.start()
        op.queue.put(KEY)
        await _settled(op.queue)
        assert len(op.queue.timers) == 1
        op.plan_event("DELETED", plan)
        held = len(_timers())
        await op.queue.stop()
        return held

    assert asyncio.run(scenario()) == 0
