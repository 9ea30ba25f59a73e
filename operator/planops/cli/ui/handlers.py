"""The UI's pages and API, shared by its two servers: `kubectl plan ui` on loopback with the
user's own kubeconfig (cli/ui/server.py) and the chart's UI server for many users, each
authenticated by the cluster and served AS themselves (planops/uiserver). The servers differ only
in who the request is: each one's middleware sets the request's client (`CLIENT`: the user's own,
or one impersonating the user) and identity (`WHO`), and whether actions are offered; everything
a page reads or does goes through that client, so the cluster's RBAC and admission decide.

Addresses (a shareable link per object; the server prefixes them with `/namespaces/NS`, the
loopback server's namespace is fixed): `/` the list, `/plans/NAME` a Plan, `/plans/NAME/runs/RUN`
one of its runs, `/plans/NAME/steps/STEP` a step of it; the page (static/app.js) draws each from
the address. Its data: `/api/plans`, `/api/plans/NAME` (`?run=`), `.../watch` (Server-Sent
Events), `.../log`, and the actions `POST .../cancel|rerun|retry|answer` (server only: the
loopback UI is read-only) with a JSON body, answered `{"message"}` or `{"error"}`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web

from planops.api.names import LABEL_PARENT
from planops.cli import live_graph, steer, steppods, stored
from planops.cli.plan_report import full_report, run_report
from planops.cli.ui import view
from planops.kube.api import CliApi
from planops.kube.client import UNREACHABLE, ApiError
from planops.kube.manifests import CONTAINER, label_value

STATIC = Path(__file__).parent / "static"
LOG_LIMIT = 1 << 20  # bytes of a pod's log shown; `kubectl plan logs` prints it whole
KEEPALIVE = 15.0  # seconds between SSE comments: a closed page is noticed, proxies keep it open
RETRY_MS = 3000  # how soon the browser reconnects a stream that ended
#: a watch that failed (the cluster refused it, or could not be reached)
WATCH_FAILED: tuple[type[BaseException], ...] = (ApiError, *UNREACHABLE)
#: a stream that ended: the page went away, or the cluster did (the browser reconnects)
STREAM_ENDED: tuple[type[BaseException], ...] = (ConnectionError, *WATCH_FAILED)
#: the namespace of the loopback server (the chart's server takes it from the address)
NAMESPACE = web.AppKey("namespace", str)
#: the client a request's reads and actions go through (set by the server's middleware)
CLIENT = web.RequestKey("client", CliApi)
#: who the request is, for the page (`/api/session`): user, groups, csrf, actions
WHO = web.RequestKey("who", dict[str, Any])
#: the cluster's answers passed on as they are (a refusal is the user's, not a server fault)
PASSED_ON = (400, 403, 404, 409, 422)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def client(request: web.Request) -> CliApi:
    return request[CLIENT]


def namespace(request: web.Request) -> str:
    return request.match_info.get("namespace") or request.app[NAMESPACE]


def json_response(obj: Any, status: int = 200) -> web.Response:
    return web.Response(text=view.to_json(obj), status=status, content_type="application/json")


async def cluster_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """The cluster's refusals and an unreachable API server as a JSON error the page shows:
    a refusal (403 of RBAC or admission, 404, 409, 422) with its own status, others as 502."""
    try:
        return await handler(request)
    except ApiError as e:
        status = e.status if e.status in PASSED_ON else 502
        text = f"the cluster answered {e.status} {e.reason}: {e.message}"
        return json_response({"error": text}, status)
    except UNREACHABLE as e:
        return json_response({"error": f"cannot reach the cluster: {type(e).__name__}: {e}"}, 502)


def _not_found(ns: str, name: str) -> web.Response:
    return json_response({"error": f"plan {name!r} not found in namespace {ns}"}, 404)


async def page(_request: web.Request) -> web.StreamResponse:
    """The one HTML page (static/index.html); static/app.js draws the list, a Plan, a run or a
    step from the address."""
    return web.FileResponse(STATIC / "index.html")


async def no_icon(_request: web.Request) -> web.StreamResponse:
    return web.Response(status=204)


async def session(request: web.Request) -> web.StreamResponse:
    """Who the page is (the server's user and groups, its CSRF token) and whether it may act."""
    return json_response(request.get(WHO) or {"actions": False})


async def plans(request: web.Request) -> web.StreamResponse:
    ns = namespace(request)
    return json_response(view.plan_list(ns, await client(request).list_plans(ns, "")))


async def _children(kube: CliApi, ns: str, name: str) -> list[dict[str, Any]]:
    return await kube.list_plans(ns, f"{LABEL_PARENT}={label_value(name)}")


async def plan(request: web.Request) -> web.StreamResponse:
    kube, ns, name = client(request), namespace(request), request.match_info["name"]
    found = await kube.get_plan(ns, name)
    if found is None:
        return _not_found(ns, name)
    run = request.query.get("run")
    if run and run != ((found.get("status") or {}).get("run") or {}).get("id"):
        earlier = await run_report(kube, found, run)  # an earlier run: status.history
        if isinstance(earlier, str):
            return json_response({"error": earlier}, 404)
        return json_response(view.plan_view(ns, found, [], earlier))  # its child Plans are gone
    found = await full_report(kube, found)  # every record, from its PlanReports
    return json_response(view.plan_view(ns, found, await _children(kube, ns, name)))


def _event(kind: str, obj: Any) -> bytes:
    return f"event: {kind}\ndata: {view.to_json(obj)}\n\n".encode()


async def watch(request: web.Request) -> web.StreamResponse:
    """The Plan's view now, then again on each change the API server sends (`event: plan`);
    `event: gone` when it is deleted, `event: problem` when the watch fails (the browser
    reconnects after RETRY_MS). Changes that came while one was being sent are coalesced."""
    kube, ns, name = client(request), namespace(request), request.match_info["name"]
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


async def stored_log(
    kube: CliApi, ns: str, plan: str, step: str, attempt: int | None
) -> dict[str, Any] | None:
    """A step's log from the artifact repository, through the reading URL the operator signed
    into the Plan's status (cli/stored.py): `{"source": "store", "text": ..., "note": ...}`, or
    None when the status holds none. Asked after the step's pod (gone) and before the output
    the report recorded. `kube` is the user's client: the URL comes from the Plan as the user
    may read it, so the user reads the log exactly when they may `get` the Plan, and the URL
    reaches that one object only."""
    found = await kube.get_plan(ns, plan)
    if found is None:
        return None
    got = await stored.read_log(await full_report(kube, found), step, attempt, LOG_LIMIT)
    if got is None:
        return None
    if isinstance(got, str):  # the recorded output follows, with why
        return {"source": "store", "text": "", "note": got}
    text, n, cut = got
    note = f"the step's pod is gone: attempt {n}'s full log, from the artifact repository"
    if cut:
        note += f" (the first {LOG_LIMIT >> 20} MiB)"
    return {"source": "store", "text": text, "note": note}


async def log(request: web.Request) -> web.StreamResponse:
    """A step's log: its newest (or the given) attempt's pod while the pod exists, else the
    log store's (stored_log), else the output the report recorded (as `kubectl plan logs`)."""
    kube, ns, name = client(request), namespace(request), request.match_info["name"]
    step = request.query.get("step", "")
    raw = request.query.get("attempt", "")
    attempt = int(raw) if raw.isascii() and raw.isdigit() else None
    pods = await steppods.step_pods(kube, ns, name, step, attempt) if step else []
    if pods:  # the step's own (by UID, never by labels alone), newest last
        pod = pods[-1]["metadata"]["name"]
        try:
            text = await kube.read_log(ns, pod, CONTAINER, LOG_LIMIT)
        except ApiError as e:  # e.g. 400 while the container is still being created
            return json_response({"source": "pod", "pod": pod, "text": "", "note": e.message})
        note = f"the first {LOG_LIMIT >> 20} MiB" if len(text.encode()) >= LOG_LIMIT else None
        return json_response({"source": "pod", "pod": pod, "text": text, "note": note})
    found = await kube.get_plan(ns, name)
    if found is None:
        return _not_found(ns, name)
    kept = await stored_log(kube, ns, name, step, attempt) if step else None
    if kept is not None and kept["text"]:
        return json_response(kept)
    found = await full_report(kube, found)
    for rec in view.plan_view(ns, found, [])["records"]:
        if rec["stepId"] == step and rec["output"] is not None:
            note = "the step's pod is gone: the output recorded in the report"
            note += f" (the stored log: {kept['note']})" if kept is not None else ""
            return json_response({"source": "report", "text": rec["output"], "note": note})
    return json_response(
        {"error": f"no pod and no recorded output for step {step!r} of {name!r}"}, 404
    )


def _text(body: dict[str, Any], key: str) -> str | None:
    value = body.get(key)
    if value is not None and not isinstance(value, str):
        raise steer.RefusedError(f"{key}: expected a string, got {type(value).__name__}")
    return value or None


async def _steer(kube: CliApi, ns: str, name: str, what: str, body: dict[str, Any]) -> str:
    """One action by its name and JSON body, through cli/steer.py (the CLI verbs' own code)."""
    by = "planops UI"
    if what == "cancel":
        return await steer.cancel(kube, ns, name, body.get("runFinally") is True, by)
    if what == "rerun":
        return await steer.rerun(kube, ns, name)
    if what == "retry":
        return await steer.retry(kube, ns, name, _text(body, "from"))
    step = _text(body, "step") or ""
    if body.get("decline") is True:
        return await steer.answer(kube, ns, name, step, None)
    answer = body.get("answer")
    if not isinstance(answer, dict) or not all(isinstance(v, str) for v in answer.values()):
        raise steer.RefusedError("answer: expected an object of field names to values (text)")
    return await steer.answer(kube, ns, name, step, [f"{k}={v}" for k, v in answer.items()])


ACTIONS = ("cancel", "rerun", "retry", "answer")


async def act(request: web.Request) -> web.StreamResponse:
    """An action on a Plan (`POST .../ACTION`, a JSON object body), made with the request's
    client: the user's own rights decide it (the cluster's refusal is passed on)."""
    what = request.match_info["action"]
    if what not in ACTIONS:
        return json_response({"error": f"no action {what!r} (one of: {', '.join(ACTIONS)})"}, 404)
    try:
        body = await request.json() if request.can_read_body else {}
    except json.JSONDecodeError:
        return json_response({"error": "the body is not JSON"}, 400)
    if not isinstance(body, dict):
        return json_response({"error": "the body is not a JSON object"}, 400)
    ns, name = namespace(request), request.match_info["name"]
    try:
        return json_response({"message": await _steer(client(request), ns, name, what, body)})
    except steer.RefusedError as e:
        return json_response({"error": str(e)}, 400)


def add_routes(app: web.Application, prefix: str, actions: bool) -> None:
    """The pages and API under `prefix` ("" or "/namespaces/{namespace}"); the actions when
    `actions` (the loopback UI is read-only)."""
    for path in ("/", "/plans/{name}", "/plans/{name}/runs/{run}", "/plans/{name}/steps/{step}"):
        app.router.add_get(prefix + path, page)
    app.router.add_get(prefix + "/api/plans", plans)
    app.router.add_get(prefix + "/api/plans/{name}", plan)
    app.router.add_get(prefix + "/api/plans/{name}/watch", watch)
    app.router.add_get(prefix + "/api/plans/{name}/log", log)
    if actions:
        app.router.add_post(prefix + "/api/plans/{name}/{action}", act)


def add_common(app: web.Application) -> None:
    """What both servers serve whatever the namespace: the scripts, the session, no icon."""
    app.router.add_get("/favicon.ico", no_icon)
    app.router.add_get("/api/session", session)
    app.router.add_static("/static/", STATIC)
