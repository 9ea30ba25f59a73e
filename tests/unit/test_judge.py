"""Reconciler.judge: the one place a Plan object is judged runs off the event loop (a plan that
is slow to judge never holds up the other plans, the webhook or the health probe) and judges a
Plan once per generation and Capsule version."""

from __future__ import annotations

import asyncio
import time
from typing import Any, Literal

import pytest

from planops.kube.client import ApiError
from planops.reconciler.reconcile import Reconciler
from planops.reconciler.run import facts, judging, status
from planops.reconciler.run.step_logs import StepLog

from .fakekube import FakeKube

CAPSULE = {"metadata": {"resourceVersion": "7"}, "spec": {"shell": {"allow": ["echo"]}}}


def _kube() -> FakeKube:
    kube = FakeKube()
    kube.put(
        "capsule", {"metadata": {"name": "default", "namespace": "ns"}, "spec": CAPSULE["spec"]}
    )
    return kube


def plan(generation: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "generation": generation},
        "spec": {"steps": [{"id": "a", "shell": "echo hi"}]},
    }


def test_judging_does_not_hold_the_event_loop(monkeypatch: pytest.MonkeyPatch):
    slow = judging.validate

    def validate(*args: Any) -> Any:
        time.sleep(0.5)  # a plan that takes long to judge (pure Python would hold the loop)
        return slow(*args)

    monkeypatch.setattr(judging, "validate", validate)

    async def scenario() -> int:
        r = Reconciler(_kube())
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.01)
                ticks += 1

        t = asyncio.create_task(ticker())
        _, _, errors = await r.judge(plan())
        t.cancel()
        assert errors == []
        return ticks

    assert asyncio.run(scenario()) >= 10  # on the loop, it would be 0 during the 0.5 s


def test_a_plan_is_judged_once_per_generation_and_capsule_version(
    monkeypatch: pytest.MonkeyPatch,
):
    calls: list[int] = []
    real = judging.validate

    def counting(*args: Any) -> Any:
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(judging, "validate", counting)
    kube = _kube()
    r = Reconciler(kube)

    async def scenario() -> None:
        for _ in range(3):
            await r.judge(plan(), reuse=True)
        assert len(calls) == 1
        await r.judge(plan(generation=2), reuse=True)  # the spec changed
        assert len(calls) == 2
        kube.put("capsule", kube.get("capsule", "ns", "default") or {})  # the Capsule changed
        await r.judge(plan(generation=2), reuse=True)
        assert len(calls) == 3
        await r.judge(plan(generation=2))  # the webhook: always judged afresh
        assert len(calls) == 4

    asyncio.run(scenario())


def _logs(answer: str | ApiError, pod_exists: bool = True) -> FakeKube:
    """The pod job-a-x, answering its log with `answer` (text, or an error)."""
    kube = FakeKube()
    if pod_exists:
        kube.put("pod", {"metadata": {"name": "job-a-x", "namespace": "ns"}})
    if isinstance(answer, ApiError):
        kube.refuse("stream_log", answer.status, answer.message, reason=answer.reason, times=None)
    else:
        kube.logs["job-a-x"] = answer
    return kube


def _observed(status: Literal["success", "failed"] = "success") -> Any:
    from planops.reconciler.run.observe import Observed  # noqa: PLC0415

    return Observed("a", 1, "job-a", "job", 0.0, status, finished_at=100.0, pod="job-a-x")


