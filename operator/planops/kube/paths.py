"""Where each object lives in the API: the paths of the collections and objects planops reads
and writes (kube/client.py's requests), each name quoted as one path segment."""

from __future__ import annotations

from urllib.parse import quote

from planops.api.documents import API_GROUP

VERSION = "v1alpha1"


def segment(name: str) -> str:
    return quote(name, safe="")


def custom(plural: str, namespace: str | None, name: str | None = None, sub: str = "") -> str:
    path = f"/apis/{API_GROUP}/{VERSION}"
    if namespace is not None:
        path += f"/namespaces/{segment(namespace)}"
    path += f"/{plural}"
    if name is not None:
        path += f"/{segment(name)}"
    return path + (f"/{sub}" if sub else "")


def core(kind: str, namespace: str, name: str | None = None, sub: str = "") -> str:
    path = f"/api/v1/namespaces/{segment(namespace)}/{kind}"
    if name is not None:
        path += f"/{segment(name)}"
    return path + (f"/{sub}" if sub else "")


def jobs(namespace: str, name: str | None = None) -> str:
    return f"/apis/batch/v1/namespaces/{segment(namespace)}/jobs" + (
        f"/{segment(name)}" if name else ""
    )


def leases(namespace: str, name: str | None = None) -> str:
    path = f"/apis/coordination.k8s.io/v1/namespaces/{segment(namespace)}/leases"
    return path + (f"/{segment(name)}" if name else "")
