"""kubectl-plan assembles a Plan's whole report from its status summary and its PlanReport
objects (cli/plan_report.py full_report): `get -o json`, `describe` and `logs` show every record.

The objects are the ones the operator writes (reconciler.run.status, reconciler.history.chunks),
served from a loopback HTTP server at the API's paths, so the real client, kubeconfig and CLI run.
tests/e2e/test_reports.py does the same against the real API server."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from planops.cli import cluster, submit
from planops.cli.exit_codes import EXIT_OK
from planops.cli.parser import build as build_parser
from planops.engine import Report, StepRecord
from planops.kube.client import Kube
from planops.kube.manifests import PlanRef
from planops.reconciler.history import chunks as reports
from planops.reconciler.run import status

REF = PlanRef("ns", "big", "uid-1", "run1")
N = 30


def records() -> list[StepRecord]:
    """N records; the first and the fourth with what they wrote on stderr."""
    said = {0: "warning: v1 is deprecated\nwarning: use v2", 3: "retrying\nfatal: no space"}
    return [
        StepRecord(
            f"s{i:02d}",
            "success",
            f"line {i}\n" + "x" * 3000,
            None,
            1,
            1.7e9,
            1.7e9 + i,
            stderr=said.get(i),
        )
        for i in range(N)
    ]


def recorded_objects() -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The Plan (its status as the operator writes it: 5 recent records) and its PlanReports
    (chunks of 8), and a PlanReport of another run that must not show."""
    written, chunks = reports.Written("run1"), {}
    for w in reports.plan_writes(written, [r.to_json() for r in records()], 8):
        if w.create:
            chunks[w.chunk.index] = reports.body(REF, w.chunk, w.records)
        else:
            chunks[w.chunk.index]["records"] += w.records
        reports.applied(written, w)
    st = status.running(
        Report("big", True, None, tuple(records())),
        status.Progress(
            total=N,
            finished=True,
            dispatched_any=True,
            generation=1,
            run={"id": "run1", "generation": 1},
            refused=[],
            previous={},
            started_at=1.7e9,
            now=1.7e9 + 60,
            reports=len(chunks),
            status_records=5,
        ),
    ).to_status()
    st["report"]["stderrInOutput"] = True  # read where the cluster could not split logs
    plan = {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": {"name": "big", "namespace": "ns", "uid": "uid-1", "generation": 1},
        "spec": {"steps": [{"id": r.step_id, "shell": "true"} for r in records()]},
        "status": st,
    }
    other = reports.body(PlanRef("ns", "big", "uid-1", "run0"), reports.Chunk(0, 0, 1, 0), [])
    other["records"] = [StepRecord("old", "failed", None, "x", 1, 0, 1).to_json()]
    return plan, [*chunks.values(), other]


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    """A kubeconfig for a loopback server answering the Plan, its PlanReports (by label
    selector, as the API server does) and no events; and the selectors it was asked for."""
    plan, objects = recorded_objects()
    asked: list[str] = []
    base = "/apis/planops.dev/v1alpha1/namespaces/ns"

    async def get_plan(_: web.Request) -> web.Response:
        return web.json_response(plan)

    async def list_reports(request: web.Request) -> web.Response:
        selector = request.query.get("labelSelector", "")
        asked.append(selector)
        wanted = dict(term.split("=", 1) for term in selector.split(",") if term)
        items = [o for o in objects if wanted.items() <= o["metadata"]["labels"].items()]
        return web.json_response({"kind": "PlanReportList", "items": items})

    async def no_events(_: web.Request) -> web.Response:
        return web.json_response({"kind": "EventList", "items": []})

    async def no_pods(_: web.Request) -> web.Response:
        return web.json_response({"kind": "PodList", "items": []})

    app = web.Application()
    app.router.add_get(f"{base}/plans/big", get_plan)
    app.router.add_get(f"{base}/planreports", list_reports)
    app.router.add_get("/api/v1/namespaces/ns/events", no_events)
    app.router.add_get("/apis/events.k8s.io/v1/namespaces/ns/events", no_events)
    app.router.add_get("/api/v1/namespaces/ns/pods", no_pods)
    app.router.add_get("/apis/batch/v1/namespaces/ns/jobs", no_pods)  # `logs` checks owners
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0)
    loop.run_until_complete(site.start())
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    path = tmp_path / "kubeconfig"
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "x",
                "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
                "clusters": [{"name": "x", "cluster": {"server": f"http://127.0.0.1:{port}"}}],
                "users": [{"name": "x", "user": {"token": "t"}}],
            }
        )
    )
    try:
        yield str(path), asked
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)


