"""planops beside Argo Workflows on the same test cluster, in one run, with the same workloads.

    tests/cluster/build argo                       # once: Argo Workflows from the Go module proxy
    eval "$(tests/cluster/up --with-node)"
    .venv/bin/python bench/vs_argo.py [--chain 20] [--burst 100] [--fanout 50] [-o json]

Three sides run one after another, each alone on the cluster and in namespaces of its own (a
clean slate): the planops operator (the chart's defaults: 8 workers), Argo's workflow-controller
with its documented defaults, and Argo again with its documented throughput tuning (more workflow
workers, higher client QPS/burst, a higher pod-creation rate limit; its docs/scaling.md). Each
controller runs out of the cluster as the operator does in tests, against the same API server,
and every pod runs on the one real node with the same busybox image.

Workloads, each in the tool's own idiom (Plan steps with dependsOn; a Workflow DAG):
1. burst: N one-step runs submitted at once: runs/s to the last one Succeeded, and etcd bytes
   per run (every key of the burst's namespace, read from etcd right after: runs, Jobs, pods,
   task results, Events);
2. chain: a K-step chain of `true`: step-to-step latency (the dependency's pod seen done on a
   watch -> the next step's pod seen ADDED; millisecond timing, Kubernetes timestamps have 1 s
   precision) and wall time;
3. fan-out: F parallel steps and a join: wall time.
Cost, over all three: API requests per step from the API server's own metrics (each client has
an identity of its own, classified by a FlowSchema of its own, read from
`apiserver_flowcontrol_dispatched_requests_total`): the controller's, the requests its step pods
make (Argo's executor writes task results; planops' pods make none), and the whole cluster's
(kube-controller-manager's Job controller works for planops, the kubelet reports more containers
for Argo); controller CPU seconds per step and peak RSS from /proc; and the CPU the step pods
used per step (the node's pod cgroups: a trivial step's own work is nearly nothing, so this is
what runs beside it, such as Argo's init and wait containers).
"""

from __future__ import annotations

import argparse
import base64
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import threading
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "image"))

from bench.measure import (  # noqa: E402
    Cluster,
    Watch,
    pct,
    proc_cpu_s,
    proc_peak_rss_mib,
    start_counted_operator,
    versions,
)
from bench.operator_bench import apply_many  # noqa: E402
from ocitar import image, layer  # noqa: E402
from tests.e2e.conftest import capsule, free_port, plan  # noqa: E402

BUSYBOX = "local/busybox:1.35.0"
CACHE = Path(os.environ.get("PLANOPS_CACHE", Path.home() / ".cache" / "planops"))
FIGURES = (
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
)


# -- the cluster -------------------------------------------------------------------------------


