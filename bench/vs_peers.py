"""planops beside its peers, Argo Workflows and Tekton Pipelines, on the same test cluster, in one
run, with the same workloads.

    tests/cluster/build argo; tests/cluster/build tekton   # once: the peers from the Go proxy
    eval "$(tests/cluster/up --with-node)"                 # or --kubeconfig of a running one
    .venv/bin/python bench/vs_peers.py [--chain 20] [--burst 100] [--fanout 50] [-o json]
    .venv/bin/python bench/vs_peers.py --sides planops,argo --workloads artifacts [--artifacts 10]

Four sides run one after another, each alone on the cluster and in namespaces of its own (a
clean slate): the planops operator (the chart's defaults: 8 workers), Argo's workflow-controller
with its documented defaults, Argo again with its documented throughput tuning (more workflow
workers, higher client QPS/burst, a higher pod-creation rate limit; Argo's scaling guide), and
Tekton's controller with the release's defaults. Each controller runs out of the cluster as the
operator does in tests, against the same API server, and every step runs `true` on the one real
node in the same busybox image. How each peer is run: bench/argo_side.py, bench/tekton_side.py.

Workloads, each in the tool's own idiom (Plan steps with dependsOn; a Workflow DAG; a Pipeline
of Tasks with runAfter):
1. burst: N one-step runs submitted at once: runs/s to the last one Succeeded, and etcd bytes
   per run (every key of the burst's namespace, read from etcd right after: runs, Jobs, TaskRuns,
   pods, task results, Events);
2. chain: a K-step chain of `true`: step-to-step latency (the dependency's pod seen done on a
   watch, its last container terminated or its phase terminal, whichever is seen first -> the
   next step's pod seen ADDED; millisecond timing, Kubernetes timestamps have 1 s precision)
   and wall time;
3. fan-out: F parallel steps and a join: wall time;
4. artifacts (`--workloads artifacts`, planops and Argo only; not among the defaults: it starts
   a SeaweedFS S3 store on the node's address and builds this checkout's operator image for
   planops' collector): N runs (`--artifacts`) of two steps at once, the first leaving a 1 MiB
   file and a small result, the second reading both, through the same store: the step pods' CPU
   per artifact step from each pod's own cgroup (planops' fetch/collect containers against
   Argo's init and wait containers for the same work), and the wall time; bench/artifact_work.py.
Cost, over the first three: API requests per step from the API server's own metrics (each client has
an identity of its own, classified by a FlowSchema of its own, read from
`apiserver_flowcontrol_dispatched_requests_total`): the controller's, the requests its step pods
make (Argo's executor writes task results; planops' and Tekton's pods make none), and the whole
cluster's (kube-controller-manager's Job controller works for planops, the kubelet reports more
containers for Argo and Tekton); controller CPU seconds per step and peak RSS from /proc; and the
CPU the step pods used per step (the node's pod cgroups: a trivial step's own work is nearly
nothing, so this is what runs beside it, such as Argo's init and wait containers or Tekton's
init container).

The JSON line (`-o json`) holds one object per side (`planops`, `argo`, `argo_tuned`, `tekton`)
and the ratios `ratio` (planops / Argo's defaults) and `ratio_tekton` (planops / Tekton), each
over FIGURES.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import statistics
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.argo_side import Argo  # noqa: E402
from bench.artifact_work import (  # noqa: E402
    CgroupSampler,
    PodLedger,
    cpu_by_container,
    node_cgroup_root,
    pods_cpu,
)
from bench.measure import Watch, pct, proc_cpu_s, proc_peak_rss_mib, versions  # noqa: E402
from bench.operator_bench import apply_many  # noqa: E402
from bench.peer_sides import (  # noqa: E402
    ArtifactStore,
    PeerCluster,
    Planops,
    Pods,
    Runs,
    Side,
    pods_cpu_s,
)
from bench.tekton_side import Tekton  # noqa: E402

SIDES = ("planops", "argo", "argo_tuned", "tekton")
# each ratio: planops' figure over the peer's, on the JSON line under its key
RATIOS = {"ratio": "argo", "ratio_tekton": "tekton"}
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
    "artifacts_pods_cpu_s_per_step",
    "artifacts_wall_s",
    "artifacts_controller_cpu_s_per_step",
    "artifacts_api_requests_per_step",
)
#: the planops image the bench builds for the collector: a tag of its own, so that a shared
#: node's release tag (which other test runs import) is never replaced
COLLECTOR_IMAGE = "local/planops-operator:vs-peers"
WORKLOADS = ("burst", "chain", "fanout", "artifacts")
#: what runs unless --workloads says otherwise (artifacts needs a store and the operator's image)
DEFAULT_WORKLOADS = ("burst", "chain", "fanout")


# -- one side's run ----------------------------------------------------------------------------


def measure(side: Side, cluster: PeerCluster, args: argparse.Namespace) -> dict[str, Any]:
    tag = uuid.uuid4().hex[:5]
    nss = {w: f"vs-{side.name.replace('_', '-')}-{w}-{tag}" for w in args.workloads}
    for ns in nss.values():
        cluster.kube.run("create", "namespace", ns)
    side.start(cluster, list(nss.values()))
    if flows := side.pod_flow(list(nss.values())):
        cluster.classify(f"bench-{side.name.replace('_', '-')}-pods", flows)
    watches: list[Watch] = []
    try:
        for w, ns in nss.items():
            (side.prepare_files if w == "artifacts" else side.prepare)(cluster, ns)
        out: dict[str, Any] = {}
        if set(nss) - {"artifacts"}:
            out.update(steps_workloads(side, cluster, args, nss, watches))
        if "artifacts" in nss:
            out.update(artifact_workload(side, cluster, nss["artifacts"], args.artifacts, watches))
        out["settings"] = side.settings
        return out
    finally:
        for w in watches:
            w.stop()
        # the namespaces go while the controller still runs (whatever finalizer it put on its
        # pods or runs, it removes), then whatever the side made cluster-wide
        cluster.kube.run(
            "delete", "namespace", *nss.values(), "--timeout=300s", timeout=330, check=False
        )
        side.stop()
        side.cleanup(cluster)


def steps_workloads(
    side: Side,
    cluster: PeerCluster,
    args: argparse.Namespace,
    nss: dict[str, str],
    watches: list[Watch],
) -> dict[str, Any]:
    """burst, chain and fan-out (those chosen), and the cost figures over all their steps."""
    runs, pods = Runs(side.outcome), Pods(side.step_of)
    for w, ns in nss.items():
        if w != "artifacts":
            watches.append(Watch(cluster.kubeconfig, side.runs_resource, ns, runs.on))
            watches.append(Watch(cluster.kubeconfig, "pods", ns, pods.on))
    time.sleep(2)
    req0, cpu0, pods0 = cluster.requests(), proc_cpu_s(side.pid), pods_cpu_s()
    out: dict[str, Any] = {}
    steps = 0

    if "burst" in nss:
        names = [f"burst-{i}" for i in range(args.burst)]
        progress(f"{side.name}: {args.burst} one-step runs at once")
        t0 = time.monotonic()
        apply_many(cluster.kube, nss["burst"], [side.one_step(n) for n in names])
        last = runs.wait(names, 120 + args.burst * 10) - t0
        out["burst_last_s"] = last
        out["throughput_runs_per_s"] = args.burst / last
        time.sleep(2)
        out["etcd_bytes_per_run"] = cluster.etcd_bytes(nss["burst"]) / args.burst
        steps += args.burst

    if "chain" in nss:
        progress(f"{side.name}: a {args.chain}-step chain")
        t0 = time.monotonic()
        cluster.kube.apply(side.chain("chain", args.chain), "-n", nss["chain"])
        out["chain_wall_s"] = runs.wait(["chain"], 60 + args.chain * 30) - t0
        lat = pods.latencies("chain", [f"s{i}" for i in range(args.chain)])
        out["chain_step_latency_p50_s"] = statistics.median(lat)
        out["chain_step_latency_p99_s"] = pct(lat, 0.99)
        out["chain_latency_samples"] = len(lat)
        steps += args.chain

    if "fanout" in nss:
        progress(f"{side.name}: a fan-out of {args.fanout} and a join")
        t0 = time.monotonic()
        cluster.kube.apply(side.fanout("fanout", args.fanout), "-n", nss["fanout"])
        out["fanout_wall_s"] = runs.wait(["fanout"], 120 + args.fanout * 10) - t0
        steps += args.fanout + 1
    time.sleep(3)  # requests that follow the last run (status writes, events)

    requests = requests_since(side, cluster, req0)
    out["api_requests_per_step"] = (requests["own"] + requests["pods"]) / steps
    out["controller_api_requests_per_step"] = requests["own"] / steps
    out["pod_api_requests_per_step"] = requests["pods"] / steps
    out["cluster_api_requests_per_step"] = requests["cluster"] / steps
    out["requests_by_flow_schema"] = requests["by_flow_schema"]
    out["controller_cpu_s_per_step"] = (proc_cpu_s(side.pid) - cpu0) / steps
    out["controller_rss_mib"] = proc_peak_rss_mib(side.pid)
    out["pods_cpu_s_per_step"] = (pods_cpu_s() - pods0) / steps
    out["steps"] = steps
    return out


def requests_since(side: Side, cluster: PeerCluster, before: dict[str, float]) -> dict[str, Any]:
    """The API requests since `before`: the controller's own, its pods', the whole cluster's
    (exempt ones aside), and every FlowSchema's."""
    after = cluster.requests()
    delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    return {
        "own": delta.get(side.client, 0.0),
        "pods": delta.get(f"bench-{side.name.replace('_', '-')}-pods", 0.0),
        "cluster": sum(v for k, v in delta.items() if k not in ("exempt",)),
        "by_flow_schema": {k: v for k, v in sorted(delta.items()) if v},
    }


