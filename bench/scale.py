"""The operator at scale, on simulated nodes (KWOK): many plans, many steps, many nodes.

    tests/cluster/build kwok                                   # once
    export PLANOPS_CLUSTER_DIR=$PWD/.cluster-scale
    eval "$(tests/cluster/up --kwok-nodes 50)"                 # a control plane, no real node
    .venv/bin/python bench/scale.py [--quick] [--scale K] [--workloads one_step,map] [-o json]

The operator of this checkout runs with the chart's defaults (8 workers, resync 60 s, maxSteps
as the chart sets it), out of the cluster as in the other benches, started afresh for each
workload in a namespace of its own; the control plane is the real one; step pods run on simulated
nodes (tests/cluster/kwok.py: each step runs --run-ms, `sleep N` runs N s). When the cluster has
no simulated node the bench starts 50 of its own and removes them afterwards.

Workloads (a tenth of each with --quick; K times each with --scale K):
- one_step: 5,000 one-step plans submitted evenly over a minute; each step runs `sleep 60`, so
  at the end of the minute all of them are in flight (the RSS figure is "with 5,000 active
  plans"); then they settle over the next minute;
- concurrent: 200 plans at once, each a 50-step chain;
- large: one plan of 20,000 independent steps;
- map: one plan whose `map` step runs a step per item of a 10,000-item list (concurrency 1000);
- jobs: no operator at all: the bench creates 20,000 Jobs of a step's shape at once (restricted
  pod, backoffLimit 0, the simulated nodes' placement, `true`), four POSTs at a time, and times
  their pods to done. This is the control plane's own ceiling on this machine (the Job
  controller, the scheduler, kwok, the API server and etcd): no operator settles steps faster
  than their pods end. Put it beside `large` (same count, same shape, through a Plan): the
  difference is what the operator adds. Its settled_steps_per_s counts pods done.
A workload beyond what the cluster accepts today (the CRD's maxItems on spec.steps, which also
bounds a map's records) is not run: its entry says `skipped` and the limit.

Each workload starts once the previous one's namespace is gone (cleanup_s: how long that took;
before 2026-12-02's round 5 each started while the previous one's objects were being deleted).

Per workload (the JSON line has one object per workload name):
- settled_steps_per_s: steps settled (the operator's planops_steps_total) per second, from the
  first settled to the last;
- dispatch_p50_s / dispatch_p99_s: a step's Job seen ADDED minus the moment it could start (its
  plan applied; the pod of the step it depends on seen done; for map items, a slot freed by an
  earlier item's pod seen done), on watches with millisecond timing;
- operator_rss_mib: the operator's largest RSS while the workload ran (sampled each second);
  operator_cpu_s_per_step;
- api_requests_per_step: the operator's own requests (its identity's FlowSchema) per settled
  step; apiserver_requests_per_s: every request the API server dispatched, all clients, per
  second of the workload, and requests_by_flow_schema (which side is the bound);
- succeeded, total: steps that succeeded, steps the workload has.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import json
import os
import ssl
import statistics
import sys
import tempfile
import threading
import time
import urllib.parse
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.measure import (  # noqa: E402
    Cluster,
    pct,
    proc_cpu_s,
    proc_rss_mib,
    start_counted_operator,
    versions,
    watch,
)
from bench.operator_bench import metric  # noqa: E402
from tests.cluster import kwok  # noqa: E402
from tests.e2e.conftest import Operator, capsule, plan  # noqa: E402

IMAGE = "local/busybox:1.35.0"  # never pulled: simulated nodes run nothing
FULL = {
    "one_step": {"plans": 5000, "over_s": 60},
    "concurrent": {"plans": 200, "steps": 50},
    "large": {"steps": 20000},
    "map": {"items": 10000},
    "jobs": {"jobs": 20000},
}
#: what runs without --workloads: the operator's workloads (jobs is the baseline beside them)
DEFAULT_WORKLOADS = "one_step,concurrent,large,map"
FIGURES = (
    "settled_steps_per_s",
    "dispatch_p50_s",
    "dispatch_p99_s",
    "operator_rss_mib",
    "operator_cpu_s_per_step",
    "api_requests_per_step",
    "apiserver_requests_per_s",
    "succeeded",
    "total",
    "wall_s",
)


def progress(msg: str) -> None:
    print(f"[scale {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Columns:
    """`kubectl get --watch` of one resource in one namespace, printing a few columns per event
    (the full objects of 20,000 pods are too much to parse beside the operator on 2 cores);
    `on(seen_at, [type, column...])` per event, timed as its line arrives."""

    def __init__(
        self,
        kubeconfig: str,
        resource: str,
        namespace: str,
        columns: list[str],
        on: Callable[[float, list[str]], None],
    ) -> None:
        spec = ",".join(f"C{i}:{c}" for i, c in enumerate([".type", *columns]))
        self.proc = watch(kubeconfig, resource, namespace, f"custom-columns={spec}", "--no-headers")
        self.thread = threading.Thread(target=self._read, args=(on,), daemon=True)
        self.thread.start()

    def _read(self, on: Callable[[float, list[str]], None]) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            on(time.monotonic(), line.split())

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)


STEP_LABEL = ".object.metadata.labels.planops\\.dev/step"
PLAN_LABEL = ".object.metadata.labels.planops\\.dev/plan"


@dataclass
class Seen:
    """Jobs first seen ADDED and pods first seen done, by (plan, step) label."""

    job_added: dict[tuple[str, str], float] = field(default_factory=dict)
    pod_done: dict[tuple[str, str], float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_job(self, now: float, cols: list[str]) -> None:
        if len(cols) >= 3:
            with self.lock:
                self.job_added.setdefault((cols[1], cols[2]), now)

    def on_pod(self, now: float, cols: list[str]) -> None:
        if len(cols) >= 4 and cols[3] in ("Succeeded", "Failed"):
            with self.lock:
                self.pod_done.setdefault((cols[1], cols[2]), now)


def pod_watch(cluster: Cluster, ns: str, seen: Seen) -> Columns:
    """Each pod of `ns` seen done, timed, into `seen` (by its plan and step labels)."""
    return Columns(
        cluster.kubeconfig,
        "pods",
        ns,
        [PLAN_LABEL, STEP_LABEL, ".object.status.phase"],
        seen.on_pod,
    )


def requests_since(cluster: Cluster, before: dict[str, float]) -> dict[str, float]:
    """The API server's requests by FlowSchema since `before` (Cluster.requests())."""
    return {k: v - before.get(k, 0.0) for k, v in cluster.requests().items()}


