"""What every side of bench/vs_peers.py shares: the cluster as the bench needs it (etcd's bytes
per namespace, images imported into the node's containerd), the watches that time runs and pods
the same way for every tool, the node's pod CPU, and the interface a side implements (start its
controller, write its runs, name its pods). planops' own side lives here too; each peer has a
module of its own (bench/argo_side.py, bench/tekton_side.py), so adding a peer touches no other.
"""

from __future__ import annotations

import base64
import itertools
import json
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.artifact_work import planops_pass  # noqa: E402
from bench.measure import Cluster, ended, start_counted_operator  # noqa: E402
from tests.e2e.conftest import capsule, plan  # noqa: E402

BUSYBOX = "local/busybox:1.35.0"

# A run's outcome as a side reads it from the run's object: None while it runs, else
# (succeeded, message).
Outcome = tuple[bool, str] | None


class PeerCluster(Cluster):
    """The cluster as the bench needs it: etcd's bytes per namespace, images on the node."""

    def etcd_bytes(self, namespace: str) -> int:
        """Bytes etcd holds (keys and values) for the objects of one namespace."""

        def enc(s: str) -> str:
            return base64.b64encode(s.encode()).decode()

        req = urllib.request.Request(
            f"{self.etcd}/v3/kv/range",
            data=json.dumps({"key": enc("/registry/"), "range_end": enc("/registry0")}).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=60) as r:
            kvs = json.load(r).get("kvs", [])
        total = 0
        for kv in kvs:
            key = base64.b64decode(kv["key"]).decode(errors="replace")
            if f"/{namespace}/" in key:
                total += len(key) + len(base64.b64decode(kv.get("value", "")))
        return total

    def import_image(self, tarball: Path) -> None:
        sock = self.dir / "run" / "containerd.sock"
        subprocess.run(
            [
                "ctr",
                "--address",
                str(sock),
                "-n",
                "k8s.io",
                "images",
                "import",
                "--no-unpack=false",
                str(tarball),
            ],
            check=True,
            capture_output=True,
        )


# -- watching ----------------------------------------------------------------------------------


@dataclass
class Runs:
    """When each run was seen Succeeded (or failed), from a watch on the runs' resource; the
    side's `outcome` reads a run's object (a phase, or a Succeeded condition)."""

    outcome: Callable[[dict[str, Any]], Outcome]
    done: dict[str, float] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on(self, now: float, kind: str, obj: dict[str, Any]) -> None:
        seen = self.outcome(obj)
        if seen is None:
            return
        name = obj["metadata"]["name"]
        with self.lock:
            if seen[0]:
                self.done.setdefault(name, now)
            else:
                self.failed[name] = seen[1]

    def wait(self, names: list[str], timeout: float) -> float:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if self.failed:
                    raise SystemExit(f"runs failed: {self.failed}")
                if all(n in self.done for n in names):
                    return max(self.done[n] for n in names)
            time.sleep(0.05)
        missing = [n for n in names if n not in self.done]
        raise SystemExit(f"timed out waiting for {len(missing)} run(s), e.g. {missing[:3]}")


@dataclass
class Pods:
    """Per step of one run: its pod first seen ADDED and first seen done.

    Done is the first event showing every container of the pod terminated, or its terminal
    phase, whichever comes first: the moment the step's own work has ended. Each tool learns of
    it its own way (planops and Argo from the pod's phase or the wait container's report, Tekton
    from the step container's termination, which the kubelet reports before the pod's phase), so
    a step's end is timed at what all of them can see: the last container seen terminated."""

    step_of: Callable[[dict[str, Any]], tuple[str, str] | None]
    added: dict[tuple[str, str], float] = field(default_factory=dict)
    done: dict[tuple[str, str], float] = field(default_factory=dict)

    def on(self, now: float, kind: str, obj: dict[str, Any]) -> None:
        key = self.step_of(obj)
        if key is None:
            return
        self.added.setdefault(key, now)
        if ended(obj):
            self.done.setdefault(key, now)

    def latencies(self, run: str, steps: list[str]) -> list[float]:
        return [
            self.added[(run, b)] - self.done[(run, a)]
            for a, b in itertools.pairwise(steps)
            if (run, b) in self.added and (run, a) in self.done
        ]


def pods_cpu_s() -> float:
    """CPU seconds used so far by every pod on the node (the kubelet's /kubepods cgroup, v1
    cpuacct or v2 cpu.stat): the steps' own work, and whatever runs beside it in their pods
    (Argo's init and wait containers, Tekton's init container and entrypoint wrapper)."""
    v1 = Path("/sys/fs/cgroup/cpuacct/kubepods/cpuacct.usage")
    if v1.exists():
        return int(v1.read_text()) / 1e9
    for line in Path("/sys/fs/cgroup/kubepods/cpu.stat").read_text().splitlines():
        if line.startswith("usage_usec"):
            return int(line.split()[1]) / 1e6
    return 0.0


def phase_outcome(obj: dict[str, Any]) -> Outcome:
    """A run that reports a phase (a Plan, an Argo Workflow)."""
    status = obj.get("status") or {}
    phase = status.get("phase")
    if phase == "Succeeded":
        return True, ""
    if phase in ("Failed", "Error", "Invalid"):
        return False, str(status.get("message", phase))
    return None


@dataclass(frozen=True)
class ArtifactStore:
    """The S3 store the `artifacts` workload's steps share (started by the bench on the node's
    address), and the image planops' collector runs from."""

    endpoint: str  # http://NODE_IP:PORT
    bucket: str
    access_key: str
    secret_key: str
    collector_image: str


