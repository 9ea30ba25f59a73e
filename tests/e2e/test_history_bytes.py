"""Earlier runs' PlanReports within the operator's history byte budget, on the cluster: a Plan
whose run writes about 1 MB of PlanReports (a Job-free `map`), re-run until the budget
(--history-report-bytes, lowered to two and a half runs) drops the oldest run's PlanReports; that
run keeps its summary in status.history (`recordsKept: false`) and `kubectl plan get --run` of
it says why, exit 0, while the newer runs keep their records."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from bench import big_results

from tests.conftest import Kube
from tests.e2e.conftest import cli, dense, start_operator, wait_plan

pytestmark = pytest.mark.cluster

BUDGET = 2_500_000


@pytest.fixture
def budget_ns(kube: Kube, crds: None, tmp_path: Path) -> Iterator[str]:
    """A namespace of its own, watched by an operator with a lowered history byte budget."""
    name = f"histbytes-{uuid.uuid4().hex[:8]}"
    kube.run("create", "namespace", name)
    kube.apply(big_results.CAPSULE, "-n", name)
    op = start_operator(
        kube.kubeconfig, [name], tmp_path / "operator.log", "--history-report-bytes", str(BUDGET)
    )
    try:
        yield name
    finally:
        op.stop()
        kube.run("delete", "namespace", name, "--wait=false", check=False)


def _run(obj: dict[str, Any]) -> str:
    return str(obj["status"]["run"]["id"])


def _bytes(kube: Kube, ns: str, run: str) -> int:
    items = kube.get("planreports", "-n", ns, "-l", f"planops.dev/run={run}")["items"]
    return sum(dense(c) for c in items)


def test_rerun_past_the_history_byte_budget_drops_the_oldest_runs_planreports_not_its_summary(
    kube: Kube, kubeconfig: str, budget_ns: str
):
    ns = budget_ns
    kube.apply(big_results.plan(20, 1500), "-n", ns, "--server-side")
    runs = [_run(wait_plan(kube, ns, "big-results", ("Succeeded",), timeout=300))]
    sizes = [_bytes(kube, ns, runs[0])]
    for _ in range(3):
        assert cli(kubeconfig, "rerun", "big-results", "-n", ns).returncode == 0
        obj = wait_plan(kube, ns, "big-results", ("Succeeded",), 300, lambda o: _run(o) != runs[-1])
        runs.append(_run(obj))
        sizes.append(_bytes(kube, ns, runs[-1]))
    assert all(600_000 < s < 1_200_000 for s in sizes), sizes  # 2 runs fit, 3 do not
    history = kube.get("plan", "big-results", "-n", ns)["status"]["history"]
    assert [e["id"] for e in history] == runs[2::-1]
    assert [e.get("recordsKept", True) for e in history] == [True, True, False]
    for e, size in zip(history[:2], (sizes[2], sizes[1]), strict=True):
        assert abs(e["reportBytes"] - size) < size // 20, (e["reportBytes"], size)
    assert _bytes(kube, ns, runs[0]) == 0 and _bytes(kube, ns, runs[1]) > 0
    got = cli(kubeconfig, "get", "big-results", "--run", runs[0], "-n", ns, "-o", "json")
    assert got.returncode == 0, got.stderr
    old = json.loads(got.stdout)["status"]
    assert old["phase"] == "Succeeded" and old["report"]["steps"] == []
    assert "history byte budget" in old["recordsDropped"]
    kept = cli(kubeconfig, "get", "big-results", "--run", runs[1], "-n", ns, "-o", "json")
    assert json.loads(kept.stdout)["status"]["report"]["steps"] != []
    print(f"runs' PlanReports: {sizes} bytes; budget {BUDGET}")
