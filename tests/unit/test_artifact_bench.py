"""bench/vs_peers.py's `artifacts` workload without a cluster (bench/artifact_work.py): the
planops run really moves its 1 MiB file and result (run here by the local runner), Argo's run is
the same work in Argo's idiom through the same store, each pod's CPU is read from its own cgroup
and summed over the workload's pods only, and the workload is chosen only for sides that have
it."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bench import argo_side, peer_sides, vs_peers
from bench import artifact_work as aw

from planops.api import PlanSpec
from planops.runners.local import LocalRunner

from .helpers import capsule
from .test_vs_peers_bench import figures, run_main

UID = "0f8d5f0c-1a2b-4c3d-8e9f-0123456789ab"
CID = "a" * 64


def test_the_planops_run_moves_a_mib_and_a_result_between_its_steps(tmp_path: Path) -> None:
    spec = PlanSpec.model_validate(aw.planops_pass("p")["spec"])
    (tmp_path / "a").mkdir()
    runner = LocalRunner({"default": capsule()}, artifacts=tmp_path / "a")
    report = asyncio.run(runner.run("p", spec))
    got = {s.step_id: s for s in report.steps}
    assert report.completed, got
    (record,) = got["a"].artifacts
    assert record.size == aw.FILE_BYTES and not record.directory
    assert got["a"].results == {"r": "ok"}
    assert got["b"].output.split() == [str(aw.FILE_BYTES), "in.bin", "result=ok"]


def test_the_argo_run_is_the_same_work_through_argos_executor() -> None:
    wf = argo_side.Argo(tuned=False).artifact_pass("w")
    assert wf["kind"] == "Workflow" and wf["spec"]["serviceAccountName"] == "argo-exec"
    templates = {t["name"]: t for t in wf["spec"]["templates"]}
    a, b = templates["main"]["dag"]["tasks"]
    assert (a["template"], b["template"], b["depends"]) == ("make", "read", "a")
    assert b["arguments"]["artifacts"] == [{"name": "x", "from": "{{tasks.a.outputs.artifacts.x}}"}]
    out = templates["make"]["outputs"]
    # the file travels as it is, like planops' (Argo's default would be a tar.gz)
    assert out["artifacts"] == [{"name": "x", "path": "/tmp/out.bin", "archive": {"none": {}}}]
    assert out["parameters"] == [{"name": "r", "valueFrom": {"path": "/tmp/r"}}]
    assert templates["read"]["inputs"]["artifacts"] == [{"name": "x", "path": "/tmp/in.bin"}]
    # the same commands as planops' steps, at Argo's paths
    planops = aw.planops_pass("p")["spec"]["steps"]
    make = templates["make"]["container"]["command"][2]
    assert (
        make.replace("/tmp/out.bin", "out.bin").replace("/tmp/r", "$PLANOPS_RESULTS/r")
        in (planops[0]["shell"])
    )
    read = templates["read"]["container"]["command"][2]
    assert (
        read.replace("/tmp/in.bin", "in.bin").replace("{{inputs.parameters.r}}", "{{a.results.r}}")
        in (planops[1]["shell"])
    )


def test_argos_repository_is_the_same_store_and_secret() -> None:
    repo = json.loads(aw.argo_repository("http://10.244.0.1:8333", "bucket", "bench-s3"))["s3"]
    assert repo["endpoint"] == "10.244.0.1:8333" and repo["bucket"] == "bucket"
    assert repo["insecure"] is True
    assert repo["accessKeySecret"] == {"name": "bench-s3", "key": "accessKeyId"}
    assert repo["secretKeySecret"] == {"name": "bench-s3", "key": "secretAccessKey"}
    store = peer_sides.ArtifactStore("http://10.244.0.1:8333", "bucket", "AK", "SK", "img")
    side = argo_side.Argo(tuned=False)
    side.use_store(store)
    assert json.loads(side.config["artifactRepository"])["s3"] == repo
    assert peer_sides.store_secret("bench-s3", "ns", store)["stringData"] == {
        "accessKeyId": "AK",
        "secretAccessKey": "SK",
    }


def test_cgroup_names_of_pods_and_containers() -> None:
    assert aw.pod_uid(f"pod{UID}") == UID
    assert aw.pod_uid(f"kubepods-besteffort-pod{UID.replace('-', '_')}.slice") == UID
    assert aw.pod_uid(f"kubepods-pod{UID.replace('-', '_')}.slice") == UID
    assert aw.pod_uid("besteffort") is None and aw.pod_uid("cpuacct.usage") is None
    assert aw.container_id(CID) == CID
    assert aw.container_id(f"cri-containerd-{CID}.scope") == CID
    assert aw.container_id("cpuacct.usage") is None and aw.container_id("abc") is None


def _usage(d: Path, ns: int) -> None:
    d.mkdir(parents=True, exist_ok=True)
    (d / "cpuacct.usage").write_text(f"{ns}\n")


def _pod(uid: str, name_of: dict[str, str], phase: str = "Running") -> dict[str, Any]:
    statuses = [{"name": n, "containerID": f"containerd://{c}"} for c, n in name_of.items()]
    return {
        "metadata": {"uid": uid},
        "status": {"phase": phase, "initContainerStatuses": statuses[:1], "containerStatuses": []},
    }


def test_each_pods_cpu_is_its_last_reading_and_only_the_workloads_pods_count(
    tmp_path: Path,
) -> None:
    other = "11111111-2222-3333-4444-555555555555"  # another user's pod on a shared node
    mine = tmp_path / "besteffort" / f"pod{UID}"
    _usage(mine, 100_000_000)
    _usage(mine / CID, 80_000_000)
    _usage(tmp_path / "burstable" / f"pod{other}", 5_000_000_000)
    sampler = aw.CgroupSampler(tmp_path)
    sampler.sample()
    ledger = aw.PodLedger()
    ledger.on(1.0, "ADDED", _pod(UID, {CID: "step"}))
    assert aw.pods_cpu(sampler.pods, ledger) == (pytest.approx(0.1), 1, 0)  # not ended yet
    ledger.on(2.0, "MODIFIED", _pod(UID, {CID: "step"}, "Succeeded"))
    (mine / CID / "cpuacct.usage").unlink()  # the container's cgroup goes with it...
    (mine / CID).rmdir()
    _usage(mine, 250_000_000)  # ... its time stays in the pod's
    sampler.sample()
    used, read, whole = aw.pods_cpu(sampler.pods, ledger)
    assert (used, read, whole) == (pytest.approx(0.25), 1, 1)
    assert aw.cpu_by_container(sampler.containers, ledger) == {"step": pytest.approx(0.08)}
    # a container no status names is the pod's sandbox
    sampler.containers[(UID, "b" * 64)] = 0.01
    assert aw.cpu_by_container(sampler.containers, ledger)["sandbox"] == pytest.approx(0.01)


def test_the_artifacts_workload_runs_only_when_chosen_and_only_for_sides_that_have_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[tuple[str, Any]] = []
    store = peer_sides.ArtifactStore("http://10.244.0.1:1", "b", "AK", "SK", "img")

    @contextlib.contextmanager
    def fake_store(cluster: Any, args: Any) -> Iterator[peer_sides.ArtifactStore | None]:
        yield store if "artifacts" in args.workloads else None

    def measure(side: peer_sides.Side, cluster: Any, args: Any) -> dict[str, Any]:
        seen.append((side.name, list(args.workloads)))
        return figures(1.0 if side.name == "planops" else 2.0)

    monkeypatch.setattr(vs_peers, "artifact_store", fake_store)
    used: list[str] = []
    monkeypatch.setattr(peer_sides.Planops, "use_store", lambda s, st: used.append(s.name))
    monkeypatch.setattr(argo_side.Argo, "use_store", lambda s, st: used.append(s.name))

    scales = {"planops": 1.0, "argo": 2.0}
    out = run_main(monkeypatch, capsys, "vs_peers", ["--sides", "planops,argo"], scales)
    assert out["_measured"] == ["planops", "argo"] and used == []  # no store by default
    monkeypatch.setattr(vs_peers, "measure", measure)

    argv = ["--sides", "planops,argo", "--workloads", "artifacts"]
    monkeypatch.setattr("sys.argv", ["vs_peers", "--kubeconfig", "/nowhere", "-o", "json", *argv])
    vs_peers.main()
    out = json.loads(capsys.readouterr().out)
    assert seen == [("planops", ["artifacts"]), ("argo", ["artifacts"])]
    assert used == ["planops", "argo"]
    assert out["ratio"]["artifacts_pods_cpu_s_per_step"] == pytest.approx(0.5)

    monkeypatch.setattr("sys.argv", ["vs_peers", "--kubeconfig", "/n", "--workloads", "artifacts"])
    with pytest.raises(SystemExit):  # Tekton (a default side) has no artifact workload
        vs_peers.main()
    assert "no side for ['tekton']" in capsys.readouterr().err
    assert "artifacts" not in vs_peers.DEFAULT_WORKLOADS
