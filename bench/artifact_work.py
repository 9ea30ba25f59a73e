"""The `artifacts` workload of bench/vs_peers.py: what a step that moves a file costs in its pod,
planops' collector against Argo's executor, for the same work through the same store.

N two-step runs: step `a` writes a 1 MiB file of random bytes and a small result, step `b` reads
the file (placed by the tool) and prints the result. Both sides use one SeaweedFS S3 store,
started by the bench on the node's address (the pods reach it over their bridge): planops
through a Capsule's `artifactRepository` (the credentials Secret in the operator's namespace,
the pods get presigned URLs), Argo through its workflow-controller ConfigMap's
`artifactRepository` (s3 endpoint, bucket, insecure, the access and secret key from a Secret in
the run's namespace, which Argo mounts into its executor's containers). Argo's output artifact
is not archived (`archive: none`), as planops' file is not: the same bytes travel.

What is measured, per artifact step (2 N steps): the CPU the step pods used, from each pod's
own cgroup on the node (sampled while it lives; the cgroup holds its dead containers' time, and
is read again after the pod has ended, so the figure is whole: `artifacts_pods_complete` says
for how many pods it was), beside the whole node's pod CPU over the same time (which includes
other users of a shared node); the wall time from the apply to the last run Succeeded; the
controller's CPU and the API requests of the controller and its pods. The CPU by container
(`artifacts_cpu_by_container_s`) is a lower bound: a container's cgroup goes with it.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.measure import ended  # noqa: E402

#: the file step `a` writes and step `b` reads
FILE_BYTES = 1 << 20
MAKE = f"head -c {FILE_BYTES} /dev/urandom > {{out}} && echo ok > {{result}}"
READ = "wc -c {path} && echo result={result}"
#: the cgroup v1 (cpuacct, nanoseconds) and v2 (cpu.stat, usage_usec) roots of the node's pods
V1_ROOT = Path("/sys/fs/cgroup/cpuacct/kubepods")
V2_ROOT = Path("/sys/fs/cgroup/kubepods")
_POD_DIR = re.compile(r"^(?:kubepods-(?:besteffort-|burstable-)?)?pod([0-9a-f_-]{36})(?:\.slice)?$")
_CONTAINER_DIR = re.compile(r"^(?:cri-containerd-)?([0-9a-f]{64})(?:\.scope)?$")


# -- the runs, each tool in its own idiom ------------------------------------------------------


def planops_pass(name: str) -> dict[str, Any]:
    """A Plan: `a` leaves artifact `x` and result `r`, `b` reads both."""
    make = MAKE.format(out="out.bin", result="$PLANOPS_RESULTS/r")
    a = {
        "id": "a",
        "shell": f"sh -c '{make}'",
        "results": [{"name": "r"}],
        "outputs": {"artifacts": [{"name": "x", "path": "out.bin"}]},
    }
    b = {
        "id": "b",
        "shell": f"sh -c '{READ.format(path='in.bin', result='{{a.results.r}}')}'",
        "dependsOn": ["a"],
        "inputs": {"artifacts": [{"from": "{{a.artifacts.x}}", "path": "in.bin"}]},
    }
    return {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": {"name": name},
        "spec": {"steps": [a, b]},
    }


def argo_pass(image: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """A Workflow DAG's tasks and their templates (bench/argo_side.py wraps them in its
    Workflow): task `a` leaves artifact `x` (not archived) and parameter `r` from a file, task
    `b` gets both as inputs."""
    make = MAKE.format(out="/tmp/out.bin", result="/tmp/r")
    read = READ.format(path="/tmp/in.bin", result="{{inputs.parameters.r}}")
    tasks = [
        {"name": "a", "template": "make"},
        {
            "name": "b",
            "template": "read",
            "depends": "a",
            "arguments": {
                "artifacts": [{"name": "x", "from": "{{tasks.a.outputs.artifacts.x}}"}],
                "parameters": [{"name": "r", "value": "{{tasks.a.outputs.parameters.r}}"}],
            },
        },
    ]
    templates = [
        {
            "name": "make",
            "container": {"image": image, "command": ["sh", "-c", make]},
            "outputs": {
                "artifacts": [{"name": "x", "path": "/tmp/out.bin", "archive": {"none": {}}}],
                "parameters": [{"name": "r", "valueFrom": {"path": "/tmp/r"}}],
            },
        },
        {
            "name": "read",
            "inputs": {
                "artifacts": [{"name": "x", "path": "/tmp/in.bin"}],
                "parameters": [{"name": "r"}],
            },
            "container": {"image": image, "command": ["sh", "-c", read]},
        },
    ]
    return tasks, templates


def argo_repository(endpoint: str, bucket: str, secret: str) -> str:
    """The workflow-controller ConfigMap's `artifactRepository` (YAML; JSON is YAML): S3 at
    `endpoint` (http://HOST:PORT) without TLS, keys from `secret` (the keys planops' Secret
    uses, so one Secret shape serves both)."""
    s3 = {
        "endpoint": endpoint.removeprefix("http://"),
        "bucket": bucket,
        "insecure": True,
        "accessKeySecret": {"name": secret, "key": "accessKeyId"},
        "secretKeySecret": {"name": secret, "key": "secretAccessKey"},
    }
    return json.dumps({"s3": s3})


# -- the pods' CPU, from their own cgroups -----------------------------------------------------


def pod_uid(dirname: str) -> str | None:
    """The pod uid a cgroup directory of the kubelet names (cgroupfs `pod<uid>`, systemd
    `kubepods-besteffort-pod<uid with _>.slice`), else None."""
    m = _POD_DIR.match(dirname)
    return m.group(1).replace("_", "-") if m else None


def container_id(dirname: str) -> str | None:
    """The container id a pod's cgroup subdirectory names (cgroupfs: the id; systemd:
    `cri-containerd-<id>.scope`), else None."""
    m = _CONTAINER_DIR.match(dirname)
    return m.group(1) if m else None


def read_usage_s(cgroup: Path) -> float | None:
    """A cgroup's CPU seconds so far (v1 cpuacct.usage or v2 cpu.stat); None once it is gone."""
    try:
        v1 = cgroup / "cpuacct.usage"
        if v1.exists():
            return int(v1.read_text()) / 1e9
        for line in (cgroup / "cpu.stat").read_text().splitlines():
            if line.startswith("usage_usec"):
                return int(line.split()[1]) / 1e6
    except (OSError, ValueError):
        return None
    return None


