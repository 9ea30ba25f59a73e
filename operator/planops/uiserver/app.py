"""The UI server's identity layer around the shared pages and API (cli/ui/handlers.py): who
each request is (uiserver/auth.py: a TokenReview of the user's token, or the trusted proxy's
headers), and a client that makes its every read and action AS that user (impersonation:
kube/ui_client.py), so the cluster's RBAC and the planops admission policies decide, never the
server's own ServiceAccount (which may only review tokens and impersonate).

Addresses: `/namespaces/NS/...` (the shared pages and API, a link per Plan, run and step),
`/login` (GET: the form that takes a token; POST: it, checked, kept in the cookie), `/logout`,
`/healthz` (no login), `/` (to the default namespace's list). Every answer carries the loopback
server's headers (a Content-Security-Policy with no inline script, no framing, no caching).
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from urllib.parse import quote

from aiohttp import web

from planops.cli.ui import handlers
from planops.cli.ui.server import HEADERS
from planops.kube.ui_client import UiKube
from planops.uiserver import auth

PREFIX = "/namespaces/{namespace}"
#: the server's pages may also post the login form to itself
CSP = HEADERS["Content-Security-Policy"].replace("form-action 'none'", "form-action 'self'")
#: the loopback server's headers, but its own page's requests name their origin: under
#: `no-referrer` a browser sends `Origin: null` even to the same origin, and the CSRF check needs
#: the real one (no address here holds a secret, and other origins still get nothing)
SERVER_HEADERS = {**HEADERS, "Content-Security-Policy": CSP, "Referrer-Policy": "same-origin"}
#: served to anyone: the login, the logout, the probe, and `/` (a redirect to a page)
OPEN = ("/", "/login", "/logout", "/healthz", "/favicon.ico")
METHODS = ("GET", "HEAD", "POST")


@dataclass
class Settings:
    """How the server authenticates (the chart's `ui.*` values, as flags)."""

    default_namespace: str = "default"
    #: the cookie only over HTTPS (the server's own TLS, or a TLS proxy/Ingress in front)
    secure_cookie: bool = False
    proxy: auth.ProxyTrust | None = None
    audiences: tuple[str, ...] = ()
    cache: auth.ReviewCache = field(default_factory=auth.ReviewCache)


KUBE = web.AppKey("kube", UiKube)
SETTINGS = web.AppKey("settings", Settings)


async def identify(request: web.Request) -> auth.Identity | None:
    """The request's user: the trusted proxy's, else the bearer token's as the cluster reviews
    it (cached briefly); None when neither."""
    settings, kube = request.app[SETTINGS], request.app[KUBE]
    if settings.proxy is not None and (who := auth.proxied(request.headers, settings.proxy)):
        return who
    found = auth.bearer(request.headers, request.cookies)
    if found is None or auth.token_problem(found[0]) is not None:
        return None
    token, ambient = found
    reviewed = settings.cache.get(token)
    if reviewed is None:
        reviewed = await kube.review_token(token, settings.audiences)
        settings.cache.put(token, reviewed)
    return auth.from_review(token, ambient, reviewed)


def _unauthenticated(request: web.Request) -> web.StreamResponse:
    if request.method == "GET" and "/api/" not in request.path:
        target = quote(request.rel_url.raw_path_qs, safe="/?=&")
        return web.Response(status=303, headers={"Location": f"/login?next={target}"})
    return handlers.json_response({"error": "log in first: no valid token (401)"}, 401)


@web.middleware
async def guard(request: web.Request, handler: handlers.Handler) -> web.StreamResponse:
    """Who the request is (else to the login page, or 401), forged actions refused, and its
    client made AS that user."""
    if request.method not in METHODS:
        return web.Response(status=405, headers={"Allow": ", ".join(METHODS)})
    if request.path in OPEN or request.path.startswith("/static/"):
        return await handler(request)
    who = await identify(request)
    if who is None:
        return _unauthenticated(request)
    if request.method == "POST" and (why := auth.forged(who, request.headers, request.host)):
        return handlers.json_response({"error": f"refused: {why}"}, 403)
    request[handlers.CLIENT] = request.app[KUBE].as_user(who.user, who.groups)
    request[handlers.WHO] = {
        "user": who.user,
        "groups": list(who.groups),
        "via": who.via,
        "csrf": who.csrf,
        "actions": True,
        "defaultNamespace": request.app[SETTINGS].default_namespace,
    }
    return await handlers.cluster_errors(request, handler)


async def _headers(_request: web.Request, response: web.StreamResponse) -> None:
    response.headers.update(SERVER_HEADERS)


LOGIN_PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>planops: log in</title>
<link rel="stylesheet" href="/static/app.css"></head>
<body><header><a href="/">planops</a></header><main>
<h1>Log in</h1>
<p>Paste a token the cluster accepts: your OIDC ID token (when the API server trusts your
issuer), or a ServiceAccount token (<code>kubectl create token NAME</code>). Every page and action
is then made as you: your rights in the cluster decide.</p>
{problem}
<form method="post" action="/login"><input type="hidden" name="next" value="{next}">
<p><textarea name="token" id="token" rows="4" cols="80" autocomplete="off"
 spellcheck="false" required></textarea></p>
<p><button type="submit" id="login">Log in</button></p></form>
</main></body></html>
"""


def _login_page(next_: str, problem: str = "", status: int = 200) -> web.Response:
    shown = f'<p class="error" id="problem">{html.escape(problem)}</p>' if problem else ""
    body = LOGIN_PAGE.format(problem=shown, next=html.escape(auth.safe_next(next_), quote=True))
    return web.Response(text=body, status=status, content_type="text/html")


async def login_form(request: web.Request) -> web.StreamResponse:
    return _login_page(request.query.get("next", "/"))


async def login(request: web.Request) -> web.StreamResponse:
    """The token posted by the form: reviewed by the cluster, then kept in the cookie."""
    form = await request.post()
    next_ = auth.safe_next(str(form.get("next") or "/"))
    if not auth.same_origin(request.headers, request.host):
        return _login_page(next_, "refused: the form was not sent from this server's page", 403)
    token = str(form.get("token") or "").strip()
    problem = auth.token_problem(token) if token else "no token given"
    if problem is None:
        reviewed = await request.app[KUBE].review_token(token, request.app[SETTINGS].audiences)
        request.app[SETTINGS].cache.put(token, reviewed)
        problem = None if reviewed.user else f"the cluster did not accept it: {reviewed.error}"
    if problem is not None:
        return _login_page(next_, problem, 401)
    found = web.Response(status=303, headers={"Location": next_})
    found.set_cookie(
        auth.COOKIE,
        token,
        httponly=True,
        samesite="Strict",
        secure=request.app[SETTINGS].secure_cookie,
        path="/",
    )
    return found


async def logout(request: web.Request) -> web.StreamResponse:
    """The cookie dropped (from this server's page only: another site cannot log one out)."""
    if not auth.same_origin(request.headers, request.host):
        return web.Response(status=403, text="refused: not sent from this server's page\n")
    gone = web.Response(status=303, headers={"Location": "/login"})
    gone.del_cookie(auth.COOKIE, path="/")
    return gone


async def home(request: web.Request) -> web.StreamResponse:
    ns = quote(request.app[SETTINGS].default_namespace, safe="")
    return web.Response(status=303, headers={"Location": f"/namespaces/{ns}/"})


async def healthz(_request: web.Request) -> web.StreamResponse:
    return web.Response(text="ok\n")


def make_app(kube: UiKube, settings: Settings) -> web.Application:
    app = web.Application(middlewares=[guard], client_max_size=1 << 16)
    app[KUBE], app[SETTINGS] = kube, settings
    app.on_response_prepare.append(_headers)
    handlers.add_common(app)
    handlers.add_routes(app, PREFIX, actions=True)
    app.router.add_get("/", home)
    app.router.add_get("/login", login_form)
    app.router.add_post("/login", login)
    app.router.add_post("/logout", logout)
    app.router.add_get("/healthz", healthz)
    return app