class ArgoCluster(Cluster):
    """The cluster as vs_argo needs it: etcd's bytes per namespace, images on the node."""

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
    """When each run was seen Succeeded (or Failed), from a watch on the runs' resource."""

    done: dict[str, float] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on(self, now: float, kind: str, obj: dict[str, Any]) -> None:
        phase = (obj.get("status") or {}).get("phase")
        name = obj["metadata"]["name"]
        with self.lock:
            if phase == "Succeeded":
                self.done.setdefault(name, now)
            elif phase in ("Failed", "Error", "Invalid"):
                self.failed[name] = str((obj.get("status") or {}).get("message", phase))

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
    """Per step of one run: its pod first seen ADDED and first seen done."""

    step_of: Callable[[dict[str, Any]], tuple[str, str] | None]
    added: dict[tuple[str, str], float] = field(default_factory=dict)
    done: dict[tuple[str, str], float] = field(default_factory=dict)

    def on(self, now: float, kind: str, obj: dict[str, Any]) -> None:
        key = self.step_of(obj)
        if key is None:
            return
        self.added.setdefault(key, now)
        if (obj.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            self.done.setdefault(key, now)

    def latencies(self, run: str, steps: list[str]) -> list[float]:
        return [
            self.added[(run, b)] - self.done[(run, a)]
            for a, b in itertools.pairwise(steps)
            if (run, b) in self.added and (run, a) in self.done
        ]


# -- the sides ---------------------------------------------------------------------------------


def pods_cpu_s() -> float:
    """CPU seconds used so far by every pod on the node (the kubelet's /kubepods cgroup, v1
    cpuacct or v2 cpu.stat): the steps' own work, and whatever runs beside it in their pods
    (Argo's init and wait containers)."""
    v1 = Path("/sys/fs/cgroup/cpuacct/kubepods/cpuacct.usage")
    if v1.exists():
        return int(v1.read_text()) / 1e9
    for line in Path("/sys/fs/cgroup/kubepods/cpu.stat").read_text().splitlines():
        if line.startswith("usage_usec"):
            return int(line.split()[1]) / 1e6
    return 0.0


class Side:
    """One tool on the cluster: starts its controller, writes its runs, names its pods."""

    name: str
    runs_resource: str
    settings: dict[str, Any]
    pid: int

    def start(self, cluster: ArgoCluster, namespaces: list[str]) -> None: ...
    def stop(self) -> None: ...
    def prepare(self, cluster: ArgoCluster, ns: str) -> None: ...
    def one_step(self, name: str) -> dict[str, Any]: ...
    def chain(self, name: str, n: int) -> dict[str, Any]: ...
    def fanout(self, name: str, n: int) -> dict[str, Any]: ...
    def step_of(self, pod: dict[str, Any]) -> tuple[str, str] | None: ...
    def pod_flow(self, namespaces: list[str]) -> list[dict[str, Any]]:
        return []


class Planops(Side):
    name = "planops"
    runs_resource = "plans.planops.dev"

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self.settings = {
            "operator": "planops (this checkout)",
            "workers": workers,
            "scope": "the bench's namespaces",
        }

    def start(self, cluster: Cluster, namespaces: list[str]) -> None:
        self.op, self.log = start_counted_operator(cluster, namespaces, self.workers)
        self.pid = self.op.proc.pid

    def stop(self) -> None:
        self.op.stop()

    def prepare(self, cluster: ArgoCluster, ns: str) -> None:
        cluster.kube.apply(capsule(BUSYBOX), "-n", ns)

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


class Argo(Side):
    runs_resource = "workflows.argoproj.io"

    def __init__(self, tuned: bool) -> None:
        self.tuned = tuned
        self.name = "argo_tuned" if tuned else "argo"
        self.bin = CACHE / "bin" / f"argo-{versions()['ARGO_VERSION']}"
        self.flags = ["--workflow-workers", "64", "--qps", "100", "--burst", "150"] if tuned else []
        self.config: dict[str, str] = {}
        if tuned:
            self.config["resourceRateLimit"] = "limit: 100\nburst: 200\n"
        self.settings = {
            "controller": f"argo workflow-controller {versions()['ARGO_VERSION']}",
            "flags": self.flags or "defaults (--workflow-workers 32, --qps 20, --burst 30)",
            "configmap": self.config or "defaults (resourceRateLimit: none)",
            "executor": "emissary (argoexec init + wait sidecar)",
        }

    def executor_image(self, cluster: ArgoCluster) -> str:
        ref = f"local/argoexec:{versions()['ARGO_VERSION']}"
        with tempfile.TemporaryDirectory() as tmp:
            entries: list[tuple[str, dict[str, object]]] = [
                (d, {"kind": tarfile.DIRTYPE, "mode": 0o755}) for d in ("bin", "etc")
            ]
            entries.append(("tmp", {"kind": tarfile.DIRTYPE, "mode": 0o1777}))
            entries.append(
                ("bin/argoexec", {"data": (self.bin / "argoexec").read_bytes(), "mode": 0o755})
            )
            entries.append(
                (
                    "etc/passwd",
                    {
                        "data": b"root:x:0:0:root:/:/bin/argoexec\n"
                        b"nobody:x:65534:65534:nobody:/:/bin/false\n"
                    },
                )
            )
            tar = image(
                Path(tmp),
                ref,
                [layer(entries)],
                {
                    "Env": ["PATH=/bin"],
                    "Entrypoint": ["argoexec"],
                    "User": "0",
                },
            )
            cluster.import_image(tar)
        return ref

    def start(self, cluster: ArgoCluster, namespaces: list[str]) -> None:
        if not (self.bin / "workflow-controller").exists():
            raise SystemExit(f"Argo is not built: run tests/cluster/build argo ({self.bin})")
        cluster.kube.run("apply", "--server-side", "-f", str(self.bin / "crds"))
        home = namespaces[0]
        kc = cluster.identity("bench-argo", namespace=home)
        cluster.classify("bench-argo", [{"kind": "User", "user": {"name": "bench-argo"}}])
        metrics, telemetry = free_port(), free_port()
        self.config.update(
            {
                "metricsConfig": f"enabled: true\nport: {metrics}\n",
                "telemetryConfig": f"enabled: false\nport: {telemetry}\n",
            }
        )
        cluster.kube.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "workflow-controller-configmap"},
                "data": self.config,
            },
            "-n",
            home,
        )
        image_ref = self.executor_image(cluster)
        self.log = Path(tempfile.gettempdir()) / f"vs-argo-{self.name}-{uuid.uuid4().hex[:6]}.log"
        # one controller for the whole cluster (its default): the bench's namespaces only hold
        # its runs
        self.proc = subprocess.Popen(
            [
                str(self.bin / "workflow-controller"),
                "--kubeconfig",
                kc,
                "--executor-image",
                image_ref,
                "--executor-image-pull-policy",
                "IfNotPresent",
                *self.flags,
            ],
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "LEADER_ELECTION_IDENTITY": f"bench-{self.name}"},
        )
        self.pid = self.proc.pid
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"argo exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=2):
                    break
            except OSError:
                time.sleep(0.3)
        time.sleep(3)  # the leader's informers sync

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def prepare(self, cluster: ArgoCluster, ns: str) -> None:
        cluster.kube.apply(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "argo-exec"}},
            "-n",
            ns,
        )
        cluster.kube.apply(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "executor"},
                "rules": [
                    {
                        "apiGroups": ["argoproj.io"],
                        "resources": ["workflowtaskresults"],
                        "verbs": ["create", "patch"],
                    }
                ],
            },
            "-n",
            ns,
        )
        cluster.kube.apply(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "executor"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": "executor",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "argo-exec", "namespace": ns}],
            },
            "-n",
            ns,
        )

    def pod_flow(self, namespaces: list[str]) -> list[dict[str, Any]]:
        return [
            {"kind": "ServiceAccount", "serviceAccount": {"name": "argo-exec", "namespace": ns}}
            for ns in namespaces
        ]

    @staticmethod
    def _wf(name: str, tasks: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Workflow",
            "metadata": {"name": name},
            "spec": {
                "entrypoint": "main",
                "serviceAccountName": "argo-exec",
                "templates": [
                    {"name": "main", "dag": {"tasks": tasks}},
                    {"name": "true", "container": {"image": BUSYBOX, "command": ["true"]}},
                ],
            },
        }

    def one_step(self, name: str) -> dict[str, Any]:
        wf = self._wf(name, [])
        wf["spec"]["entrypoint"] = "true"
        wf["spec"]["templates"] = wf["spec"]["templates"][1:]
        return wf

    def chain(self, name: str, n: int) -> dict[str, Any]:
        tasks = [{"name": "s0", "template": "true"}]
        tasks += [
            {"name": f"s{i}", "template": "true", "depends": f"s{i - 1}"} for i in range(1, n)
        ]
        return self._wf(name, tasks)

    def fanout(self, name: str, n: int) -> dict[str, Any]:
        tasks = [{"name": f"f{i}", "template": "true"} for i in range(n)]
        tasks.append(
            {"name": "join", "template": "true", "depends": " && ".join(f"f{i}" for i in range(n))}
        )
        return self._wf(name, tasks)

    def step_of(self, pod: dict[str, Any]) -> tuple[str, str] | None:
        meta = pod["metadata"]
        wf = (meta.get("labels") or {}).get("workflows.argoproj.io/workflow")
        node = (meta.get("annotations") or {}).get("workflows.argoproj.io/node-name")
        if wf is None or node is None:
            return None
        return wf, node.rsplit(".", 1)[-1] if "." in node else "only"