def run(capfd: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = cluster.run(build_parser().parse_args(list(argv)))
    out = capfd.readouterr()
    return code, out.out, out.err


def test_the_status_alone_holds_a_summary():
    plan, _ = recorded_objects()
    rep = plan["status"]["report"]
    assert rep["records"] == N and len(rep["steps"]) == 5 and rep["stepsOmitted"] == N - 5
    assert len(rep["steps"][0]["output"]) < 3000  # a recent record's text is shortened


def test_get_json_shows_every_record_in_order_with_its_text(
    capfd: pytest.CaptureFixture[str], server: tuple[str, list[str]]
):
    kubeconfig, asked = server
    code, out, err = run(capfd, "get", "big", "-n", "ns", "-o", "json", "--kubeconfig", kubeconfig)
    assert code == 0, err
    rep = json.loads(out)["status"]["report"]
    assert [s["stepId"] for s in rep["steps"]] == [r.step_id for r in records()]
    assert [s["output"] for s in rep["steps"]] == [r.output for r in records()]
    assert rep["stepsOmitted"] == 0 and rep["records"] == N
    assert asked == [REF.selector()]  # the run's chunks, by label


def test_describe_shows_every_step(
    capfd: pytest.CaptureFixture[str], server: tuple[str, list[str]]
):
    kubeconfig, _ = server
    code, out, err = run(capfd, "describe", "big", "-n", "ns", "--kubeconfig", kubeconfig)
    assert code == 0, err
    rows = [line.split()[0] for line in out.splitlines() if line.startswith("s")]
    assert rows == [r.step_id for r in records()]
    assert "old" not in out.split()  # another run's chunk is not this run's report
    # what steps wrote on stderr, each step's last lines, kept apart from the output
    assert "Note: the steps' outputs hold what they wrote on stderr too" in out
    said = out.split("Stderr, last lines (kubectl plan logs big STEP for the whole log):\n")[1]
    assert said.startswith(
        "  s00 (success):\n    warning: v1 is deprecated\n    warning: use v2\n"
        "  s03 (success):\n    retrying\n    fatal: no space\n"
    )


def test_logs_of_a_gone_pod_read_the_record_from_the_report_objects(
    capfd: pytest.CaptureFixture[str], server: tuple[str, list[str]]
):
    kubeconfig, _ = server
    code, out, err = run(capfd, "logs", "big", "s00", "-n", "ns", "--kubeconfig", kubeconfig)
    assert code == 0, err
    # not in the status's window of 5; printed as the step printed it: its line end again
    assert out == records()[0].output + "\n"
    assert err.endswith("warning: v1 is deprecated\nwarning: use v2\n")  # stderr on stderr


def test_submit_wait_prints_every_settled_step_though_the_status_shows_the_last_five(
    capsys: pytest.CaptureFixture[str], server: tuple[str, list[str]]
):
    kubeconfig, _ = server

    async def wait() -> int:
        kube = await Kube.connect(kubeconfig)
        try:
            return await submit.wait(kube, "ns", "big", 30)
        finally:
            await kube.close()

    assert asyncio.run(wait()) == EXIT_OK
    lines = capsys.readouterr().err.splitlines()
    assert [line.split()[1] for line in lines] == [r.step_id for r in records()]
