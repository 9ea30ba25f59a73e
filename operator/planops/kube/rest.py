"""What every request of kube.client shares: the API's answers read as JSON or as one
`ApiError`, and the paths of the objects planops reads and writes. Apart from kube/client.py
so that module stays one class of requests."""

from __future__ import annotations

import asyncio
import json
from typing import Any, cast
from urllib.parse import quote

import aiohttp

from planops.api.documents import API_GROUP
from planops.kube import jsontext

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


async def _json(resp: aiohttp.ClientResponse) -> Any:
    try:
        if resp.status >= 300:
            try:
                body = await resp.json(content_type=None, loads=jsontext.loads)
                if not isinstance(body, dict):
                    raise ValueError(body)
            except ValueError:  # not JSON: report the raw text
                body = {"reason": resp.reason or "", "message": (await resp.text())[:2000]}
            raise ApiError(resp.status, str(body.get("reason", "")), str(body.get("message", "")))
        return await resp.json(content_type=None, loads=jsontext.loads)
    finally:
        resp.release()


async def _obj(resp: aiohttp.ClientResponse) -> Obj:
    return cast(Obj, await _json(resp))


def _version(page: Obj) -> str:
    return str((page.get("metadata") or {}).get("resourceVersion") or "")


def _name(name: str) -> str:
    return quote(name, safe="")


def _custom(plural: str, namespace: str | None, name: str | None = None, sub: str = "") -> str:
    path = f"/apis/{API_GROUP}/{VERSION}"
    if namespace is not None:
        path += f"/namespaces/{_name(namespace)}"
    path += f"/{plural}"
    if name is not None:
        path += f"/{_name(name)}"
    return path + (f"/{sub}" if sub else "")


def _core(kind: str, namespace: str, name: str | None = None, sub: str = "") -> str:
    path = f"/api/v1/namespaces/{_name(namespace)}/{kind}"
    if name is not None:
        path += f"/{_name(name)}"
    return path + (f"/{sub}" if sub else "")


def _jobs(namespace: str, name: str | None = None) -> str:
    return f"/apis/batch/v1/namespaces/{_name(namespace)}/jobs" + (
        f"/{_name(name)}" if name else ""
    )


def _leases(namespace: str, name: str | None = None) -> str:
    path = f"/apis/coordination.k8s.io/v1/namespaces/{_name(namespace)}/leases"
    return path + (f"/{_name(name)}" if name else "")


def dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), sort_keys=True)
