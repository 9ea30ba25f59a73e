"""Bytes one run writes to its PlanReports: the plan of bench/big_results.py (a `map` whose body
filters an input, no Job) run through the engine, its records cut and chunked as the operator's
report writer does (reconciler.history.chunks), and the chunks' JSON summed.

    python bench/report_bytes.py [--items 2000] [--rows 1500] [--unbounded]

`--unbounded` lifts the run's frame budget (engine.budget RUN_FRAME_BUDGET): what a run wrote
before it had one. docs/security.md and docs/runs.md have the figures.
"""

from __future__ import annotations

import argparse
import time

from bench import big_results

from planops.api import PlanSpec
from planops.engine import Run
from planops.kube import manifests
from planops.reconciler.history import chunks as reports
from planops.reconciler.run import status


def measure(items: int, rows: int, unbounded: bool = False) -> dict[str, int | str | float]:
    spec = PlanSpec.model_validate(big_results.plan(items, rows)["spec"])
    run = Run("p", spec)
    if unbounded:
        run.budget.frame_limit = 1 << 62
    began = time.monotonic()
    while not run.decide(0.0).finished:
        pass
    records = run.settled
    new = [status.recut(r.to_json(), len(records), status.RECORD_TEXT_LIMIT) for r in records]
    ref = manifests.PlanRef("ns", "big-results", "0123-uid", "r1")
    written = reports.Written("r1")
    total = chunks = 0
    for w in reports.plan_writes(written, new):
        reports.applied(written, w)
    for chunk in written.chunks:
        body = reports.body(
            ref, chunk, [r.to_json() for r in written.records[chunk.first :][: chunk.count]]
        )
        total += status.json_size(body)
        chunks += 1
    failed = next((r.error for r in records if r.step_id == "each" and r.error), "")
    return {
        "records": len(records),
        "chunks": chunks,
        "bytes": total,
        "seconds": round(time.monotonic() - began, 1),
        "failed": failed[:60],
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--items", type=int, default=2000)
    p.add_argument("--rows", type=int, default=1500)
    p.add_argument("--unbounded", action="store_true")
    args = p.parse_args()
    print(measure(args.items, args.rows, args.unbounded))


if __name__ == "__main__":
    main()
