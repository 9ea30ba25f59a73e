"""Benchmark: a Capsule's `maxRunningPlans` queue with many Plans waiting (in-process).

    python bench/capsule_queue.py [--sizes 1000,5000]

One Capsule with `maxRunningPlans: 1`, one Plan holding the slot and N waiting, reconciled by
the operator's Reconciler against the unit tests' in-memory API (tests/unit/fakekube.py), with
the Plans' cache grouped by Capsule as the operator keeps it. It prints the CPU (process time)
of the burst (every Plan's first reconcile: the holder starts, the others join the queue) and
of one resync (every Plan reconciled again, nothing changed: what the operator does every
`--resync-seconds`, 60 by default in the chart).

It runs against older commits too (before the queue was kept in order, the cache grouped
Plans in a dict and each verdict sorted them), so the same file measures before and after:
copy it into a checkout of the older commit and run it there. The command and today's
figure go in docs/performance.md ("The queue of a Capsule"), a dated round in docs/results/.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "operator"))
sys.path.insert(0, str(ROOT))

from tests.unit.fakekube import FakeKube  # noqa: E402

from planops.kube.cache import WatchCache  # noqa: E402
from planops.reconciler.queue import slots  # noqa: E402
from planops.reconciler.reconcile import Reconciler  # noqa: E402

NOW = 1_800_000_000.0
NAMESPACE = "ns"


def plan(i: int) -> dict[str, Any]:
    """Plan i, created at second i (the queue's order)."""
    minute, second = divmod(i, 60)
    hour, minute = divmod(minute, 60)
    return {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": {
            "name": f"p{i:05d}",
            "namespace": NAMESPACE,
            "uid": f"uid-{i}",
            "generation": 1,
            "creationTimestamp": f"2027-01-15T{hour:02d}:{minute:02d}:{second:02d}Z",
        },
        "spec": {"steps": [{"id": "a", "shell": "sleep 100"}]},
    }


def cluster(waiting: int) -> tuple[Reconciler, list[str]]:
    """The API holding the Capsule and waiting + 1 Plans, and a reconciler reading them from a
    cache fed as the watch feeds the operator's."""
    kube = FakeKube()
    kube.put(
        "capsule",
        {
            "metadata": {"name": "default", "namespace": NAMESPACE},
            "spec": {
                "image": "busybox:1",
                "shell": {"allow": ["sleep"]},
                "concurrency": {"maxRunningPlans": 1},
            },
        },
    )
    names = [kube.put("plan", plan(i))["metadata"]["name"] for i in range(waiting + 1)]
    try:
        from planops.reconciler.queue.standing import Standing  # noqa: PLC0415

        grouped: dict[str, Any] = {"group": Standing}
    except ImportError:  # an older commit: the cache grouped Plans in a dict
        grouped = {}
    plans, capsules = WatchCache(index=slots.capsule_key, **grouped), WatchCache()
    for obj in kube.of("capsule"):
        capsules.seen("ADDED", copy.deepcopy(obj))
    for obj in kube.of("plan"):
        plans.seen("ADDED", copy.deepcopy(obj))
    reconciler = Reconciler(kube, clock=lambda: NOW, plans=plans, capsules=capsules)
    return reconciler, names


def cpu(reconciler: Reconciler, names: list[str]) -> float:
    """CPU seconds of one reconcile of each Plan, in turn (as the operator's queue runs them)."""

    async def each() -> None:
        for name in names:
            await reconciler.reconcile(NAMESPACE, name)

    started = time.process_time()
    asyncio.run(each())
    return time.process_time() - started


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="1000,5000", help="waiting Plans, comma-separated")
    args = parser.parse_args(argv)
    print(f"{'waiting':>8} {'burst s':>9} {'resync s':>9} {'ms/Plan':>8}")
    for n in (int(s) for s in args.sizes.split(",")):
        reconciler, names = cluster(n)
        burst = cpu(reconciler, names)
        resync = cpu(reconciler, names)
        print(f"{n:>8} {burst:>9.2f} {resync:>9.2f} {1000 * resync / (n + 1):>8.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
