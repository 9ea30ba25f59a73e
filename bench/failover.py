"""Failover time: a SIGKILLed leader -> the standby's next dispatched step, on the test cluster.

    eval "$(tests/cluster/up --with-node)"
    .venv/bin/python bench/failover.py [--trials 5] [-o json]

Two operator replicas with leader election and the chart's default timings (lease 15 s, renew
deadline 10 s, retry 2 s) run a chain of quick steps; each trial SIGKILLs the leader while the
chain runs and measures, on this machine's clock:
- lease: the kill -> the standby holds the Lease (it must wait for the Lease to expire: a killed
  leader cannot release it);
- dispatch: the kill -> the first Job created after it (the standby dispatching the next step).
The killed replica is started again as the new standby before the next trial. What a Plan sees
meanwhile: its step in flight runs on (its pod does not depend on the operator); steps that become
ready wait for the new leader; nothing is lost or run twice (tests/faults checks that).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import Kube  # noqa: E402
from tests.e2e.conftest import capsule, plan  # noqa: E402
from tests.faults.conftest import Pair  # noqa: E402


def job_names(kube: Kube, ns: str) -> set[str]:
    return {j["metadata"]["name"] for j in kube.get("jobs", "-n", ns)["items"]}


def trial(kube: Kube, pair: Pair, ns: str, n: int) -> tuple[float, float]:
    name = f"chain-{n}"
    chain = [{"id": "s0", "shell": "sleep 1"}] + [
        {"id": f"s{i}", "shell": "sleep 1", "dependsOn": [f"s{i - 1}"]} for i in range(1, 40)
    ]
    leader = pair.leader()
    kube.apply(plan(name, *chain), "-n", ns)
    deadline = time.monotonic() + 60
    while len([j for j in job_names(kube, ns) if j.startswith(name)]) < 3:
        assert time.monotonic() < deadline, "the chain never started"
        time.sleep(0.2)
    before = job_names(kube, ns)
    killed = pair.kill(leader)
    lease_at = dispatch_at = None
    while dispatch_at is None:
        now = time.time()
        if lease_at is None and pair.holder() not in (None, leader.name):
            lease_at = now
        if job_names(kube, ns) - before:
            dispatch_at = now
        assert now - killed < 120, "no step was dispatched within 120 s of the kill"
        time.sleep(0.1)
    if lease_at is None:
        lease_at = dispatch_at
    kube.run("delete", "plan", name, "-n", ns, "--wait=false")
    pair.start(leader.name)  # back as the standby
    return lease_at - killed, dispatch_at - killed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("-o", "--output", choices=["table", "json"], default="table")
    args = ap.parse_args()
    kubeconfig = str(Path(__import__("os").environ["KUBECONFIG"]).resolve())
    kube = Kube(kubeconfig)
    kube.run("apply", "-f", str(ROOT / "crds"))
    busybox = (Path(kubeconfig).parent / "busybox-image").read_text().strip()
    busybox = busybox.removeprefix("docker.io/")
    ns, lease_ns = f"f-bench-{uuid.uuid4().hex[:6]}", f"lease-{uuid.uuid4().hex[:6]}"
    for n in (ns, lease_ns):
        kube.run("create", "namespace", n)
    kube.apply(capsule(busybox), "-n", ns)
    pair = Pair(kube, kubeconfig, Path(tempfile.mkdtemp(prefix="planops-failover-")), lease_ns)
    results = []
    try:
        for n in range(args.trials):
            lease, dispatch = trial(kube, pair, ns, n)
            results.append((lease, dispatch))
            if args.output == "table":
                print(f"trial {n + 1}: lease taken {lease:5.1f}s, next step {dispatch:5.1f}s")
    finally:
        pair.stop()
        for n in (ns, lease_ns):
            kube.run("delete", "namespace", n, "--wait=false", check=False)
    leases, dispatches = [r[0] for r in results], [r[1] for r in results]
    summary = {
        "trials": len(results),
        "lease_taken_s_p50": round(statistics.median(leases), 2),
        "lease_taken_s_max": round(max(leases), 2),
        "next_dispatch_s_p50": round(statistics.median(dispatches), 2),
        "next_dispatch_s_max": round(max(dispatches), 2),
        "timings": {"lease_duration_s": 15, "renew_deadline_s": 10, "retry_period_s": 2},
    }
    if args.output == "json":
        print(json.dumps(summary))
    else:
        print(
            f"failover over {len(results)} trials: Lease taken p50 {summary['lease_taken_s_p50']}s"
            f" (max {summary['lease_taken_s_max']}s), next step dispatched p50 "
            f"{summary['next_dispatch_s_p50']}s (max {summary['next_dispatch_s_max']}s)"
        )


if __name__ == "__main__":
    main()
