"""bench/vs_peers.py's own logic, without a cluster: the JSON line it prints (every side's
figures under its key, `ratio` planops over Argo's defaults and `ratio_tekton` planops over
Tekton, the earlier rounds' keys and figure names kept), and Tekton's side: its workloads as
Pipelines of Tasks ordered by runAfter, a run's end read from its Succeeded condition, a pod
named by its run and pipeline task. And the old name, bench/vs_argo.py, still runs the bench."""

from __future__ import annotations

import json
import runpy
import sys
from typing import Any

import pytest
from bench import peer_sides, tekton_side, vs_peers

# the figure names of the rounds published so far (docs/results/vs_argo-*.json)
PUBLISHED_FIGURES = {
    "chain_step_latency_p50_s",
    "chain_step_latency_p99_s",
    "chain_wall_s",
    "throughput_runs_per_s",
    "burst_last_s",
    "fanout_wall_s",
    "api_requests_per_step",
    "pod_api_requests_per_step",
    "cluster_api_requests_per_step",
    "controller_cpu_s_per_step",
    "controller_rss_mib",
    "pods_cpu_s_per_step",
    "etcd_bytes_per_run",
}


def figures(scale: float) -> dict[str, Any]:
    return {f: scale * (i + 1) for i, f in enumerate(vs_peers.FIGURES)}


def run_main(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    script: str,
    argv: list[str],
    scales: dict[str, float],
) -> dict[str, Any]:
    """The bench's main with each side's measurement replaced by `figures(scale)`."""

    class NoCluster:
        def __init__(self, kubeconfig: str) -> None:
            pass

        def remove_made(self) -> None:
            pass

    measured: list[str] = []

    def measure(side: peer_sides.Side, cluster: Any, args: Any) -> dict[str, Any]:
        measured.append(side.name)
        return figures(scales[side.name])

    monkeypatch.setattr(vs_peers, "PeerCluster", NoCluster)
    monkeypatch.setattr(vs_peers, "measure", measure)
    monkeypatch.setattr(vs_peers.shutil, "which", lambda _: "/bin/true")
    monkeypatch.setattr(sys, "argv", [script, "--kubeconfig", "/nowhere", "-o", "json", *argv])
    if script == "vs_peers":
        vs_peers.main()
    else:
        runpy.run_path(str(vs_peers.ROOT / "bench" / f"{script}.py"), run_name="__main__")
    out = json.loads(capsys.readouterr().out)
    out["_measured"] = measured
    return out  # type: ignore[no-any-return]


