"""Benchmark: the archive's write cost per run, against a real PostgreSQL (Debian's, started on
loopback in a temporary directory by tests/cluster/postgres.py, default settings: fsync on).

    python bench/archive.py [--runs 2000] [--records 1,50,500] [--writers 1,2]

For each report size (records per run, 200-byte outputs) and number of writers (connections
writing at once, as the operator's queue does with 2), it writes `--runs` rows through
planops.archive.store (the row the operator builds: planops.archive.row) and prints rows/s,
ms per run (mean and p99 of one write) and the table's size per run on disk (with its
indexes and TOAST: what sizing PostgreSQL needs). Results go in docs/performance.md
(a dated round's write-up in docs/results/).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "operator"))
sys.path.insert(0, str(ROOT))

from tests.cluster.postgres import server  # noqa: E402

from planops.archive.row import row  # noqa: E402
from planops.archive.store import Store  # noqa: E402


def finished_plan(n_records: int, i: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    records = [
        {
            "stepId": f"step-{k}",
            "status": "success",
            "output": f"{i:08d} " + "x" * 191,
            "error": None,
            "attempts": 1,
            "startedAt": "2026-12-03T10:00:00.000Z",
            "finishedAt": "2026-12-03T10:00:01.000Z",
        }
        for k in range(n_records)
    ]
    plan = {
        "metadata": {
            "namespace": "bench",
            "name": f"plan-{i}",
            "uid": str(uuid.uuid4()),
            "generation": 1,
            "labels": {"team": "bench"},
        },
        "spec": {
            "capsule": "default",
            "input": {"i": i},
            "steps": [{"id": f"step-{k}", "shell": "echo x"} for k in range(n_records)],
        },
        "status": {
            "phase": "Succeeded",
            "run": {"id": uuid.uuid4().hex[:10], "generation": 1},
            "startedAt": "2026-12-03T10:00:00Z",
            "finishedAt": "2026-12-03T10:01:00Z",
            "report": {"planId": f"plan-{i}", "completed": True, "records": n_records},
        },
    }
    return plan, records


async def measure(dsn: str, runs: int, n_records: int, writers: int) -> dict[str, float]:
    rows = [row(*finished_plan(n_records, i)) for i in range(runs)]
    stores = [await Store.connect(dsn) for _ in range(writers)]
    await stores[0].migrate()
    await stores[0].conn.execute("TRUNCATE planops_runs")
    latencies: list[float] = []

    async def writer(store: Store, mine: list[Any]) -> None:
        for r in mine:
            t = time.perf_counter()
            await store.write(r)
            latencies.append(time.perf_counter() - t)

    started = time.perf_counter()
    await asyncio.gather(*(writer(s, rows[k::writers]) for k, s in enumerate(stores)))
    elapsed = time.perf_counter() - started
    cur = await stores[0].conn.execute("SELECT pg_total_relation_size('planops_runs')")
    size = (await cur.fetchone() or [0])[0]
    for s in stores:
        await s.close()
    latencies.sort()
    return {
        "rows_per_s": runs / elapsed,
        "mean_ms": statistics.fmean(latencies) * 1000,
        "p99_ms": latencies[int(len(latencies) * 0.99) - 1] * 1000,
        "kib_per_run": size / runs / 1024,
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--runs", type=int, default=2000)
    p.add_argument("--records", default="1,50,500")
    p.add_argument("--writers", default="1,2")
    args = p.parse_args()
    print(f"{'records':>8} {'writers':>8} {'rows/s':>8} {'ms/run':>8} {'p99 ms':>8} {'KiB/run':>8}")
    with server() as pg:
        for n in map(int, args.records.split(",")):
            for w in map(int, args.writers.split(",")):
                runs = max(50, args.runs // max(1, n // 50))  # fewer of the big ones
                got = asyncio.run(measure(pg.dsn(), runs, n, w))
                print(
                    f"{n:>8} {w:>8} {got['rows_per_s']:>8.0f} {got['mean_ms']:>8.2f} "
                    f"{got['p99_ms']:>8.2f} {got['kib_per_run']:>8.1f}",
                    flush=True,
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