class Sampler:
    """Each second: the operator's RSS and its settled-steps counter."""

    def __init__(self, op: Operator) -> None:
        self.op, self.rss, self.settled = op, 0.0, [(time.monotonic(), 0.0)]
        self.succeeded = 0.0
        self.plans_done = 0.0
        self.stop_ = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop_.is_set():
            self.sample()
            self.stop_.wait(1.0)

    def sample(self) -> None:
        try:
            self.rss = max(self.rss, proc_rss_mib(self.op.proc.pid))
            text = self.op.metrics()
        except OSError:
            return
        settled = metric(text, "planops_steps_total")
        self.succeeded = sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("planops_steps_total{") and 'status="success"' in line
        )
        self.plans_done = metric(text, "planops_plans_total")
        if settled != self.settled[-1][1]:
            self.settled.append((time.monotonic(), settled))

    def stop(self) -> None:
        self.stop_.set()
        self.thread.join(5)
        self.sample()


def step_limit(cluster: Cluster) -> int:
    """The most steps a Plan may have, as the cluster's CRD says (spec.steps maxItems)."""
    cluster.kube.run("apply", "-f", str(ROOT / "crds"))
    cluster.kube.run("wait", "--for=condition=Established", "crd/plans.planops.dev")
    crd = cluster.kube.get("crd", "plans.planops.dev")
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return int(schema["properties"]["spec"]["properties"]["steps"]["maxItems"])