# -- one side's run ----------------------------------------------------------------------------


def measure(side: Side, cluster: ArgoCluster, args: argparse.Namespace) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:5]
    nss = {w: f"vs-{side.name.replace('_', '-')}-{w}-{tag}" for w in ("burst", "chain", "fanout")}
    for ns in nss.values():
        cluster.kube.run("create", "namespace", ns)
    side.start(cluster, list(nss.values()))
    if flows := side.pod_flow(list(nss.values())):
        cluster.classify(f"bench-{side.name.replace('_', '-')}-pods", flows)
    watches: list[Watch] = []
    try:
        for ns in nss.values():
            side.prepare(cluster, ns)
        runs, pods = Runs(), Pods(side.step_of)
        for ns in nss.values():
            watches.append(Watch(cluster.kubeconfig, side.runs_resource, ns, runs.on))
            watches.append(Watch(cluster.kubeconfig, "pods", ns, pods.on))
        time.sleep(2)
        req0, cpu0, pods0 = cluster.requests(), proc_cpu_s(side.pid), pods_cpu_s()
        out: dict[str, Any] = {}

        names = [f"burst-{i}" for i in range(args.burst)]
        progress(f"{side.name}: {args.burst} one-step runs at once")
        t0 = time.monotonic()
        apply_many(cluster.kube, nss["burst"], [side.one_step(n) for n in names])
        last = runs.wait(names, 120 + args.burst * 10) - t0
        out["burst_last_s"] = last
        out["throughput_runs_per_s"] = args.burst / last
        time.sleep(2)
        out["etcd_bytes_per_run"] = cluster.etcd_bytes(nss["burst"]) / args.burst

        progress(f"{side.name}: a {args.chain}-step chain")
        t0 = time.monotonic()
        cluster.kube.apply(side.chain("chain", args.chain), "-n", nss["chain"])
        out["chain_wall_s"] = runs.wait(["chain"], 60 + args.chain * 30) - t0
        lat = pods.latencies("chain", [f"s{i}" for i in range(args.chain)])
        out["chain_step_latency_p50_s"] = statistics.median(lat)
        out["chain_step_latency_p99_s"] = pct(lat, 0.99)
        out["chain_latency_samples"] = len(lat)

        progress(f"{side.name}: a fan-out of {args.fanout} and a join")
        t0 = time.monotonic()
        cluster.kube.apply(side.fanout("fanout", args.fanout), "-n", nss["fanout"])
        out["fanout_wall_s"] = runs.wait(["fanout"], 120 + args.fanout * 10) - t0
        time.sleep(3)  # requests that follow the last run (status writes, events)

        steps = args.burst + args.chain + args.fanout + 1
        req1 = cluster.requests()
        delta = {k: req1.get(k, 0.0) - req0.get(k, 0.0) for k in req1}
        own = delta.get(f"bench-{'argo' if side.name.startswith('argo') else 'planops'}", 0.0)
        in_pods = delta.get(f"bench-{side.name.replace('_', '-')}-pods", 0.0)
        cluster_total = sum(v for k, v in delta.items() if k not in ("exempt",))
        out["api_requests_per_step"] = (own + in_pods) / steps
        out["controller_api_requests_per_step"] = own / steps
        out["pod_api_requests_per_step"] = in_pods / steps
        out["cluster_api_requests_per_step"] = cluster_total / steps
        out["requests_by_flow_schema"] = {k: v for k, v in sorted(delta.items()) if v}
        out["controller_cpu_s_per_step"] = (proc_cpu_s(side.pid) - cpu0) / steps
        out["controller_rss_mib"] = proc_peak_rss_mib(side.pid)
        out["pods_cpu_s_per_step"] = (pods_cpu_s() - pods0) / steps
        out["steps"] = steps
        out["settings"] = side.settings
        return out
    finally:
        for w in watches:
            w.stop()
        side.stop()
        for ns in nss.values():
            cluster.kube.run("delete", "namespace", ns, "--wait=false", check=False)


