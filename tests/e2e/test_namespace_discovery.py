"""kopf's namespace discovery against the real API server (kopf_adapter.fix_namespace_discovery).

With a namespace glob, kopf's observer lists the namespaces, then starts a watch that lists
them again before it watches. A namespace created between the two listings is only in the
second, which kopf's own processor ignores: that namespace's Plans were never watched. The
window is a second or so wide at operator start; this test makes it certain by creating the
namespace at the moment kopf's observer has finished its own listing, and runs kopf's real
observer (not the whole operator) so that nothing else can discover the namespace for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from planops.handlers import kopf_adapter
from tests.conftest import Kube
from tests.e2e.conftest import NS_PREFIX

pytestmark = pytest.mark.cluster


def test_a_namespace_created_between_kopfs_two_listings_is_watched(
    kube: Kube, kubeconfig: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert kopf_adapter.fix_namespace_discovery()
    from kopf._cogs.clients import auth, fetching, scanning  # noqa: PLC0415
    from kopf._cogs.configs import configuration  # noqa: PLC0415
    from kopf._cogs.structs import credentials, references  # noqa: PLC0415
    from kopf._core.reactor import observation  # noqa: PLC0415

    from planops.handlers.config import CONFIG  # noqa: PLC0415

    monkeypatch.setattr(CONFIG, "kubeconfig", kubeconfig)
    group = f"{NS_PREFIX}disc-{uuid.uuid4().hex[:6]}"
    late = f"{group}-late"
    listings: list[str] = []
    real_fetch = fetching.fetch_objs

    async def fetch_objs(**kw: Any) -> AsyncIterator[Any]:
        async for chunk in real_fetch(**kw):
            yield chunk
        if kw["resource"].plural == "namespaces":
            listings.append("namespaces")
            if len(listings) == 1:  # the observer's own listing is done; its watch's is next
                kube.run("create", "namespace", late)

    monkeypatch.setattr(fetching, "fetch_objs", fetch_objs)

    async def discover() -> set[Any]:
        vault = credentials.Vault()
        await vault.populate({"planops": await kopf_adapter.login()})
        auth.vault_var.set(vault)
        settings = configuration.OperatorSettings()
        insights = references.Insights()
        log = logging.getLogger("test")
        await insights.backbone.fill(
            resources=await scanning.scan_resources(groups={""}, settings=settings, logger=log)
        )
        task = asyncio.create_task(
            observation.namespace_observer(
                clusterwide=False,
                namespaces=[f"{group}-*"],
                insights=insights,
                settings=settings,
            )
        )
        try:
            for _ in range(100):  # 20 s
                if late in insights.namespaces:
                    break
                await asyncio.sleep(0.2)
            return set(insights.namespaces)
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    try:
        seen = asyncio.run(discover())
        assert len(listings) >= 2, listings  # the namespace was created between two listings
        assert seen == {late}
    finally:
        kube.run("delete", "namespace", late, "--wait=false", check=False)
