"""The informers (kube.informer) against a scripted API server: list then watch from the list's
version, an explicit sync state, resumption from the last version seen (bookmarks too), a new
list on 410 Gone that finds what was deleted meanwhile, and the operator's use of them (its
queues start once they have listed; a run's Jobs and pods feed the run-object cache
directly; with namespace patterns, one informer per matching namespace)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator, Callable
from typing import Any

import pytest
from aiohttp import web

from planops.api.names import LABEL_PLAN, LABEL_RUN
from planops.handlers.config import Config
from planops.handlers.wiring import Operator
from planops.kube import informer as informer_
from planops.kube import jsontext
from planops.kube.client import ApiError, Kube
from planops.kube.credentials import Credentials
from planops.kube.informer import JOBS, NAMESPACES, Informer
from planops.kube.transport import Transport

from .fakekube import FakeKube
from .helpers import serving

Obj = dict[str, Any]
Script = list[Any]


def obj(name: str, version: str, ns: str = "ns", plan: str = "p", run: str = "r1") -> Obj:
    labels = {LABEL_PLAN: plan, LABEL_RUN: run, "planops.dev/step": name}
    return {
        "metadata": {"name": name, "namespace": ns, "resourceVersion": version, "labels": labels}
    }


def bookmark(version: str) -> tuple[str, Obj]:
    return "BOOKMARK", {"metadata": {"resourceVersion": version}}


class Api:
    """list_pages and watch as an API server answers them, from scripts: each list is (items,
    version) or an error; each watch a list of events, ending with an error or not (the server
    closed it); past the scripts a watch stays open. Every request is recorded."""

    def __init__(self, lists: Script, watches: Script) -> None:
        self.lists, self.watches = lists, watches
        self.requests: list[tuple[str, str, str | None, dict[str, Any]]] = []
        self.idle = asyncio.Event()  # set once a watch waits past the scripts
        self.readers: set[Any] = set()  # how the answers were to be read

    async def list_pages(
        self, path: str, each: Callable[[Obj], None], query: Any, loads: Any = None
    ) -> str:
        self.requests.append(("list", path, None, query))
        self.readers.add(loads)
        answer = self.lists.pop(0)
        if isinstance(answer, Exception):
            raise answer
        items, version = answer
        for item in items:
            each(item)
        return str(version)

    async def watch(
        self,
        path: str,
        version: str | None,
        query: Any,
        timeout: int = 0,
        loads: Any = None,
        idle: float | None = None,
    ) -> AsyncGenerator[tuple[str, Obj], None]:
        self.requests.append(("watch", path, version, query))
        self.readers.add(loads)
        if not self.watches:
            self.idle.set()
            await asyncio.Event().wait()
        for event in self.watches.pop(0):
            if isinstance(event, Exception):
                raise event
            yield event


def run_informer(api: Api, relisted: Callable[[set[tuple[str, str]], str], None] | None = None):
    seen: list[tuple[str | None, str]] = []
    synced_at: list[bool] = []  # has_synced() as each event was handed on

    async def scenario() -> Informer:
        def record(kind: str | None, o: Obj) -> None:
            seen.append((kind, o["metadata"]["name"]))
            synced_at.append(inf.has_synced())

        inf = Informer(api, JOBS, "ns", record, relisted, selector=LABEL_PLAN)  # type: ignore[arg-type]
        assert not inf.has_synced()
        inf.start()
        await inf.wait_synced()
        await asyncio.wait_for(api.idle.wait(), 5)
        await inf.stop()
        return inf

    inf = asyncio.run(scenario())
    return inf, seen, synced_at


@pytest.fixture(autouse=True)
def no_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(informer_, "MAX_BACKOFF", 0.0)


def test_it_lists_hands_each_object_on_syncs_and_watches_from_the_lists_version():
    api = Api([([obj("a", "5"), obj("b", "6")], "7")], [[("MODIFIED", obj("a", "8"))]])
    _, seen, synced_at = run_informer(api)
    assert seen == [(None, "a"), (None, "b"), ("MODIFIED", "a")]
    assert synced_at == [False, False, True]  # synced once the whole list was handed on
    (kind, path, _, query), *watches = api.requests
    assert (kind, path, query) == (
        "list",
        "/apis/batch/v1/namespaces/ns/jobs",
        {"labelSelector": LABEL_PLAN},
    )
    assert [(w[0], w[2]) for w in watches] == [("watch", "7"), ("watch", "8")]
    # a Job's fields are all typed: read by orjson (a Plan's any JSON is read by jsontext.loads)
    assert api.readers == {jsontext.loads_typed}


def test_a_watch_the_server_ends_resumes_from_the_last_version_seen_bookmarks_too():
    api = Api(
        [([], "10")],
        [[("ADDED", obj("a", "11")), bookmark("15")], [bookmark("20")], [ConnectionError("x")]],
    )
    _, seen, _ = run_informer(api)
    assert seen == [("ADDED", "a")]  # a bookmark is no object
    assert [r[2] for r in api.requests if r[0] == "watch"] == ["10", "15", "20", "20"]
    assert [r[0] for r in api.requests].count("list") == 1  # never listed again for that


def test_410_gone_lists_again_and_what_the_list_lacks_is_known_gone():
    gone = ApiError(410, "Expired", "too old resource version")
    api = Api(
        [([obj("a", "5"), obj("b", "6")], "7"), ([obj("b", "9")], "30")],
        [[("MODIFIED", obj("a", "8")), gone]],
    )
    lists: list[tuple[set[tuple[str, str]], str]] = []
    _, seen, _ = run_informer(api, lambda names, version: lists.append((names, version)))
    assert lists == [({("ns", "a"), ("ns", "b")}, "7"), ({("ns", "b")}, "30")]
    assert seen[-1] == (None, "b")
    assert [r[2] for r in api.requests if r[0] == "watch"] == ["7", "30"]


def test_a_failing_list_is_tried_again_and_the_informer_syncs_then():
    api = Api(
        [ApiError(500, "InternalError", "etcd"), ConnectionError(), ([obj("a", "1")], "2")], []
    )
    inf, seen, _ = run_informer(api)
    assert inf.lists == 3 and inf.has_synced() and seen == [(None, "a")]


def test_a_bug_handing_an_event_on_lists_again_instead_of_stopping_the_watch():
    api = Api([([], "1"), ([obj("b", "4")], "5")], [[("ADDED", obj("a", "2"))]])
    calls: list[str] = []

    def seen(kind: str | None, o: Obj) -> None:
        calls.append(o["metadata"]["name"])
        if o["metadata"]["name"] == "a":
            raise KeyError("a bug")

    async def scenario() -> None:
        inf = Informer(api, JOBS, "ns", seen)  # type: ignore[arg-type]
        inf.start()
        await asyncio.wait_for(api.idle.wait(), 5)
        await inf.stop()

    asyncio.run(scenario())
    assert calls == ["a", "b"]


# -- the operator's informers ---------------------------------------------------------------


def assembled(config: Config, api: Api) -> tuple[Operator, FakeKube]:
    kube = FakeKube()
    kube.list_pages = api.list_pages  # type: ignore[attr-defined]
    kube.watch = api.watch  # type: ignore[attr-defined]
    op = Operator(config)
    op.assemble(kube)  # type: ignore[arg-type]
    return op, kube


def test_a_jobs_deletion_missed_while_no_watch_ran_is_found_by_the_next_list():
    """client-go's DeletedFinalStateUnknown: the run-object cache drops the Job and its Plan
    is reconciled (it reads the attempt as vanished)."""

    async def scenario() -> tuple[list[Obj], list[Any]]:
        op, _ = assembled(Config(namespaces=["ns"]), Api([], []))
        op.job_event("ADDED", obj("a", "5"))
        op.job_event("ADDED", obj("other", "6", ns="ns2"))
        op.queue.queue = asyncio.Queue()
        op.queue.pending.clear()
        assert op.jobs.relisted is not None
        op.jobs.relisted("ns", set(), "10")  # the new list holds nothing of ns
        held = op.runs.of("job", ("ns", "p", "r1")) + op.runs.of("job", ("ns2", "p", "r1"))
        return held, [op.queue.queue.get_nowait() for _ in range(op.queue.queue.qsize())]

    held, queued = asyncio.run(scenario())
    assert [o["metadata"]["name"] for o in held] == ["other"]  # ns2 is another informer's
    assert queued == [("ns", "p")]


def test_a_job_created_while_the_list_was_on_its_way_is_not_taken_for_gone():
    """The reconciler writes a Job it created into the run-object cache at once; a list whose
    snapshot predates the create lacks it, and must not make it 'deleted' (the step failed as
    'its Job was deleted' when the API server came back from a restart). The watch from the
    list's version tells what becomes of it."""

    async def scenario() -> list[str]:
        op, _ = assembled(Config(namespaces=["ns"]), Api([], []))
        op.job_event("ADDED", obj("old", "5"))  # held, and deleted while no watch ran
        op.job_event("ADDED", obj("new", "12"))  # created after the list's snapshot (10)
        assert op.jobs.relisted is not None
        op.jobs.relisted("ns", set(), "10")
        return [o["metadata"]["name"] for o in op.runs.of("job", ("ns", "p", "r1"))]

    assert asyncio.run(scenario()) == ["new"]