def progress(msg: str) -> None:
    print(f"[vs_argo {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def table(result: dict[str, Any]) -> str:
    cols = ("planops", "argo", "argo_tuned", "ratio")
    rows = [f"| figure | {' | '.join(cols)} |", "|---|" + "---:|" * len(cols)]
    for f in FIGURES:
        cells = []
        for c in cols:
            v = result.get(c, {}).get(f)
            cells.append("" if v is None else f"{v:,.3f}" if v < 100 else f"{v:,.0f}")
        rows.append(f"| {f} | {' | '.join(cells)} |")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chain", type=int, default=20)
    ap.add_argument("--burst", type=int, default=100)
    ap.add_argument("--fanout", type=int, default=50)
    ap.add_argument("--workers", type=int, default=8, help="the operator's --workers (chart: 8)")
    ap.add_argument("--sides", default="planops,argo,argo_tuned")
    ap.add_argument("-o", "--output", choices=("table", "json"), default="table")
    args = ap.parse_args()
    if shutil.which("ctr") is None or shutil.which("openssl") is None:
        raise SystemExit("needs ctr (containerd) and openssl: see docs/test-cluster.md")
    cluster = ArgoCluster(os.environ["KUBECONFIG"])
    sides: dict[str, Side] = {
        "planops": Planops(args.workers),
        "argo": Argo(tuned=False),
        "argo_tuned": Argo(tuned=True),
    }
    result: dict[str, Any] = {}
    for name in args.sides.split(","):
        result[name] = measure(sides[name], cluster, args)
    if "planops" in result and "argo" in result:
        result["ratio"] = {
            f: result["planops"][f] / result["argo"][f] for f in FIGURES if result["argo"].get(f)
        }
    result["versions"] = {**versions(), "workloads": vars(args)}
    if args.output == "json":
        print(json.dumps(result, sort_keys=True))
    else:
        print(table(result))
        print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
