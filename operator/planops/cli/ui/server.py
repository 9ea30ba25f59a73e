"""`kubectl plan ui`: a read-only web page of a namespace's Plans, served on loopback by aiohttp
(already installed: the Kubernetes client runs on it) with the user's own kubeconfig. Its pages
and API are cli/ui/handlers.py's, shared with the chart's UI server (planops.uiserver): this
module is only the loopback server's identity layer (the session token, the Host check) and its
start.

It adds no server-side credentials and no RBAC: every request the page makes is turned into a
request of the user's own client (`planops.kube.client.Kube`), so the page sees what `kubectl
plan get/describe/logs` would, and nothing more. Live status comes from a watch of the one Plan
(`Kube.watch_plan`, the one `kubectl plan graph --watch` uses), pushed to the page as
Server-Sent Events: one long GET per open page, no polling, and the browser's EventSource
reconnects by itself when the stream ends.

Security, since the page reads a cluster with the user's credentials:
- every request needs this session's token (a random 256-bit value made at start, as Jupyter
  does): the printed address carries it (`?token=...`), which sets an HttpOnly cookie and
  redirects to the same page without it, so the page's own requests (its data, its live
  stream, the logs, its scripts) carry the cookie; anything else is refused (403). Loopback is
  shared by every user of the machine: without it any of them could read the user's Plans and
  step logs with the user's credentials. Compared in constant time. The browser is opened on a
  private file that redirects to the address (Jupyter's way too), so the token is never on a
  command line other users may read (`ps`);
- it listens on 127.0.0.1 only, and refuses (403) any request whose Host header is not
  `127.0.0.1:PORT` or `localhost:PORT`: a page on another site that rebinds its DNS name to
  127.0.0.1 sends its own name as the Host, so it cannot read these answers;
- GET and HEAD only (405 otherwise): nothing here changes the cluster;
- the page's DOM is built with `textContent` (static/app.js), never from markup, under a
  Content-Security-Policy that allows scripts from this server's files only (no inline
  script, no eval, no other origin); JSON answers escape `<`, `>`, `&` (view.to_json);
- one cookie, the token's (HttpOnly, SameSite=Lax, named after the port: two pages of two
  servers keep theirs); no CORS headers (another origin's script cannot read an answer);
  frames refused.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hmac
import html
import os
import secrets
import shutil
import socket
import sys
import tempfile
import webbrowser
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlencode

from aiohttp import web

from planops.cli import cluster
from planops.cli.exit_codes import EXIT_INPUT, EXIT_OK
from planops.cli.ui import handlers, view
from planops.kube.api import CliApi

STATIC = handlers.STATIC
READ_ONLY = ("GET", "HEAD")
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
    "Cache-Control": "no-store",
}
KUBE = web.AppKey("kube", CliApi)
PORT = web.AppKey("port", int)
TOKEN = web.AppKey("token", str)


def new_token() -> str:
    """A session's token: 256 random bits, URL-safe."""
    return secrets.token_urlsafe(32)


def cookie_name(port: int) -> str:
    """The token's cookie: one per port, since cookies are kept per host, not per port."""
    return f"planops-ui-{port}"