def test_the_queues_start_only_once_the_informers_have_listed(monkeypatch):
    """As controller-runtime starts its workers after WaitForCacheSync: no reconcile reads a
    run-object cache that has not seen the cluster yet."""

    async def scenario() -> tuple[list[bool], list[str]]:
        listed = asyncio.Event()
        api = Api([], [])

        async def list_pages(path: str, each: Callable[[Obj], None], query: Any, *_: Any) -> str:
            api.requests.append(("list", path, None, query))
            await listed.wait()
            return "1"

        kube = FakeKube()
        kube.list_pages = list_pages  # type: ignore[attr-defined]
        kube.watch = api.watch  # type: ignore[attr-defined]

        async def connect(*_: Any) -> FakeKube:
            return kube

        monkeypatch.setattr("planops.handlers.wiring.Kube.connect", connect)
        op = Operator(Config(namespaces=["ns"]))
        await op.start()
        await asyncio.sleep(0.05)
        started = [op.has_synced() or bool(op.queue.tasks)]
        listed.set()
        for _ in range(100):
            if op.queue.tasks:
                break
            await asyncio.sleep(0.01)
        started.append(op.has_synced() and bool(op.queue.tasks) and bool(op.schedules.tasks))
        await op.stop()
        return started, sorted(r[1] for r in api.requests if r[0] == "list")

    started, lists = asyncio.run(scenario())
    assert started == [False, True]
    assert lists == [
        "/api/v1/namespaces",
        "/api/v1/namespaces/ns/pods",
        "/apis/batch/v1/namespaces/ns/jobs",
    ]