def artifact_workload(
    side: Side, cluster: PeerCluster, ns: str, n: int, watches: list[Watch]
) -> dict[str, Any]:
    """N runs of two artifact steps at once (bench/artifact_work.py): the step pods' CPU from
    their own cgroups, per artifact step, and the wall time to the last run Succeeded."""
    runs, ledger = Runs(side.outcome), PodLedger()
    watches.append(Watch(cluster.kubeconfig, side.runs_resource, ns, runs.on))
    watches.append(Watch(cluster.kubeconfig, "pods", ns, ledger.on))
    sampler = CgroupSampler(node_cgroup_root())
    time.sleep(2)
    req0, cpu0, node0 = cluster.requests(), proc_cpu_s(side.pid), pods_cpu_s()
    sampler.start()
    names = [f"pass-{i}" for i in range(n)]
    progress(f"{side.name}: {n} runs of two artifact steps (1 MiB and a result) at once")
    t0 = time.monotonic()
    apply_many(cluster.kube, ns, [side.artifact_pass(name) for name in names])
    wall = runs.wait(names, 180 + n * 30) - t0
    time.sleep(3)  # the last pods' cgroups read once more after their end; late requests
    sampler.stop()
    steps = 2 * n
    used, read, whole = pods_cpu(sampler.pods, ledger)
    requests = requests_since(side, cluster, req0)
    return {
        "artifacts_wall_s": wall,
        "artifacts_pods_cpu_s_per_step": used / steps,
        "artifacts_node_pods_cpu_s_per_step": (pods_cpu_s() - node0) / steps,
        "artifacts_controller_cpu_s_per_step": (proc_cpu_s(side.pid) - cpu0) / steps,
        "artifacts_api_requests_per_step": (requests["own"] + requests["pods"]) / steps,
        "artifacts_cpu_by_container_s_per_step": {
            k: v / steps for k, v in sorted(cpu_by_container(sampler.containers, ledger).items())
        },
        "artifacts_pods": len(ledger.uids),
        "artifacts_pods_read": read,
        "artifacts_pods_complete": whole,
        "artifacts_steps": steps,
    }


