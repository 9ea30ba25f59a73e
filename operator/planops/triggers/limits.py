"""What the trigger receiver holds each sender to: body size, rate, time, replays; and what it
keeps of the API server's objects (TtlCache: a trigger and its secret, read once per
`cache_seconds`). In memory and per replica (the chart's replicas multiply the rates: a shared
count would cost a request to a shared store per delivery, which is what the rates bound); the
replay check that holds across replicas is the Plan's name (receiver.plan_name): a second
create of it is AlreadyExists.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class Limits:
    """The receiver's bounds (its flags)."""

    #: bytes of a delivery's body read at most (413 past it)
    body_bytes: int = 1 << 20
    #: authenticated deliveries per minute per trigger, and the burst above that rate (429 past
    #: them): charged once the signature is checked, so a sender without the secret spends none
    per_minute: float = 60.0
    burst: int = 20
    #: authenticated deliveries per second over all triggers (429 past it)
    total_per_second: float = 50.0
    #: requests per second over all triggers, before anything is read (429 past it): what bounds
    #: the work of senders without the secret (each body read and its HMAC computed, each
    #: name not cached read from the API server)
    requests_per_second: float = 200.0
    #: refusals before the signature is checked (a bad signature, a body refused, ...) written
    #: to a trigger's status and Events per minute (burst: as many); past it, the metric only
    unverified_per_minute: float = 30.0
    #: seconds a trigger, and its secret, are kept once read (an edit, a deletion or a revoked
    #: grant on the Secret counts after at most this long)
    cache_seconds: float = 10.0
    #: triggers and secrets kept at most (the least recently used forgotten first)
    cache_entries: int = 10_000
    #: bodies being read at once (503 past it): what bounds the memory held by senders who
    #: open many requests and send their bodies slowly (each up to body_bytes for body_seconds;
    #: 32 of 1 MiB stay well within the chart's 256Mi)
    reading_at_once: int = 32
    #: seconds a connection lives at most, whatever it sends (slow headers, slow bodies)
    connection_seconds: float = 30.0
    #: seconds to read a body at most (408 past it)
    body_seconds: float = 10.0
    #: delivery ids remembered per replica (a replay within them: 409 before any API call)
    replay_window: int = 10_000


@dataclass
class _Bucket:
    tokens: float
    at: float


@dataclass
class RateLimiter:
    """A token bucket per key (`rate` per second, `burst` at most), for at most `keys` keys:
    the least recently used is forgotten first (a forgotten key starts with a full bucket)."""

    rate: float
    burst: float
    keys: int = 10_000
    clock: Callable[[], float] = time.monotonic
    _buckets: OrderedDict[object, _Bucket] = field(default_factory=OrderedDict)

    def take(self, key: object) -> bool:
        """Whether one more event of `key` is within its rate (and spend it)."""
        now = self.clock()
        b = self._buckets.pop(key, None) or _Bucket(self.burst, now)
        b.tokens = min(self.burst, b.tokens + (now - b.at) * self.rate)
        b.at = now
        self._buckets[key] = b
        while len(self._buckets) > self.keys:
            self._buckets.popitem(last=False)
        if b.tokens < 1:
            return False
        b.tokens -= 1
        return True


@dataclass
class ReplayWindow:
    """The last `size` deliveries seen (trigger, id), oldest forgotten first."""

    size: int
    _seen: OrderedDict[tuple[str, str, str], None] = field(default_factory=OrderedDict)

    def seen(self, key: tuple[str, str, str]) -> bool:
        return key in self._seen

    def add(self, key: tuple[str, str, str]) -> None:
        self._seen[key] = None
        self._seen.move_to_end(key)
        while len(self._seen) > self.size:
            self._seen.popitem(last=False)


@dataclass
class TtlCache(Generic[T]):
    """Values read (`load`), each kept `ttl` seconds, `size` at most: the least recently used
    is forgotten first. A load that raises keeps nothing (the next asks again)."""

    ttl: float
    size: int
    clock: Callable[[], float] = time.monotonic
    _items: OrderedDict[object, tuple[float, T]] = field(default_factory=OrderedDict)

    async def get(self, key: object, load: Callable[[], Awaitable[T]]) -> T:
        now = self.clock()
        held = self._items.get(key)
        if held is not None and now - held[0] < self.ttl:
            self._items.move_to_end(key)
            return held[1]
        value = await load()
        self.put(key, value, now)
        return value

    def put(self, key: object, value: T, at: float | None = None) -> None:
        """Keep `value` for `key` (read at `at`, default now)."""
        self._items[key] = (self.clock() if at is None else at, value)
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)