def _same(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def _authorized(request: web.Request) -> web.StreamResponse | None:
    """None when the request carries this session's token (its cookie, or `?token=`); a page
    opened with `?token=` is redirected to itself without it, setting the cookie; else 403."""
    token, port = request.app[TOKEN], request.app[PORT]
    if _same(request.cookies.get(cookie_name(port)), token):
        return None
    if not _same(request.query.get("token"), token):
        return web.Response(
            status=403,
            text="forbidden: this page needs the token of its session: open the address "
            "`kubectl plan ui` printed (http://127.0.0.1:PORT/?token=...)\n",
        )
    if not (request.path == "/" or request.path.startswith("/plans/")):
        return None  # not a page (the API, a static file) asked with the token: served
    rest = urlencode([(k, v) for k, v in request.query.items() if k != "token"])
    path = request.rel_url.raw_path
    found = web.Response(status=303, headers={"Location": path + (f"?{rest}" if rest else "")})
    found.set_cookie(cookie_name(port), token, httponly=True, samesite="Lax", path="/")
    return found


@web.middleware
async def guard(request: web.Request, handler: handlers.Handler) -> web.StreamResponse:
    """Loopback names only (DNS rebinding), this session's token only (other local users), read-
    only methods only; the cluster's refusals and an unreachable API server as a JSON error the
    page shows."""
    if not view.host_allowed(request.headers.get("Host"), request.app[PORT]):
        return web.Response(status=403, text="forbidden: open this page as http://127.0.0.1:PORT/")
    if (refused := _authorized(request)) is not None:
        return refused
    if request.method not in READ_ONLY:
        return web.Response(
            status=405, headers={"Allow": ", ".join(READ_ONLY)}, text="read-only: GET only"
        )
    request[handlers.CLIENT] = request.app[KUBE]
    return await handlers.cluster_errors(request, handler)


async def _headers(_request: web.Request, response: web.StreamResponse) -> None:
    response.headers.update(HEADERS)


def make_app(kube: CliApi, namespace: str, port: int, token: str) -> web.Application:
    app = web.Application(middlewares=[guard])
    app[KUBE], app[handlers.NAMESPACE], app[PORT], app[TOKEN] = kube, namespace, port, token
    app.on_response_prepare.append(_headers)
    handlers.add_common(app)
    handlers.add_routes(app, "", actions=False)
    return app


def listen(port: int) -> socket.socket:
    """A socket on 127.0.0.1:`port` (0: a free one), never on another interface."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    return sock


@contextlib.contextmanager
def redirect_file(url: str) -> Iterator[str]:
    """A file:// address of a page that sends the browser on to `url`, in a directory only this
    user may read (removed after): the browser is started with it, so `url`'s token never
    appears on a command line, which every local user may read."""
    folder = tempfile.mkdtemp(prefix="planops-ui-")  # mode 0700
    try:
        page = Path(folder) / "open.html"
        fd = os.open(page, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        link = html.escape(url, quote=True)
        with os.fdopen(fd, "w") as f:
            f.write(
                f'<!doctype html><meta charset="utf-8"><meta http-equiv="refresh" '
                f'content="0;url={link}"><title>planops</title><a href="{link}">planops UI</a>\n'
            )
        yield page.as_uri()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def browser_here() -> bool:
    """A graphical browser can be opened: macOS, Windows, or a Linux/BSD desktop session (on a
    bare terminal `webbrowser` would start a text browser in it, over this command's output)."""
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


async def serve(kube: CliApi, args: argparse.Namespace, ns: str) -> int:
    """Check what the page needs (the Plan, the right to list Plans), listen, print the
    address, open it in a browser when there is one, and serve until interrupted."""
    if args.name and await kube.get_plan(ns, args.name) is None:
        sys.stderr.write(f"error: plan {args.name!r} not found in namespace {ns}\n")
        return EXIT_INPUT
    await kube.list_plans(ns, "")  # refused (RBAC, no CRD): said now, as the other verbs do
    try:
        sock = listen(args.port)
    except OSError as e:
        sys.stderr.write(f"error: --port {args.port}: cannot listen on 127.0.0.1: {e.strerror}\n")
        return EXIT_INPUT
    port, token = int(sock.getsockname()[1]), new_token()
    app = make_app(kube, ns, port, token)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
    await runner.setup()
    try:
        await web.SockSite(runner, sock).start()
        url = f"http://127.0.0.1:{port}/"
        if args.name:
            url += f"plans/{quote(args.name, safe='')}"
        url += f"?token={token}"
        print(f"planops UI of namespace {ns}: {url}", flush=True)
        print(
            "read-only, for this address only (its token is this session's: keep it to "
            "yourself); Ctrl-C stops it",
            file=sys.stderr,
            flush=True,
        )
        with contextlib.ExitStack() as opened:
            if not args.no_open and browser_here():  # the file stays while the page may load
                page = opened.enter_context(redirect_file(url))
                await asyncio.get_running_loop().run_in_executor(None, webbrowser.open, page)
            await asyncio.Event().wait()
    finally:
        await runner.cleanup()
    return EXIT_OK


def run(args: argparse.Namespace) -> int:
    if not 0 <= args.port <= 65535:
        sys.stderr.write(f"error: --port {args.port}: a port is 0 (any free one) to 65535\n")
        return EXIT_INPUT
    try:
        return cluster.run(args, serve)
    except KeyboardInterrupt:
        sys.stderr.write("stopped\n")
        return EXIT_OK