@dataclass
class Load:
    """One workload: its plans, how many steps settle, and when each step could start."""

    plans: list[dict[str, Any]]
    total: int
    over_s: float = 0.0  # submitted evenly over this long (0: at once)
    size: int = 0  # what the limit applies to (steps of one plan, items of one map)
    #: (plan, step) -> the key whose pod being done lets it start; None: its plan being applied
    after: Callable[[str, str], tuple[str, str] | None] = lambda p, s: None
    map_concurrency: int = 0
    jobs: list[dict[str, Any]] = field(default_factory=list)  # created bare, no operator


def one_step(n: int, over_s: float) -> Load:
    step = {"id": "only", "shell": f"sleep {max(1, round(over_s))}"}
    return Load([plan(f"one-{i}", step) for i in range(n)], n, over_s, 1)


def chains(n: int, steps: int) -> Load:
    def chain(name: str) -> dict[str, Any]:
        s = [{"id": "s0", "shell": "true"}]
        s += [{"id": f"s{i}", "shell": "true", "dependsOn": [f"s{i - 1}"]} for i in range(1, steps)]
        return plan(name, *s)

    def after(p: str, s: str) -> tuple[str, str] | None:
        i = int(s[1:])
        return (p, f"s{i - 1}") if i else None

    return Load([chain(f"chain-{i}") for i in range(n)], n * steps, 0, steps, after)


def large(steps: int) -> Load:
    s = [{"id": f"s{i}", "shell": "true"} for i in range(steps)]
    return Load([plan("large", *s)], steps, 0, steps)


def mapped(items: int) -> Load:
    conc = min(1000, items)
    step = {
        "id": "fan",
        "map": {"over": "{{input.items}}", "concurrency": conc, "do": {"shell": "true"}},
    }
    doc = plan("map", step, input={"items": list(range(items))})
    return Load([doc], items + 1, 0, items, map_concurrency=conc)


def bare_jobs(n: int) -> Load:
    """Jobs shaped like a step's (kube/manifests.py job()), labelled like one so the watches
    time them alike; the plan label is one no Plan has. Written out rather than made by job():
    that one names its Plan as the Job's owner, and the garbage collector deletes Jobs whose
    owner does not exist."""

    def one(i: int) -> dict[str, Any]:
        labels: dict[str, Any] = {"planops.dev/plan": "bare", "planops.dev/step": f"s{i}"}
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": f"bare-s{i}", "labels": labels},
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "restartPolicy": "Never",
                        "automountServiceAccountToken": False,
                        "enableServiceLinks": False,
                        "securityContext": {
                            "runAsNonRoot": True,
                            "runAsUser": 65532,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "containers": [
                            {
                                "name": "step",
                                "image": IMAGE,
                                "command": ["sh", "-c", "true"],
                                "securityContext": {
                                    "allowPrivilegeEscalation": False,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                                "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}},
                            }
                        ],
                        "nodeSelector": kwok.PLACEMENT["nodeSelector"],
                        "tolerations": kwok.PLACEMENT["tolerations"],
                    },
                },
            },
        }

    return Load([], n, 0, 0, jobs=[one(i) for i in range(n)])


