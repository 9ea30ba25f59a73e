"""The plan that made one run hold gigabytes (bench/big_results.py: a `map` over 2,000 items whose
body filters a 1,500-row input, ~290 KB of spec) runs on the cluster with the operator's RSS well
under its chart limit (512 MiB), writes a report of a few MiB instead of ~96 MiB, says what it
cut, and posts a bounded number of Events. Before the run's budget (engine.budget), the operator
was OOM-killed by it, and again on every restart."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from bench import big_results

from tests.conftest import Kube
from tests.e2e.conftest import (
    STATUS_BOUND,
    Operator,
    capsule,
    dense,
    events,
    report_records,
    start_operator,
    wait_plan,
)

pytestmark = pytest.mark.cluster

LIMIT = 512 << 20  # the chart's memory limit of the operator


def peak_rss(op: Operator) -> int:
    """The operator process's peak resident set (VmHWM), in bytes."""
    for line in Path(f"/proc/{op.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.fixture
def own(
    kube: Kube, kubeconfig: str, crds: None, busybox: str, tmp_path: Path
) -> Iterator[tuple[str, Operator]]:
    """A namespace watched by an operator of its own: the peak RSS measured is this plan's, not
    that of whatever the session's operator ran before it (another test's big runs)."""
    name = f"budget-{uuid.uuid4().hex[:10]}"
    kube.run("create", "namespace", name)
    kube.apply(capsule(busybox), "-n", name)
    op = start_operator(kubeconfig, [name], tmp_path / "operator.log")
    try:
        yield name, op
    finally:
        op.stop()
        kube.run("delete", "namespace", name, "--wait=false", check=False)


def test_the_map_of_filters_runs_within_the_budget_and_its_report_says_what_was_cut(
    kube: Kube, own: tuple[str, Operator]
):
    ns, operator = own
    doc = big_results.plan(2000, 1500)
    started = time.monotonic()
    kube.apply(doc, "-n", ns, "--server-side")  # ~290 KB: over a client-side apply's annotation
    obj = wait_plan(kube, ns, "big-results", timeout=900)
    took = time.monotonic() - started
    st = obj["status"]
    assert st["phase"] == "Succeeded", json.dumps(st)[:3000]
    assert st["report"]["records"] == 2001
    cut = st["report"]["cut"]
    # most records are cut (a reconcile restores records at their PlanReport share, ~2 KB, so
    # each reconcile's run lets its first few keep their ~277 KB: about 13 a reconcile)
    assert cut["records"] >= 1500 and cut["bytes"] > 1500 * 250_000, cut
    assert dense(st) <= STATUS_BOUND

    chunks = kube.get("planreports", "-n", ns, "-l", "planops.dev/plan=big-results")["items"]
    written = sum(dense(c) for c in chunks)
    assert written < 6 << 20, f"{len(chunks)} PlanReports, {written} bytes"
    records = report_records(kube, ns, "big-results")
    assert len(records) == 2001
    assert records[-1]["output"].endswith("bytes cut here (the run's result budget)]")

    rss = peak_rss(operator)
    assert rss < LIMIT // 2, f"operator peak RSS {rss >> 20} MiB"
    posted = events(kube, ns, "big-results")
    assert len(posted) < 60, posted
    assert posted.count("BodyStepsSettled") == 4  # 2,000 body records: one per 500
    print(
        f"big-results: Succeeded in {took:.0f} s; {len(chunks)} PlanReports, {written} bytes; "
        f"operator peak RSS {rss >> 20} MiB; {len(posted)} Events"
    )
