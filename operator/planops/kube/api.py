"""What a Plan's reconcile asks of the Kubernetes API, as a Protocol.

kube.client.Kube is the implementation that sends requests; the reconciler, its reader, its
report writer and the Event recorder are typed by this Protocol instead, so a unit test drives
them with one in-memory fake (tests/unit/fakekube.py: objects, resourceVersions, the API
server's error answers, slow calls) and mypy checks the fake against the same methods.
Errors are kube.client.ApiError, whatever the implementation.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass
from typing import Any, Protocol

Obj = dict[str, Any]
#: what a list's caller holds of each object as its page arrives; None: nothing (the object is
#: not the caller's concern, and a big list's unwanted objects are never held at once)
Keep = Callable[[Obj], Obj | None]


@dataclass(frozen=True)
class LogWindow:
    """Which part of a pod's log to read, as the pod log API takes it (`kubectl logs --tail
    --since --since-time --timestamps`): the last `tail_lines` lines, those written in the last
    `since_seconds` or after `since_time` (RFC 3339), each opened by its RFC 3339 time."""

    tail_lines: int | None = None
    since_seconds: int | None = None
    since_time: str | None = None
    timestamps: bool = False

    def query(self) -> dict[str, str | int | bool | None]:
        return {
            "tailLines": self.tail_lines,
            "sinceSeconds": self.since_seconds,
            "sinceTime": self.since_time,
            "timestamps": self.timestamps or None,
        }


class KubeApi(Protocol):
    """Reads return None for an object that does not exist; deletes of one are no error."""

    async def get_plan(self, namespace: str, name: str) -> Obj | None: ...
    async def list_plans(self, namespace: str, selector: str) -> list[Obj]: ...
    async def create_plan(self, namespace: str, body: Obj) -> Obj: ...
    async def delete_plan(self, namespace: str, name: str) -> None: ...
    async def patch_plan_status(
        self, namespace: str, name: str, status: Obj, resource_version: str | None = None
    ) -> Obj: ...
    async def delete_plan_as_seen(
        self, namespace: str, name: str, uid: str, resource_version: str
    ) -> None: ...
    async def patch_plan(self, namespace: str, name: str, patch: Obj) -> Obj: ...
    async def get_capsule(self, namespace: str, name: str) -> Obj | None: ...
    async def may_use_capsule(
        self, namespace: str, capsule: str, username: str, groups: list[str]
    ) -> tuple[bool, str]: ...
    async def may_access(
        self,
        resource: str,
        verb: str,
        namespace: str | None,
        name: str,
        username: str,
        groups: list[str],
    ) -> tuple[bool, str]: ...
    async def get_object(self, plural: str, namespace: str | None, name: str) -> Obj | None: ...
    async def list_plan_reports(self, namespace: str, selector: str) -> list[Obj]: ...
    async def create_plan_report(self, namespace: str, body: Obj) -> None: ...
    async def patch_plan_report(self, namespace: str, name: str, patch: list[Obj]) -> None: ...
    async def delete_plan_report(self, namespace: str, name: str) -> None: ...
    async def list_jobs(
        self, namespace: str, selector: str, keep: Keep | None = None
    ) -> list[Obj]: ...
    async def get_job(self, namespace: str, name: str) -> Obj | None: ...
    async def create_job(self, namespace: str, body: Obj) -> Obj: ...
    async def delete_job(self, namespace: str, name: str) -> None: ...
    async def list_pods(
        self, namespace: str, selector: str, keep: Keep | None = None
    ) -> list[Obj]: ...
    async def get_pod(self, namespace: str, name: str) -> Obj | None: ...
    async def get_secret(self, namespace: str, name: str) -> Obj | None: ...
    async def stream_log(
        self,
        namespace: str,
        pod: str,
        container: str,
        feed: Callable[[bytes], None],
        stream: str | None = None,
        limit_bytes: int | None = None,
        window: LogWindow | None = None,
    ) -> None: ...
    async def create_pvc(self, namespace: str, body: Obj) -> Obj: ...
    async def list_pvcs(self, namespace: str, selector: str) -> list[Obj]: ...
    async def delete_pvc(self, namespace: str, name: str) -> None: ...
    async def create_event(self, namespace: str, body: Obj) -> None: ...


class ScheduleApi(KubeApi, Protocol):
    """What a ScheduledPlan's reconcile asks besides (reconciler.schedules.shell): its own object by
    plural (namespaced or cluster-wide), its status, the namespaces a selector picks."""

    async def get_object(self, plural: str, namespace: str | None, name: str) -> Obj | None: ...
    async def patch_status(
        self,
        plural: str,
        namespace: str | None,
        name: str,
        status: Obj,
        resource_version: str | None = None,
    ) -> Obj: ...
    async def list_namespaces(self, selector: str) -> list[Obj]: ...


class CliApi(KubeApi, Protocol):
    """What kubectl-plan's cluster verbs ask besides (planops.cli): a Plan's annotations patched
    (re-run, cancel, answer), Capsules created, a Plan's watch and Events, a log read or
    followed, and the connection closed at the end; Plans listed and watched in one namespace
    or all (None) with the list's resourceVersion, deleted by name (`delete`: whether it was
    there), the server's version and a CRD (`version`)."""

    async def list_plans_at(
        self, namespace: str | None, selector: str
    ) -> tuple[list[Obj], str]: ...
    def watch_plans(
        self,
        namespace: str | None,
        selector: str,
        resource_version: str | None,
        timeout_seconds: int = 240,
    ) -> AsyncGenerator[tuple[str, Obj], None]: ...
    async def delete_plan_found(self, namespace: str, name: str) -> bool: ...
    async def server_version(self) -> Obj: ...
    async def get_crd(self, name: str) -> Obj | None: ...

    async def patch_object(self, plural: str, namespace: str, name: str, patch: Obj) -> Obj: ...
    async def create_capsule(self, namespace: str, body: Obj) -> Obj: ...
    async def list_events(self, namespace: str, name: str) -> list[Obj]: ...
    def watch_plan(
        self, namespace: str, name: str, resource_version: str | None, timeout_seconds: int = 240
    ) -> AsyncGenerator[tuple[str, Obj], None]: ...
    async def read_log(
        self,
        namespace: str,
        pod: str,
        container: str,
        limit_bytes: int,
        window: LogWindow | None = None,
    ) -> str: ...
    def follow_log(
        self, namespace: str, pod: str, container: str, window: LogWindow | None = None
    ) -> AsyncGenerator[str, None]: ...
    async def close(self) -> None: ...
