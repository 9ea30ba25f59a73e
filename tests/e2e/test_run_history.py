"""Every run keeps its record, on the real test cluster: a plan fails, is re-run, and
`kubectl plan get NAME --run <first>` still shows the first failure with its step records (its
PlanReports kept beside the new run's); the history stays within spec.historyLimit, the runs
that fall off take their PlanReports with them, and `history NAME` without an archive lists the
current run and the earlier ones. With the archive on (a real PostgreSQL), a run re-run at once
while the database is down is kept past the limit until it is archived, from its history entry
and its PlanReports, and only then falls off."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.postgres import Postgres, postgres  # noqa: F401 - the session's server
from tests.conftest import Kube
from tests.e2e.conftest import cli, plan, wait_plan
from tests.e2e.test_archive import STEPS, _operator, _rows, _wait, archive_ns  # noqa: F401

pytestmark = [pytest.mark.cluster]

FAILING = [
    {"id": "prepare", "shell": "echo ready"},
    {
        "id": "deploy",
        "shell": "sh -c 'echo half done; echo disk full >&2; exit 3'",
        "dependsOn": ["prepare"],
    },
]


def _run_id(obj: dict[str, Any]) -> str:
    return str(obj["status"]["run"]["id"])


def _rerun_and_wait(kube: Kube, kubeconfig: str, ns: str, name: str, before: str) -> dict[str, Any]:
    done = cli(kubeconfig, "rerun", name, "-n", ns)
    assert done.returncode == 0, done.stderr
    return wait_plan(kube, ns, name, ("Failed", "Succeeded"), until=lambda o: _run_id(o) != before)


def _reports_of(kube: Kube, ns: str, run: str) -> list[dict[str, Any]]:
    return list(kube.get("planreports", "-n", ns, "-l", f"planops.dev/run={run}")["items"])


@pytest.mark.node
def test_a_failure_rerun_keeps_its_whole_report_within_the_history_limit(
    kube: Kube, kubeconfig: str, ns: str, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv("PLANOPS_ARCHIVE_DSN", raising=False)  # history reads the cluster
    kube.apply(plan("flaky", *FAILING, historyLimit=2), "-n", ns)
    first = wait_plan(kube, ns, "flaky", ("Failed", "Succeeded"))
    assert first["status"]["phase"] == "Failed" and first["status"]["failedStep"] == "deploy"
    runs = [_run_id(first)]
    second = _rerun_and_wait(kube, kubeconfig, ns, "flaky", runs[0])
    runs.append(_run_id(second))
    [entry] = second["status"]["history"]
    assert entry["id"] == runs[0] and entry["phase"] == "Failed" and entry["failedStep"] == "deploy"
    assert entry["counts"] == {"success": 1, "failed": 1, "skipped": 0}

    got = cli(kubeconfig, "get", "flaky", "--run", runs[0], "-n", ns, "-o", "json")
    assert got.returncode == 0, got.stderr
    old = json.loads(got.stdout)["status"]
    assert old["run"]["id"] == runs[0] and old["phase"] == "Failed"
    steps = {s["stepId"]: s for s in old["report"]["steps"]}
    assert steps["prepare"]["status"] == "success" and "ready" in steps["prepare"]["output"]
    assert steps["deploy"]["status"] == "failed" and "half done" in (
        steps["deploy"]["output"] or ""
    )
    described = cli(kubeconfig, "describe", "flaky", "--run", runs[0], "-n", ns)
    assert described.returncode == 0 and f"Run:        {runs[0]}" in described.stdout
    current = json.loads(cli(kubeconfig, "get", "flaky", "-n", ns, "-o", "json").stdout)
    assert _run_id(current) == runs[1]  # get without --run: unchanged, the current run

    for _ in range(2):  # two more runs: the first falls off the history (historyLimit 2)
        runs.append(_run_id(_rerun_and_wait(kube, kubeconfig, ns, "flaky", runs[-1])))
    now = kube.get("plan", "flaky", "-n", ns)
    assert [e["id"] for e in now["status"]["history"]] == [runs[2], runs[1]]
    assert _reports_of(kube, ns, runs[0]) == []  # deleted with its entry
    assert _reports_of(kube, ns, runs[1]) != []
    gone = cli(kubeconfig, "get", "flaky", "--run", runs[0], "-n", ns)
    assert gone.returncode == 2 and f"{runs[3]}, {runs[2]}, {runs[1]}" in gone.stderr

    listed = cli(kubeconfig, "history", "flaky", "-n", ns, "-o", "json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert rows["source"] == "cluster"
    assert [r["runId"] for r in rows["runs"]] == [runs[3], runs[2], runs[1]]


@pytest.mark.archive
def test_a_run_rerun_before_it_was_archived_is_archived_from_the_history(
    kube: Kube,
    kubeconfig: str,
    archive_ns: str,  # noqa: F811
    postgres: Postgres,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
):
    dsn = postgres.create_database(f"t_{uuid.uuid4().hex[:12]}")
    op = _operator(kubeconfig, archive_ns, dsn, tmp_path / "operator.log", monkeypatch)
    try:
        postgres.stop()  # nothing can be archived: each re-run replaces a run not archived
        kube.apply(plan("quick", *STEPS, historyLimit=1), "-n", archive_ns)
        runs = [_run_id(wait_plan(kube, archive_ns, "quick", ("Succeeded",)))]
        for _ in range(2):
            done = cli(kubeconfig, "rerun", "quick", "-n", archive_ns)
            assert done.returncode == 0, done.stderr
            obj = wait_plan(
                kube, archive_ns, "quick", ("Succeeded",), until=lambda o: _run_id(o) != runs[-1]
            )
            runs.append(_run_id(obj))
        kept = kube.get("plan", "quick", "-n", archive_ns)["status"]["history"]
        # past historyLimit 1: both earlier runs wait for the archive, with their PlanReports
        assert [e["id"] for e in kept] == [runs[1], runs[0]]
        assert all(_reports_of(kube, archive_ns, r) for r in runs)
        postgres.start()

        def every_run_archived() -> bool:
            st = kube.get("plan", "quick", "-n", archive_ns)["status"]
            return st.get("archived") == runs[2] and all(e.get("archived") for e in st["history"])

        _wait("every run archived", every_run_archived, 120, op)
        rows = {r["run_id"]: r for r in _rows(dsn, archive_ns)}
        assert set(rows) == set(runs)
        for r in rows.values():  # each run's whole report, from its own PlanReports
            assert [s["stepId"] for s in r["report"]["steps"]] == [s["id"] for s in STEPS]
        # archived now: the next run trims the history to its limit, and their reports go
        done = cli(kubeconfig, "rerun", "quick", "-n", archive_ns)
        assert done.returncode == 0, done.stderr
        last = wait_plan(
            kube, archive_ns, "quick", ("Succeeded",), until=lambda o: _run_id(o) != runs[-1]
        )
        assert [e["id"] for e in last["status"]["history"]] == [runs[2]]
        assert _reports_of(kube, archive_ns, runs[0]) == []
        assert _reports_of(kube, archive_ns, runs[1]) == []
    finally:
        if not postgres.running():
            postgres.start()
        op.stop()
