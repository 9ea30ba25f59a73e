"""`kubectl plan ui`'s session token: loopback is shared by every user of the machine, so every
route answers only a request that carries this session's token, as the printed address's
`?token=` or the cookie a page opened with it sets; without it, or with another, 403 and a hint.
The real app on a real loopback socket, and the real `serve` with the in-memory API."""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import stat
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest
from aiohttp import web

from planops.cli.ui import server
from planops.kube.client import Kube

from .fakekube import FakeKube

TOKEN = server.new_token()
#: every route of the app, the live stream and the logs included (none reaches the cluster
#: without the token: the client here is None, which would fail loudly)
ROUTES = [
    "/",
    "/plans/web",
    "/plans/web/runs/r1",
    "/plans/web/steps/a",
    "/api/session",
    "/favicon.ico",
    "/static/app.js",
    "/api/plans",
    "/api/plans/web",
    "/api/plans/web/watch",
    "/api/plans/web/log?step=a",
]


async def _ask(asks: list[tuple[str, dict[str, str]]]) -> list[tuple[int, Any, str]]:
    sock = server.listen(0)
    port = int(sock.getsockname()[1])
    runner = web.AppRunner(server.make_app(cast(Kube, None), "team", port, TOKEN), access_log=None)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    out = []
    try:
        async with aiohttp.ClientSession() as session:
            for path, headers in asks:
                hdrs = {k: v.replace("PORT", str(port)) for k, v in headers.items()}
                async with session.get(
                    f"http://127.0.0.1:{port}{path}", headers=hdrs, allow_redirects=False
                ) as r:
                    out.append((r.status, r.headers, await r.text()))
    finally:
        await runner.cleanup()
    return out


def test_every_route_refuses_a_request_without_the_token_and_says_where_it_is():
    got = asyncio.run(_ask([(path, {}) for path in ROUTES]))
    for (status, _, body), path in zip(got, ROUTES, strict=True):
        assert status == 403, path
        assert "needs the token of its session" in body and "?token=" in body, path


def test_a_wrong_token_is_refused_as_a_query_and_as_a_cookie():
    wrong = TOKEN[:-1] + ("A" if TOKEN[-1] != "A" else "B")
    asks = [(f"{path}{'&' if '?' in path else '?'}token={wrong}", {}) for path in ROUTES]
    asks += [(path, {"Cookie": f"planops-ui-PORT={wrong}"}) for path in ROUTES]
    asks += [("/", {"Cookie": f"planops-ui-1={TOKEN}"})]  # another server's cookie name
    asks += [("/?token=", {}), ("/", {"Cookie": "planops-ui-PORT="})]
    assert [status for status, _, _ in asyncio.run(_ask(asks))] == [403] * len(asks)


def test_a_page_opened_with_the_token_sets_the_cookie_and_drops_it_from_the_address():
    (home, _), (plan, _) = [
        (r[:2], r[2])
        for r in asyncio.run(
            _ask([(f"/?token={TOKEN}", {}), (f"/plans/a%20b?token={TOKEN}&run=r1", {})])
        )
    ]
    for (status, headers), where in ((home, "/"), (plan, "/plans/a%20b?run=r1")):
        assert status == 303 and headers["Location"] == where
        cookie = headers["Set-Cookie"]
        assert re.match(r"planops-ui-\d+=" + re.escape(TOKEN) + ";", cookie)
        assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Path=/" in cookie


def test_the_cookie_or_the_query_token_is_accepted_on_every_kind_of_route():
    cookie = {"Cookie": f"planops-ui-PORT={TOKEN}"}
    got = asyncio.run(
        _ask(
            [
                ("/", cookie),
                ("/plans/web", cookie),
                ("/static/app.js", cookie),
                ("/favicon.ico", cookie),
                (f"/static/app.js?token={TOKEN}", {}),  # not a page: served, not redirected
                (f"/favicon.ico?token={TOKEN}", {}),
            ]
        )
    )
    assert [status for status, _, _ in got] == [200, 200, 200, 204, 200, 204]
    assert '<script src="/static/app.js"' in got[0][2] and "textContent" in got[2][2]


def test_the_token_is_checked_after_the_host_and_before_the_method():
    asks = [("/", {"Host": "rebound.example", "Cookie": f"planops-ui-PORT={TOKEN}"})]
    (rebound,) = asyncio.run(_ask(asks))
    assert rebound[0] == 403 and "127.0.0.1:PORT" in rebound[2]


def test_tokens_are_random_and_long():
    tokens = {server.new_token() for _ in range(100)}
    assert len(tokens) == 100 and all(len(t) >= 43 for t in tokens)  # 256 bits, base64


def test_the_browser_is_opened_on_a_private_file_that_redirects(tmp_path: Path):
    url = f"http://127.0.0.1:1234/plans/x?token={TOKEN}&a=<b>"
    with server.redirect_file(url) as page:
        path = Path(page.removeprefix("file://"))
        text = path.read_text()
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
        assert 'http-equiv="refresh"' in text and TOKEN in text
        assert "<b>" not in text and "&amp;a=&lt;b&gt;" in text
    assert not path.exists() and not path.parent.exists()


def test_the_printed_address_opens_the_page_and_nothing_else_does(
    capsys: pytest.CaptureFixture[str],
):
    async def go() -> tuple[str, list[int]]:
        kube = FakeKube()
        args = argparse.Namespace(name=None, port=0, no_open=True)
        task = asyncio.create_task(server.serve(kube, args, "team"))
        printed = ""
        for _ in range(200):
            await asyncio.sleep(0.01)
            printed += capsys.readouterr().out
            if "http://" in printed:
                break
        url = re.search(r"http://\S+", printed)
        assert url is not None, printed
        base = url.group(0).split("?")[0]
        statuses = []
        try:
            # a browser's cookies: kept for an IP address too (aiohttp's jar needs `unsafe`)
            async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as s:
                async with s.get(base) as r:  # the address without its token
                    statuses.append(r.status)
                async with s.get(url.group(0)) as r:  # redirected, with the cookie
                    statuses.append(r.status)
                async with s.get(base + "api/plans") as r:  # the page's own request
                    statuses.append(r.status)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        return url.group(0), statuses

    url, statuses = asyncio.run(go())
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/\?token=[\w-]{43,}", url)
    assert statuses == [403, 200, 200]
    assert os.environ.get("PLANOPS_UI_TOKEN") is None  # never passed through the environment