def store_secret(name: str, ns: str, store: ArtifactStore) -> dict[str, Any]:
    """A Secret with the store's keys as planops' chart names them (accessKeyId,
    secretAccessKey); Argo's repository is pointed at the same keys."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": ns},
        "stringData": {"accessKeyId": store.access_key, "secretAccessKey": store.secret_key},
    }


# -- the sides ---------------------------------------------------------------------------------


class Side:
    """One tool on the cluster: starts its controller, writes its runs, names its pods.

    `client` is the identity its controller talks to the API server as (its requests are
    counted under a FlowSchema of that name); `settings` is what the JSON line says about how
    it ran."""

    name: str
    client: str
    runs_resource: str
    settings: dict[str, Any]
    pid: int

    def start(self, cluster: PeerCluster, namespaces: list[str]) -> None: ...
    def stop(self) -> None: ...
    def prepare(self, cluster: PeerCluster, ns: str) -> None: ...
    def one_step(self, name: str) -> dict[str, Any]: ...
    def chain(self, name: str, n: int) -> dict[str, Any]: ...
    def fanout(self, name: str, n: int) -> dict[str, Any]: ...
    def step_of(self, pod: dict[str, Any]) -> tuple[str, str] | None: ...

    def outcome(self, run: dict[str, Any]) -> Outcome:
        return phase_outcome(run)

    def pod_flow(self, namespaces: list[str]) -> list[dict[str, Any]]:
        """The subjects a FlowSchema needs to count the requests the side's pods make."""
        return []

    def cleanup(self, cluster: PeerCluster) -> None:
        """Deletes what the side made cluster-wide (its CRDs, ...), after its namespaces."""

    # the `artifacts` workload (bench/artifact_work.py), for a side whose `files` is true
    files = False

    def use_store(self, store: ArtifactStore) -> None:
        """Before start: the controller is to use `store` as its artifact repository."""

    def prepare_files(self, cluster: PeerCluster, ns: str) -> None:
        """What a namespace of artifact runs needs besides prepare's (a Secret, a Capsule)."""

    def artifact_pass(self, name: str) -> dict[str, Any]:
        """A run of two steps, one leaving a file and a result, the other reading both."""
        raise NotImplementedError(f"{self.name} has no artifact workload")


class Planops(Side):
    name = "planops"
    client = "bench-planops"
    runs_resource = "plans.planops.dev"

    files = True
    #: the credentials Secret, in the operator's own namespace (`system`)
    SECRET = "bench-s3"

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.settings = {
            "operator": "planops (this checkout)",
            "workers": workers,
            "scope": "the bench's namespaces",
        }
        self.store: ArtifactStore | None = None
        self.system = ""

    def use_store(self, store: ArtifactStore) -> None:
        self.store = store
        self.settings["collector_image"] = store.collector_image

    def start(self, cluster: PeerCluster, namespaces: list[str]) -> None:
        extra: tuple[str, ...] = ()
        if self.store is not None:
            self.system = f"{namespaces[0]}-system"
            cluster.kube.run("create", "namespace", self.system)
            image = self.store.collector_image
            extra = ("--artifact-secrets-namespace", self.system, "--collector-image", image)
        self.op, self.log = start_counted_operator(cluster, namespaces, self.workers, *extra)
        self.pid = self.op.proc.pid

    def stop(self) -> None:
        self.op.stop()

    def prepare(self, cluster: PeerCluster, ns: str) -> None:
        cluster.kube.apply(capsule(BUSYBOX), "-n", ns)

    def prepare_files(self, cluster: PeerCluster, ns: str) -> None:
        """The Capsule names the store; its Secret, in the operator's namespace, lists `ns`."""
        assert self.store is not None, "use_store before start"
        repository = {
            "endpoint": self.store.endpoint,
            "bucket": self.store.bucket,
            "insecure": True,
            "credentialsSecret": {"name": self.SECRET},
        }
        cluster.kube.apply(capsule(BUSYBOX, artifactRepository=repository), "-n", ns)
        secret = store_secret(self.SECRET, self.system, self.store)
        secret["metadata"]["annotations"] = {"planops.dev/artifact-namespaces": ns}
        cluster.kube.apply(secret)

    def artifact_pass(self, name: str) -> dict[str, Any]:
        return planops_pass(name)

    def cleanup(self, cluster: PeerCluster) -> None:
        if self.system:
            cluster.kube.run(
                "delete", "namespace", self.system, "--wait=false", check=False, timeout=60
            )

    def one_step(self, name: str) -> dict[str, Any]:
        return plan(name, {"id": "only", "shell": "true"})

    def chain(self, name: str, n: int) -> dict[str, Any]:
        steps = [{"id": "s0", "shell": "true"}]
        steps += [{"id": f"s{i}", "shell": "true", "dependsOn": [f"s{i - 1}"]} for i in range(1, n)]
        return plan(name, *steps)

    def fanout(self, name: str, n: int) -> dict[str, Any]:
        steps = [{"id": f"f{i}", "shell": "true"} for i in range(n)]
        steps.append({"id": "join", "shell": "true", "dependsOn": [f"f{i}" for i in range(n)]})
        return plan(name, *steps)

    def step_of(self, pod: dict[str, Any]) -> tuple[str, str] | None:
        labels = pod["metadata"].get("labels") or {}
        if "planops.dev/plan" not in labels:
            return None
        return labels["planops.dev/plan"], labels.get("planops.dev/step", "")
