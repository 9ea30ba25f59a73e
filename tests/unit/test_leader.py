"""Leader election's rules (planops.kube.leader) on an in-memory Lease store that behaves like the
API server where it matters (resourceVersion conflicts), with injected clocks; the real Lease on
the real cluster is tested in tests/faults/test_faults.py (the leader killed) and
tests/e2e/test_chart_install.py (the leader's pod deleted)."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from planops.kube.client import ApiError
from planops.kube.leader import GuardedKube, LeaderElector, NotLeading, Timing
from planops.kube.queue import Coalescer


class Store:
    def __init__(self) -> None:
        self.lease: dict[str, Any] | None = None
        self.version = 0
        self.down: set[str] = set()  # identities cut off from the "API server"

    def _reach(self, who: str) -> None:
        if who in self.down:
            raise OSError("connection refused")

    def client(self, who: str) -> Client:
        return Client(self, who)


class Client:
    def __init__(self, store: Store, who: str) -> None:
        self.store, self.who = store, who

    async def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        self.store._reach(self.who)
        return copy.deepcopy(self.store.lease)

    async def create_lease(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        self.store._reach(self.who)
        if self.store.lease is not None:
            raise ApiError(409, "AlreadyExists", "exists")
        self.store.version += 1
        body = copy.deepcopy(body)
        body["metadata"]["resourceVersion"] = str(self.store.version)
        self.store.lease = body
        return body

    async def replace_lease(
        self, namespace: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        self.store._reach(self.who)
        assert self.store.lease is not None
        if body["metadata"]["resourceVersion"] != self.store.lease["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", "the object has been modified")
        self.store.version += 1
        body = copy.deepcopy(body)
        body["metadata"]["resourceVersion"] = str(self.store.version)
        self.store.lease = body
        return body


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def elector(store: Store, who: str, clock: Clock) -> LeaderElector:
    return LeaderElector(store.client(who), "ns", "planops", who, Timing(), clock, clock)


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_one_candidate_leads_and_the_other_waits_while_it_renews():
    store, clock = Store(), Clock()
    a, b = elector(store, "a", clock), elector(store, "b", clock)
    assert run(a.try_once()) is True and a.leading()
    for _ in range(30):  # a minute of renewals every 2 s
        clock.t += 2
        assert run(a.try_once()) is True
        assert run(b.try_once()) is False and not b.leading()
    assert store.lease is not None and store.lease["spec"]["holderIdentity"] == "a"
    assert store.lease["spec"]["leaseTransitions"] == 0


def test_a_leader_that_stops_renewing_stops_leading_before_another_may_start():
    store, clock = Store(), Clock()
    a, b = elector(store, "a", clock), elector(store, "b", clock)
    run(a.try_once())
    run(b.try_once())  # b observes a's record now
    store.down.add("a")  # a is cut off from the API server (or killed)
    took_over_at = None
    for _ in range(100):
        clock.t += 0.5
        with pytest.raises(OSError):
            run(a.try_once())
        if run(b.try_once()):
            took_over_at = clock.t
            break
        if clock.t - 1000 >= Timing().renew_deadline:
            assert not a.leading()  # a stopped acting at its renew deadline
    assert took_over_at is not None
    assert took_over_at - 1000 >= Timing().lease_duration  # only after the Lease expired
    assert not a.leading() and b.leading()
    assert store.lease is not None and store.lease["spec"]["leaseTransitions"] == 1
    with pytest.raises(NotLeading):
        a.check()
    b.check()


def test_of_two_candidates_racing_for_a_free_lease_one_wins():
    store, clock = Store(), Clock()
    a, b = elector(store, "a", clock), elector(store, "b", clock)

    async def race() -> list[bool]:
        return list(await asyncio.gather(a.try_once(), b.try_once()))

    results = run(race())
    assert sorted(results) == [False, True]
    assert a.leading() != b.leading()


def test_a_released_lease_is_taken_at_once():
    store, clock = Store(), Clock()
    a, b = elector(store, "a", clock), elector(store, "b", clock)
    run(a.try_once())
    run(b.try_once())
    run(a.release())
    assert not a.leading()
    clock.t += 2  # the next retry, long before the lease duration
    assert run(b.try_once()) is True


def test_callbacks_announce_each_change_once():
    store, clock = Store(), Clock()
    seen: list[str] = []
    a = LeaderElector(
        store.client("a"),
        "ns",
        "planops",
        "a",
        Timing(),
        clock,
        clock,
        on_started=lambda: seen.append("started"),
        on_stopped=lambda: seen.append("stopped"),
    )
    run(a.try_once())
    a._announce()
    a._announce()
    clock.t += Timing().renew_deadline  # no renewal since
    a._announce()
    a._announce()
    assert seen == ["started", "stopped"]


def test_timing_must_leave_the_old_leader_time_to_stop():
    with pytest.raises(ValueError, match="renew deadline < lease duration"):
        Timing(lease_duration=10, renew_deadline=10, retry_period=2)


class _Kube:
    api = None

    async def create_job(self, namespace: str, body: dict[str, Any]) -> str:
        return "created"

    async def list_jobs(self, namespace: str, selector: str) -> list[str]:
        return ["job"]


def test_a_follower_reads_but_every_write_is_refused_before_it_leaves():
    leading = False

    def guard() -> None:
        if not leading:
            raise NotLeading("follower")

    kube = GuardedKube.__new__(GuardedKube)
    kube._guard = guard  # type: ignore[attr-defined]
    kube.api = None
    kube.create_job = _Kube().create_job  # type: ignore[method-assign]
    kube.list_jobs = _Kube().list_jobs  # type: ignore[method-assign]
    assert run(kube.list_jobs("ns", "")) == ["job"]
    with pytest.raises(NotLeading):
        run(kube.create_job("ns", {}))
    leading = True
    assert run(kube.create_job("ns", {})) == "created"


def test_the_queue_holds_keys_while_following_and_runs_them_once_leading():
    async def scenario() -> list[tuple[str, ...]]:
        done: list[tuple[str, ...]] = []
        gate = asyncio.Event()
        lost_once = {"k2"}

        async def fn(*key: str) -> None:
            if key[0] in lost_once:  # leadership lost in the middle of this reconcile
                lost_once.discard(key[0])
                raise NotLeading("lost")
            done.append(key)

        q = Coalescer(fn, workers=2, gate=gate)
        q.start()
        q.put(("k1",))
        q.put(("k2",))
        await asyncio.sleep(0.05)
        assert done == []  # following: nothing runs
        gate.set()
        await asyncio.sleep(0.05)
        await q.stop()
        assert q.failures == {}  # losing the Lease is not a failure of the plan
        return done

    assert sorted(run(scenario())) == [("k1",), ("k2",)]
