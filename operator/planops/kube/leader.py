"""Leader election with a `coordination.k8s.io/v1` Lease: the Kubernetes convention (client-go's
leaderelection package, with controller-runtime's flags and defaults).

Why: two replicas keep planops available when a node drains or a pod dies, but only one of them
may act. A Job both created would be adopted (names are deterministic), yet two writers of one
Plan's status would race, and a ScheduledPlan's Replace policy could stop a run the other just
started. So every replica watches (its queue stays warm) and only the leader reconciles.

The rules, as client-go applies them:
- Every `retry_period` a candidate reads the Lease. It takes it when nobody holds it, or when the
  holder's record has not changed for `lease_duration` *as observed here* (the local clock only:
  another machine's clock is never trusted), with an update that carries the resourceVersion it
  read, so of two candidates one wins and the other gets 409 Conflict.
- The holder renews every `retry_period`. `leading()` is true only while its last successful
  renewal is younger than `renew_deadline`; since `renew_deadline < lease_duration`, a leader cut
  off from the API server stops acting before any other candidate may take the Lease.
- On a clean stop the holder releases the Lease (holder cleared), so a rolling update hands over
  at once instead of after `lease_duration`.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from planops.kube.client import ApiError, Kube

log = logging.getLogger("planops.leader")
Obj = dict[str, Any]


class NotLeading(Exception):  # noqa: N818 - reads as a fact, like KeyError
    """This replica does not hold the Lease (any more): it must not act on the cluster."""


@dataclass(frozen=True)
class Timing:
    """controller-runtime's defaults (seconds)."""

    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                "leader election needs retry period < renew deadline < lease duration "
                f"(got {self.retry_period}, {self.renew_deadline}, {self.lease_duration})"
            )


class LeaseStore(Protocol):
    async def get_lease(self, namespace: str, name: str) -> Obj | None: ...
    async def create_lease(self, namespace: str, body: Obj) -> Obj: ...
    async def replace_lease(self, namespace: str, name: str, body: Obj) -> Obj: ...


def default_identity() -> str:
    """POD_NAME when set (the chart sets it from the pod's name), else host name and pid."""
    return os.environ.get("POD_NAME") or f"{socket.gethostname()}_{os.getpid()}"


