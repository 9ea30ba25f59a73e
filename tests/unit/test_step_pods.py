"""Security: `kubectl plan logs` and the UI's log endpoint show a step's own pod, never one made
with its labels.

A pod is the step's when its controller is a Job whose controller is the Plan, both by UID (the
operator's rule, planops.reconciler.run.observe): copied labels, a higher attempt label, a newer
creation time, or a Job of another owner carrying the step's labels change nothing.
"""

from __future__ import annotations

import asyncio
import io
from argparse import Namespace
from contextlib import redirect_stdout
from typing import Any

import aiohttp
from aiohttp import web

from planops.cli import steppods
from planops.cli.show import cmd_logs
from planops.cli.ui import server

from .fakekube import FakeKube

Obj = dict[str, Any]
LABELS = {"planops.dev/plan": "nightly", "planops.dev/step": "build"}


def _ref(uid: str, kind: str, controller: bool = True) -> Obj:
    api = "batch/v1" if kind == "Job" else "planops.dev/v1alpha1"
    return {"apiVersion": api, "kind": kind, "name": "x", "uid": uid, "controller": controller}


def job(uid: str, owner: str, attempt: int = 1) -> Obj:
    return {
        "metadata": {
            "name": f"job-{uid}",
            "uid": uid,
            "labels": {**LABELS, "planops.dev/attempt": str(attempt)},
            "ownerReferences": [_ref(owner, "Plan")],
        }
    }


def pod(name: str, attempt: str, created: str, *refs: Obj) -> Obj:
    meta: Obj = {
        "name": name,
        "uid": f"pod-{name}",
        "creationTimestamp": created,
        "labels": {**LABELS, "planops.dev/attempt": attempt},
    }
    if refs:
        meta["ownerReferences"] = list(refs)
    return {"metadata": meta}


PLAN = {"metadata": {"name": "nightly", "namespace": "team", "uid": "plan-uid"}, "status": {}}
JOBS = [job("job-1", "plan-uid", 1), job("job-2", "plan-uid", 2), job("squat", "other-plan", 3)]
REAL_1 = pod("real-1", "1", "2026-01-01T00:00:01Z", _ref("job-1", "Job"))
REAL_2 = pod("real-2", "2", "2026-01-01T00:00:02Z", _ref("job-2", "Job"))
FORGED = [
    pod("no-owner", "2", "2026-01-01T00:00:09Z"),  # labels copied, nothing else
    pod("high-attempt", "9", "2026-01-01T00:00:03Z"),
    pod("other-jobs", "3", "2026-01-01T00:00:09Z", _ref("squat", "Job")),  # a Job not the Plan's
    pod("not-controller", "2", "2026-01-01T00:00:09Z", _ref("job-2", "Job", controller=False)),
    pod("plan-owned", "2", "2026-01-01T00:00:09Z", _ref("plan-uid", "Plan")),  # skips the Job
    pod("unknown-job", "2", "2026-01-01T00:00:09Z", _ref("job-gone", "Job")),
]


def test_only_pods_of_the_plans_own_jobs_count_newest_attempt_last():
    got = steppods.owned_pods(PLAN, JOBS, [*FORGED, REAL_2, REAL_1])
    assert [p["metadata"]["name"] for p in got] == ["real-1", "real-2"]


def test_a_plan_or_job_without_a_uid_owns_no_pod():
    """Missing UIDs match nothing, not each other (an owner reference without a uid is not an
    owner)."""
    by_j = pod("by-j", "1", "2026-01-01T00:00:01Z", _ref("j", "Job"))
    for uid in (None, ""):
        bare = {"metadata": {"name": "nightly", "uid": uid}}
        assert steppods.owned_pods(bare, [job("j", ""), *JOBS], [REAL_1, REAL_2, by_j]) == []
    nameless = {"metadata": {**job("x", "plan-uid")["metadata"], "uid": None}}
    no_uid = pod("no-uid", "1", "2026-01-01T00:00:01Z", {"kind": "Job", "controller": True})
    assert steppods.owned_pods(PLAN, [nameless], [no_uid]) == []


def api(pods: list[Obj]) -> FakeKube:
    """The API server holding the Plan, its Jobs (and a squatter's) and `pods` in namespace
    team; every pod's log names its pod."""
    kube = FakeKube()
    for kind, objs in (("plan", [PLAN]), ("job", JOBS), ("pod", pods)):
        for o in objs:
            kube.put(kind, {**o, "metadata": {**o["metadata"], "namespace": "team"}})
    kube.logs.update({p["metadata"]["name"]: f"log of {p['metadata']['name']}\n" for p in pods})
    return kube


def logs(pods: list[Obj], attempt: int | None = None) -> tuple[int, str]:
    out = io.StringIO()
    args = Namespace(name="nightly", step="build", attempt=attempt)
    with redirect_stdout(out):
        code = asyncio.run(cmd_logs(api(pods), args, "team"))
    return code, out.getvalue()


def test_kubectl_plan_logs_shows_the_steps_own_pod_not_a_newer_forged_one():
    assert logs([REAL_1, *FORGED, REAL_2]) == (0, "log of real-2\n")


def test_kubectl_plan_logs_of_an_attempt_selects_it_and_still_checks_the_owner():
    kube = api([REAL_1])
    args = Namespace(name="nightly", step="build", attempt=1)
    with redirect_stdout(io.StringIO()):
        asyncio.run(cmd_logs(kube, args, "team"))
    assert kube.selectors and all(s.endswith(",planops.dev/attempt=1") for s in kube.selectors)


def test_kubectl_plan_logs_never_reads_a_forged_pod_even_when_it_is_the_only_one(capsys):
    code, out = logs(FORGED)
    assert "log of" not in out
    assert code != 0  # no pod of the step, and no recorded output
    assert "no pod and no recorded output" in capsys.readouterr().err


async def _ui_log(kube: FakeKube) -> Any:
    sock = server.listen(0)
    port = int(sock.getsockname()[1])
    runner = web.AppRunner(server.make_app(kube, "team", port, "t"), access_log=None)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    try:
        url = f"http://127.0.0.1:{port}/api/plans/nightly/log?step=build&token=t"
        async with aiohttp.ClientSession() as s, s.get(url) as r:
            return await r.json()
    finally:
        await runner.cleanup()


def test_the_uis_log_endpoint_shows_the_steps_own_pod_not_a_forged_one():
    got = asyncio.run(_ui_log(api([REAL_1, *FORGED])))
    assert (got["source"], got["pod"], got["text"]) == ("pod", "real-1", "log of real-1\n")
