"""A `map` whose body runs no Job, over more items than one run's report may hold
(engine.budget RUN_REPORT_BYTES, 16 MiB), on the cluster: the run fails with
[ReportBytesExceeded] once its records' frames are spent, and its PlanReports, read back from the
API server, take at most that many bytes. Before the budget, this map succeeded having written
16.9 MB of PlanReports (121 objects; a 199,999-item map 48.5 MB: bench/report_bytes.py), within
every text budget."""

from __future__ import annotations

import json
import time

import pytest
from bench import big_results

from planops.engine import budget
from tests.conftest import Kube
from tests.e2e.conftest import dense, report_records, wait_plan

pytestmark = pytest.mark.cluster

ITEMS = 60_000


def test_a_job_free_map_past_the_report_budget_fails_and_its_planreports_stay_within_it(
    kube: Kube, ns: str
):
    doc = big_results.plan(ITEMS, 1)
    started = time.monotonic()
    kube.apply(doc, "-n", ns, "--server-side")
    obj = wait_plan(kube, ns, "big-results", timeout=900)
    took = time.monotonic() - started
    st = obj["status"]
    assert st["phase"] == "Failed", json.dumps(st)[:3000]
    assert st["failedStep"] == "each"

    chunks = kube.get("planreports", "-n", ns, "-l", "planops.dev/plan=big-results")["items"]
    written = sum(dense(c) for c in chunks)
    records = report_records(kube, ns, "big-results")
    # stopped well before the list's end, and everything written is within the budget (each
    # chunk's object metadata aside: about 1 KiB a chunk)
    assert 20_000 < len(records) < ITEMS, len(records)
    assert written <= budget.RUN_REPORT_BYTES + len(chunks) * 2048, (len(chunks), written)
    failed = next(r for r in records if r["stepId"] == "each")
    # its error says why, though the run's text budget was spent long before (ERROR_FLOOR)
    assert failed["error"].startswith("[ReportBytesExceeded] map stopped before item "), failed
    assert "split the list" in failed["error"]
    print(
        f"{ITEMS}-item map: Failed in {took:.0f} s after {len(records)} records; "
        f"{len(chunks)} PlanReports, {written} bytes"
    )