def micro_time(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass
class LeaderElector:
    store: LeaseStore
    namespace: str
    name: str
    identity: str = field(default_factory=default_identity)
    timing: Timing = field(default_factory=Timing)
    clock: Callable[[], float] = time.monotonic
    wall: Callable[[], float] = time.time
    on_started: Callable[[], None] = lambda: None
    on_stopped: Callable[[], None] = lambda: None
    _renewed_at: float | None = field(default=None, init=False)
    _observed: tuple[Any, ...] | None = field(default=None, init=False)
    _observed_at: float = field(default=0.0, init=False)
    _announced: bool = field(default=False, init=False)

    def leading(self) -> bool:
        """True while this replica may act: it holds the Lease and renewed it recently enough."""
        return (
            self._renewed_at is not None
            and self.clock() - self._renewed_at < self.timing.renew_deadline
        )

    def check(self) -> None:
        """Raise NotLeading unless this replica may act (called right before every write)."""
        if not self.leading():
            raise NotLeading(f"{self.identity} does not hold the Lease {self.name}")

    async def try_once(self) -> bool:
        """One attempt to acquire or renew; returns leading()."""
        now, wall = self.clock(), self.wall()
        lease = await self.store.get_lease(self.namespace, self.name)
        if lease is None:
            first = self._spec(wall, acquired=wall, transitions=0)
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": first,
            }
            try:
                await self.store.create_lease(self.namespace, body)
            except ApiError as e:
                if e.status != 409:
                    raise
                return self.leading()  # another candidate created it first
            self._won(now, first)
            return True
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        seen = (holder, spec.get("renewTime"), spec.get("leaseTransitions"))
        if seen != self._observed:
            self._observed, self._observed_at = seen, now
        duration = float(spec.get("leaseDurationSeconds") or self.timing.lease_duration)
        if holder and holder != self.identity and now - self._observed_at < duration:
            self._renewed_at = None  # somebody else leads, and renews
            return False
        ours = holder == self.identity
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if ours else 1)
        acquired = spec.get("acquireTime") if ours else None
        new_spec = self._spec(wall, acquired=acquired or wall, transitions=transitions)
        if ours and acquired:
            new_spec["acquireTime"] = acquired
        body = {**lease, "spec": new_spec}  # metadata keeps the resourceVersion read
        try:
            await self.store.replace_lease(self.namespace, self.name, body)
        except ApiError as e:
            if e.status != 409:
                raise
            return self.leading()  # somebody wrote it in between: look again next round
        if not ours:
            log.info("%s took the Lease %s/%s", self.identity, self.namespace, self.name)
        self._won(now, new_spec)
        return True

    def _spec(self, wall: float, *, acquired: float | str, transitions: int) -> Obj:
        return {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": int(self.timing.lease_duration),
            "acquireTime": acquired if isinstance(acquired, str) else micro_time(acquired),
            "renewTime": micro_time(wall),
            "leaseTransitions": transitions,
        }

    def _won(self, now: float, spec: Obj) -> None:
        self._renewed_at = now
        self._observed = (spec["holderIdentity"], spec["renewTime"], spec["leaseTransitions"])
        self._observed_at = now

    def _announce(self) -> None:
        """Tell the callbacks when leading() changed."""
        leading = self.leading()
        if leading and not self._announced:
            self._announced = True
            log.info("%s leads (Lease %s/%s)", self.identity, self.namespace, self.name)
            self.on_started()
        elif not leading and self._announced:
            self._announced = False
            log.warning(
                "%s stopped leading (Lease %s/%s)", self.identity, self.namespace, self.name
            )
            self.on_stopped()

    async def run(self) -> None:
        """Campaign and renew until cancelled. A renewal may take up to renew_deadline; loss of
        leadership is noticed within a fraction of a second either way (the watchdog)."""
        watchdog = asyncio.create_task(self._watch())
        try:
            while True:
                started = self.clock()
                try:
                    await asyncio.wait_for(self.try_once(), timeout=self.timing.renew_deadline)
                except (ApiError, OSError, TimeoutError) as e:
                    log.info("Lease %s/%s: %s", self.namespace, self.name, e or type(e).__name__)
                except Exception:
                    log.exception("Lease %s/%s: unexpected error", self.namespace, self.name)
                self._announce()
                elapsed = self.clock() - started
                await asyncio.sleep(max(0.0, self.timing.retry_period - elapsed))
        finally:
            watchdog.cancel()

    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(min(0.25, self.timing.retry_period / 4))
            self._announce()

    async def release(self) -> None:
        """Give the Lease up now (a clean stop), so another replica takes over at once."""
        if not self.leading():
            return
        self._renewed_at = None
        self._announce()
        try:
            lease = await self.store.get_lease(self.namespace, self.name)
            if lease is None or (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            spec = {
                **lease["spec"],
                "holderIdentity": None,
                "leaseDurationSeconds": 1,
                "renewTime": micro_time(self.wall()),
            }
            await self.store.replace_lease(self.namespace, self.name, {**lease, "spec": spec})
            log.info("%s released the Lease %s/%s", self.identity, self.namespace, self.name)
        except (ApiError, OSError) as e:
            log.info("could not release the Lease (it expires by itself): %s", e)


#: The API calls that change the cluster (the Lease's own are not guarded: they elect).
WRITES = ("create_", "delete_", "patch_", "replace_")


class GuardedKube(Kube):
    """The API client of a replica that may not be the leader: every write first asks `guard`
    (LeaderElector.check), which raises NotLeading unless this replica holds the Lease, right
    before the request leaves. One place, so no write can forget the check."""

    def __init__(self, kube: Kube, guard: Callable[[], None]) -> None:
        super().__init__(kube.api)  # the same connection pool and credentials
        self._guard = guard

    def __getattribute__(self, name: str) -> Any:
        attr = super().__getattribute__(name)
        if name.startswith(WRITES) and not name.endswith("_lease"):
            guard = super().__getattribute__("_guard")

            async def checked(*args: Any, **kwargs: Any) -> Any:
                guard()
                return await attr(*args, **kwargs)

            return checked
        return attr
