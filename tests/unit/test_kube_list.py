"""The client's lists hold only what the caller keeps of each object (`keep`, None: nothing), as
each page arrives, and a list whose continue token expired starts again whole without holding
the first attempt's objects twice. Against a small HTTP server: the client's own paging."""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from planops.kube import client as client_
from planops.kube.client import Kube
from planops.kube.credentials import Credentials
from planops.kube.transport import Transport

from .helpers import serving

Obj = dict[str, Any]


def _job(name: str) -> Obj:
    return {"metadata": {"name": name, "namespace": "ns"}}


def _listed(expire_once: bool, keep: Any) -> tuple[list[Obj], list[dict[str, str]]]:
    requests: list[dict[str, str]] = []
    expired = [expire_once]

    async def jobs(request: web.Request) -> web.Response:
        query = dict(request.query)
        requests.append(query)
        if not query.get("continue"):
            meta = {"resourceVersion": "7"}
            if query.get("limit"):
                meta["continue"] = "page2"
                return web.json_response({"metadata": meta, "items": [_job("a"), _job("b")]})
            return web.json_response({"metadata": meta, "items": [_job(n) for n in "abcd"]})
        if expired[0]:
            expired[0] = False
            body = {"kind": "Status", "code": 410, "reason": "Expired", "message": "too old"}
            return web.json_response(body, status=410)
        meta = {"resourceVersion": "7"}
        return web.json_response({"metadata": meta, "items": [_job("c"), _job("d")]})

    async def scenario() -> list[Obj]:
        app = web.Application()
        app.router.add_get("/apis/batch/v1/namespaces/ns/jobs", jobs)
        runner, port = await serving(app)
        kube = Kube(Transport(Credentials(server=f"http://127.0.0.1:{port}")))
        try:
            return await kube.list_jobs("ns", "planops.dev/plan=p", keep)
        finally:
            await kube.close()
            await runner.cleanup()

    return asyncio.run(scenario()), requests


def _names(objs: list[Obj]) -> list[str]:
    return [o["metadata"]["name"] for o in objs]


def test_a_list_holds_only_what_keep_keeps_page_by_page():
    got, requests = _listed(False, lambda o: None if o["metadata"]["name"] in "bc" else o)
    assert _names(got) == ["a", "d"]
    assert [r.get("continue") for r in requests] == [None, "page2"]  # two pages
    assert requests[0]["limit"] == str(client_.LIST_PAGE)


def test_a_list_whose_token_expired_starts_again_whole_and_holds_each_object_once():
    got, requests = _listed(True, lambda o: None if o["metadata"]["name"] == "c" else o)
    assert _names(got) == ["a", "b", "d"]
    assert len(requests) == 3 and "limit" not in requests[2]  # the whole list, unpaged
