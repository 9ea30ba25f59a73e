"""The chart's UI server (planops.uiserver): who a request is (a TokenReview of its token, or a
proxy believed only with its shared secret), the cookie's flags, the CSRF checks on actions, and
that every read and action goes through a client made AS the user (impersonation headers on the
wire; the server's own identity never reads a Plan). The real app on aiohttp's test server, with
the in-memory API behind a fake reviewer."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, cast

import pytest
from aiohttp import web
from aiohttp.test_utils import TestClient, TestServer
from multidict import CIMultiDict

from planops.kube.api import CliApi
from planops.kube.credentials import Credentials
from planops.kube.transport import Transport
from planops.kube.ui_client import Reviewed, UiKube
from planops.uiserver import app as app_
from planops.uiserver import auth

from .fakekube import FakeKube

ALICE_TOKEN = "alice-token"
ALICE = Reviewed("alice", ("team-a", "system:authenticated"), "")
SECRET = "s" * 24


@dataclass
class FakeUi:
    """The reviewer (tokens it knows) and the impersonating client (the in-memory API, with who
    asked recorded per call)."""

    kube: FakeKube
    reviews: list[str] = field(default_factory=list)
    users: list[tuple[str, tuple[str, ...]]] = field(default_factory=list)

    async def review_token(self, token: str, audiences: tuple[str, ...] = ()) -> Reviewed:
        self.reviews.append(token)
        return ALICE if token == ALICE_TOKEN else Reviewed(None, (), "invalid bearer token")

    def as_user(self, user: str, groups: tuple[str, ...]) -> CliApi:
        self.users.append((user, groups))
        return self.kube


def _plan(name: str = "web", ns: str = "team") -> dict[str, Any]:
    ask = {"stepId": "ok", "question": "q1", "outputSchema": {"type": "object"}}
    return {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"steps": [{"id": "ok", "ask": {"prompt": "?"}}]},
        "status": {"phase": "Running", "run": {"id": "r1"}, "asks": [ask]},
    }


Check = Callable[[TestClient[web.Request, web.Application], FakeUi], Awaitable[None]]


def _run(check: Check, **settings: Any) -> FakeUi:
    fake = FakeUi(FakeKube())
    fake.kube.put("plan", _plan())

    async def go() -> None:
        app = app_.make_app(cast(UiKube, fake), app_.Settings(**settings))
        async with TestClient(TestServer(app)) as client:
            await check(client, fake)

    asyncio.run(go())
    return fake


# -- the pure parts ----------------------------------------------------------------------------


def test_the_authorization_header_wins_over_the_cookie_and_only_the_cookie_is_ambient():
    cookies = {auth.COOKIE: "from-cookie"}
    assert auth.bearer({"Authorization": "Bearer abc"}, cookies) == ("abc", False)
    assert auth.bearer({"Authorization": "bearer  abc "}, {}) == ("abc", False)
    assert auth.bearer({}, cookies) == ("from-cookie", True)
    assert auth.bearer({"Authorization": "Basic abc"}, {}) is None
    assert auth.bearer({}, {}) is None


def test_a_sessions_csrf_token_is_its_credentials_and_no_other():
    assert auth.csrf_token("a") == auth.csrf_token("a")
    assert auth.csrf_token("a") != auth.csrf_token("b")
    assert "secret-token" not in auth.csrf_token("secret-token")


def test_an_ambient_post_needs_this_servers_origin_and_the_csrf_token():
    who = auth.Identity("alice", (), "token", True, "T")
    ok = {"Origin": "http://ui.example", auth.CSRF_HEADER: "T"}
    assert auth.forged(who, ok, "ui.example") is None
    evil = {**ok, "Origin": "http://evil.example"}
    assert "Origin" in (auth.forged(who, evil, "ui.example") or "")
    assert "Origin" in (auth.forged(who, {auth.CSRF_HEADER: "T"}, "ui.example") or "")
    assert "Origin" in (auth.forged(who, {**ok, "Origin": "null"}, "ui.example") or "")
    assert auth.CSRF_HEADER in (auth.forged(who, {**ok, auth.CSRF_HEADER: "X"}, "ui.example") or "")
    referer = {"Referer": "https://ui.example/namespaces/a/", auth.CSRF_HEADER: "T"}
    assert auth.forged(who, referer, "ui.example") is None
    # an API client's Authorization header is never sent by a browser on its own
    client = auth.Identity("alice", (), "token", False, "T")
    assert auth.forged(client, {}, "ui.example") is None


def test_proxy_headers_are_believed_only_with_the_proxys_secret():
    trust = auth.ProxyTrust(SECRET)
    headers = CIMultiDict(
        [("X-Remote-User", "bob"), ("X-Remote-Group", "a, b"), ("X-Remote-Group", "c")]
    )
    assert auth.proxied(headers, trust) is None
    headers["X-Planops-Proxy-Secret"] = SECRET[:-1] + "x"
    assert auth.proxied(headers, trust) is None
    headers["X-Planops-Proxy-Secret"] = SECRET
    who = auth.proxied(headers, trust)
    assert who is not None
    assert (who.user, who.groups, who.via, who.ambient) == ("bob", ("a", "b", "c"), "proxy", True)


def test_after_login_only_a_path_of_this_server():
    assert auth.safe_next("/namespaces/a/plans/x") == "/namespaces/a/plans/x"
    for bad in ("//evil.example/", "https://evil.example/", "/\\evil.example", "", None):
        assert auth.safe_next(bad) == "/"


def test_a_review_is_cached_briefly_by_hash_and_a_refusal_not_at_all():
    cache = auth.ReviewCache(ttl=30, size=2)
    cache.put("t1", ALICE, now=0)
    assert cache.get("t1", now=29) == ALICE
    assert cache.get("t1", now=31) is None
    cache.put("bad", Reviewed(None, (), "no"), now=0)
    assert cache.get("bad", now=1) is None
    for i in range(3):
        cache.put(f"t{i}", ALICE, now=0)
    assert cache.get("t0", now=1) is None  # the oldest forgotten
    assert all(len(k) == 32 and b"t1" not in k for k in cache._seen)  # hashes, not tokens


def test_a_token_too_long_or_with_odd_characters_is_never_sent_for_review():
    assert auth.token_problem("a" * auth.MAX_TOKEN) is None
    assert auth.token_problem("a" * (auth.MAX_TOKEN + 1)) is not None
    assert auth.token_problem("a b") is not None
    assert auth.token_problem("a\nb") is not None


# -- impersonation on the wire -------------------------------------------------------------------


def test_the_users_client_sends_impersonation_headers_and_the_servers_own_does_not():
    seen: list[tuple[str, list[str], list[str], str]] = []

    async def record(request: web.Request) -> web.Response:
        h = request.headers
        seen.append(
            (
                h.get("Impersonate-User", ""),
                h.getall("Impersonate-Group", []),
                h.getall("Authorization", []),
                request.path,
            )
        )
        return web.json_response({"metadata": {"name": "web"}})

    async def go() -> None:
        api = web.Application()
        api.router.add_route("*", "/{tail:.*}", record)
        async with TestServer(api) as server:
            creds = Credentials(server=str(server.make_url("")), token="ui-sa-token")
            ui = UiKube(Transport(creds))
            try:
                await ui.as_user("alice", ("team-a", "system:authenticated")).get_plan("t", "web")
                await ui.get_plan("t", "web")  # the same pool, without the user's headers
                await ui.as_user("bob", ()).get_plan("t", "web")
            finally:
                await ui.close()

    asyncio.run(go())
    bearer = ["Bearer ui-sa-token"]
    path = "/apis/planops.dev/v1alpha1/namespaces/t/plans/web"
    assert seen == [
        ("alice", ["team-a", "system:authenticated"], bearer, path),
        ("", [], bearer, path),
        ("bob", [], bearer, path),
    ]


def test_a_token_review_asks_the_api_server_and_reads_its_answer():
    bodies: list[Any] = []

    async def review(request: web.Request) -> web.Response:
        body = await request.json()
        bodies.append(body)
        ok = body["spec"]["token"] == "good"
        user = {"username": "system:serviceaccount:t:alice", "groups": ["g"]}
        return web.json_response(
            {"status": {"authenticated": ok, "user": user if ok else {}, "error": "bad"}}
        )

    async def go() -> tuple[Reviewed, Reviewed]:
        api = web.Application()
        api.router.add_post("/apis/authentication.k8s.io/v1/tokenreviews", review)
        async with TestServer(api) as server:
            ui = UiKube(Transport(Credentials(server=str(server.make_url("")), token="sa")))
            try:
                return await ui.review_token("good", ("planops",)), await ui.review_token("no")
            finally:
                await ui.close()

    good, bad = asyncio.run(go())
    assert good == Reviewed("system:serviceaccount:t:alice", ("g",), "")
    assert bad == Reviewed(None, (), "bad")
    assert bodies[0]["spec"] == {"token": "good", "audiences": ["planops"]}
    assert bodies[1]["spec"] == {"token": "no"}


# -- the server ------------------------------------------------------------------------------------


def test_without_a_token_a_page_goes_to_login_and_the_api_answers_401():
    async def check(c: TestClient[web.Request, web.Application], fake: FakeUi) -> None:
        r = await c.get("/namespaces/team/plans/web", allow_redirects=False)
        assert (r.status, r.headers["Location"]) == (303, "/login?next=/namespaces/team/plans/web")
        r = await c.get("/namespaces/team/api/plans")
        assert r.status == 401
        r = await c.get("/namespaces/team/api/plans", headers={"Authorization": "Bearer nope"})
        assert r.status == 401
        r = await c.post("/namespaces/team/api/plans/web/rerun", json={})
        assert r.status == 401
        assert (await c.get("/healthz")).status == 200
        login = await c.get("/login?next=//evil.example/")
        assert 'name="next" value="/"' in await login.text()
        assert fake.users == []  # nothing was read by anyone

    fake = _run(check)
    assert fake.kube.calls == []


def _origin(c: TestClient[web.Request, web.Application]) -> dict[str, str]:
    return {"Origin": str(c.make_url("")).rstrip("/")}


@pytest.mark.parametrize("secure", [False, True])
def test_login_keeps_the_token_in_an_httponly_samesite_strict_cookie(secure: bool):
    async def check(c: TestClient[web.Request, web.Application], fake: FakeUi) -> None:
        form = {"token": ALICE_TOKEN, "next": "/namespaces/team/plans/web"}
        r = await c.post("/login", data=form, headers=_origin(c), allow_redirects=False)
        assert (r.status, r.headers["Location"]) == (303, "/namespaces/team/plans/web")
        cookie = r.headers["Set-Cookie"]
        assert cookie.startswith(f"{auth.COOKIE}={ALICE_TOKEN};")
        flags = {f.strip().split("=")[0].lower() for f in cookie.split(";")[1:]}
        assert {"httponly", "samesite", "path"} <= flags
        assert "SameSite=Strict" in cookie
        assert ("secure" in flags) is secure
        if not secure:  # (a Secure cookie is not sent back over this test's plain HTTP)
            who = await (await c.get("/api/session")).json()  # the cookie now rides along
            assert (who["user"], who["csrf"]) == ("alice", auth.csrf_token(ALICE_TOKEN))

    _run(check, secure_cookie=secure)


def test_a_login_is_refused_with_a_bad_token_or_from_another_origin():
    async def check(c: TestClient[web.Request, web.Application], fake: FakeUi) -> None:
        r = await c.post("/login", data={"token": "nope"}, headers=_origin(c))
        assert r.status == 401 and "did not accept it: invalid bearer token" in await r.text()
        assert "Set-Cookie" not in r.headers
        evil = {"Origin": "http://evil.example"}
        r = await c.post("/login", data={"token": ALICE_TOKEN}, headers=evil)
        assert r.status == 403 and "Set-Cookie" not in r.headers
        r = await c.post("/login", data={"token": "x" * 5000}, headers=_origin(c))
        assert r.status == 401
        assert fake.reviews == ["nope"]  # neither the other site's nor the odd one reviewed

    _run(check)


def test_reads_and_actions_are_made_by_a_client_impersonating_the_user():
    async def check(c: TestClient[web.Request, web.Application], fake: FakeUi) -> None:
        c.session.cookie_jar.update_cookies({auth.COOKIE: ALICE_TOKEN})
        body = await (await c.get("/namespaces/team/api/plans")).json()
        assert [p["name"] for p in body["items"]] == ["web"]
        assert fake.users == [("alice", ALICE.groups)]
        headers = {**_origin(c), auth.CSRF_HEADER: auth.csrf_token(ALICE_TOKEN)}
        r = await c.post("/namespaces/team/api/plans/web/rerun", json={}, headers=headers)
        assert r.status == 200, await r.text()
        assert "re-run" in (await r.json())["message"]
        assert fake.users[-1] == ("alice", ALICE.groups)
        assert fake.reviews == [ALICE_TOKEN]  # the second request: the cached review

    fake = _run(check)
    ann = fake.kube.get("plan", "team", "web")["metadata"]["annotations"]  # type: ignore[index]
    assert "planops.dev/rerun" in ann


def test_an_action_riding_the_cookie_without_the_csrf_token_or_from_elsewhere_is_refused():
    async def check(c: TestClient[web.Request, web.Application], fake: FakeUi) -> None:
        c.session.cookie_jar.update_cookies({auth.COOKIE: ALICE_TOKEN})
        csrf = {auth.CSRF_HEADER: auth.csrf_token(ALICE_TOKEN)}
        for headers in (
            _origin(c),
            {**csrf, "Origin": "http://evil.example"},
            csrf,
            {**_origin(c), auth.CSRF_HEADER: auth.csrf_token("another")},
        ):
            r = await c.post("/namespaces/team/api/plans/web/cancel", json={}, headers=headers)
            assert r.status == 403, headers
            assert "refused" in (await r.json())["error"]
        # an API client with its token in the Authorization header needs neither
        bearer = {"Authorization": f"Bearer {ALICE_TOKEN}"}
        r = await c.post("/namespaces/team/api/plans/web/cancel", json={}, headers=bearer)
        assert r.status == 200, await r.text()

    fake = _run(check)
    ann = fake.kube.get("plan", "team", "web")["metadata"]["annotations"]  # type: ignore[index]
    assert list(ann) == ["planops.dev/cancel"]
    assert ann["planops.dev/cancel"].startswith("planops UI at ")


def test_an_answer_is_checked_by_the_clis_own_rules_and_the_clusters_refusal_passes_on():
    async def check(c: TestClient[web.Request, web.Application], fake: FakeUi) -> None:
        bearer = {"Authorization": f"Bearer {ALICE_TOKEN}"}
        url = "/namespaces/team/api/plans/web/answer"
        r = await c.post(url, json={"step": "nope", "answer": {}}, headers=bearer)
        assert r.status == 400
        assert "not waiting for an answer (waiting: ok)" in (await r.json())["error"]
        r = await c.post(url, json={"step": "ok", "answer": {"a": 1}}, headers=bearer)
        assert r.status == 400
        r = await c.post(url, data=b"[1", headers=bearer)
        assert r.status == 400
        r = await c.post(url, json={"step": "ok", "decline": True}, headers=bearer)
        assert r.status == 200, await r.text()
        fake.kube.refuse("patch_plan", 403, 'User "alice" cannot patch plans')
        r = await c.post(url, json={"step": "ok", "decline": True}, headers=bearer)
        assert r.status == 403
        assert 'User "alice" cannot patch' in (await r.json())["error"]
        r = await c.post("/namespaces/team/api/plans/web/delete", json={}, headers=bearer)
        assert r.status == 404

    fake = _run(check)
    ann = fake.kube.get("plan", "team", "web")["metadata"]["annotations"]  # type: ignore[index]
    (value,) = ann.values()
    assert json.loads(value) == {"run": "r1", "question": "q1", "declined": True}


def test_a_proxys_user_is_believed_only_with_its_secret():
    async def check(c: TestClient[web.Request, web.Application], fake: FakeUi) -> None:
        forged = {"X-Remote-User": "root", "X-Remote-Group": "system:masters"}
        r = await c.get("/namespaces/team/api/plans", headers=forged)
        assert r.status == 401
        wrong = {**forged, "X-Planops-Proxy-Secret": "w" * 24}
        assert (await c.get("/namespaces/team/api/plans", headers=wrong)).status == 401
        good = {"X-Remote-User": "bob", "X-Remote-Group": "team-b"}
        good["X-Planops-Proxy-Secret"] = SECRET
        r = await c.get("/namespaces/team/api/plans", headers=good)
        assert r.status == 200
        assert fake.users == [("bob", ("team-b",))]
        r = await c.post("/namespaces/team/api/plans/web/rerun", json={}, headers=good)
        assert r.status == 403  # a proxy's session is ambient: its POST needs Origin and CSRF

    _run(check, proxy=auth.ProxyTrust(SECRET))


def test_the_server_pages_allow_the_login_form_and_nothing_inline():
    async def check(c: TestClient[web.Request, web.Application], fake: FakeUi) -> None:
        r = await c.get("/login")
        csp = r.headers["Content-Security-Policy"]
        assert "form-action 'self'" in csp and "script-src 'self'" in csp
        assert "unsafe-inline" not in csp and r.headers["X-Frame-Options"] == "DENY"
        assert r.headers["Referrer-Policy"] == "same-origin"  # else a POST's Origin is "null"
        r = await c.get("/", allow_redirects=False)
        assert r.headers["Location"] == "/namespaces/team-default/"

    _run(check, default_namespace="team-default")