def run_bare_jobs(cluster: Cluster, load: Load, timeout: float) -> dict[str, Any]:
    """The `jobs` workload: the control plane alone, no operator (see the module's docstring)."""
    out: dict[str, Any] = {"total": load.total, "succeeded": 0}
    ns = f"scale-jobs-{uuid.uuid4().hex[:5]}"
    cluster.kube.run("create", "namespace", ns)
    seen = Seen()
    pods = pod_watch(cluster, ns, seen)
    try:
        time.sleep(2)
        req0 = cluster.requests()
        t0 = time.monotonic()
        progress(f"jobs: {load.total} bare Jobs, no operator, in {ns}")
        poster = Poster(cluster)
        path = f"/apis/batch/v1/namespaces/{ns}/jobs"
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(lambda j: poster.create(path, j), load.jobs))
        created = time.monotonic()
        while time.monotonic() < t0 + timeout and len(seen.pod_done) < load.total:
            time.sleep(0.5)
        if len(seen.pod_done) < load.total:
            out["timed_out"] = f"not done within {timeout:.0f}s"
        wall = time.monotonic() - t0
        delta = requests_since(cluster, req0)
        with seen.lock:
            done = sorted(seen.pod_done.values())
        out.update(
            {
                "settled_steps_per_s": len(done) / max(done[-1] - done[0], 1.0) if done else 0,
                "created_jobs_per_s": load.total / max(created - t0, 1e-3),
                "succeeded": len(done),
                "settled": len(done),
                "apiserver_requests_per_s": sum(delta.values()) / wall,
                "requests_by_flow_schema": {k: round(v) for k, v in sorted(delta.items()) if v},
                "wall_s": wall,
                "namespace": ns,
            }
        )
        progress(
            f"jobs: {len(done)}/{load.total} pods done in {wall:.0f}s, "
            f"{out['settled_steps_per_s']:.1f} pods/s"
        )
        return out
    finally:
        pods.stop()
        cluster.kube.run("delete", "namespace", ns, "--wait=false", check=False)


def dispatch_latencies(load: Load, seen: Seen, applied: dict[str, float]) -> list[float]:
    with seen.lock:
        added, done = dict(seen.job_added), dict(seen.pod_done)
    if load.map_concurrency:  # item k + C starts when any of the earlier items ends
        starts = sorted(added.values())
        ends = sorted(done.values())
        first = min(applied.values())
        out = [t - first for t in starts[: load.map_concurrency]]
        out += [s - e for s, e in zip(starts[load.map_concurrency :], ends, strict=False)]
        return [max(0.0, x) for x in out]
    out = []
    for (p, s), t in added.items():
        dep = load.after(p, s)
        ready = done.get(dep) if dep is not None else applied.get(p)
        if ready is not None:
            out.append(max(0.0, t - ready))
    return out


class Poster:
    """Creates objects with plain POSTs on kept-alive connections, as the client `bench-submit`
    (its own FlowSchema): `kubectl apply` runs a process and a GET per object, far too slow to
    submit 83 plans a second on this machine."""

    def __init__(self, cluster: Cluster) -> None:
        cluster.identity("bench-submit")
        cluster.classify("bench-submit", [{"kind": "User", "user": {"name": "bench-submit"}}])
        pki = cluster.dir / "pki"
        self.ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self.ctx.load_cert_chain(
            str(pki / "bench-bench-submit.crt"), str(pki / "bench-bench-submit.key")
        )
        self.host = urllib.parse.urlsplit(cluster.server).netloc
        self.local = threading.local()

    def create(self, path: str, obj: dict[str, Any]) -> None:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = http.client.HTTPSConnection(self.host, context=self.ctx)
        conn.request("POST", path, json.dumps(obj), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        body = resp.read()
        if resp.status not in (200, 201):
            raise SystemExit(f"POST {path}: {resp.status} {body[:500]!r}")


def submit(cluster: Cluster, ns: str, load: Load) -> dict[str, float]:
    """Creates the plans (evenly over load.over_s, else at once), four at a time, returning when
    each one's create returned."""
    poster = Poster(cluster)
    path = f"/apis/planops.dev/v1alpha1/namespaces/{ns}/plans"
    applied: dict[str, float] = {}
    t0 = time.monotonic()
    n = len(load.plans)

    def one(i: int) -> None:
        if load.over_s:
            time.sleep(max(0.0, t0 + load.over_s * i / n - time.monotonic()))
        poster.create(path, load.plans[i])
        applied[load.plans[i]["metadata"]["name"]] = time.monotonic()

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(one, range(n)))
    return applied


