"""`kubectl plan ui`: a read-only web page of a namespace's Plans, served on loopback by aiohttp
(already installed: the Kubernetes client runs on it) with the user's own kubeconfig.

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
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from aiohttp import web

from planops.api.names import LABEL_PARENT
from planops.cli import cluster, live_graph, steppods
from planops.cli.exit_codes import EXIT_INPUT, EXIT_OK
from planops.cli.plan_report import full_report, run_report
from planops.cli.ui import view
from planops.kube.api import CliApi
from planops.kube.client import UNREACHABLE, ApiError
from planops.kube.manifests import CONTAINER, label_value

STATIC = Path(__file__).parent / "static"
LOG_LIMIT = 1 << 20  # bytes of a pod's log shown; `kubectl plan logs` prints it whole
KEEPALIVE = 15.0  # seconds between SSE comments: a closed page is noticed, proxies keep it open
RETRY_MS = 3000  # how soon the browser reconnects a stream that ended
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
#: a watch that failed (the cluster refused it, or could not be reached)
WATCH_FAILED: tuple[type[BaseException], ...] = (ApiError, *UNREACHABLE)
#: a stream that ended: the page went away, or the cluster did (the browser reconnects)
STREAM_ENDED: tuple[type[BaseException], ...] = (ConnectionError, *WATCH_FAILED)
KUBE = web.AppKey("kube", CliApi)
NAMESPACE = web.AppKey("namespace", str)
PORT = web.AppKey("port", int)
TOKEN = web.AppKey("token", str)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


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
async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
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
    try:
        return await handler(request)
    except ApiError as e:
        return _json({"error": f"the cluster answered {e.status} {e.reason}: {e.message}"}, 502)
    except UNREACHABLE as e:
        return _json({"error": f"cannot reach the cluster: {type(e).__name__}: {e}"}, 502)


async def _headers(_request: web.Request, response: web.StreamResponse) -> None:
    response.headers.update(HEADERS)


def _json(obj: Any, status: int = 200) -> web.Response:
    return web.Response(text=view.to_json(obj), status=status, content_type="application/json")


def _not_found(ns: str, name: str) -> web.Response:
    return _json({"error": f"plan {name!r} not found in namespace {ns}"}, 404)


async def page(_request: web.Request) -> web.StreamResponse:
    """The one HTML page (static/index.html); static/app.js draws the list or a Plan from the
    address."""
    return web.FileResponse(STATIC / "index.html")


async def no_icon(_request: web.Request) -> web.StreamResponse:
    return web.Response(status=204)


async def plans(request: web.Request) -> web.StreamResponse:
    ns = request.app[NAMESPACE]
    return _json(view.plan_list(ns, await request.app[KUBE].list_plans(ns, "")))


async def _children(kube: CliApi, ns: str, name: str) -> list[dict[str, Any]]:
    return await kube.list_plans(ns, f"{LABEL_PARENT}={label_value(name)}")


async def plan(request: web.Request) -> web.StreamResponse:
    kube, ns, name = request.app[KUBE], request.app[NAMESPACE], request.match_info["name"]
    found = await kube.get_plan(ns, name)
    if found is None:
        return _not_found(ns, name)
    run = request.query.get("run")
    if run and run != ((found.get("status") or {}).get("run") or {}).get("id"):
        earlier = await run_report(kube, found, run)  # an earlier run: status.history
        if isinstance(earlier, str):
            return _json({"error": earlier}, 404)
        return _json(view.plan_view(ns, found, [], earlier))  # its child Plans are gone
    found = await full_report(kube, found)  # every record, from its PlanReports
    return _json(view.plan_view(ns, found, await _children(kube, ns, name)))


def _event(kind: str, obj: Any) -> bytes:
    return f"event: {kind}\ndata: {view.to_json(obj)}\n\n".encode()


async def watch(request: web.Request) -> web.StreamResponse:
    """The Plan's view now, then again on each change the API server sends (`event: plan`);
    `event: gone` when it is deleted, `event: problem` when the watch fails (the browser
    reconnects after RETRY_MS). Changes that came while one was being sent are coalesced."""
    kube, ns, name = request.app[KUBE], request.app[NAMESPACE], request.match_info["name"]
    current = await kube.get_plan(ns, name)
    if current is None:
        return _not_found(ns, name)
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    await resp.write(f"retry: {RETRY_MS}\n\n".encode())
    queue: asyncio.Queue[tuple[str, Any]] = asyncio.Queue()

    async def follow(plan: dict[str, Any]) -> None:
        try:
            while (plan_or_none := await live_graph.next_version(kube, ns, name, plan)) is not None:
                plan = plan_or_none
                await queue.put(("plan", plan))
            await queue.put(("gone", {"name": name}))
        except WATCH_FAILED as e:
            await queue.put(("problem", {"error": f"the watch failed: {e}"}))

    task = asyncio.create_task(follow(current))
    kind, obj = "plan", current
    try:
        while True:
            if kind == "plan":
                # the status repeats the last records; the others are in the PlanReports
                omitted = ((obj.get("status") or {}).get("report") or {}).get("stepsOmitted")
                obj = await full_report(kube, obj) if omitted else obj
                shown = view.plan_view(ns, obj, await _children(kube, ns, name))
                await resp.write(_event("plan", shown))
            else:
                await resp.write(_event(kind, obj))
                break
            while True:
                try:
                    kind, obj = await asyncio.wait_for(queue.get(), KEEPALIVE)
                    break
                except TimeoutError:
                    await resp.write(b": keepalive\n\n")
            while kind == "plan" and not queue.empty():
                kind, obj = queue.get_nowait()
    except STREAM_ENDED:
        pass
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    return resp


async def log(request: web.Request) -> web.StreamResponse:
    """A step's log: its newest (or the given) attempt's pod while the pod exists, else the
    output the report recorded (as `kubectl plan logs` does)."""
    kube, ns, name = request.app[KUBE], request.app[NAMESPACE], request.match_info["name"]
    step = request.query.get("step", "")
    raw = request.query.get("attempt", "")
    attempt = int(raw) if raw.isascii() and raw.isdigit() else None
    pods = await steppods.step_pods(kube, ns, name, step, attempt) if step else []
    if pods:  # the step's own (by UID, never by labels alone), newest last
        pod = pods[-1]["metadata"]["name"]
        try:
            text = await kube.read_log(ns, pod, CONTAINER, LOG_LIMIT)
        except ApiError as e:  # e.g. 400 while the container is still being created
            return _json({"source": "pod", "pod": pod, "text": "", "note": e.message})
        note = f"the first {LOG_LIMIT >> 20} MiB" if len(text.encode()) >= LOG_LIMIT else None
        return _json({"source": "pod", "pod": pod, "text": text, "note": note})
    found = await kube.get_plan(ns, name)
    if found is None:
        return _not_found(ns, name)
    found = await full_report(kube, found)
    for rec in view.plan_view(ns, found, [])["records"]:
        if rec["stepId"] == step and rec["output"] is not None:
            note = "the step's pod is gone: the output recorded in the report"
            return _json({"source": "report", "text": rec["output"], "note": note})
    return _json({"error": f"no pod and no recorded output for step {step!r} of {name!r}"}, 404)


def make_app(kube: CliApi, namespace: str, port: int, token: str) -> web.Application:
    app = web.Application(middlewares=[guard])
    app[KUBE], app[NAMESPACE], app[PORT], app[TOKEN] = kube, namespace, port, token
    app.on_response_prepare.append(_headers)
    app.router.add_get("/", page)
    app.router.add_get("/plans/{name}", page)
    app.router.add_get("/favicon.ico", no_icon)
    app.router.add_get("/api/plans", plans)
    app.router.add_get("/api/plans/{name}", plan)
    app.router.add_get("/api/plans/{name}/watch", watch)
    app.router.add_get("/api/plans/{name}/log", log)
    app.router.add_static("/static/", STATIC)
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
