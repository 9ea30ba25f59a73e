"""A coalescing work queue: one reconcile at a time per key, bursts collapsed into one pass.

Event-driven dispatch (no fixed requeue floor, unlike Argo's 10 s): a Job event enqueues its Plan
at once. A key enqueued while it is being reconciled is marked dirty and runs again right after,
so no event is lost and no object is reconciled twice concurrently. A failed reconcile is retried
with capped exponential backoff. `fn(*key)` may return seconds after which the key is looked at
again (a schedule's next time), or None for "when an event comes".

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

    def put(self, key: Key) -> None:
        if key in self.running:
            self.dirty.add(key)
        elif key not in self.pending:
            self.pending.add(key)
            self.queue.put_nowait(key)

    def start(self) -> None:
        self.tasks = [
            asyncio.create_task(self._work(), name=f"planops-worker-{i}")
            for i in range(self.workers)
        ]

    async def stop(self) -> None:
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
                if again is not None:
                    loop.call_later(again, self.put, key)
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
                loop.call_later(delay, self.put, key)
            finally:
                self.running.discard(key)
                if key in self.dirty:
                    self.dirty.discard(key)
                    self.put(key)
