"""A coalescing work queue: one reconcile at a time per key, bursts collapsed into one pass.

Event-driven dispatch (no fixed requeue floor, unlike Argo's 10 s): a Job event enqueues its Plan
at once. A key enqueued while it is being reconciled is marked dirty and runs again right after,
so no event is lost and no object is reconciled twice concurrently. A failed reconcile is retried
with capped exponential backoff. `fn(*key)` may return seconds after which the key is looked at
again (a schedule's next time, a TTL, an ask's deadline), or None for "when an event comes".

A key has at most one wake-up timer: the earliest asked for wins. Each reconcile asks for its
next wake-up again, so one timer per reconcile, never cancelled, grew the operator by ~400 bytes
for every label edit of a finished Plan whose TTL was years away. The earliest, not the latest,
because a wake-up is a question asked early, never a lost one: when it fires, the reconcile
answers with the next one, so an early timer costs one reconcile at most, while a later request
replacing an earlier one (a reconcile answering None or a later time for a reason of its own)
could leave a deadline unwatched. A retry's backoff is a wake-up like the others. `forget` drops
a deleted object's timer.

With leader election, `gate` is set while this replica leads: keys queue up meanwhile (the watch
keeps the queue warm, each key once), and a reconcile cut short because leadership was lost
(NotLeading) waits for the gate instead of counting as a failure.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from planops.kube.leader import NotLeading

log = logging.getLogger("planops.queue")
Key = tuple[str, ...]


class Coalescer:
    def __init__(
        self,
        fn: Callable[..., Awaitable[float | None]],
        workers: int = 4,
        max_backoff: float = 30.0,
        gate: asyncio.Event | None = None,
    ) -> None:
        self.fn = fn
        self.gate = gate
        self.workers = workers
        self.max_backoff = max_backoff
        self.queue: asyncio.Queue[Key] = asyncio.Queue()
        self.pending: set[Key] = set()
        self.running: set[Key] = set()
        self.dirty: set[Key] = set()
        self.failures: dict[Key, int] = {}
        self.tasks: list[asyncio.Task[None]] = []
        #: each key's one wake-up timer (the earliest asked for)
        self.timers: dict[Key, asyncio.TimerHandle] = {}
        #: keys forgotten while they were being reconciled: that reconcile's wake-up is dropped
        self.gone: set[Key] = set()

    def put(self, key: Key) -> None:
        if key in self.running:
            self.dirty.add(key)
        elif key not in self.pending:
            self.pending.add(key)
            self.queue.put_nowait(key)

    def wake_after(self, key: Key, delay: float) -> None:
        """Look at `key` again in `delay` seconds, unless its timer fires sooner already."""
        loop = asyncio.get_running_loop()
        when = loop.time() + delay
        held = self.timers.get(key)
        if held is not None:
            if held.when() <= when:
                return
            held.cancel()
        self.timers[key] = loop.call_at(when, self._wake, key)

    def _wake(self, key: Key) -> None:
        self.timers.pop(key, None)
        self.put(key)

    def forget(self, key: Key) -> None:
        """The object `key` is gone: its wake-up with it (and the one a reconcile of it under
        way would ask for)."""
        held = self.timers.pop(key, None)
        if held is not None:
            held.cancel()
        self.failures.pop(key, None)
        if key in self.running:
            self.gone.add(key)

    def start(self) -> None:
        self.tasks = [
            asyncio.create_task(self._work(), name=f"planops-worker-{i}")
            for i in range(self.workers)
        ]

    async def stop(self) -> None:
        for timer in self.timers.values():
            timer.cancel()
        self.timers.clear()
        for t in self.tasks:
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    async def _work(self) -> None:
        loop = asyncio.get_running_loop()
        while True:
            if self.gate is not None:
                await self.gate.wait()
            key = await self.queue.get()
            if self.gate is not None and not self.gate.is_set():
                self.queue.put_nowait(key)  # still pending: for when this replica leads again
                continue
            self.pending.discard(key)
            self.running.add(key)
            try:
                again = await self.fn(*key)
                self.failures.pop(key, None)
                if again is not None and key not in self.gone:
                    self.wake_after(key, again)
            except NotLeading:
                loop.call_soon(self.put, key)  # held by the gate until this replica leads again
            except Exception as e:
                n = self.failures[key] = self.failures.get(key, 0) + 1
                delay = min(self.max_backoff, 0.5 * 2 ** (n - 1))
                log.warning(
                    "reconcile of %s failed (attempt %d, retry in %.1fs): %s",
                    "/".join(key),
                    n,
                    delay,
                    e,
                    exc_info=n == 1,
                )
                self.wake_after(key, delay)
            finally:
                self.running.discard(key)
                self.gone.discard(key)
                if key in self.dirty:
                    self.dirty.discard(key)
                    self.put(key)