def pod_cgroups(root: Path) -> Iterable[tuple[str, Path]]:
    """(uid, directory) of every pod cgroup under the kubelet's root, whatever its QoS class."""
    qos = [p for p in root.glob("*") if "besteffort" in p.name or "burstable" in p.name]
    for parent in (root, *sorted(qos)):
        try:
            children = list(parent.iterdir())
        except OSError:
            continue
        for d in children:
            uid = pod_uid(d.name)
            if uid is not None:
                yield uid, d


@dataclass
class CgroupSampler:
    """Reads the pods' cgroups every `period` seconds in a thread, keeping each pod's and each
    container's last reading and when it was taken (monotonic)."""

    root: Path
    period: float = 0.2
    pods: dict[str, tuple[float, float]] = field(default_factory=dict)
    containers: dict[tuple[str, str], float] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)
        self.sample()  # once more, now

    def _loop(self) -> None:
        while not self._stop.wait(self.period):
            self.sample()

    def sample(self) -> None:
        for uid, d in list(pod_cgroups(self.root)):
            used = read_usage_s(d)
            if used is None:
                continue
            self.pods[uid] = (used, time.monotonic())
            try:
                subdirs = list(d.iterdir())
            except OSError:
                continue
            for c in subdirs:
                cid = container_id(c.name)
                got = read_usage_s(c) if cid is not None else None
                if cid is not None and got is not None:
                    self.containers[(uid, cid)] = got


def node_cgroup_root() -> Path:
    return V1_ROOT if V1_ROOT.exists() else V2_ROOT


@dataclass
class PodLedger:
    """The pods of one namespace from a watch: uid, when each was first seen ended, and the
    name of each container id (init containers included)."""

    ended_at: dict[str, float] = field(default_factory=dict)
    names: dict[str, str] = field(default_factory=dict)
    uids: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on(self, now: float, kind: str, pod: dict[str, Any]) -> None:
        uid = pod["metadata"]["uid"]
        status = pod.get("status") or {}
        with self.lock:
            self.uids.add(uid)
            for c in [
                *status.get("initContainerStatuses", []),
                *status.get("containerStatuses", []),
            ]:
                cid = str(c.get("containerID") or "").rpartition("://")[2]
                if cid:
                    self.names[cid] = c["name"]
            if ended(pod):
                self.ended_at.setdefault(uid, now)


def pods_cpu(sampled: dict[str, tuple[float, float]], ledger: PodLedger) -> tuple[float, int, int]:
    """The CPU seconds of the ledger's pods (each one's last reading), how many pods were read
    at all and how many were read after they were seen ended (their whole figure)."""
    total, read, whole = 0.0, 0, 0
    for uid in ledger.uids:
        if uid not in sampled:
            continue
        used, at = sampled[uid]
        total += used
        read += 1
        if uid in ledger.ended_at and at >= ledger.ended_at[uid]:
            whole += 1
    return total, read, whole


def cpu_by_container(
    containers: dict[tuple[str, str], float], ledger: PodLedger
) -> dict[str, float]:
    """CPU seconds by container name over the ledger's pods (`sandbox` for a cgroup no status
    names: the pod's pause container)."""
    out: dict[str, float] = {}
    for (uid, cid), used in containers.items():
        if uid in ledger.uids:
            name = ledger.names.get(cid, "sandbox")
            out[name] = out.get(name, 0.0) + used
    return out