def test_with_patterns_each_matching_namespace_gets_informers_while_it_exists():
    async def scenario() -> list[list[str | None]]:
        op, _ = assembled(Config(namespaces=["team-*"]), Api([], []))
        op.matches = lambda ns: ns.startswith("team-")
        shown = []
        for kind, name in [
            (None, "team-a"),
            (None, "other"),
            ("ADDED", "team-b"),
            ("DELETED", "team-a"),
        ]:
            op.namespace_event(kind, {"metadata": {"name": name}})
            await asyncio.sleep(0)
            shown.append(sorted(n or "" for n in op.jobs.informers))
        op.namespaces.relisted(None, {("", "team-a")}, "1")  # type: ignore[misc]
        await asyncio.sleep(0.01)
        shown.append(sorted(n or "" for n in op.pods.informers))
        await op.jobs.stop()
        await op.pods.stop()
        return shown

    assert asyncio.run(scenario()) == [
        ["team-a"],
        ["team-a"],
        ["team-a", "team-b"],
        ["team-b"],
        [],
    ]


def test_namespaces_are_listed_cluster_wide():
    assert NAMESPACES.path("ns") == "/api/v1/namespaces"
    assert JOBS.path(None) == "/apis/batch/v1/jobs"


def test_a_watch_gone_silent_without_a_reset_is_resumed_after_the_idle_bound(monkeypatch):
    # A partition that leaves the connection open but passes no bytes: the API server's watch
    # would send a BOOKMARK every minute, so silence past WATCH_IDLE_SECONDS means the
    # connection is dead, and the watch resumes from the last version seen. Before the bound
    # the silence lasted the server's timeout and 30 s more, over the real HTTP client.
    monkeypatch.setattr(informer_, "WATCH_IDLE_SECONDS", 0.3)
    requests: list[dict[str, str]] = []
    resumed = asyncio.Event()

    async def jobs(request: web.Request) -> web.StreamResponse:
        query = dict(request.query)
        requests.append(query)
        if query.get("watch") != "true":
            return web.json_response({"metadata": {"resourceVersion": "7"}, "items": []})
        resp = web.StreamResponse()
        await resp.prepare(request)
        if len(requests) == 2:  # the first watch: headers, then nothing, ever
            await asyncio.sleep(60)
        else:
            line = {"type": "ADDED", "object": obj("a", "9")}
            await resp.write(json.dumps(line).encode() + b"\n")
            resumed.set()
            await asyncio.sleep(60)
        return resp

    async def scenario() -> list[tuple[str | None, str]]:
        app = web.Application()
        app.router.add_get("/apis/batch/v1/namespaces/ns/jobs", jobs)
        runner, port = await serving(app)
        kube = Kube(Transport(Credentials(server=f"http://127.0.0.1:{port}")))
        seen: list[tuple[str | None, str]] = []
        inf = Informer(kube, JOBS, "ns", lambda k, o: seen.append((k, o["metadata"]["name"])))
        inf.start()
        try:
            await asyncio.wait_for(resumed.wait(), 5)
            await asyncio.sleep(0.05)
        finally:
            await inf.stop()
            await kube.close()
            await runner.cleanup()
        return seen

    seen = asyncio.run(scenario())
    assert seen == [("ADDED", "a")]
    assert [r.get("resourceVersion") for r in requests[1:]] == ["7", "7"]  # resumed, not relisted
    assert requests[1]["allowWatchBookmarks"] == "true"  # what makes silence mean dead
