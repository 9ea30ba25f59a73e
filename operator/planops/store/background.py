"""Uploads off the reconcile loop: the store's client is blocking (urllib3), so each upload runs
in a thread, a few at a time, and a reconcile only hands it over. Bounded: at most `pending`
uploads wait; past that a new one is dropped with a warning and counted (a store that is slow or
down never grows the operator's memory, nor holds a reconcile). Each upload's failure is logged
with the repository's name (StoreError's message), never raised into the reconciler.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

log = logging.getLogger("planops.store")


@dataclass
class Uploads:
    """A bounded set of background uploads (one event loop's)."""

    concurrency: int = 4
    pending: int = 256
    dropped: int = 0
    failed: int = 0
    done: int = 0
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)
    _slots: asyncio.Semaphore | None = None
    #: the uploads in flight per group (a Plan's uid: its deletion waits for them)
    _groups: dict[str, int] = field(default_factory=dict)

    def submit(
        self, what: str, fn: Callable[[], Any], cleanup: Callable[[], None], group: str = ""
    ) -> bool:
        """Runs `fn` in a thread in the background, then `cleanup` (always: also when
        dropped); False when too many wait already (dropped, and said once per drop)."""
        if len(self._tasks) >= self.pending:
            self.dropped += 1
            log.warning("store: %d uploads wait already; %s is not stored", len(self._tasks), what)
            cleanup()
            return False
        task = asyncio.get_running_loop().create_task(self._run(what, fn, cleanup))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        if group:
            self._groups[group] = self._groups.get(group, 0) + 1
            task.add_done_callback(lambda _: self._done(group))
        return True

    def busy(self, group: str) -> bool:
        """Whether uploads of `group` are in flight or waiting."""
        return self._groups.get(group, 0) > 0

    def _done(self, group: str) -> None:
        left = self._groups.get(group, 0) - 1
        if left > 0:
            self._groups[group] = left
        else:
            self._groups.pop(group, None)

    async def _run(self, what: str, fn: Callable[[], Any], cleanup: Callable[[], None]) -> None:
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.concurrency)
        try:
            async with self._slots:
                await asyncio.to_thread(fn)
            self.done += 1
        except Exception as e:  # a failed upload is logged, never raised into the reconciler
            self.failed += 1
            log.warning("store: %s not stored: %s", what, e)
        finally:
            cleanup()

    async def drain(self, timeout: float | None = None) -> None:
        """Waits for the uploads in flight (tests; the operator's shutdown)."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=timeout)
