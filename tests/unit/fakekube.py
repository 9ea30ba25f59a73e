"""One in-memory Kubernetes API for the unit tests, implementing planops.kube.api.KubeApi.

It keeps objects by kind, namespace and name, gives each write a new resourceVersion and each
created object a uid, selects by label the way the API server does for the selectors planops
writes (`k=v`, `k!=v`, `k`, `!k`, comma-separated), and answers as the API server does where a
reconcile depends on it: 409 AlreadyExists for a name taken, 409 Conflict for a status written
with a resourceVersion that is not the object's (the status writer's precondition), a JSON
Patch's failed `test` as 422, deletes of what is gone as no error.

Faults are injected into this one fake, never by subclassing it: `refuse` answers a method with
the API server's error (a 403, a 409 Conflict, a 404, a 422; `deny`: an admission webhook's),
once or every time; `fail` raises any error, a connection's too; `on` runs a hook as a method is
called or once it has answered (a change made meanwhile, a race, a clock moved, a call held);
`delay` slows every call, `gate` holds every call until it is set. `calls` records what was
asked, in order, `reviews` the access reviews and `statuses` every status written.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import itertools
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from planops.kube import loglines
from planops.kube.api import CliApi, Keep, LogWindow, Obj, ScheduleApi
from planops.kube.client import ApiError

if TYPE_CHECKING:  # not the archive's database driver for every test
    from planops.archive.queue import Cluster


@dataclass
class _Refusal:
    method: str
    name: str | None
    error: Exception
    times: int | None  # None: every time


def _matches(labels: dict[str, str], selector: str) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            k, v = term.split("!=", 1)
            if labels.get(k) == v:
                return False
        elif "=" in term:
            k, v = term.split("=", 1)
            if labels.get(k) != v.lstrip("="):
                return False
        elif term.startswith("!"):
            if term[1:] in labels:
                return False
        elif term not in labels:
            return False
    return True


@dataclass
class FakeKube:
    objects: dict[tuple[str, str, str], Obj] = field(default_factory=dict)
    logs: dict[str, str] = field(default_factory=dict)  # pod name -> its log (its stdout)
    #: pod name -> what it wrote on stderr: a read of the log without a stream selection gives
    #: the stderr first, then the stdout (interleaved, as the kubelet would)
    stderr: dict[str, str] = field(default_factory=dict)
    #: what the log API does with a stream selection (KEP-3288): "split" (the feature gate on),
    #: "api" (the API server refuses it: 422), "kubelet" (the node refuses it: 400), "ignored"
    #: (an API server or kubelet older than 1.32: both streams, as without it)
    log_streams: str = "split"
    events: list[Obj] = field(default_factory=list)
    calls: list[tuple[str, str, str]] = field(default_factory=list)
    #: seconds every call takes (a slow API server)
    delay: float = 0.0
    #: when set, every call waits until it is (an API server that answers only when told)
    gate: asyncio.Event | None = None
    #: (namespace, capsule, username) the authorizer answers "no" for `use` (others: allowed)
    use_denied: set[tuple[str, str, str]] = field(default_factory=set)
    #: (resource, verb, namespace, name, username) the authorizer refuses (may_access)
    access_denied: set[tuple[str, str, str, str, str]] = field(default_factory=set)
    #: the access reviews asked: (namespace, capsule, username, groups)
    reviews: list[tuple[str, str, str, list[str]]] = field(default_factory=list)
    #: every status written (Plans' and ScheduledPlans'), in order
    statuses: list[Obj] = field(default_factory=list)
    #: the deletionTimestamp a delete gives an object that has finalizers
    deleted_at: str = "2026-01-01T00:00:00Z"
    #: what each watch_plan yields, one list per watch in turn: (type, object) pairs, or an
    #: exception raised at that point, or a function called then (a change no event shows): a
    #: watch is a script here, not derived from writes; what it shows is stored, so a read
    #: after it answers the same
    watches: list[list[tuple[str, Obj] | Exception | Callable[[], object]]] = field(
        default_factory=list
    )
    #: the resourceVersion each watch started from, and the watches and clients closed
    watched_from: list[str | None] = field(default_factory=list)
    watches_closed: int = 0
    closed: int = 0
    #: the label selectors lists were asked with, in order
    selectors: list[str] = field(default_factory=list)
    #: the log windows (tail, since, timestamps) every log read was asked with, in order
    windows: list[LogWindow | None] = field(default_factory=list)
    #: what /version answers (`kubectl plan version`)
    version: Obj = field(default_factory=lambda: {"gitVersion": "v1.36.3", "platform": "x"})
    _refusals: list[_Refusal] = field(default_factory=list)
    _versions: itertools.count[int] = field(default_factory=lambda: itertools.count(100))
    _uids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    # -- what tests use ---------------------------------------------------------------------

    def refuse(
        self,
        method: str,
        status: int,
        message: str,
        *,
        reason: str | None = None,
        causes: tuple[tuple[str, str], ...] = (),
        name: str | None = None,
        times: int | None = 1,
    ) -> None:
        """Answer `method` (for the object `name`, or any) with an error, `times` times (None:
        always) before answering normally again. `reason` is the API server's for `status`
        unless given ("" for none: an admission webhook's denial), `causes` the details'
        (type, field) pairs (("", "") is a ValidatingAdmissionPolicy's: kube.errors)."""
        if reason is None:
            reason = REASONS.get(status, "")
        self.fail(method, ApiError(status, reason, message, causes), name=name, times=times)

    def deny(
        self, method: str, message: str, *, name: str | None = None, times: int | None = 1
    ) -> None:
        """Answer `method` as an admission webhook's denial does (400, no reason)."""
        self.refuse(method, 400, message, reason="", name=name, times=times)

    def fail(
        self, method: str, error: Exception, *, name: str | None = None, times: int | None = 1
    ) -> None:
        """Make `method` (for `name`, or any) raise `error` (an ApiError, or a connection's
        error such as ConnectionResetError), `times` times (None: always)."""
        self._refusals.append(_Refusal(method, name, error, times))

    def on(
        self,
        method: str,
        hook: Callable[..., object],
        *,
        after: bool = False,
        times: int | None = None,
    ) -> None:
        """Run `hook(*args)` (awaited when it is a coroutine function) each time `method` is
        called with `args`, before it answers (`after`: once it has answered, before its caller
        sees the answer), `times` times (None: every time)."""
        inner = getattr(self, method)
        left = [times]

        async def hooked(*args: object, **kwargs: object) -> object:
            run = left[0] is None or left[0] > 0
            if run and left[0] is not None:
                left[0] -= 1
            if run and not after:
                await _awaited(hook(*args, **kwargs))
            answer = await inner(*args, **kwargs)
            if run and after:
                await _awaited(hook(*args, **kwargs))
            return answer

        setattr(self, method, hooked)  # on this one fake: its class stays as it is

    def put(self, kind: str, obj: Obj) -> Obj:
        """Store an object as if somebody else had created it (no refusal applies)."""
        meta = obj.setdefault("metadata", {})
        meta.setdefault("namespace", "" if kind in _CLUSTER_WIDE else "ns")
        meta.setdefault("uid", f"uid-{next(self._uids)}")
        meta["resourceVersion"] = str(next(self._versions))
        self.objects[(kind, meta["namespace"], meta["name"])] = obj
        return obj

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        return self.objects.get((kind, namespace, name))

    def finish_job(self, job: Obj, ok: bool, at: str, log: str) -> None:
        """Let a step's Job end as the Job controller and the kubelet would show it: its
        Complete (or Failed) condition at `at` (RFC 3339), its pod ended with exit code 0 (or
        1) at `at`, and the pod's log."""
        kind = "Complete" if ok else "Failed"
        job["status"] = {
            "succeeded" if ok else "failed": 1,
            "conditions": [{"type": kind, "status": "True", "lastTransitionTime": at}],
        }
        pod = f"{job['metadata']['name']}-pod"
        owner = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": job["metadata"]["name"],
            "uid": job["metadata"]["uid"],
            "controller": True,
        }
        ended = {"exitCode": 0 if ok else 1, "finishedAt": at}
        self.put(
            "pod",
            {
                "metadata": {
                    "name": pod,
                    "labels": job["metadata"]["labels"],
                    "ownerReferences": [owner],
                    "creationTimestamp": at,
                },
                "status": {
                    "phase": "Succeeded" if ok else "Failed",
                    "containerStatuses": [{"state": {"terminated": ended}}],
                },
            },
        )
        self.logs[pod] = log

    def methods(self) -> list[str]:
        """The methods called, in order (what `calls` records, without their arguments)."""
        return [method for method, _, _ in self.calls]

    def of(self, kind: str, namespace: str = "ns") -> list[Obj]:
        return [o for (k, ns, _), o in self.objects.items() if k == kind and ns == namespace]

    # -- the machinery ---------------------------------------------------------------------------

    async def _call(self, method: str, namespace: str, name: str = "") -> None:
        self.calls.append((method, namespace, name))
        if self.gate is not None:
            await self.gate.wait()
        if self.delay:
            await asyncio.sleep(self.delay)
        for r in self._refusals:
            if r.method == method and r.name in (None, name) and r.times != 0:
                if r.times is not None:
                    r.times -= 1
                raise r.error

    def _read(self, kind: str, namespace: str, name: str) -> Obj | None:
        found = self.objects.get((kind, namespace, name))
        return copy.deepcopy(found) if found is not None else None

    def _list(
        self, kind: str, namespace: str | None, selector: str, keep: Keep | None = None
    ) -> list[Obj]:
        hold: Keep = keep or (lambda o: o)
        self.selectors.append(selector)
        kept = (
            hold(copy.deepcopy(o))
            for (k, ns, _), o in sorted(self.objects.items())
            if k == kind
            and namespace in (ns, None)
            and _matches((o.get("metadata") or {}).get("labels") or {}, selector)
        )
        return [o for o in kept if o is not None]

    def _create(self, kind: str, namespace: str, body: Obj) -> Obj:
        name = body["metadata"]["name"]
        if (kind, namespace, name) in self.objects:
            raise ApiError(409, "AlreadyExists", f'{kind} "{name}" already exists')
        obj = copy.deepcopy(body)
        obj["metadata"]["namespace"] = namespace
        self.put(kind, obj)
        return copy.deepcopy(obj)

    def _write_status(
        self, kind: str, namespace: str, name: str, status: Obj, resource_version: str | None
    ) -> Obj:
        found = self.objects.get((kind, namespace, name))
        if found is None:
            raise ApiError(404, "NotFound", f'{kind}s "{name}" not found')
        stored = found["metadata"]["resourceVersion"]
        if resource_version is not None and stored != resource_version:
            raise ApiError(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {kind}s "{name}": the object has been '
                "modified; please apply your changes to the latest version and try again",
            )
        found["status"] = copy.deepcopy(status)  # replaced whole, as kube.client writes it
        found["metadata"]["resourceVersion"] = str(next(self._versions))
        self.statuses.append(copy.deepcopy(status))
        return copy.deepcopy(found)

    def _delete(self, kind: str, namespace: str, name: str) -> None:
        """Gone, or, while it has finalizers, marked deleted (the API server's deletionTimestamp)
        until the last is removed (patch_plan)."""
        found = self.objects.get((kind, namespace, name))
        if found is None:
            return
        meta = found["metadata"]
        if not meta.get("finalizers"):
            del self.objects[(kind, namespace, name)]
        elif not meta.get("deletionTimestamp"):
            meta["deletionTimestamp"] = self.deleted_at
            meta["resourceVersion"] = str(next(self._versions))

    # -- KubeApi ----------------------------------------------------------------------------------

    async def get_plan(self, namespace: str, name: str) -> Obj | None:
        await self._call("get_plan", namespace, name)
        return self._read("plan", namespace, name)

    async def list_plans(self, namespace: str, selector: str) -> list[Obj]:
        await self._call("list_plans", namespace)
        return self._list("plan", namespace, selector)

    async def list_plans_at(self, namespace: str | None, selector: str) -> tuple[list[Obj], str]:
        """Every namespace's when `namespace` is None; the list's resourceVersion: the last
        one given (a watch from it sees the changes after)."""
        await self._call("list_plans_at", namespace or "")
        return self._list("plan", namespace, selector), str(self._last_version())

    def _last_version(self) -> int:
        versions = [int(o["metadata"]["resourceVersion"]) for o in self.objects.values()]
        return max(versions, default=99)

    async def delete_plan_found(self, namespace: str, name: str) -> bool:
        await self._call("delete_plan_found", namespace, name)
        found = ("plan", namespace, name) in self.objects
        self._delete("plan", namespace, name)
        return found

    async def create_plan(self, namespace: str, body: Obj) -> Obj:
        meta = body["metadata"]
        if "name" not in meta:  # generateName: the API server completes it
            meta["name"] = f"{meta['generateName']}{next(self._uids):05d}"
        await self._call("create_plan", namespace, meta["name"])
        return self._create("plan", namespace, body)

    async def delete_plan(self, namespace: str, name: str) -> None:
        await self._call("delete_plan", namespace, name)
        self._delete("plan", namespace, name)

    async def patch_plan_status(
        self, namespace: str, name: str, status: Obj, resource_version: str | None = None
    ) -> Obj:
        """Replace .status whole, as kube.client writes it; with `resource_version`, only the
        Plan as it was read (409 Conflict otherwise, as the API server answers)."""
        await self._call("patch_plan_status", namespace, name)
        return self._write_status("plan", namespace, name, status, resource_version)

    async def delete_plan_as_seen(
        self, namespace: str, name: str, uid: str, resource_version: str
    ) -> None:
        """The API server's preconditions: 409 unless the Plan still has that uid and version."""
        await self._call("delete_plan_as_seen", namespace, name)
        plan = self.objects.get(("plan", namespace, name))
        if plan is None:
            return
        meta = plan["metadata"]
        if meta.get("uid") != uid or meta.get("resourceVersion") != resource_version:
            raise ApiError(409, "Conflict", "Precondition failed: UID or ResourceVersion")
        self._delete("plan", namespace, name)

    async def get_capsule(self, namespace: str, name: str) -> Obj | None:
        await self._call("get_capsule", namespace, name)
        return self._read("capsule", namespace, name)

    async def may_use_capsule(
        self, namespace: str, capsule: str, username: str, groups: list[str]
    ) -> tuple[bool, str]:
        await self._call("may_use_capsule", namespace, capsule)
        self.reviews.append((namespace, capsule, username, groups))
        if (namespace, capsule, username) in self.use_denied:
            return False, f"{username} may not use capsule {capsule}"
        return True, ""

    async def list_plan_reports(self, namespace: str, selector: str) -> list[Obj]:
        await self._call("list_plan_reports", namespace)
        return self._list("planreport", namespace, selector)

    async def create_plan_report(self, namespace: str, body: Obj) -> None:
        await self._call("create_plan_report", namespace, body["metadata"]["name"])
        self._create("planreport", namespace, body)

    async def patch_plan_report(self, namespace: str, name: str, patch: list[Obj]) -> None:
        await self._call("patch_plan_report", namespace, name)
        chunk = self.objects.get(("planreport", namespace, name))
        if chunk is None:
            raise ApiError(404, "NotFound", f'planreports "{name}" not found')
        new = copy.deepcopy(chunk)
        for op in patch:
            key = op["path"].split("/")[1]
            if op["op"] == "test" and new.get(key) != op["value"]:
                raise ApiError(422, "Invalid", f"the test of {op['path']} failed")
            if op["op"] == "add" and op["path"].endswith("/-"):
                new[key].append(op["value"])
            elif op["op"] in ("add", "replace"):
                new[key] = op["value"]
        self.put("planreport", new)

    async def delete_plan_report(self, namespace: str, name: str) -> None:
        await self._call("delete_plan_report", namespace, name)
        self._delete("planreport", namespace, name)

    async def list_jobs(self, namespace: str, selector: str, keep: Keep | None = None) -> list[Obj]:
        await self._call("list_jobs", namespace)
        return self._list("job", namespace, selector, keep)

    async def get_job(self, namespace: str, name: str) -> Obj | None:
        await self._call("get_job", namespace, name)
        return self._read("job", namespace, name)

    async def create_job(self, namespace: str, body: Obj) -> Obj:
        await self._call("create_job", namespace, body["metadata"]["name"])
        return self._create("job", namespace, body)

    async def delete_job(self, namespace: str, name: str) -> None:
        await self._call("delete_job", namespace, name)
        self._delete("job", namespace, name)

    async def list_pods(self, namespace: str, selector: str, keep: Keep | None = None) -> list[Obj]:
        await self._call("list_pods", namespace)
        return self._list("pod", namespace, selector, keep)

    async def get_pod(self, namespace: str, name: str) -> Obj | None:
        await self._call("get_pod", namespace, name)
        return self._read("pod", namespace, name)

    async def get_secret(self, namespace: str, name: str) -> Obj | None:
        await self._call("get_secret", namespace, name)
        return self._read("secret", namespace, name)

    async def read_log(
        self,
        namespace: str,
        pod: str,
        container: str,
        limit_bytes: int,
        window: LogWindow | None = None,
    ) -> str:
        await self._call("read_log", namespace, pod)
        self.windows.append(window)
        if pod not in self.logs:
            raise ApiError(404, "NotFound", f'pods "{pod}" not found')
        return _windowed(self.stderr.get(pod, "") + self.logs[pod], window)[:limit_bytes]

    async def stream_log(
        self,
        namespace: str,
        pod: str,
        container: str,
        feed: Callable[[bytes], None],
        stream: str | None = None,
        limit_bytes: int | None = None,
        window: LogWindow | None = None,
    ) -> None:
        await self._call("stream_log", namespace, pod)
        self.windows.append(window)
        if stream is not None and self.log_streams == "api":
            raise ApiError(422, "Invalid", f'PodLogOptions "{pod}" is invalid: stream: Forbidden')
        if pod not in self.logs:
            raise ApiError(404, "NotFound", f'pods "{pod}" not found')
        if stream is not None and self.log_streams == "kubelet":
            raise ApiError(400, "BadRequest", "unable to return the given log stream")
        out, err = self.logs[pod], self.stderr.get(pod, "")
        if stream == "Stdout" and self.log_streams == "split":
            text = out
        elif stream == "Stderr" and self.log_streams == "split":
            text = err
        else:
            text = err + out
        data = _windowed(text, window).encode()[:limit_bytes]
        for start in range(0, len(data), 1 << 16):  # in chunks, as a response arrives
            feed(data[start : start + (1 << 16)])

    async def create_pvc(self, namespace: str, body: Obj) -> Obj:
        await self._call("create_pvc", namespace, body["metadata"]["name"])
        return self._create("pvc", namespace, body)

    async def list_pvcs(self, namespace: str, selector: str) -> list[Obj]:
        await self._call("list_pvcs", namespace)
        return self._list("pvc", namespace, selector)

    async def delete_pvc(self, namespace: str, name: str) -> None:
        await self._call("delete_pvc", namespace, name)
        self._delete("pvc", namespace, name)

    # -- CliApi: what kubectl-plan asks besides -----------------------------------------------

    async def patch_plan(self, namespace: str, name: str, patch: Obj) -> Obj:
        """A JSON merge patch (RFC 7386) of the Plan: None removes a key."""
        await self._call("patch_plan", namespace, name)
        plan = self.objects.get(("plan", namespace, name))
        if plan is None:
            raise ApiError(404, "NotFound", f'plans "{name}" not found')
        version = (patch.get("metadata") or {}).get("resourceVersion")
        if version is not None and version != plan["metadata"]["resourceVersion"]:
            raise ApiError(409, "Conflict", f'Operation cannot be fulfilled on plans "{name}"')
        _merge(plan, copy.deepcopy(patch))
        plan["metadata"]["resourceVersion"] = str(next(self._versions))
        meta = plan["metadata"]
        if meta.get("deletionTimestamp") and not meta.get("finalizers"):
            del self.objects[("plan", namespace, name)]  # its last finalizer removed: gone
        return copy.deepcopy(plan)

    async def create_capsule(self, namespace: str, body: Obj) -> Obj:
        await self._call("create_capsule", namespace, body["metadata"]["name"])
        return self._create("capsule", namespace, body)

    async def list_events(self, namespace: str, name: str) -> list[Obj]:
        """The Events about the Plan `name` (those posted and those a test appended)."""
        await self._call("list_events", namespace, name)
        return [
            copy.deepcopy(e)
            for e in self.events
            if (e.get("involvedObject") or {}).get("name") == name
            and (e.get("involvedObject") or {}).get("kind", "Plan") == "Plan"
        ]

    async def watch_plan(
        self, namespace: str, name: str, resource_version: str | None, timeout_seconds: int = 240
    ) -> AsyncGenerator[tuple[str, Obj], None]:
        await self._call("watch_plan", namespace, name)
        self.watched_from.append(resource_version)
        try:
            for item in self.watches.pop(0) if self.watches else []:
                if isinstance(item, BaseException):
                    raise item
                if callable(item):  # something happens meanwhile, which no event shows
                    item()
                    continue
                kind, obj = item
                key = ("plan", namespace, (obj.get("metadata") or {}).get("name", name))
                if kind in ("ADDED", "MODIFIED"):  # what the watch shows is the API's truth
                    self.objects[key] = copy.deepcopy(obj)
                elif kind == "DELETED":
                    self.objects.pop(key, None)
                yield item
        finally:
            self.watches_closed += 1  # the real one releases its connection here

    async def follow_log(
        self, namespace: str, pod: str, container: str, window: LogWindow | None = None
    ) -> AsyncGenerator[str, None]:
        await self._call("follow_log", namespace, pod)
        self.windows.append(window)
        if pod not in self.logs:
            raise ApiError(404, "NotFound", f'pods "{pod}" not found')
        # in chunks, through the client's own line reading (kube/loglines.py: long lines cut)
        data, lines = _windowed(self.logs[pod], window).encode(), loglines.LineCutter()
        for start in range(0, len(data), 1 << 16):
            for line in lines.feed(data[start : start + (1 << 16)]):
                yield line
        for line in lines.end():
            yield line

    async def watch_plans(
        self,
        namespace: str | None,
        selector: str,
        resource_version: str | None,
        timeout_seconds: int = 240,
    ) -> AsyncGenerator[tuple[str, Obj], None]:
        """The next scripted watch (`watches`), its objects kept as the API's truth, shown when
        they are in `namespace` (None: any) and match `selector`."""
        await self._call("watch_plans", namespace or "")
        self.watched_from.append(resource_version)
        try:
            for item in self.watches.pop(0) if self.watches else []:
                if isinstance(item, BaseException):
                    raise item
                if callable(item):
                    item()
                    continue
                kind, obj = item
                meta = obj.get("metadata") or {}
                key = ("plan", meta.get("namespace", "ns"), meta.get("name", ""))
                if kind in ("ADDED", "MODIFIED"):
                    self.objects[key] = copy.deepcopy(obj)
                elif kind == "DELETED":
                    self.objects.pop(key, None)
                if namespace in (None, key[1]) and _matches(meta.get("labels") or {}, selector):
                    yield item
        finally:
            self.watches_closed += 1

    async def server_version(self) -> Obj:
        await self._call("server_version", "")
        return copy.deepcopy(self.version)

    async def get_crd(self, name: str) -> Obj | None:
        await self._call("get_crd", "", name)
        return self._read("crd", "", name)

    async def close(self) -> None:
        self.closed += 1

    # -- ScheduleApi: objects by plural ("" is the namespace of cluster-wide ones) ----------------

    async def may_access(
        self,
        resource: str,
        verb: str,
        namespace: str | None,
        name: str,
        username: str,
        groups: list[str],
    ) -> tuple[bool, str]:
        await self._call("may_access", namespace or "", name)
        self.reviews.append((namespace or "", f"{resource}/{name}", username, groups))
        if (resource, verb, namespace or "", name, username) in self.access_denied:
            return False, f"{username} may not {verb} {resource} {name}"
        return True, ""

    async def patch_object(self, plural: str, namespace: str, name: str, patch: Obj) -> Obj:
        await self._call("patch_object", namespace, name)
        found = self.objects.get((_KINDS[plural], namespace, name))
        if found is None:
            raise ApiError(404, "NotFound", f"{plural} {name} not found")
        notes = found["metadata"].setdefault("annotations", {})
        notes.update((patch.get("metadata") or {}).get("annotations") or {})
        found["metadata"]["resourceVersion"] = str(next(self._versions))
        return copy.deepcopy(found)

    async def get_object(self, plural: str, namespace: str | None, name: str) -> Obj | None:
        await self._call("get_object", namespace or "", name)
        return self._read(_KINDS[plural], namespace or "", name)

    async def patch_status(
        self,
        plural: str,
        namespace: str | None,
        name: str,
        status: Obj,
        resource_version: str | None = None,
    ) -> Obj:
        await self._call("patch_status", namespace or "", name)
        return self._write_status(_KINDS[plural], namespace or "", name, status, resource_version)

    async def list_namespaces(self, selector: str) -> list[Obj]:
        await self._call("list_namespaces", "")
        return self._list("namespace", "", selector)

    async def create_event(self, namespace: str, body: Obj) -> None:
        await self._call("create_event", namespace, str(body.get("reason")))
        self.events.append(body)


#: the reason the API server gives each status it answers with
REASONS = {
    400: "BadRequest",
    403: "Forbidden",
    404: "NotFound",
    409: "Conflict",
    410: "Expired",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}
#: kinds that live in no namespace (stored under "")
_CLUSTER_WIDE = {"namespace", "clusterscheduledplan", "crd", "clusterplantemplate"}
#: what `timestamps` puts before each line of a log here (the kubelet writes the line's time)
STAMP = "2026-12-05T10:00:00.000000000Z "


def _windowed(text: str, window: LogWindow | None) -> str:
    """The part of a log a window picks, as the kubelet cuts it: the last `tail_lines` lines,
    each opened by its time with `timestamps` (a since_seconds here keeps every line: all of a
    fake log is recent)."""
    if window is None:
        return text
    lines = text.splitlines(keepends=True)
    if window.tail_lines is not None:
        lines = lines[len(lines) - window.tail_lines :] if window.tail_lines else []
    return "".join(STAMP + line if window.timestamps else line for line in lines)


#: the kinds `put` stores objects under, by the plural ScheduleApi names them with
_KINDS = {
    "plans": "plan",
    "scheduledplans": "scheduledplan",
    "clusterscheduledplans": "clusterscheduledplan",
    "capsules": "capsule",
    "plantemplates": "plantemplate",
    "clusterplantemplates": "clusterplantemplate",
}


async def _awaited(value: object) -> None:
    if inspect.isawaitable(value):
        await value


def _merge(target: Obj, patch: Obj) -> None:
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = value


def _typed(kube: FakeKube) -> tuple[ScheduleApi, CliApi, Cluster]:
    return kube, kube, kube  # mypy checks the fake against the Protocols here
