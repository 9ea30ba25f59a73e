"""Tekton Pipelines as a side of bench/vs_peers.py: its controller (built by
`tests/cluster/build tekton`) run out of the cluster with the release's defaults, and the
workloads in Tekton's idiom: a PipelineRun whose Pipeline is a DAG of Tasks ordered by
`runAfter`, each Task one step running `true` in the node's busybox image.

What runs, and what does not:
- The controller, with the release's ConfigMaps (config/*.yaml of the module: defaults, feature
  flags, leader election, ...) in a system namespace of its own, `-entrypoint-image` and friends
  pointing at images made here without Docker (image/ocitar.py) from the built binaries, each at
  /ko-app/<name> as `ko` lays them out (the controller names those paths in the pods it makes),
  and `-shell-image` the node's busybox (the release uses a busybox image there too; only
  `script:` steps and workspaces need it). Its probes, metrics and profiling servers get free
  ports (the release's 8080, 9090 and 8008 are shared on this machine).
- Not the webhook. The workloads do not need it: the reconcilers default every run and validate
  its spec themselves (SetDefaults and Validate in ReconcileKind), and conversion only serves
  v1beta1 clients (every object here is tekton.dev/v1, the stored version, so the API server
  never calls it). Its cost (one more Go process with informers and a lease) is left out of
  Tekton's figures, as planops' own admission webhook is left out of planops'.
- Every Task is embedded in its Pipeline (`taskSpec`), and the Pipeline in its run
  (`pipelineSpec`): as self-contained as a Plan or an Argo Workflow, and no Task lookups.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "image"))

from bench.measure import versions  # noqa: E402
from bench.peer_sides import BUSYBOX, Outcome, PeerCluster, Side  # noqa: E402
from ocitar import image, layer  # noqa: E402
from tests.e2e.conftest import free_port  # noqa: E402

CACHE = Path(os.environ.get("PLANOPS_CACHE", Path.home() / ".cache" / "planops"))
# the images a TaskRun's pod may name: entrypoint (the init container copying itself into every
# step), nop (a stopped sidecar), workingdirinit, sidecarlogresults
POD_BINARIES = ("entrypoint", "nop", "workingdirinit", "sidecarlogresults")
# the reconcilers that hold a lease when the controller leads (knative's leader election)
LEASED = ("taskrun", "pipelinerun", "resolutionrequest")


def task(name: str, after: list[str] | None = None) -> dict[str, Any]:
    """One PipelineTask: an embedded Task of one step, `true` in busybox."""
    out: dict[str, Any] = {
        "name": name,
        "taskSpec": {"steps": [{"name": "true", "image": BUSYBOX, "command": ["true"]}]},
    }
    if after:
        out["runAfter"] = after
    return out


def pipeline_run(name: str, tasks: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": "tekton.dev/v1",
        "kind": "PipelineRun",
        "metadata": {"name": name},
        "spec": {"pipelineSpec": {"tasks": tasks}},
    }


def condition_outcome(obj: dict[str, Any]) -> Outcome:
    """A Tekton run reports its end in the Succeeded condition (True, False; Unknown runs)."""
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Succeeded":
            if c.get("status") == "True":
                return True, ""
            if c.get("status") == "False":
                return False, f"{c.get('reason', '')}: {c.get('message', '')}"
    return None


class Tekton(Side):
    name = "tekton"
    client = "bench-tekton"
    runs_resource = "pipelineruns.tekton.dev"

    def __init__(self) -> None:
        self.version = versions()["TEKTON_VERSION"]
        self.bin = CACHE / "bin" / f"tekton-{self.version}"
        self.settings = {
            "controller": f"tekton pipelines controller {self.version}",
            "flags": "defaults (threads-per-controller 2, kube-api-qps 20, kube-api-burst 20)",
            "configmaps": "the release's (config/*.yaml)",
            "webhook": "not run (v1 objects only: the reconcilers default and validate)",
            "pods": "init container `prepare` (entrypoint) + one step wrapped by entrypoint",
        }

    # -- images --------------------------------------------------------------------------------

    def pod_image(self, cluster: PeerCluster, binary: str) -> str:
        """local/tekton-<binary>:<version>: /ko-app/<binary> as its entrypoint, nonroot as ko's
        base images are."""
        ref = f"local/tekton-{binary}:{self.version}"
        with tempfile.TemporaryDirectory() as tmp:
            entries: list[tuple[str, dict[str, object]]] = [
                (d, {"kind": tarfile.DIRTYPE, "mode": 0o755}) for d in ("etc", "ko-app")
            ]
            entries.append(("tmp", {"kind": tarfile.DIRTYPE, "mode": 0o1777}))
            entries.append(
                (f"ko-app/{binary}", {"data": (self.bin / binary).read_bytes(), "mode": 0o755})
            )
            entries.append(
                (
                    "etc/passwd",
                    {
                        "data": b"root:x:0:0:root:/root:/sbin/nologin\n"
                        b"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
                    },
                )
            )
            tar = image(
                Path(tmp),
                ref,
                [layer(entries)],
                {"Entrypoint": [f"/ko-app/{binary}"], "User": "65532"},
            )
            cluster.import_image(tar)
        return ref

    # -- the controller ------------------------------------------------------------------------

    def configmaps(self) -> list[dict[str, Any]]:
        """The release's ConfigMaps (the controller refuses to start without them)."""
        out = []
        for path in sorted((self.bin / "config").glob("config-*.yaml")):
            for doc in yaml.safe_load_all(path.read_text()):
                if doc and doc.get("kind") == "ConfigMap":
                    doc["metadata"].pop("namespace", None)
                    out.append(doc)
        return out

    def start(self, cluster: PeerCluster, namespaces: list[str]) -> None:
        if not (self.bin / "controller").exists():
            raise SystemExit(f"Tekton is not built: run tests/cluster/build tekton ({self.bin})")
        cluster.kube.run(
            "apply", "--server-side", "-f", str(self.bin / "config" / "300-crds"), timeout=120
        )
        self.system = f"vs-tekton-system-{uuid.uuid4().hex[:5]}"
        cluster.kube.run("create", "namespace", self.system)
        for cm in self.configmaps():
            cluster.kube.apply(cm, "-n", self.system)
        kc = cluster.identity(self.client, namespace=self.system)
        cluster.classify(self.client, [{"kind": "User", "user": {"name": self.client}}])
        images = {b: self.pod_image(cluster, b) for b in POD_BINARIES}
        probes, metrics, profiling = free_port(), free_port(), free_port()
        env = {
            **os.environ,
            "SYSTEM_NAMESPACE": self.system,
            "KUBERNETES_MIN_VERSION": "v1.28.0",
            "CONFIG_DEFAULTS_NAME": "config-defaults",
            "CONFIG_LOGGING_NAME": "config-logging",
            "CONFIG_OBSERVABILITY_NAME": "config-observability",
            "CONFIG_FEATURE_FLAGS_NAME": "feature-flags",
            "CONFIG_LEADERELECTION_NAME": "config-leader-election-controller",
            "CONFIG_SPIRE": "config-spire",
            "METRICS_DOMAIN": "tekton.dev/pipeline",
            "METRICS_PROMETHEUS_HOST": "127.0.0.1",
            "METRICS_PROMETHEUS_PORT": str(metrics),
            "PROBES_PORT": str(probes),
            "PROFILING_PORT": str(profiling),
            "POD_NAME": "bench-tekton-controller",
        }
        self.log = Path(tempfile.gettempdir()) / f"vs-peers-tekton-{uuid.uuid4().hex[:6]}.log"
        self.proc = subprocess.Popen(
            [
                str(self.bin / "controller"),
                "-kubeconfig",
                kc,
                "-entrypoint-image",
                images["entrypoint"],
                "-nop-image",
                images["nop"],
                "-workingdirinit-image",
                images["workingdirinit"],
                "-sidecarlogresults-image",
                images["sidecarlogresults"],
                "-shell-image",
                BUSYBOX,
                # required by the flag check, used only for Windows nodes (none here)
                "-shell-image-win",
                "local/unused-windows-shell:none",
            ],
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=env,
        )
        self.pid = self.proc.pid
        self._wait_leading(cluster, probes)

    def _wait_leading(self, cluster: PeerCluster, probes: int) -> None:
        """Up when its probe answers and each reconciler holds its lease (it then starts its
        workers; informers synced before)."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"tekton exited: {self.log.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{probes}/readiness", timeout=2):
                    pass
                leases = cluster.kube.get("leases", "-n", self.system)["items"]
                held = {
                    kind
                    for lease in leases
                    for kind in LEASED
                    if f".{kind}.reconciler." in lease["metadata"]["name"]
                    and (lease.get("spec") or {}).get("holderIdentity")
                }
                if held == set(LEASED):
                    time.sleep(2)
                    return
            except OSError:
                pass
            time.sleep(0.5)
        raise SystemExit(f"tekton did not lead within 120 s: {self.log.read_text()[-3000:]}")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def cleanup(self, cluster: PeerCluster) -> None:
        cluster.kube.run("delete", "namespace", self.system, "--ignore-not-found", check=False)
        cluster.kube.run(
            "delete",
            "-f",
            str(self.bin / "config" / "300-crds"),
            "--ignore-not-found",
            timeout=120,
            check=False,
        )

    # -- the workloads -------------------------------------------------------------------------

    def prepare(self, cluster: PeerCluster, ns: str) -> None:
        """Nothing: a TaskRun's pod runs as the namespace's default ServiceAccount and makes no
        requests of its own (pod_flow counts them all the same)."""

    def pod_flow(self, namespaces: list[str]) -> list[dict[str, Any]]:
        return [
            {"kind": "ServiceAccount", "serviceAccount": {"name": "default", "namespace": ns}}
            for ns in namespaces
        ]

    def outcome(self, run: dict[str, Any]) -> Outcome:
        return condition_outcome(run)

    def one_step(self, name: str) -> dict[str, Any]:
        return pipeline_run(name, [task("only")])

    def chain(self, name: str, n: int) -> dict[str, Any]:
        tasks = [task("s0")] + [task(f"s{i}", [f"s{i - 1}"]) for i in range(1, n)]
        return pipeline_run(name, tasks)

    def fanout(self, name: str, n: int) -> dict[str, Any]:
        tasks = [task(f"f{i}") for i in range(n)]
        tasks.append(task("join", [f"f{i}" for i in range(n)]))
        return pipeline_run(name, tasks)

    def step_of(self, pod: dict[str, Any]) -> tuple[str, str] | None:
        labels = pod["metadata"].get("labels") or {}
        run, step = labels.get("tekton.dev/pipelineRun"), labels.get("tekton.dev/pipelineTask")
        if run is None or step is None:
            return None
        return run, step
