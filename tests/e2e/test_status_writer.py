"""The one status writer against the real API server: a Plan's status written with the
resourceVersion it was decided from is refused (409 Conflict, kube.errors' CONFLICT) once anyone
changed the Plan since, and nothing is written then; written with the current one, it is. And the
API server's refusals are read by kind, never by message (kube.errors): what a create it refuses
for its own validation, and what a missing object, say."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from planops.kube.client import ApiError, Kube
from planops.kube.errors import ErrorKind
from tests.conftest import Kube as Kubectl
from tests.e2e.conftest import plan

pytestmark = pytest.mark.cluster


def _run(kubeconfig: str, body: Any) -> Any:
    async def go() -> Any:
        api = await Kube.connect(kubeconfig)
        try:
            return await body(api)
        finally:
            await api.close()

    return asyncio.run(go())


def test_a_status_decided_from_an_old_version_is_refused_and_writes_nothing(
    kube: Kubectl, crds: None, namespace: str
):
    kube.apply(plan("p", {"id": "a", "shell": "true"}), "-n", namespace)

    async def body(api: Kube) -> tuple[str, dict[str, Any]]:
        read = await api.get_plan(namespace, "p")
        assert read is not None
        version = read["metadata"]["resourceVersion"]
        written = await api.patch_plan_status(namespace, "p", {"phase": "Pending"}, version)
        assert written["status"] == {"phase": "Pending"}
        # the same version again: the Plan changed since (our own write)
        with pytest.raises(ApiError) as refused:
            await api.patch_plan_status(namespace, "p", {"phase": "Running"}, version)
        after = await api.get_plan(namespace, "p")
        assert after is not None
        return refused.value.kind.name, after

    kind, after = _run(kube.kubeconfig, body)
    assert kind == ErrorKind.CONFLICT.name
    assert after["status"] == {"phase": "Pending"}  # nothing written by the refused one


def test_the_api_servers_own_refusals_are_known_by_kind(kube: Kubectl, crds: None, namespace: str):
    async def body(api: Kube) -> list[str]:
        kinds = []
        bad = {"metadata": {"name": "x"}, "spec": {"template": {"spec": {"containers": []}}}}
        for call in (
            api.create_job(namespace, bad),  # its own validation: Invalid, field by field
            api.patch_plan_status(namespace, "nobody", {}, "1"),  # no such Plan
        ):
            try:
                await call
            except ApiError as e:
                kinds.append(e.kind.name)
        return kinds

    assert _run(kube.kubeconfig, body) == [ErrorKind.INVALID.name, ErrorKind.NOT_FOUND.name]
