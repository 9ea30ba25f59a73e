"""Benchmark of the operator on the local test cluster (tests/cluster/up --with-node).

    eval "$(tests/cluster/up --with-node)"
    .venv/bin/python bench/operator_bench.py [--chain 30] [--plans 200] [--pod-plans 40]
                                             [--active 1000] [--workers 4]

Starts its own operator (watching one namespace it creates and deletes), then prints:
- dispatch latency p50/p99: a dependency's pod seen Succeeded on a watch -> the next step's pod
  seen ADDED (millisecond timing on the watch stream; Kubernetes timestamps have 1 s precision);
- throughput of one-step plans: plans whose step needs no pod (a false `if`), which measures the
  operator alone, and plans with a real pod, which measures this 2-core node;
- status patches per settled step (from the operator's own metrics), overall and for each part
  (the chain, the no-pod plans, the plans with a pod): the no-pod plans are the operator-bound
  figure; a plan with a pod writes `Running` when its Job is created and its result when it
  settles (docs/operator.md), so its part is 2 per step by design;
- operator memory (RSS) with N active plans (their pods unschedulable, so the node stays idle).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.cluster import postgres  # noqa: E402
from tests.conftest import Kube  # noqa: E402
from tests.e2e.conftest import capsule, plan, start_operator  # noqa: E402


def apply_many(kube: Kube, ns: str, objs: list[dict[str, Any]]) -> None:
    for i in range(0, len(objs), 100):
        kube.run(
            "apply",
            "-n",
            ns,
            "-f",
            "-",
            input=json.dumps({"apiVersion": "v1", "kind": "List", "items": objs[i : i + 100]}),
            timeout=300,
        )


def phases(kube: Kube, ns: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for p in kube.get("plans", "-n", ns)["items"]:
        ph = (p.get("status") or {}).get("phase", "none")
        out[ph] = out.get(ph, 0) + 1
    return out


def wait_all(kube: Kube, ns: str, n: int, phase: str, timeout: float) -> float:
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if phases(kube, ns).get(phase, 0) >= n:
            return time.monotonic() - t0
        time.sleep(0.2)
    raise SystemExit(f"timed out: {phases(kube, ns)}")


def dispatch_latency(kube: Kube, ns: str, chain: int) -> list[float]:
    """Watch the chain's pods; for each step k > 0: time(pod k ADDED) - time(pod k-1 seen
    Succeeded), as bench/vs_peers.py measures it (the operator settles a step on its pod's
    success, not on the Job controller's Complete, which comes about a second later)."""
    seen_done: dict[str, float] = {}
    added: dict[str, float] = {}
    stop = threading.Event()
    cmd = [
        str(kube_bin()),
        "--kubeconfig",
        kube.kubeconfig,
        "get",
        "pods",
        "-n",
        ns,
        "-l",
        "planops.dev/plan=chain",
        "--watch",
        "--output-watch-events",
        "-o",
        "json",
    ]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:  # one compact JSON watch event per line
            now = time.monotonic()
            pod = json.loads(line)["object"]
            step = pod["metadata"]["labels"]["planops.dev/step"]
            added.setdefault(step, now)
            if (pod.get("status") or {}).get("phase") == "Succeeded":
                seen_done.setdefault(step, now)
            if stop.is_set():
                return

    t = threading.Thread(target=read, daemon=True)
    t.start()
    time.sleep(1)
    steps = [{"id": "s0", "shell": "true"}] + [
        {"id": f"s{i}", "shell": "true", "dependsOn": [f"s{i - 1}"]} for i in range(1, chain)
    ]
    kube.apply(plan("chain", *steps), "-n", ns)
    wait_all(kube, ns, 1, "Succeeded", 60 + chain * 20)
    time.sleep(1)
    stop.set()
    proc.terminate()
    return [
        added[f"s{i}"] - seen_done[f"s{i - 1}"]
        for i in range(1, chain)
        if f"s{i}" in added and f"s{i - 1}" in seen_done
    ]


def kube_bin() -> Path:
    from tests.conftest import KUBECTL  # noqa: PLC0415

    return KUBECTL


def metric(text: str, name: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name) and not line.startswith("#"):
            total += float(line.split()[-1])
    return total


def rss_mib(pid: int) -> float:
    status = Path(f"/proc/{pid}/status").read_text()
    kb = int(re.search(r"VmRSS:\s+(\d+)", status).group(1))  # type: ignore[union-attr]
    return kb / 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--chain", type=int, default=30)
    ap.add_argument("--plans", type=int, default=200)
    ap.add_argument("--pod-plans", type=int, default=40)
    ap.add_argument("--active", type=int, default=1000)
    ap.add_argument("--workers", type=int, default=4, help="the operator's --workers")
    ap.add_argument(
        "--archive",
        action="store_true",
        help="the operator archives every finished run to a real PostgreSQL started for the "
        "bench (tests/cluster/postgres.py); prints how many runs it archived",
    )
    args = ap.parse_args()
    with contextlib.ExitStack() as stack:
        extra: list[str] = []
        if args.archive:
            pg = stack.enter_context(postgres.server())
            os.environ["PLANOPS_ARCHIVE_DSN"] = pg.create_database("bench")
            extra.append("--archive")
        bench(args, extra)


def bench(args: argparse.Namespace, extra: list[str]) -> None:
    kubeconfig = os.environ["KUBECONFIG"]
    kube = Kube(kubeconfig)
    kube.run("apply", "-f", str(ROOT / "crds"))
    busybox = "local/busybox:1.35.0"
    ns = f"bench-{uuid.uuid4().hex[:6]}"
    kube.run("create", "namespace", ns)
    kube.apply(capsule(busybox), "-n", ns)
    log = Path(f"/tmp/{ns}-operator.log")
    op = start_operator(kubeconfig, [ns], log, "--workers", str(args.workers), *extra)
    parts: list[tuple[str, float, float]] = []  # (part, patches, settled steps)
    last = [0.0, 0.0]

    def part(name: str) -> None:
        m = op.metrics()
        now = [metric(m, "planops_status_patches_total"), metric(m, "planops_steps_total")]
        parts.append((name, now[0] - last[0], now[1] - last[1]))
        last[:] = now

    try:
        lat = sorted(dispatch_latency(kube, ns, args.chain))
        part(f"the {args.chain}-step chain")
        p50 = statistics.median(lat)
        p99 = lat[min(len(lat) - 1, round(0.99 * (len(lat) - 1)))]
        print(
            f"dispatch latency over a {args.chain}-step chain ({len(lat)} samples): "
            f"p50 {p50 * 1000:.0f} ms, p99 {p99 * 1000:.0f} ms, max {lat[-1] * 1000:.0f} ms"
        )

        skip = {"id": "only", "shell": "true", "if": "'a' == 'b'"}
        plans = [plan(f"np-{i}", skip) for i in range(args.plans)]
        t0 = time.monotonic()
        apply_many(kube, ns, plans)
        wait_all(kube, ns, args.plans + 1, "Succeeded", 600)
        took = time.monotonic() - t0
        print(
            f"throughput, {args.plans} one-step plans needing no pod (operator-bound): "
            f"{args.plans / took:.1f} plans/s ({took:.1f} s, including kubectl apply)"
        )
        part(f"{args.plans} one-step plans needing no pod")

        pods = [plan(f"pp-{i}", {"id": "only", "shell": "true"}) for i in range(args.pod_plans)]
        t0 = time.monotonic()
        apply_many(kube, ns, pods)
        wait_all(kube, ns, args.plans + args.pod_plans + 1, "Succeeded", 1200)
        took = time.monotonic() - t0
        print(
            f"throughput, {args.pod_plans} one-step plans with a pod (node-bound): "
            f"{args.pod_plans / took:.2f} plans/s ({took:.1f} s)"
        )
        part(f"{args.pod_plans} one-step plans with a pod")

        m = op.metrics()
        patches, settled = (
            metric(m, "planops_status_patches_total"),
            metric(m, "planops_steps_total"),
        )
        print(
            f"status patches per settled step: {patches / settled:.2f} "
            f"({patches:.0f} patches, {settled:.0f} steps)"
        )
        for name, n_patches, n_steps in parts:
            print(
                f"  {name}: {n_patches / max(n_steps, 1):.2f} "
                f"({n_patches:.0f} patches, {n_steps:.0f} steps)"
            )
        rec = metric(m, "planops_reconcile_duration_seconds_count")
        print(
            f"reconciles: {rec:.0f}; mean reconcile "
            f"{metric(m, 'planops_reconcile_duration_seconds_sum') / rec * 1000:.1f} ms"
        )

        before = rss_mib(op.proc.pid)
        huge = {
            "id": "wait",
            "shell": "sleep 3600",
            "resources": {"requests": {"cpu": "1000"}, "limits": {"cpu": "1000"}},
        }
        apply_many(kube, ns, [plan(f"act-{i}", huge) for i in range(args.active)])
        wait_all(kube, ns, args.active, "Running", 1200)
        time.sleep(5)
        print(
            f"operator RSS: {before:.0f} MiB before, {rss_mib(op.proc.pid):.0f} MiB with "
            f"{args.active} active plans (pods unschedulable: the node stays idle)"
        )
        if extra:
            m = op.metrics()
            print(
                f"archive: {metric(m, 'planops_archive_runs_total'):.0f} runs archived, "
                f"{metric(m, 'planops_archive_pending_runs'):.0f} pending"
            )
    finally:
        op.stop()
        kube.run("delete", "namespace", ns, "--wait=false", check=False)


if __name__ == "__main__":
    main()
