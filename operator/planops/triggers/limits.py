"""What the trigger receiver holds each sender to: body size, rate, time, replays. In memory and
per replica (the chart's replicas multiply the rates); the replay check that holds across
replicas is the Plan's name (receiver.plan_name): a second create of it is AlreadyExists.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Limits:
    """The receiver's bounds (its flags)."""

    #: bytes of a delivery's body read at most (413 past it)
    body_bytes: int = 1 << 20
    #: deliveries per minute per trigger, and the burst above that rate (429 past them)
    per_minute: float = 60.0
    burst: int = 20
    #: deliveries per second over all triggers, unknown names included (429 past it)
    total_per_second: float = 50.0
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
