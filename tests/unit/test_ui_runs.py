"""`kubectl plan ui` lists a Plan's runs (its current run, then status.history) and opens an
earlier one: `/api/plans/NAME?run=ID` answers that run's view (its entry and the records of its
PlanReports, cli.plan_report.run_report), an ID the Plan does not keep is a 404 naming the runs
it keeps, and the page follows no watch and offers no pod log for an earlier run (its pods are
gone; a pod of the same step would be the current run's)."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import aiohttp
from aiohttp import web

from planops.cli.plan_report import run_report
from planops.cli.ui import server, view
from planops.kube.manifests import PlanRef
from planops.reconciler.history import chunks as reports
from tests.unit.test_ui import ROOT

from .fakekube import FakeKube

EARLIER = {
    "id": "run0",
    "generation": 1,
    "phase": "Failed",
    "reason": "Failed",
    "finishedAt": "2026-12-01T10:00:07.000Z",
    "failedStep": "deploy",
}
PLAN = {
    "apiVersion": "planops.dev/v1alpha1",
    "kind": "Plan",
    "metadata": {"name": "web", "namespace": "team", "uid": "uid-web", "generation": 1},
    "spec": {"steps": [{"id": "deploy", "shell": "true"}]},
    "status": {
        "phase": "Succeeded",
        "run": {"id": "run1", "generation": 1},
        "finishedAt": "2026-12-01T11:00:00.000Z",
        "report": {"steps": [{"stepId": "deploy", "status": "success", "output": "ok"}]},
        "history": [EARLIER, {"no": "id"}],
    },
}
OLD_RECORD = {"stepId": "deploy", "status": "failed", "error": "disk full", "attempts": 1}


def _api() -> FakeKube:
    """The API server holding the Plan and the one PlanReport of its earlier run."""
    kube = FakeKube()
    kube.put("plan", copy.deepcopy(PLAN))
    chunk = reports.body(
        PlanRef("team", "web", "uid-web", "run0"), reports.Chunk(0, 0, 1, 0), [OLD_RECORD]
    )
    chunk["metadata"]["namespace"] = "team"
    kube.put("planreport", chunk)
    return kube


def test_the_view_lists_the_current_run_then_the_earlier_ones():
    v = view.plan_view("team", PLAN, [])
    assert [(r["id"], r["phase"], r["current"]) for r in v["runs"]] == [
        ("run1", "Succeeded", True),
        ("run0", "Failed", False),
    ]
    assert v["earlier"] is False and v["run"] == "run1"


async def _get(paths: list[str]) -> list[tuple[int, Any]]:
    sock = server.listen(0)
    port = int(sock.getsockname()[1])
    runner = web.AppRunner(server.make_app(_api(), "team", port, "t"), access_log=None)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    out = []
    try:
        async with aiohttp.ClientSession() as session:
            for path in paths:
                url = f"http://127.0.0.1:{port}{path}"
                hdrs = {"Host": f"127.0.0.1:{port}", "Cookie": f"{server.cookie_name(port)}=t"}
                async with session.get(url, headers=hdrs) as r:
                    out.append((r.status, await r.json()))
    finally:
        await runner.cleanup()
    return out


def test_an_earlier_run_opens_with_its_records_and_an_unknown_one_is_refused():
    (ok, old), (cur_status, cur), (missing, err) = asyncio.run(
        _get(["/api/plans/web?run=run0", "/api/plans/web?run=run1", "/api/plans/web?run=zzz"])
    )
    assert ok == 200 and old["earlier"] is True and old["run"] == "run0"
    assert old["phase"] == "Failed" and old["failedStep"] == "deploy"
    assert old["records"][0]["error"] == "disk full"
    assert {n["id"]: n["status"] for n in old["nodes"]} == {"deploy": "failed"}
    assert [r["id"] for r in old["runs"]] == ["run1", "run0"]  # all of them, still
    assert cur_status == 200 and cur["earlier"] is False and cur["run"] == "run1"
    assert missing == 404 and "run1, run0" in err["error"]


def test_the_page_follows_no_watch_and_offers_no_log_for_an_earlier_run():
    js = (ROOT / "operator/planops/cli/ui/static/app.js").read_text()
    assert "if (state.view.earlier) {" in js
    assert '!view.earlier && ["shell", "script", "tool", "capsule"]' in js
    assert "?run=${encodeURIComponent(run)}" in js


def test_an_earlier_run_without_records_says_the_history_byte_budget_dropped_them():
    plan = copy.deepcopy(PLAN)
    plan["status"]["history"] = [{**EARLIER, "message": "step failed", "recordsKept": False}]
    earlier = asyncio.run(run_report(_api(), plan, "run0"))
    assert isinstance(earlier, dict)
    v = view.plan_view("team", plan, [], earlier)
    assert v["earlier"] is True and v["records"] == []  # its leftover PlanReport is not read
    assert v["message"].startswith("step failed ") and "history byte budget" in v["message"]