def test_an_output_is_read_never_made_up():
    def output(
        answer: str | ApiError, status: str = "success", now: float = 101.0, exists: bool = True
    ) -> Any:
        r = Reconciler(_logs(answer, exists))
        return asyncio.run(r._reads.output("ns", _observed(status), 1000, now))

    assert output("hello\n") == StepLog("hello", None, merged=False)
    assert output("") == StepLog(None, None, merged=False)  # a step that printed nothing
    lost = output("unable to retrieve container logs for containerd://abc")
    assert isinstance(lost, facts.Lost) and "node lost the container's log" in lost.reason
    not_found = ApiError(404, "NotFound", "the server could not find the requested resource")
    gone = output(not_found, exists=False)
    assert isinstance(gone, facts.Lost) and "deleted before its log was read" in gone.reason
    assert output(not_found, status="failed", exists=False) is None  # its error says why
    # the kubelet restarting: 404 for a pod it does not know yet, or unreachable: read later
    assert isinstance(output(not_found), facts.Later)
    down = ApiError(500, "InternalError", "dial tcp 10.244.0.1:10250: connect: connection refused")
    assert isinstance(output(down), facts.Later)
    # a failed attempt (a pod that never started: no log to read) is settled at once by its error
    assert output(ApiError(400, "BadRequest", "container is waiting to start"), "failed") is None
    late = output(down, now=100.0 + facts.LOG_GRACE_SECONDS + 1)
    assert isinstance(late, facts.Lost) and "did not serve the log" in late.reason


def test_a_spec_too_large_to_share_its_object_with_a_status_is_refused_with_what_to_do():
    """The CRD's maxItems lets 30,000 steps through; a spec past SPEC_BUDGET bytes (its status
    shares the etcd object) is refused as `limits`, with the way out, before anything runs."""
    big = plan()
    big["spec"]["steps"] = [
        {"id": f"s{i}", "shell": "echo " + "x" * 40} for i in range(status.MAX_STEPS)
    ]
    small = plan()
    small["spec"]["steps"] = [{"id": f"s{i:x}", "tool": "t"} for i in range(status.MAX_STEPS)]

    mapped = plan()
    mapped["spec"]["steps"] = [
        {"id": "each", "map": {"over": ["x" * 40] * 30_000, "do": [{"id": "b", "tool": "t"}]}}
    ]

    async def scenario() -> tuple[list[Any], list[Any], list[Any]]:
        r = Reconciler(_kube())
        return (await r.judge(big))[2], (await r.judge(small))[2], (await r.judge(mapped))[2]

    refused, accepted, too_many_items = asyncio.run(scenario())
    assert [(e.code, e.path) for e in refused] == [("limits", "spec")]
    assert "a Plan's spec may be at most 786432 bytes" in refused[0].message
    assert "run a map over the items" in refused[0].message
    assert not any(e.path == "spec" for e in accepted)  # 30,000 of the smallest steps fit
    # a map's items too large: the way out is not "run a map"
    assert [(e.code, e.path) for e in too_many_items] == [("limits", "spec")]
    assert "run a map" not in too_many_items[0].message
    assert "split them across capsule steps" in too_many_items[0].message


def test_a_capsule_step_is_judged_against_its_target_capsules_plan_and_again_when_it_changes():
    """The target Capsule (in spawn.allow) is read with the Plan's own; its version is part of
    the verdict's key, so a target Capsule whose plan stops taking the objective is judged anew."""
    parent = {"spec": {"spawn": {"allow": ["rel"]}}}
    takes = {"type": "object", "properties": {"objective": {"type": "string"}}}
    closed = {"type": "object", "additionalProperties": False}
    rel = {"spec": {"plan": {"inputSchema": takes, "steps": []}}}

    kube = FakeKube()
    kube.put("capsule", {"metadata": {"name": "default"}, **parent})
    kube.put("capsule", {"metadata": {"name": "rel"}, "spec": rel["spec"]})

    doc = plan()
    doc["spec"] = {"steps": [{"id": "go", "capsule": "rel", "input": "ship it"}]}

    async def scenario() -> list[list[str]]:
        r = Reconciler(kube)
        first = [e.code for e in (await r.judge(doc, reuse=True))[2]]
        # a new resourceVersion (FakeKube.put gives each write one)
        kube.put(
            "capsule",
            {"metadata": {"name": "rel"}, "spec": {"plan": {"inputSchema": closed, "steps": []}}},
        )
        return [first, [e.code for e in (await r.judge(doc, reuse=True))[2]]]

    assert asyncio.run(scenario()) == [[], ["capsule-plan-input"]]