def run(
    cluster: Cluster,
    sim: kwok.Kwok,
    name: str,
    load: Load,
    limit: int,
    timeout: float,
    workers: int = 8,
) -> dict[str, Any]:
    if load.jobs:
        return run_bare_jobs(cluster, load, timeout)
    out: dict[str, Any] = {"total": load.total, "succeeded": 0}
    if load.size > limit:
        what = "steps in one plan" if name != "map" else "items of one map"
        out["skipped"] = (
            f"limit {limit}: {load.size} {what} is more than the cluster accepts today "
            "(plans.planops.dev spec.steps maxItems; it runs once the ceiling is raised)"
        )
        progress(f"{name}: skipped ({out['skipped']})")
        return out
    ns = f"scale-{name.replace('_', '-')}-{uuid.uuid4().hex[:5]}"
    cluster.kube.run("create", "namespace", ns)
    cluster.kube.apply(capsule(IMAGE, **kwok.PLACEMENT), "-n", ns)
    sim.output(ns, "")
    op, log = start_counted_operator(cluster, [ns], workers)
    seen = Seen()
    watches = [
        Columns(cluster.kubeconfig, "jobs", ns, [PLAN_LABEL, STEP_LABEL], seen.on_job),
        pod_watch(cluster, ns, seen),
    ]
    try:
        time.sleep(2)
        req0, cpu0 = cluster.requests(), proc_cpu_s(op.proc.pid)
        sampler = Sampler(op)
        t0 = time.monotonic()
        progress(f"{name}: {len(load.plans)} plan(s), {load.total} steps, in {ns}")
        applied = submit(cluster, ns, load)
        deadline = t0 + timeout
        while time.monotonic() < deadline:
            if sampler.plans_done >= len(load.plans):
                break
            time.sleep(0.5)
        else:
            out["timed_out"] = f"not done within {timeout:.0f}s"
        wall = time.monotonic() - t0
        time.sleep(2)  # the last status writes and events
        sampler.stop()
        delta = requests_since(cluster, req0)
        settled = sampler.settled[-1][1]
        first = next((t for t, v in sampler.settled if v > 0), t0)
        last = sampler.settled[-1][0]
        lat = dispatch_latencies(load, seen, applied)
        out.update(
            {
                "settled_steps_per_s": settled / max(last - first, 1.0),
                "dispatch_p50_s": statistics.median(lat) if lat else None,
                "dispatch_p99_s": pct(lat, 0.99) if lat else None,
                "dispatch_samples": len(lat),
                "operator_rss_mib": sampler.rss,
                # per settled step: none when nothing settled (the totals are still there)
                "operator_cpu_s_per_step": (proc_cpu_s(op.proc.pid) - cpu0) / settled
                if settled
                else None,
                "operator_cpu_s": proc_cpu_s(op.proc.pid) - cpu0,
                "api_requests_per_step": delta.get("bench-planops", 0.0) / settled
                if settled
                else None,
                "apiserver_requests_per_s": sum(delta.values()) / wall,
                "requests_by_flow_schema": {k: round(v) for k, v in sorted(delta.items()) if v},
                "settled": settled,
                "succeeded": sampler.succeeded,
                "wall_s": wall,
                "namespace": ns,
            }
        )
        progress(
            f"{name}: {settled:.0f}/{load.total} settled in {wall:.0f}s, "
            f"{out['settled_steps_per_s']:.1f} steps/s, dispatch p99 {out['dispatch_p99_s']}"
        )
        return out
    finally:
        for w in watches:
            w.stop()
        op.stop()
        if op.proc.returncode not in (0, None, -15):
            out["operator_log_tail"] = log.read_text(errors="replace")[-2000:]
        cluster.kube.run("delete", "namespace", ns, "--wait=false", check=False)
        sim.forget_output(ns)