def progress(msg: str) -> None:
    print(f"[vs_peers {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def table(result: dict[str, Any]) -> str:
    cols = [c for c in (*SIDES, *RATIOS) if c in result]
    rows = [f"| figure | {' | '.join(cols)} |", "|---|" + "---:|" * len(cols)]
    for f in FIGURES:
        cells = []
        for c in cols:
            v = result[c].get(f)
            cells.append("" if v is None else f"{v:,.3f}" if v < 100 else f"{v:,.0f}")
        rows.append(f"| {f} | {' | '.join(cells)} |")
    return "\n".join(rows)


def with_ratios(result: dict[str, Any]) -> dict[str, Any]:
    """The sides' figures and, for each peer measured beside planops, planops' figure over the
    peer's (a figure the peer has as zero, or not at all, has no ratio)."""
    out = dict(result)
    for key, peer in RATIOS.items():
        if "planops" in result and peer in result:
            out[key] = {
                f: result["planops"][f] / result[peer][f]
                for f in FIGURES
                if result[peer].get(f) and f in result["planops"]
            }
    return out


@contextlib.contextmanager
def artifact_store(
    cluster: PeerCluster, args: argparse.Namespace
) -> Iterator[ArtifactStore | None]:
    """For the artifacts workload: a SeaweedFS on the node's address (its pods reach it over
    their bridge), stopped and removed afterwards, and the collector's image on the node."""
    if "artifacts" not in args.workloads:
        yield None
        return
    from tests.cluster.s3 import server  # noqa: PLC0415 - only this workload starts a store
    from tests.e2e.conftest import operator_image_on_node  # noqa: PLC0415
    from tests.e2e.test_artifacts import node_ip  # noqa: PLC0415

    progress(f"the collector's image {args.collector_image}: image/build --import")
    image = operator_image_on_node(cluster.kubeconfig, args.collector_image)
    node = cluster.kube.get("nodes")["items"][0]
    with server(node_ip(node)) as s3:
        progress(f"the artifact store: {s3.endpoint}, bucket {s3.bucket}")
        yield ArtifactStore(s3.endpoint, s3.bucket, s3.access_key, s3.secret_key, image)


def main(sides: str = ",".join(SIDES)) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--chain", type=int, default=20)
    ap.add_argument("--burst", type=int, default=100)
    ap.add_argument("--fanout", type=int, default=50)
    ap.add_argument("--workers", type=int, default=8, help="the operator's --workers (chart: 8)")
    ap.add_argument(
        "--workloads",
        default=",".join(DEFAULT_WORKLOADS),
        help=f"a comma-separated choice of {WORKLOADS} (default: {','.join(DEFAULT_WORKLOADS)})",
    )
    ap.add_argument("--artifacts", type=int, default=10, help="the artifact workload's runs")
    ap.add_argument(
        "--collector-image",
        default=os.environ.get("PLANOPS_TEST_OPERATOR_IMAGE", COLLECTOR_IMAGE),
        help="the operator's image the planops collector runs from, built from this checkout "
        "and imported into the node's containerd under this name (default: "
        "$PLANOPS_TEST_OPERATOR_IMAGE or %(default)s)",
    )
    ap.add_argument("--sides", default=sides, help=f"a comma-separated choice of {SIDES}")
    ap.add_argument(
        "--kubeconfig",
        default=os.environ.get("KUBECONFIG"),
        help="the admin kubeconfig of a test cluster with a node (default: $KUBECONFIG); its "
        "directory is the cluster's (ports.env, pki/, run/containerd.sock)",
    )
    ap.add_argument("-o", "--output", choices=("table", "json"), default="table")
    args = ap.parse_args()
    chosen = args.sides.split(",")
    if unknown := [s for s in chosen if s not in SIDES]:
        ap.error(f"unknown side(s) {unknown}: choose from {SIDES}")
    args.workloads = args.workloads.split(",")
    if unknown := [w for w in args.workloads if w not in WORKLOADS]:
        ap.error(f"unknown workload(s) {unknown}: choose from {WORKLOADS}")
    if not args.kubeconfig:
        ap.error("no cluster: pass --kubeconfig or set KUBECONFIG")
    if shutil.which("ctr") is None or shutil.which("openssl") is None:
        raise SystemExit("needs ctr (containerd) and openssl: see docs/test-cluster.md")
    cluster = PeerCluster(args.kubeconfig)
    makers: dict[str, Any] = {
        "planops": lambda: Planops(args.workers),
        "argo": lambda: Argo(tuned=False),
        "argo_tuned": lambda: Argo(tuned=True),
        "tekton": Tekton,
    }
    if "artifacts" in args.workloads and (no_files := [n for n in chosen if not makers[n]().files]):
        ap.error(f"the artifacts workload has no side for {no_files}: choose from planops, argo")
    result: dict[str, Any] = {}
    with contextlib.ExitStack() as stack:
        store = stack.enter_context(artifact_store(cluster, args))
        try:
            for name in chosen:
                side = makers[name]()
                if store is not None:
                    side.use_store(store)
                result[name] = measure(side, cluster, args)
                # each side's figures as soon as they are taken: a later side's failure keeps
                progress(f"{name}: {json.dumps(result[name], sort_keys=True)}")
        finally:
            cluster.remove_made()
    result = with_ratios(result)
    result["versions"] = {**versions(), "workloads": vars(args)}
    if args.output == "json":
        print(json.dumps(result, sort_keys=True))
    else:
        print(table(result))
        print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
