"""The one place that talks to the Kubernetes API (enforced by tests/unit/test_layering.py).

Plain HTTP with aiohttp, not the official client's generated API classes: objects stay plain
dicts (as users write them, as Jobs are built), and the generated layer cost more than the rest
of a request (measured with py-spy in bench/vs_argo.py: pydantic argument validation on every
call, a recursive copy of every body, a thread hop per request for proxy and netrc lookups, and
seconds of pydantic schema building at the first use of each API class, ~0.3 ms of CPU per call
and 15 MiB of memory in all). Credentials come from kube/credentials.py (the pod's own, or the
kubeconfig's, as kubectl reads them), which `Transport`
(kube/transport.py) turns into a TLS context and headers.

A non-2xx answer becomes one `ApiError` with the API's reason and message and its kind
(kube.errors: read from the code, the reason and the details, never the message), by which the
reconciler decides (AlreadyExists = adopt, a refusal of the request = the step is refused, a
Conflict = read again and decide again, anything passing = retry on the next reconcile).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any, Self, cast

import aiohttp

from planops.api.documents import API_GROUP
from planops.kube import credentials as credentials_
from planops.kube import jsontext
from planops.kube import kubeconfig as kubeconfig_
from planops.kube.api import Keep, LogWindow
from planops.kube.errors import ApiError, ErrorKind, ListExpired, causes_of
from planops.kube.paths import core as _core
from planops.kube.paths import custom as _custom
from planops.kube.paths import jobs as _jobs
from planops.kube.paths import leases as _leases
from planops.kube.transport import Query, Transport

__all__ = ["UNREACHABLE", "ApiError", "ConfigError", "Kube", "ListExpired"]

Obj = dict[str, Any]
Loads = Callable[[bytes], Any]
Window = LogWindow | None


class ConfigError(Exception):
    """No usable credentials: the kubeconfig cannot be read, or lacks a context, cluster or user
    it needs (and no pod's own credentials either)."""


#: What reaching the API server can raise besides an answer (ApiError): refused or reset
#: connections, names that do not resolve, TLS failures, no answer in time.
UNREACHABLE: tuple[type[BaseException], ...] = (aiohttp.ClientError, OSError, asyncio.TimeoutError)

#: Objects per page of a list (client-go's pager uses the same). A run of 20,000 steps has
#: 40,000 Jobs and pods: one answer of that size is hundreds of MB decoded at once, and the
#: allocator keeps that peak as the operator's RSS long after (docs/results/scale-rounds.md,
#: "Where a large plan's memory goes"). In pages, only one page is ever whole at a time (`keep`).
LIST_PAGE = 500
#: bytes of a log handed on at a time (stream_log)
LOG_CHUNK = 64 << 10


async def _json(resp: aiohttp.ClientResponse, loads: Loads = jsontext.loads) -> Any:
    try:
        if resp.status >= 300:
            try:
                body = await resp.json(content_type=None, loads=jsontext.loads)
                if not isinstance(body, dict):
                    raise ValueError(body)
            except ValueError:  # not JSON: report the raw text
                body = {"reason": resp.reason or "", "message": (await resp.text())[:2000]}
            raise ApiError(
                resp.status,
                str(body.get("reason", "")),
                str(body.get("message", "")),
                causes_of(body.get("details")),
            )
        body = await resp.read()
        return loads(body) if body.strip() else None
    finally:
        resp.release()


def _unread(_: bytes) -> None:
    """An answer whose body nobody reads (create_event)."""


async def _obj(resp: aiohttp.ClientResponse) -> Obj:
    return cast(Obj, await _json(resp))


#: Deletions leave the children to the garbage collector (the API's default for Jobs orphans
#: their pods).
BACKGROUND = {"propagationPolicy": "Background"}
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"


@dataclass
class Kube:
    """Typed-by-convention access to the objects planops reads and writes."""

    api: Transport

    @classmethod
    async def connect(cls, kubeconfig: str | None = None, context: str | None = None) -> Self:
        """In-cluster credentials, else the kubeconfig (given, else every file $KUBECONFIG
        lists, merged as kubectl merges them, else ~/.kube/config: kube.kubeconfig);
        ConfigError when neither is usable."""
        try:
            return cls(Transport(await credentials_.load(kubeconfig, context)))
        except (credentials_.CredentialsError, kubeconfig_.KubeconfigError) as e:
            raise ConfigError(str(e)) from None

    async def close(self) -> None:
        await self.api.close()

    async def _get(self, path: str) -> Obj | None:
        """The object at `path`, or None when it does not exist."""
        try:
            return await _obj(await self.api.request("GET", path))
        except ApiError as e:
            if e.not_found:
                return None
            raise

    async def _list(
        self,
        path: str,
        keep: Keep | None = None,
        loads: Loads = jsontext.loads,
        **query: str | None,
    ) -> list[Obj]:
        """Every object at `path` (list_pages), each passed through `keep` (what the caller
        holds of it, None: nothing) as its page arrives. An expired continue token restarts the
        list once, whole, as client-go's pager does: a consistent list is all a caller can use."""
        hold: Keep = keep or (lambda o: o)
        items: list[Obj] = []

        def each(obj: Obj) -> None:
            kept = hold(obj)
            if kept is not None:
                items.append(kept)

        try:
            await self.list_pages(path, each, query, loads)
        except ListExpired:
            items.clear()
            page = await _json(await self.api.request("GET", path, query=query), loads)
            for obj in page["items"] or []:
                each(obj)
        return items

    async def list_pages(
        self, path: str, each: Callable[[Obj], None], query: Query, loads: Loads = jsontext.loads
    ) -> str:
        """Hand every object at `path` to `each`, LIST_PAGE at a time (only one page is ever
        whole), as its page arrives; the list's resourceVersion (every page is of that one
        snapshot: a watch from it misses nothing and repeats nothing). A continue token that
        expired between pages (410: etcd compacted the list's revision) raises ListExpired."""
        token: str | None = None
        while True:
            paged = {**query, "limit": LIST_PAGE, "continue": token}
            try:
                page = await _json(await self.api.request("GET", path, query=paged), loads)
            except ApiError as e:
                if e.kind is ErrorKind.EXPIRED and token is not None:
                    raise ListExpired(e.status, e.reason, e.message) from None
                raise
            for obj in page.get("items") or []:
                each(obj)
            meta = page.get("metadata") or {}
            token = meta.get("continue") or None
            if token is None:
                return str(meta.get("resourceVersion") or "")

    async def _create(self, path: str, body: Obj, loads: Loads = jsontext.loads) -> Obj:
        return cast(Obj, await _json(await self.api.request("POST", path, body=body), loads))

    async def _delete(self, path: str, query: Query | None = None) -> None:
        """Delete; one that is already gone is no error."""
        try:
            await _json(await self.api.request("DELETE", path, query=query))
        except ApiError as e:
            if not e.not_found:
                raise

    # -- the leader's Lease (planops.kube.leader) --------------------------------------------

    async def get_lease(self, namespace: str, name: str) -> Obj | None:
        return await self._get(_leases(namespace, name))

    async def create_lease(self, namespace: str, body: Obj) -> Obj:
        return await self._create(_leases(namespace), body)

    async def replace_lease(self, namespace: str, name: str, body: Obj) -> Obj:
        """A full update carrying the resourceVersion read: 409 Conflict when someone else wrote
        the Lease in between (optimistic concurrency: two candidates cannot both win)."""
        return await _obj(await self.api.request("PUT", _leases(namespace, name), body=body))

    # -- planops resources ------------------------------------------------------------------

    async def get_plan(self, namespace: str, name: str) -> Obj | None:
        return await self.get_object("plans", namespace, name)

    async def list_plans(self, namespace: str, selector: str) -> list[Obj]:
        return await self._list(_custom("plans", namespace), labelSelector=selector)

    async def create_plan(self, namespace: str, body: Obj) -> Obj:
        return await self._create(_custom("plans", namespace), body)

    async def delete_plan(self, namespace: str, name: str) -> None:
        await self._delete(_custom("plans", namespace, name), BACKGROUND)

    async def patch_plan_status(
        self, namespace: str, name: str, status: Obj, resource_version: str | None = None
    ) -> Obj:
        """Replace .status whole (status subresource; spec untouched), with one JSON Patch `add`:
        unlike a merge patch, explicit nulls of the report (failedStep: null) are kept. With
        `resource_version`, only the Plan as it was read: the patch sets that resourceVersion,
        which the API server takes as a precondition (409 Conflict when the Plan changed since)."""
        return await _obj(
            await self.api.request(
                "PATCH",
                _custom("plans", namespace, name, "status"),
                body=_status_patch(status, resource_version),
                content_type=JSON_PATCH,
            )
        )

    async def patch_object(self, plural: str, namespace: str, name: str, patch: Obj) -> Obj:
        """A merge patch of a namespaced planops object (a ScheduledPlan's run-now annotation)."""
        path = _custom(plural, namespace, name)
        return await _obj(
            await self.api.request("PATCH", path, body=patch, content_type=MERGE_PATCH)
        )

    async def patch_plan(self, namespace: str, name: str, patch: Obj) -> Obj:
        """A merge patch of the Plan itself (metadata: the rerun / cancel annotations)."""
        path = _custom("plans", namespace, name)
        return await _obj(
            await self.api.request("PATCH", path, body=patch, content_type=MERGE_PATCH)
        )

    async def delete_plan_as_seen(
        self, namespace: str, name: str, uid: str, resource_version: str
    ) -> None:
        """Delete the Plan only if it is still the object that was judged: the same uid (not a
        Plan created again under its name) and resourceVersion (not re-run or changed since);
        otherwise 409 Conflict. Its Jobs, pods, PlanReports and child Plans go with it (owned)."""
        body = {
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "propagationPolicy": "Background",
            "preconditions": {"uid": uid, "resourceVersion": resource_version},
        }
        path = _custom("plans", namespace, name)
        try:
            await _json(await self.api.request("DELETE", path, body=body))
        except ApiError as e:
            if not e.not_found:
                raise

    def watch_plan(
        self, namespace: str, name: str, resource_version: str | None, timeout_seconds: int = 240
    ) -> AsyncGenerator[tuple[str, Obj], None]:
        """The watch events of one Plan after `resource_version` (watch)."""
        query = {"fieldSelector": f"metadata.name={name}"}
        return self.watch(_custom("plans", namespace), resource_version, query, timeout_seconds)

    async def watch(
        self,
        path: str,
        resource_version: str | None,
        query: Query,
        timeout_seconds: int = 240,
        loads: Loads = jsontext.loads,
        idle_seconds: float | None = None,
    ) -> AsyncGenerator[tuple[str, Obj], None]:
        """The watch events of the collection at `path` after `resource_version`, as (type,
        object): ADDED, MODIFIED, DELETED, BOOKMARK, each read by `loads`. It ends when the
        server closes the watch (after `timeout_seconds`): watch again from the last
        resourceVersion seen. An ERROR event (410 Gone: that version is too old) is raised as
        ApiError. Close it (`aclosing`) when leaving it early: that releases the connection.

        `idle_seconds`: the longest silence taken for a live connection (the default: the
        server's timeout and 30 s more). A watch served from the API server's watch cache gets a
        BOOKMARK every minute when it asks for them, so a caller that relies on that may bound
        the silence at little more than a minute: a connection that went dead without a reset
        (a partition) then ends within that bound instead of the server's timeout."""
        watching = {
            **query,
            "watch": True,
            "allowWatchBookmarks": True,
            "resourceVersion": resource_version,
            "timeoutSeconds": timeout_seconds,
        }
        # no total: the server ends the watch; silence longer than that is a dead connection
        idle = timeout_seconds + 30 if idle_seconds is None else idle_seconds
        timeout = aiohttp.ClientTimeout(total=None, sock_read=idle)
        resp = await self.api.request("GET", path, query=watching, timeout=timeout)
        if resp.status >= 300:
            await _json(resp)  # raises ApiError
        try:
            while line := await resp.content.readline():
                event = loads(line)
                kind, obj = str(event.get("type", "")), event.get("object") or {}
                if kind == "ERROR":
                    code, reason = int(obj.get("code") or 500), str(obj.get("reason", ""))
                    raise ApiError(code, reason, str(obj.get("message", "")))
                yield kind, obj
        finally:
            resp.release()

    async def get_capsule(self, namespace: str, name: str) -> Obj | None:
        return await self.get_object("capsules", namespace, name)

    async def create_capsule(self, namespace: str, body: Obj) -> Obj:
        return await self._create(_custom("capsules", namespace), body)

    # -- PlanReports: a run's report, in chunks (planops.reconciler.history.chunks) ----------------

    async def list_plan_reports(self, namespace: str, selector: str) -> list[Obj]:
        return await self._list(_custom("planreports", namespace), labelSelector=selector)

    async def create_plan_report(self, namespace: str, body: Obj) -> None:
        await self._create(_custom("planreports", namespace), body)

    async def patch_plan_report(self, namespace: str, name: str, patch: list[Obj]) -> None:
        """A JSON Patch (the chunk's append: its `test` fails with 422 on a stale count)."""
        path = _custom("planreports", namespace, name)
        await _json(await self.api.request("PATCH", path, body=patch, content_type=JSON_PATCH))

    async def delete_plan_report(self, namespace: str, name: str) -> None:
        await self._delete(_custom("planreports", namespace, name))

    # -- any planops kind (scheduled plans; cluster-scoped when namespace is None) -----------------

    async def get_object(self, plural: str, namespace: str | None, name: str) -> Obj | None:
        return await self._get(_custom(plural, namespace, name))

    async def patch_status(
        self,
        plural: str,
        namespace: str | None,
        name: str,
        status: Obj,
        resource_version: str | None = None,
    ) -> Obj:
        """Replace .status whole (JSON Patch `add`, as for Plans), with the same precondition."""
        path = _custom(plural, namespace, name, "status")
        body = _status_patch(status, resource_version)
        return await _obj(await self.api.request("PATCH", path, body=body, content_type=JSON_PATCH))

    async def list_namespaces(self, selector: str) -> list[Obj]:
        return await self._list("/api/v1/namespaces", labelSelector=selector)

    # -- access reviews (an author's grant, asked again before a run started on their behalf) -----

    async def may_use_capsule(
        self, namespace: str, capsule: str, username: str, groups: list[str]
    ) -> tuple[bool, str]:
        """Whether `username` (in `groups`) may `use` the Capsule, as the API server's authorizer
        answers now (a SubjectAccessReview: nothing is created), and its reason."""
        return await self.may_access("capsules", "use", namespace, capsule, username, groups)

    async def may_access(
        self,
        resource: str,
        verb: str,
        namespace: str | None,
        name: str,
        username: str,
        groups: list[str],
    ) -> tuple[bool, str]:
        """Whether `username` (in `groups`) may `verb` the planops object `resource`/`name` (in
        `namespace`; None: cluster-scoped), as the authorizer answers now (a
        SubjectAccessReview), and its reason."""
        attributes = {"group": API_GROUP, "resource": resource, "verb": verb, "name": name}
        if namespace is not None:
            attributes["namespace"] = namespace
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {"user": username, "groups": groups, "resourceAttributes": attributes},
        }
        path = "/apis/authorization.k8s.io/v1/subjectaccessreviews"
        status = (await self._create(path, review)).get("status") or {}
        return bool(status.get("allowed")) and not status.get("denied"), str(
            status.get("reason") or status.get("evaluationError") or ""
        )

    # -- Jobs and pods --------------------------------------------------------------------------

    async def list_jobs(self, namespace: str, selector: str, keep: Keep | None = None) -> list[Obj]:
        return await self._list(
            _jobs(namespace), keep, jsontext.loads_typed, labelSelector=selector
        )

    async def get_job(self, namespace: str, name: str) -> Obj | None:
        return await self._get(_jobs(namespace, name))

    async def create_job(self, namespace: str, body: Obj) -> Obj:
        return await self._create(_jobs(namespace), body, jsontext.loads_typed)

    async def delete_job(self, namespace: str, name: str) -> None:
        await self._delete(_jobs(namespace, name), BACKGROUND)

    async def list_pods(self, namespace: str, selector: str, keep: Keep | None = None) -> list[Obj]:
        return await self._list(
            _core("pods", namespace), keep, jsontext.loads_typed, labelSelector=selector
        )

    async def get_pod(self, namespace: str, name: str) -> Obj | None:
        return await self._get(_core("pods", namespace, name))

    async def get_secret(self, namespace: str, name: str) -> Obj | None:
        """One Secret by name (the artifact repositories' credentials: the operator may get
        only the ones the chart names, in its own namespace)."""
        return await self._get(_core("secrets", namespace, name))

    async def stream_log(
        self,
        namespace: str,
        pod: str,
        container: str,
        feed: Callable[[bytes], None],
        stream: str | None = None,
        limit_bytes: int | None = None,
        window: Window = None,
    ) -> None:
        """A pod's log, chunk by chunk to `feed` as it arrives (nothing held here): one stream
        (Stdout, Stderr: KEP-3288, where the cluster selects one) or both as interleaved; the
        part `window` picks (kubectl's --tail, --since, --timestamps), else all of it."""
        query = {"container": container, "stream": stream, "limitBytes": limit_bytes}
        query |= (window or LogWindow()).query()
        path = _core("pods", namespace, pod, "log")
        resp = await self.api.request("GET", path, query=query)  # None: not sent
        if resp.status >= 300:
            await _json(resp)  # raises ApiError
        try:
            async for chunk in resp.content.iter_chunked(LOG_CHUNK):
                feed(chunk)
        finally:
            resp.release()

    # -- workspace claims ------------------------------------------------------------------------

    async def create_pvc(self, namespace: str, body: Obj) -> Obj:
        return await self._create(_core("persistentvolumeclaims", namespace), body)

    async def list_pvcs(self, namespace: str, selector: str) -> list[Obj]:
        return await self._list(_core("persistentvolumeclaims", namespace), labelSelector=selector)

    async def delete_pvc(self, namespace: str, name: str) -> None:
        await self._delete(_core("persistentvolumeclaims", namespace, name))

    # -- events ----------------------------------------------------------------------------------

    async def create_event(self, namespace: str, body: Obj) -> None:
        """Post an Event; the answer (the Event as stored) is not read: nothing uses it, and
        Events are a third of the operator's requests (docs/performance.md)."""
        await _json(await self.api.request("POST", _core("events", namespace), body=body), _unread)


def _status_patch(status: Obj, resource_version: str | None) -> list[Obj]:
    """A JSON Patch replacing .status whole; with `resource_version`, conditional on it (the
    patched object carries that version, and the API server refuses an update whose version is
    not the stored one: client-go's optimistic concurrency, in a patch)."""
    patch = [{"op": "add", "path": "/status", "value": status}]
    if resource_version is None:
        return patch
    return [
        {"op": "replace", "path": "/metadata/resourceVersion", "value": resource_version},
        *patch,
    ]
