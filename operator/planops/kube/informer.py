"""Informers: the objects of one kind, listed once and then watched, handed to the operator as
events, with an explicit sync state (client-go's Reflector and SharedInformer, reduced to what
planops needs).

Why not kopf: a run's Jobs and pods are ~13 watch events a step (the pod's 8 versions, the Job's
5), and kopf's per-event machinery (its causes, handler invocation, per-object bookkeeping) cost
more CPU than the reconcile that follows (docs/performance.md, "Beside Argo Workflows"). An event
here is one decoded line handed to a function. kopf keeps the planops kinds.

The rules, as client-go's:
- **List, then watch from the list's resourceVersion** (the list paged: kube.client.LIST_PAGE;
  every page is of the one snapshot), so no change between the two is missed or repeated. Each
  listed object is handed on as an event of type None (kopf's convention for a listing), and
  then `relisted` gets the names the list held and its resourceVersion: whatever the caller
  holds that the list lacks was deleted while no watch ran (client-go's
  DeletedFinalStateUnknown), unless the caller's copy is newer than the list (an object the
  operator created while the list's pages came, and wrote into its cache: the watch from the
  list's version tells what becomes of it).
- **has_synced()** is true once the first list has been handed on, and stays true (a relist
  hands on the newer truth; it never makes what was handed on untrue).
- **A watch that ends is resumed** from the last resourceVersion seen (bookmarks included:
  allowWatchBookmarks), at once when the server closed it, after a backoff (capped, doubling,
  reset by any event) when it failed. **410 Gone** (the version was compacted away) lists again.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from planops.kube import jsontext
from planops.kube.client import UNREACHABLE, Kube
from planops.kube.errors import ApiError, ErrorKind

log = logging.getLogger("planops.informer")
Obj = dict[str, Any]
Names = set[tuple[str, str]]

#: seconds the API server keeps one watch open (kopf's setting for planops' kinds, too)
WATCH_SECONDS = 300
#: the longest silence on a watch taken for a live connection: the API server sends a watch that
#: asks for them (allowWatchBookmarks) a BOOKMARK every minute (measured on Kubernetes 1.36: 60 s
#: apart, and one 2 s before the server's timeout), so a watch silent for longer went dead without
#: a reset (a partition, a relay that stopped passing bytes); it is resumed from the last version
#: seen, as a watch the server ended. Without this bound a dead watch waited for the read timeout
#: of WATCH_SECONDS and 30 s more, and the run's Jobs and pods only by the resync's list.
WATCH_IDLE_SECONDS = 90.0
#: a failed list or watch is tried again after 0.5 s, doubling up to this
MAX_BACKOFF = 30.0


@dataclass(frozen=True)
class Resource:
    """A kind as its collection's path says it: `/apis/batch/v1` + `jobs`."""

    base: str
    plural: str
    namespaced: bool = True
    #: how its JSON is read: every built-in kind's field is typed (jsontext.loads_typed)
    loads: Callable[[bytes], Any] = jsontext.loads_typed

    def path(self, namespace: str | None) -> str:
        if namespace is None or not self.namespaced:
            return f"{self.base}/{self.plural}"
        return f"{self.base}/namespaces/{quote(namespace, safe='')}/{self.plural}"


JOBS = Resource("/apis/batch/v1", "jobs")
PODS = Resource("/api/v1", "pods")
NAMESPACES = Resource("/api/v1", "namespaces", namespaced=False)


