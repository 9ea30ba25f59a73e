"""The archive's writer: finished runs queued in memory and written to PostgreSQL by a few
tasks of their own, so a reconcile never waits for the database.

`offer` is what the Plan watch calls: synchronous, O(1), never blocking. The queue holds keys
only (namespace, name); a writer reads the Plan from the watch cache when its turn comes, so
the queue costs a few bytes a run, and a Plan re-run meanwhile is archived as it is then. It is
bounded: past `capacity`, a run is not queued but counted (planops_archive_overflow_total), and
`sweep` (the operator's resync, and each leadership start) finds it again in the watch cache,
since a run not yet archived is one whose Plan's status lacks `archived: <its run id>`. That
field is written only after the row commits, and the row is written with
ON CONFLICT DO NOTHING: a crash between the two writes the row again as a no-op, so a restart or
a new leader neither loses a run nor doubles one.

While the database is down, the writers retry with a capped backoff, the run stays at the head
of the queue, planops_archive_database_up is 0, and each Plan whose run waits gets one Warning
Event `ArchivePending`. That Event is in the tenant's namespace: it says the archive is behind,
never why (the database's error is the operator's: it may name hosts, users, and for a malformed
DSN the password). The operator's log says why, with nothing of the DSN's password (archive.dsn).
"""

from __future__ import annotations

import asyncio
import logging
import time
import traceback
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Protocol

from planops import metrics
from planops.archive.dsn import redacted
from planops.archive.row import (
    Row,
    marked,
    marked_earlier,
    needs_report_objects,
    pending_earlier,
    pending_run,
    row,
)
from planops.archive.store import DatabaseError, RowRejected, Store
from planops.kube.cache import WatchCache
from planops.kube.client import ApiError
from planops.kube.errors import ErrorKind
from planops.kube.events import event
from planops.kube.leader import NotLeading
from planops.kube.manifests import PlanRef
from planops.reconciler import (
    StatusApi,
    StatusWriter,
    earlier_status,
    records_json,
    reports_selector,
)

log = logging.getLogger("planops.archive")

Key = tuple[str, str]
#: runs queued at most (keys only: a few hundred bytes each)
CAPACITY = 10_000
WRITERS = 2
#: the longest wait between two tries while the database is down
RETRY_MAX = 5.0
#: the longest one run's write may take before its connection is given up (a database that
#: stopped answering without closing the connection must not hold a writer for good)
WRITE_TIMEOUT = 60.0
#: runs remembered as just archived (the watch shows their status a little later)
DONE_KEPT = 10_000


