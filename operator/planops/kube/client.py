"""The one place that talks to the Kubernetes API (enforced by tests/unit/test_layering.py).

A thin layer over the official async client (`kubernetes.aio`): every call uses its
`*_without_preload_content` form, so objects stay plain dicts (as users write them, as Jobs are
built) and a non-2xx answer becomes one `ApiError` with the API's reason and message, which the
reconciler turns into a defined outcome (AlreadyExists = adopt, Forbidden from an admission policy
= the step is refused, anything else = retry on the next reconcile).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from dataclasses import dataclass
from typing import Any, cast

import aiohttp
from kubernetes.aio import client
from kubernetes.aio import config as _config

from planops.api.documents import API_GROUP
from planops.kube import kubeconfig as kubeconfig_

VERSION = "v1alpha1"
Obj = dict[str, Any]


class ApiError(Exception):
    """A non-2xx answer of the API server."""

    def __init__(self, status: int, reason: str, message: str) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status, self.reason, self.message = status, reason, message

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def already_exists(self) -> bool:
        return self.status == 409 and self.reason == "AlreadyExists"

    @property
    def refused_by_admission(self) -> bool:
        """Refused by an admission webhook or policy (ValidatingAdmissionPolicy, Kyverno, ...)."""
        return self.status in (400, 403, 422) and (
            "admission" in self.message.lower()
            or "denied" in self.message.lower()
            or "policy" in self.message.lower()
        )


class ConfigError(Exception):
    """No usable credentials: the kubeconfig cannot be read, or lacks a context, cluster or user
    it needs (and no pod's own credentials either)."""


#: What reaching the API server can raise besides an answer (ApiError): refused or reset
#: connections, names that do not resolve, TLS failures, no answer in time.
UNREACHABLE: tuple[type[BaseException], ...] = (aiohttp.ClientError, OSError, asyncio.TimeoutError)

# kubernetes.aio.config is untyped
config: Any = _config


async def _json(resp: Any) -> Any:
    if resp.status >= 300:
        try:
            body = await resp.json()
        except Exception:  # not JSON: report the raw text
            body = {"reason": resp.reason or "", "message": (await resp.text())[:2000]}
        resp.release()
        raise ApiError(resp.status, str(body.get("reason", "")), str(body.get("message", "")))
    data = await resp.json()
    resp.release()
    return data


async def _obj(resp: Any) -> Obj:
    return cast(Obj, await _json(resp))


async def _text(resp: Any) -> str:
    if resp.status >= 300:
        await _json(resp)  # raises ApiError
    text = await resp.text(errors="replace")
    resp.release()
    return str(text)


@dataclass
class Kube:
    """Typed-by-convention access to the objects planops reads and writes."""

    api: client.ApiClient

    @classmethod
    async def connect(cls, kubeconfig: str | None = None, context: str | None = None) -> Kube:
        """In-cluster credentials, else the kubeconfig (given, else every file $KUBECONFIG
        lists, merged as kubectl merges them, else ~/.kube/config: kube.kubeconfig);
        ConfigError when neither is usable."""
        try:
            if not (kubeconfig or context):
                try:
                    config.load_incluster_config()
                    return cls(client.ApiClient())
                except config.ConfigException:
                    pass
            await config.load_kube_config_from_dict(kubeconfig_.merged(kubeconfig), context)
        except (config.ConfigException, kubeconfig_.KubeconfigError) as e:
            raise ConfigError(str(e)) from None
        return cls(client.ApiClient())

    async def close(self) -> None:
        await cast(Any, self.api).close()

    # The generated APIs are typed with their pydantic models but accept plain dicts at runtime;
    # planops keeps objects as dicts throughout, so the APIs are used as `Any` here, in one place.
    @property
    def _custom(self) -> Any:
        return client.CustomObjectsApi(self.api)

    @property
    def _batch(self) -> Any:
        return client.BatchV1Api(self.api)

    @property
    def _core(self) -> Any:
        return client.CoreV1Api(self.api)

    @property
    def _coordination(self) -> Any:
        return client.CoordinationV1Api(self.api)

    # -- the leader's Lease (planops.kube.leader) --------------------------------------------

    async def get_lease(self, namespace: str, name: str) -> Obj | None:
        try:
            return await _obj(
                await self._coordination.read_namespaced_lease_without_preload_content(
                    name, namespace
                )
            )
        except ApiError as e:
            if e.not_found:
                return None
            raise

    async def create_lease(self, namespace: str, body: Obj) -> Obj:
        return await _obj(
            await self._coordination.create_namespaced_lease_without_preload_content(
                namespace, body
            )
        )

    async def replace_lease(self, namespace: str, name: str, body: Obj) -> Obj:
        """A full update carrying the resourceVersion read: 409 Conflict when someone else wrote
        the Lease in between (optimistic concurrency: two candidates cannot both win)."""
        return await _obj(
            await self._coordination.replace_namespaced_lease_without_preload_content(
                name, namespace, body
            )
        )

    # -- planops resources ------------------------------------------------------------------

    async def get_plan(self, namespace: str, name: str) -> Obj | None:
        return await self.get_object("plans", namespace, name)

    async def list_plans(self, namespace: str, selector: str) -> list[Obj]:
        data = await _json(
            await self._custom.list_namespaced_custom_object_without_preload_content(
                API_GROUP, VERSION, namespace, "plans", label_selector=selector
            )
        )
        return list(data["items"])

    async def create_plan(self, namespace: str, body: Obj) -> Obj:
        return await _obj(
            await self._custom.create_namespaced_custom_object_without_preload_content(
                API_GROUP, VERSION, namespace, "plans", body
            )
        )

    async def delete_plan(self, namespace: str, name: str) -> None:
        try:
            await _json(
                await self._custom.delete_namespaced_custom_object_without_preload_content(
                    API_GROUP, VERSION, namespace, "plans", name, propagation_policy="Background"
                )
            )
        except ApiError as e:
            if not e.not_found:
                raise

    async def patch_plan_status(self, namespace: str, name: str, status: Obj) -> Obj:
        """Replace .status whole (status subresource; spec untouched), with one JSON Patch `add`:
        unlike a merge patch, explicit nulls of the report (failedStep: null) are kept."""
        return await _obj(
            await self._custom.patch_namespaced_custom_object_status_without_preload_content(
                API_GROUP,
                VERSION,
                namespace,
                "plans",
                name,
                [{"op": "add", "path": "/status", "value": status}],
                _content_type="application/json-patch+json",
            )
        )

    async def patch_plan(self, namespace: str, name: str, patch: Obj) -> Obj:
        """A merge patch of the Plan itself (metadata: the rerun / cancel annotations)."""
        return await _obj(
            await self._custom.patch_namespaced_custom_object_without_preload_content(
                API_GROUP,
                VERSION,
                namespace,
                "plans",
                name,
                patch,
                _content_type="application/merge-patch+json",
            )
        )

    async def watch_plan(
        self, namespace: str, name: str, resource_version: str | None, timeout_seconds: int = 240
    ) -> AsyncGenerator[tuple[str, Obj], None]:
        """The watch events of one Plan after `resource_version`, as (type, object): ADDED,
        MODIFIED, DELETED, BOOKMARK. It ends when the server closes the watch (after
        `timeout_seconds`): watch again from the last resourceVersion seen. An ERROR event
        (410 Gone: that version is too old) is raised as ApiError. Close it (`aclosing`) when
        leaving it early: that releases the connection."""
        resp = await self._custom.list_namespaced_custom_object_without_preload_content(
            API_GROUP,
            VERSION,
            namespace,
            "plans",
            field_selector=f"metadata.name={name}",
            watch=True,
            allow_watch_bookmarks=True,
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
        )
        if resp.status >= 300:
            await _json(resp)  # raises ApiError
        try:
            while line := await resp.content.readline():
                event = json.loads(line)
                kind, obj = str(event.get("type", "")), event.get("object") or {}
                if kind == "ERROR":
                    raise ApiError(
                        int(obj.get("code") or 500),
                        str(obj.get("reason", "")),
                        str(obj.get("message", "")),
                    )
                yield kind, obj
        finally:
            resp.release()

    async def get_capsule(self, namespace: str, name: str) -> Obj | None:
        return await self.get_object("capsules", namespace, name)

    async def create_capsule(self, namespace: str, body: Obj) -> Obj:
        return await _obj(
            await self._custom.create_namespaced_custom_object_without_preload_content(
                API_GROUP, VERSION, namespace, "capsules", body
            )
        )

    # -- any planops kind (scheduled plans; cluster-scoped when namespace is None) -----------------

    async def get_object(self, plural: str, namespace: str | None, name: str) -> Obj | None:
        try:
            if namespace is None:
                return await _obj(
                    await self._custom.get_cluster_custom_object_without_preload_content(
                        API_GROUP, VERSION, plural, name
                    )
                )
            return await _obj(
                await self._custom.get_namespaced_custom_object_without_preload_content(
                    API_GROUP, VERSION, namespace, plural, name
                )
            )
        except ApiError as e:
            if e.not_found:
                return None
            raise

    async def patch_status(
        self, plural: str, namespace: str | None, name: str, status: Obj
    ) -> None:
        """Replace .status whole (JSON Patch `add`, as for Plans)."""
        body = [{"op": "add", "path": "/status", "value": status}]
        ct = "application/json-patch+json"
        if namespace is None:
            await _json(
                await self._custom.patch_cluster_custom_object_status_without_preload_content(
                    API_GROUP, VERSION, plural, name, body, _content_type=ct
                )
            )
        else:
            await _json(
                await self._custom.patch_namespaced_custom_object_status_without_preload_content(
                    API_GROUP, VERSION, namespace, plural, name, body, _content_type=ct
                )
            )

    async def list_namespaces(self, selector: str) -> list[Obj]:
        data = await _json(
            await self._core.list_namespace_without_preload_content(label_selector=selector)
        )
        return list(data["items"])

    # -- Jobs and pods --------------------------------------------------------------------------

    async def list_jobs(self, namespace: str, selector: str) -> list[Obj]:
        data = await _json(
            await self._batch.list_namespaced_job_without_preload_content(
                namespace, label_selector=selector
            )
        )
        return list(data["items"])

    async def get_job(self, namespace: str, name: str) -> Obj | None:
        try:
            return await _obj(
                await self._batch.read_namespaced_job_without_preload_content(name, namespace)
            )
        except ApiError as e:
            if e.not_found:
                return None
            raise

    async def create_job(self, namespace: str, body: Obj) -> Obj:
        return await _obj(
            await self._batch.create_namespaced_job_without_preload_content(namespace, body)
        )

    async def delete_job(self, namespace: str, name: str) -> None:
        try:
            await _json(
                await self._batch.delete_namespaced_job_without_preload_content(
                    name, namespace, propagation_policy="Background"
                )
            )
        except ApiError as e:
            if not e.not_found:
                raise

    async def list_pods(self, namespace: str, selector: str) -> list[Obj]:
        data = await _json(
            await self._core.list_namespaced_pod_without_preload_content(
                namespace, label_selector=selector
            )
        )
        return list(data["items"])

    async def get_pod(self, namespace: str, name: str) -> Obj | None:
        try:
            return await _obj(
                await self._core.read_namespaced_pod_without_preload_content(name, namespace)
            )
        except ApiError as e:
            if e.not_found:
                return None
            raise

    async def read_log(self, namespace: str, pod: str, container: str, limit_bytes: int) -> str:
        return await _text(
            await self._core.read_namespaced_pod_log_without_preload_content(
                pod, namespace, container=container, limit_bytes=limit_bytes
            )
        )

    # -- workspace claims ------------------------------------------------------------------------

    async def create_pvc(self, namespace: str, body: Obj) -> Obj:
        return await _obj(
            await self._core.create_namespaced_persistent_volume_claim_without_preload_content(
                namespace, body
            )
        )

    async def list_pvcs(self, namespace: str, selector: str) -> list[Obj]:
        data = await _json(
            await self._core.list_namespaced_persistent_volume_claim_without_preload_content(
                namespace, label_selector=selector
            )
        )
        return list(data["items"])

    async def delete_pvc(self, namespace: str, name: str) -> None:
        try:
            await _json(
                await self._core.delete_namespaced_persistent_volume_claim_without_preload_content(
                    name, namespace
                )
            )
        except ApiError as e:
            if not e.not_found:
                raise

    # -- events ----------------------------------------------------------------------------------

    async def list_events(self, namespace: str, name: str) -> list[Obj]:
        data = await _json(
            await self._core.list_namespaced_event_without_preload_content(
                namespace, field_selector=f"involvedObject.name={name},involvedObject.kind=Plan"
            )
        )
        return list(data["items"])

    async def create_event(self, namespace: str, body: Obj) -> None:
        await _json(
            await self._core.create_namespaced_event_without_preload_content(namespace, body)
        )


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)