def _name(obj: Obj) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class Informer:
    """One kind in one namespace (or all: None), matching `selector`: each event to `seen`
    (type None for a listed object), and after each list the names it held to `relisted`."""

    def __init__(
        self,
        kube: Kube,
        resource: Resource,
        namespace: str | None,
        seen: Callable[[str | None, Obj], None],
        relisted: Callable[[Names, str], None] | None = None,
        selector: str | None = None,
    ) -> None:
        self.kube, self.resource, self.namespace = kube, resource, namespace
        self.seen, self.relisted, self.selector = seen, relisted, selector
        self._synced = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        #: the last resourceVersion seen: a watch resumes from it; None: list first
        self.version: str | None = None
        #: lists and watches started (a test and the log read them)
        self.lists = 0
        self.watches = 0

    def __repr__(self) -> str:
        where = self.namespace if self.namespace is not None else "all namespaces"
        return f"Informer({self.resource.plural} in {where})"

    def has_synced(self) -> bool:
        """Whether the first list has been handed on (client-go's HasSynced)."""
        return self._synced.is_set()

    async def wait_synced(self) -> None:
        await self._synced.wait()

    def start(self) -> None:
        if self._task is None:
            self._task = asyncio.create_task(self.run(), name=repr(self))

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def run(self) -> None:
        """List and watch until cancelled."""
        failures = 0
        while True:
            try:
                if self.version is None:
                    self.version = await self.list()
                await self.watch()
                failures = 0
                continue
            except ApiError as e:
                if e.kind is ErrorKind.EXPIRED:  # too old: a new list knows what happened since
                    self.version = None
                    continue
                log.warning("%r: %s", self, e)
            except UNREACHABLE as e:
                log.info("%r: %s", self, e or type(e).__name__)
            except Exception:  # a bug handing an event on: list again, the truth re-handed
                log.exception("%r: listing again", self)
                self.version = None
            failures = min(failures + 1, 16)
            await asyncio.sleep(min(MAX_BACKOFF, 0.5 * 2 ** (failures - 1)))

    def _query(self) -> dict[str, str | None]:
        return {"labelSelector": self.selector}

    async def list(self) -> str:
        """One list, handed on; its resourceVersion."""
        self.lists += 1
        names: Names = set()
        seen = self.seen

        def each(obj: Obj) -> None:
            names.add(_name(obj))
            seen(None, obj)

        path = self.resource.path(self.namespace)
        version = await self.kube.list_pages(path, each, self._query(), self.resource.loads)
        if self.relisted is not None:
            self.relisted(names, version)
        self._synced.set()
        return version

    async def watch(self) -> None:
        """One watch from the last version seen until the server ends it."""
        self.watches += 1
        path = self.resource.path(self.namespace)
        seen = self.seen
        loads = self.resource.loads
        events = self.kube.watch(
            path, self.version, self._query(), WATCH_SECONDS, loads, WATCH_IDLE_SECONDS
        )
        async with aclosing(events):
            async for kind, obj in events:
                version = (obj.get("metadata") or {}).get("resourceVersion")
                if version:
                    self.version = str(version)
                if kind != "BOOKMARK":
                    seen(kind, obj)


class Informers:
    """One kind's informers over the namespaces the operator watches: one for all namespaces,
    or one per namespace (`watch` / `unwatch` as namespaces come and go), all handing their
    events to the same functions. Synced when every informer started is."""

    def __init__(
        self,
        kube: Kube,
        resource: Resource,
        seen: Callable[[str | None, Obj], None],
        relisted: Callable[[str | None, Names, str | None], None] | None = None,
        selector: str | None = None,
    ) -> None:
        self.kube, self.resource, self.selector = kube, resource, selector
        self.seen, self.relisted = seen, relisted
        self.informers: dict[str | None, Informer] = {}

    def watch(self, namespace: str | None) -> None:
        if namespace in self.informers:
            return
        relisted = self.relisted
        informer = Informer(
            self.kube,
            self.resource,
            namespace,
            self.seen,
            (lambda names, version: relisted(namespace, names, version))
            if relisted is not None
            else None,
            self.selector,
        )
        self.informers[namespace] = informer
        informer.start()

    async def unwatch(self, namespace: str | None) -> None:
        """Stop watching `namespace` (deleted, or no longer matching): what it held is gone."""
        informer = self.informers.pop(namespace, None)
        if informer is None:
            return
        await informer.stop()
        if self.relisted is not None:
            self.relisted(namespace, set(), None)  # no version: whatever it held is gone

    def has_synced(self) -> bool:
        return all(i.has_synced() for i in self.informers.values())

    async def wait_synced(self) -> None:
        for informer in list(self.informers.values()):
            await informer.wait_synced()

    async def stop(self) -> None:
        for informer in list(self.informers.values()):
            await informer.stop()
        self.informers.clear()