def test_the_json_line_keeps_argos_keys_and_adds_tekton_with_planops_over_tekton(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    scales = {"planops": 1.0, "argo": 4.0, "argo_tuned": 3.0, "tekton": 8.0}
    out = run_main(monkeypatch, capsys, "vs_peers", [], scales)
    assert out.pop("_measured") == ["planops", "argo", "argo_tuned", "tekton"]
    assert set(out) == {
        "planops",
        "argo",
        "argo_tuned",
        "tekton",
        "ratio",
        "ratio_tekton",
        "versions",
    }
    # the figures the published rounds name are still measured, and ratioed
    assert set(vs_peers.FIGURES) >= PUBLISHED_FIGURES
    assert set(out["ratio"]) == set(out["ratio_tekton"]) == set(vs_peers.FIGURES)
    for f in vs_peers.FIGURES:
        assert out["ratio"][f] == pytest.approx(out["planops"][f] / out["argo"][f])
        assert out["ratio"][f] == pytest.approx(0.25)
        assert out["ratio_tekton"][f] == pytest.approx(out["planops"][f] / out["tekton"][f])
        assert out["ratio_tekton"][f] == pytest.approx(0.125)
    assert out["versions"]["TEKTON_VERSION"] == "v1.6.0"


def test_a_ratio_skips_a_figure_the_peer_has_as_zero_and_needs_both_sides() -> None:
    planops, tekton = figures(1.0), figures(2.0)
    tekton["pod_api_requests_per_step"] = 0.0  # Tekton's pods make no requests
    out = vs_peers.with_ratios({"planops": planops, "tekton": tekton})
    assert "pod_api_requests_per_step" not in out["ratio_tekton"]
    assert out["ratio_tekton"]["chain_wall_s"] == pytest.approx(0.5)
    assert "ratio" not in out  # no Argo side, no Argo ratio
    assert set(vs_peers.with_ratios({"tekton": tekton})) == {"tekton"}


def test_vs_argo_still_runs_the_rounds_sides(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    scales = {"planops": 1.0, "argo": 2.0, "argo_tuned": 2.0}
    out = run_main(monkeypatch, capsys, "vs_argo", [], scales)
    assert out.pop("_measured") == ["planops", "argo", "argo_tuned"]
    assert out["ratio"]["chain_wall_s"] == pytest.approx(0.5)
    assert "ratio_tekton" not in out


def test_tekton_chain_and_fanout_are_pipelines_ordered_by_run_after() -> None:
    side = tekton_side.Tekton()
    chain = side.chain("c", 4)
    assert chain["apiVersion"] == "tekton.dev/v1" and chain["kind"] == "PipelineRun"
    tasks = chain["spec"]["pipelineSpec"]["tasks"]
    assert [t["name"] for t in tasks] == ["s0", "s1", "s2", "s3"]
    assert [t.get("runAfter") for t in tasks] == [None, ["s0"], ["s1"], ["s2"]]
    fan = side.fanout("f", 3)["spec"]["pipelineSpec"]["tasks"]
    assert [t.get("runAfter") for t in fan] == [None, None, None, ["f0", "f1", "f2"]]
    one = side.one_step("b-1")["spec"]["pipelineSpec"]["tasks"]
    assert [t["name"] for t in one] == ["only"]
    # every task one step running `true` in the node's busybox, like the other sides' steps
    for t in [*tasks, *fan, *one]:
        assert t["taskSpec"]["steps"] == [
            {"name": "true", "image": peer_sides.BUSYBOX, "command": ["true"]}
        ]


def test_a_tekton_run_ends_on_its_succeeded_condition_only() -> None:
    def run(*conditions: dict[str, str]) -> dict[str, Any]:
        return {"metadata": {"name": "r"}, "status": {"conditions": list(conditions)}}

    side = tekton_side.Tekton()
    assert side.outcome({"metadata": {"name": "r"}}) is None
    assert side.outcome(run({"type": "Succeeded", "status": "Unknown"})) is None
    assert side.outcome(run({"type": "Ready", "status": "True"})) is None
    assert side.outcome(run({"type": "Succeeded", "status": "True"})) == (True, "")
    failed = side.outcome(
        run({"type": "Succeeded", "status": "False", "reason": "Failed", "message": "boom"})
    )
    assert failed == (False, "Failed: boom")
    # the bench's watch records the first and stops waiting on a failure
    runs = peer_sides.Runs(side.outcome)
    runs.on(1.0, "MODIFIED", run({"type": "Succeeded", "status": "Unknown"}))
    assert runs.done == {} and runs.failed == {}
    runs.on(2.0, "MODIFIED", run({"type": "Succeeded", "status": "True"}))
    runs.on(3.0, "MODIFIED", run({"type": "Succeeded", "status": "True"}))
    assert runs.done == {"r": 2.0}


def test_a_tekton_pod_is_its_pipeline_runs_task() -> None:
    side = tekton_side.Tekton()
    labels = {"tekton.dev/pipelineRun": "chain", "tekton.dev/pipelineTask": "s3"}
    assert side.step_of({"metadata": {"labels": labels}}) == ("chain", "s3")
    assert side.step_of({"metadata": {"labels": {"tekton.dev/pipelineRun": "chain"}}}) is None
    assert side.step_of({"metadata": {}}) is None


def test_a_steps_end_is_its_last_container_seen_terminated_before_the_pods_phase() -> None:
    """Tekton starts the next step on the step container's termination, which the kubelet reports
    before the pod's phase: timed on the phase alone its latency came out negative."""

    def pod(step: str, phase: str, *states: str) -> dict[str, Any]:
        statuses = [{"name": f"c{i}", "state": {s: {}}} for i, s in enumerate(states)]
        return {"step": step, "status": {"phase": phase, "containerStatuses": statuses}}

    pods = peer_sides.Pods(step_of=lambda o: ("r", o["step"]))
    pods.on(0.0, "ADDED", pod("a", "Pending"))
    pods.on(1.0, "MODIFIED", pod("a", "Running", "running", "running"))
    pods.on(2.0, "MODIFIED", pod("a", "Running", "terminated", "running"))  # one of two
    pods.on(3.0, "MODIFIED", pod("a", "Running", "terminated", "terminated"))  # the work ended
    pods.on(3.5, "ADDED", pod("b", "Pending"))
    pods.on(4.0, "MODIFIED", pod("a", "Succeeded", "terminated", "terminated"))
    assert pods.done[("r", "a")] == 3.0
    assert pods.latencies("r", ["a", "b"]) == [0.5]
    pods.on(5.0, "MODIFIED", pod("b", "Failed"))  # a terminal phase is an end by itself
    assert pods.done[("r", "b")] == 5.0