class Plans(Protocol):
    """Where the writers read Plans: the operator's watch cache."""

    def get(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    def values(self) -> Iterable[dict[str, Any]]: ...


class Cluster(StatusApi, Protocol):
    """What the writers ask of the API server (planops.kube.client.Kube): a run's PlanReports,
    and what the one status writer asks (the Plan, its status)."""

    async def list_plan_reports(self, namespace: str, selector: str) -> list[dict[str, Any]]: ...


class EventSink(Protocol):
    def put(self, namespace: str, body: dict[str, Any]) -> None: ...


class Archiver:
    def __init__(
        self,
        connect: Callable[[], Awaitable[Store]],
        kube: Cluster,
        plans: Plans,
        *,
        events: EventSink | None = None,
        gate: asyncio.Event | None = None,
        capacity: int = CAPACITY,
        writers: int = WRITERS,
        retry_max: float = RETRY_MAX,
        dsn: str | None = None,
    ) -> None:
        self.connect = connect
        #: what `connect` reaches: only to keep its password out of the log
        self.dsn = dsn
        self.kube = kube
        self.plans = plans
        #: the marks go through the one status writer (a whole status, written with the
        #: resourceVersion it was read at: a reconcile's write in between is read and marked
        #: again, never lost); not the reconciler's own, so its watch event wakes the Plan
        self.marks = StatusWriter(kube, plans if isinstance(plans, WatchCache) else None)
        self.events = events
        self.gate = gate
        self.capacity = capacity
        self.writers = writers
        self.retry_max = retry_max
        self.queue: OrderedDict[Key, None] = OrderedDict()
        self._ready = asyncio.Event()
        self._busy: set[Key] = set()
        self._done: OrderedDict[tuple[str, str], None] = OrderedDict()  # (uid, run)
        self._told: set[tuple[str, str]] = set()  # (uid, run) with an ArchivePending Event
        self._migrated = asyncio.Lock()
        self._schema_ready = False
        self._tasks: list[asyncio.Task[None]] = []

    # -- what the handlers call (never blocks) ------------------------------------------------

    def offer(self, plan: dict[str, Any]) -> bool:
        """Queue the Plan's run if it is finished and not archived; True when queued (or already
        there)."""
        meta = plan.get("metadata") or {}
        run = pending_run(plan)
        if (run is None or (str(meta.get("uid")), run) in self._done) and not pending_earlier(plan):
            return False
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        if key not in self.queue:
            if len(self.queue) >= self.capacity:
                metrics.archive_overflow.inc()
                return False
            self.queue[key] = None
            metrics.archive_pending.set(len(self.queue))
        self._ready.set()
        return True

    def sweep(self) -> int:
        """Offer every Plan the watch cache holds (the queue rebuilt from the cluster); how many
        runs were queued."""
        return sum(1 for plan in list(self.plans.values()) if self.offer(plan))

    # -- lifecycle ------------------------------------------------------------------------------

    def start(self) -> None:
        self._tasks = [asyncio.create_task(self._write_loop()) for _ in range(self.writers)]

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def drained(self, timeout: float) -> bool:
        """Wait until nothing is queued or being written (tests, benchmarks)."""
        deadline = time.monotonic() + timeout
        while self.queue or self._busy:
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    # -- the writers ----------------------------------------------------------------------------

    async def _next(self) -> Key:
        while True:
            if self.gate is not None:
                await self.gate.wait()  # only the leader writes
            for key in self.queue:
                if key not in self._busy:
                    del self.queue[key]
                    metrics.archive_pending.set(len(self.queue))
                    self._busy.add(key)
                    return key
            self._ready.clear()
            await self._ready.wait()

    async def _write_loop(self) -> None:
        store: Store | None = None
        backoff = 0.2
        while True:
            key = await self._next()
            try:
                if store is None or store.closed:
                    store = await self._open()
                await asyncio.wait_for(self._archive(store, key), WRITE_TIMEOUT)
                backoff = 0.2
                metrics.archive_up.set(1)
            except asyncio.CancelledError:
                self._requeue(key)
                if store is not None:
                    await store.close()
                raise
            except RowRejected as e:  # this run's row, not the database: the others go on
                metrics.archive_failures.labels("rejected").inc()
                log.error("archive: %s/%s: the database refused its row: %s", *key, self._said(e))
                # not queued again now; its status still lacks the mark: the next sweep retries
            except (DatabaseError, TimeoutError) as e:
                metrics.archive_up.set(0)
                kind = "timeout" if isinstance(e, TimeoutError) else "database"
                metrics.archive_failures.labels(kind).inc()
                self._tell(key)
                self._requeue(key)
                if store is not None:
                    await _close_quietly(store)
                store = None
                log.warning("archive: %s/%s: %s: %s", *key, type(e).__name__, self._said(e))
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, self.retry_max)
            except NotLeading:
                self._requeue(key)  # the next leader writes it (the gate is closing)
            except ApiError as e:
                metrics.archive_failures.labels("api").inc()
                self._requeue(key, front=False)
                log.warning("archive: %s/%s: the cluster answered %s: %s", *key, e.status, e)
                await asyncio.sleep(1.0)
            except Exception as e:
                metrics.archive_failures.labels("unexpected").inc()
                self._requeue(key, front=False)
                said = redacted("".join(traceback.format_exception(e)), self.dsn)
                log.error("archive: %s/%s: unexpected error\n%s", *key, said)
                await asyncio.sleep(1.0)
            finally:
                self._busy.discard(key)

    async def _open(self) -> Store:
        store = await self.connect()
        if not self._schema_ready:
            async with self._migrated:
                if not self._schema_ready:
                    applied = await store.migrate()
                    if applied:
                        log.info("archive: schema migrations applied: %s", applied)
                    self._schema_ready = True
        return store

    def _requeue(self, key: Key, front: bool = True) -> None:
        if key not in self.queue:
            self.queue[key] = None
            if front:
                self.queue.move_to_end(key, last=False)
            metrics.archive_pending.set(len(self.queue))
        self._ready.set()

    async def _archive(self, store: Store, key: Key) -> None:
        ns, name = key
        plan = self.plans.get(ns, name)
        if plan is None:  # deleted before its turn (its PlanReports went with it)
            log.warning("archive: plan %s/%s was deleted before its run was archived", ns, name)
            return
        for index, entry in pending_earlier(plan):  # earlier runs first: the oldest waited most
            await self._archive_earlier(store, plan, index, entry)
        run = pending_run(plan)
        if run is None:
            return
        meta = plan["metadata"]
        uid = str(meta.get("uid"))
        started = time.monotonic()
        records = None
        if needs_report_objects(plan):
            ref = PlanRef(ns, name, uid, run)
            listed = await self.kube.list_plan_reports(ns, reports_selector(ref))
            records = records_json(listed, uid, run)
        written = await store.write(row(plan, records))
        await self._mark(ns, name, lambda p: marked(p, run))
        metrics.archive_write.observe(time.monotonic() - started)
        metrics.archive_runs.labels("written" if written else "already").inc()
        self._done[(uid, run)] = None
        if len(self._done) > DONE_KEPT:
            self._done.popitem(last=False)
        self._told.discard((uid, run))

    async def _archive_earlier(
        self, store: Store, plan: dict[str, Any], index: int, entry: dict[str, Any]
    ) -> None:
        """An earlier run the Plan keeps in status.history (a new run replaced it before it was
        archived): its row from its entry and its PlanReports, then its entry marked."""
        meta = plan["metadata"]
        ns, name, uid, run = (
            str(meta["namespace"]),
            str(meta["name"]),
            str(meta["uid"]),
            entry["id"],
        )
        started = time.monotonic()
        listed = await self.kube.list_plan_reports(
            ns, reports_selector(PlanRef(ns, name, uid, run))
        )
        written = await store.write(earlier_row(plan, entry, records_json(listed, uid, run)))
        await self._mark(ns, name, lambda p: marked_earlier(p, run))
        metrics.archive_write.observe(time.monotonic() - started)
        metrics.archive_runs.labels("written" if written else "already").inc()

    async def _mark(
        self, namespace: str, name: str, change: Callable[[dict[str, Any]], dict[str, Any] | None]
    ) -> None:
        """A run marked archived in the Plan's status, once its row committed (a Plan gone, or
        no longer holding the run, has nothing to mark)."""
        try:
            await self.marks.change(namespace, name, change)
        except ApiError as e:
            if e.kind is not ErrorKind.NOT_FOUND:
                raise

    def _said(self, error: BaseException) -> str:
        """An error as the operator's log says it: without the DSN's password."""
        return redacted(str(error), self.dsn)

    def _tell(self, key: Key) -> None:
        """One Warning Event per waiting run: its Plan says it is not archived yet (not why:
        the Event is in the tenant's namespace, the database's error the operator's)."""
        plan = self.plans.get(*key)
        run = pending_run(plan) if plan is not None else None
        if plan is None or run is None or self.events is None:
            return
        told = (str(plan["metadata"].get("uid")), run)
        if told in self._told:
            return
        if len(self._told) >= self.capacity:
            self._told.clear()
        self._told.add(told)
        message = (
            f"run {run} is not archived yet: the archive is behind; the run stays queued and is "
            "written when the archive catches up (the operator's log and metrics say why)"
        )
        self.events.put(key[0], event(plan, "ArchivePending", message, warning=True))


def earlier_row(plan: dict[str, Any], entry: dict[str, Any], records: list[dict[str, Any]]) -> Row:
    """The row of an earlier run the Plan keeps (its status.history entry and every record of
    its PlanReports): the row its run had made, had it been archived while it was current."""
    name = str((plan.get("metadata") or {}).get("name") or "")
    return row({**plan, "status": earlier_status(name, entry, records)})


async def _close_quietly(store: Store) -> None:
    try:
        await store.close()
    except Exception as e:  # a broken connection: closing it can fail too
        log.debug("archive: closing a broken connection: %s", e)
