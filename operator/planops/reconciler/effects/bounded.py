"""Requests made a few at a time: a reconcile's creates, log reads and deletes."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


async def bounded(calls: list[Coroutine[Any, Any, T]], limit: int) -> list[T]:
    """Await `calls` with at most `limit` in flight, in order; results in order. The first error
    propagates after every call has ended (nothing is left running behind a failed reconcile).
    `limit` workers take the calls one after another: 20,000 creates are 16 tasks, not 20,000
    (each a task and a started frame waiting its turn)."""
    results: list[Any] = [None] * len(calls)
    errors: list[Exception] = []
    todo = iter(enumerate(calls))

    async def worker() -> None:
        for i, call in todo:
            try:
                results[i] = await call
            except Exception as e:
                errors.append(e)

    await asyncio.gather(*(worker() for _ in range(min(limit, len(calls)))))
    if errors:
        raise errors[0]
    return results
