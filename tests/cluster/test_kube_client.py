"""planops' own API client (planops.kube.client) lists in pages against the real API server:
every object once, `keep` applied page by page, and a continue token that etcd's compaction
expired between two pages answered by one whole list (what client-go's pager does)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from planops.kube import client as client_
from planops.kube.cache import slim_run_object
from tests.cluster.etcd import compact
from tests.conftest import Kube as Kubectl

pytestmark = pytest.mark.cluster


def _job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": {"paging": "yes"}},
        "spec": {
            "suspend": True,  # no pods: only the Jobs are listed
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "local/busybox:1.35.0"}],
                }
            },
        },
    }


def _template(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PodTemplate",
        "metadata": {"name": name, "labels": {"paging": "yes"}},
        "template": {"spec": {"containers": [{"name": "c", "image": "local/busybox:1.35.0"}]}},
    }


class _Counting:
    """The real transport, with the query of every GET kept (and a hook after each answer)."""

    def __init__(self, api: client_.Transport, after: Any = None) -> None:
        self.api, self.after, self.gets = api, after, []

    async def request(self, method: str, path: str, **kw: Any) -> Any:
        if method == "GET":
            self.gets.append(dict(kw.get("query") or {}))
        resp = await self.api.request(method, path, **kw)
        if self.after:
            self.after(len(self.gets))
        return resp


def test_lists_arrive_in_pages_each_object_once_kept_page_by_page(
    kube: Kubectl, kubeconfig: str, namespace: str, monkeypatch: pytest.MonkeyPatch
):
    for i in range(5):
        kube.apply(_job(f"j{i}"), "-n", namespace)
    monkeypatch.setattr(client_, "LIST_PAGE", 2)

    async def main() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        kube = await client_.Kube.connect(kubeconfig)
        counting = _Counting(kube.api)
        kube.api = counting  # type: ignore[assignment]
        try:
            jobs = await kube.list_jobs(
                namespace, "paging=yes", lambda o: slim_run_object("job", o)
            )
        finally:
            await counting.api.close()
        return jobs, counting.gets

    jobs, gets = asyncio.run(main())
    assert sorted(j["metadata"]["name"] for j in jobs) == [f"j{i}" for i in range(5)]
    assert all("managedFields" not in j["metadata"] for j in jobs)  # kept, not whole
    assert all("image" not in j["spec"]["template"]["spec"]["containers"][0] for j in jobs)
    assert [g["limit"] for g in gets] == [2, 2, 2]
    assert gets[0]["continue"] is None and all(g["continue"] for g in gets[1:])


def test_a_continue_token_expired_by_compaction_restarts_the_list_whole(
    kube: Kubectl, kubeconfig: str, namespace: str, monkeypatch: pytest.MonkeyPatch
):
    """PodTemplates are listed from etcd (tests/cluster/up turns their watch cache off), so the
    second page's token is older than the compacted revision: 410 Gone."""
    for i in range(5):
        kube.apply(_template(f"t{i}"), "-n", namespace)
    monkeypatch.setattr(client_, "LIST_PAGE", 2)
    path = f"/api/v1/namespaces/{namespace}/podtemplates"

    def after(n_gets: int) -> None:
        if n_gets == 1:  # the first page is in hand: a change, then compaction, before the next
            kube.run("label", "podtemplate", "t0", "-n", namespace, "changed=yes", "--overwrite")
            compact(kubeconfig)

    async def main() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        kube = await client_.Kube.connect(kubeconfig)
        counting = _Counting(kube.api, after)
        kube.api = counting  # type: ignore[assignment]
        try:
            items = await kube._list(path, labelSelector="paging=yes")
        finally:
            await counting.api.close()
        return items, counting.gets

    items, gets = asyncio.run(main())
    assert sorted(o["metadata"]["name"] for o in items) == [f"t{i}" for i in range(5)]
    assert len(gets) == 3 and gets[1]["continue"] and "limit" not in gets[2]
    t0 = next(o for o in items if o["metadata"]["name"] == "t0")
    assert t0["metadata"]["labels"].get("changed") == "yes"  # one consistent list, after it