def clean_slate(cluster: Cluster, ns: str, timeout: float) -> float:
    """Waits until a workload's namespace is gone: the next workload starts on a control plane
    that is not deleting thousands of Jobs and pods meanwhile (the garbage collector's and the
    namespace controller's requests would count against it). Returns the seconds it took."""
    t0 = time.monotonic()
    while time.monotonic() < t0 + timeout:
        got = cluster.kube.run("get", "namespace", ns, "-o", "name", check=False)
        if got.returncode != 0:
            return time.monotonic() - t0
        progress(f"waiting for namespace {ns} to be deleted ({time.monotonic() - t0:.0f}s)")
        time.sleep(5)
    progress(f"namespace {ns} still there after {timeout:.0f}s: going on")
    return time.monotonic() - t0


def loads(quick: bool, k: float) -> dict[str, Load]:
    f = (0.1 if quick else 1.0) * k
    one, conc = FULL["one_step"], FULL["concurrent"]
    return {
        "one_step": one_step(round(one["plans"] * f), one["over_s"] * (0.1 if quick else 1.0)),
        "concurrent": chains(round(conc["plans"] * f), conc["steps"]),
        "large": large(round(FULL["large"]["steps"] * f)),
        "map": mapped(round(FULL["map"]["items"] * f)),
        "jobs": bare_jobs(round(FULL["jobs"]["jobs"] * f)),
    }


def table(result: dict[str, Any]) -> str:
    names = [n for n in FULL if n in result]
    rows = [f"| figure | {' | '.join(names)} |", "|---|" + "---:|" * len(names)]
    for fig in FIGURES:
        cells = []
        for n in names:
            v = result[n].get(fig)
            if "skipped" in result[n] and fig not in ("total", "succeeded"):
                cells.append("skipped")
            elif v is None:
                cells.append("")
            else:
                cells.append(f"{v:,.3f}" if v < 100 else f"{v:,.0f}")
        rows.append(f"| {fig} | {' | '.join(cells)} |")
    for n in names:
        if "skipped" in result[n]:
            rows.append(f"\n{n}: skipped: {result[n]['skipped']}")
    return "\n".join(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="a tenth of each workload")
    ap.add_argument("--scale", type=float, default=1.0, help="K times each workload")
    ap.add_argument("--workloads", default=DEFAULT_WORKLOADS)
    ap.add_argument("--nodes", type=int, default=50, help="simulated nodes started if none")
    ap.add_argument("--workers", type=int, default=8, help="the operator's (chart: 8)")
    ap.add_argument("--timeout", type=float, default=900, help="per workload, seconds")
    ap.add_argument("-o", "--output", choices=("table", "json"), default="table")
    args = ap.parse_args()
    cluster = Cluster(os.environ["KUBECONFIG"])
    limit = step_limit(cluster)
    chosen = args.workloads.split(",")
    if unknown := set(chosen) - set(FULL):
        raise SystemExit(f"unknown workload(s) {sorted(unknown)}: choose from {list(FULL)}")
    result: dict[str, Any] = {}
    state = Path(tempfile.mkdtemp(prefix="scale-kwok-"))
    with kwok.simulated_nodes(
        cluster.kubeconfig, state, f"sim-scale-{uuid.uuid4().hex[:5]}", args.nodes
    ) as sim:
        nodes = cluster.kube.get("nodes", "-l", kwok.INSTANCE_LABEL)["items"]
        all_loads = loads(args.quick, args.scale)
        for name in chosen:
            load = all_loads[name]
            result[name] = run(cluster, sim, name, load, limit, args.timeout, args.workers)
            # as it goes: a run cut short keeps what it measured
            progress(f"{name}: {json.dumps(result[name], sort_keys=True)}")
            if ns := result[name].get("namespace"):
                result[name]["cleanup_s"] = clean_slate(cluster, ns, args.timeout)
    result["settings"] = {
        "quick": args.quick,
        "scale": args.scale,
        "step_limit": limit,
        "simulated_nodes": len(nodes),
        "operator": f"this checkout, --workers {args.workers} (chart: 8), --resync-seconds 60",
        "versions": {k: v for k, v in versions().items() if k in ("K8S_VERSION", "KWOK_VERSION")},
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if args.output == "table":
        print(table(result))
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
