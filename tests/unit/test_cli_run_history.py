"""`kubectl plan get|describe NAME --run ID` show an earlier run the Plan keeps (status.history and
that run's PlanReports: cli/plan_report.run_report), `get NAME` stays the current run's, an
unknown run id is refused naming the runs there are, and `history` without an archive lists the
current run and the earlier ones. Served by the loopback API of tests/unit/test_cli_reports.py,
whose Plan `big` (current run `run1`) is given an earlier run `run0` here (its one PlanReport,
with the failed record `old`, is already there)."""

from __future__ import annotations

import json
from typing import Any

import pytest

import tests.unit.test_cli_reports as served
from tests.unit.test_cli_reports import run, server  # noqa: F401 - the loopback API (a fixture)

ORIGINAL = served.recorded_objects
EARLIER = {
    "id": "run0",
    "generation": 1,
    "phase": "Failed",
    "reason": "Failed",
    "message": "step 'old' failed and stopped the plan",
    "startedAt": "2026-12-01T10:00:00.000Z",
    "finishedAt": "2026-12-01T10:00:07.000Z",
    "failedStep": "old",
    "counts": {"success": 0, "failed": 1, "skipped": 0},
    "records": 1,
    "reportObjects": 1,
    "archived": False,
}


@pytest.fixture(autouse=True)
def kept_history(monkeypatch: pytest.MonkeyPatch) -> None:
    """Before the server starts (autouse fixtures come first): `big` keeps `run0`."""

    def with_history() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        plan, objects = ORIGINAL()
        plan["status"]["history"] = [EARLIER]
        return plan, objects

    monkeypatch.setattr(served, "recorded_objects", with_history)


def test_get_run_shows_the_earlier_runs_whole_report(capfd, server):  # noqa: F811
    kubeconfig, asked = server
    code, out, err = run(
        capfd, "get", "big", "--run", "run0", "-n", "ns", "-o", "json", "--kubeconfig", kubeconfig
    )
    assert code == 0, err
    st = json.loads(out)["status"]
    assert st["run"]["id"] == "run0" and st["phase"] == "Failed" and st["failedStep"] == "old"
    assert [s["stepId"] for s in st["report"]["steps"]] == ["old"]
    assert st["duration"] == "7s"
    assert asked == ["planops.dev/plan=big,planops.dev/run=run0"]


def test_get_run_of_the_current_run_and_get_alone_show_the_current_run(capfd, server):  # noqa: F811
    kubeconfig, _ = server
    for extra in (["--run", "run1"], []):
        code, out, err = run(
            capfd, "get", "big", *extra, "-n", "ns", "-o", "json", "--kubeconfig", kubeconfig
        )
        assert code == 0, err
        st = json.loads(out)["status"]
        assert st["run"]["id"] == "run1" and "old" not in [
            s["stepId"] for s in st["report"]["steps"]
        ]


def test_an_unknown_run_is_refused_naming_the_runs_there_are(capfd, server):  # noqa: F811
    kubeconfig, _ = server
    code, out, err = run(
        capfd, "get", "big", "--run", "nope", "-n", "ns", "--kubeconfig", kubeconfig
    )
    assert code == 2 and out == ""
    assert "keeps no run 'nope'" in err and "run1, run0" in err
    code, _, err = run(
        capfd, "describe", "big", "--run", "nope", "-n", "ns", "--kubeconfig", kubeconfig
    )
    assert code == 2 and "run1, run0" in err


def test_describe_run_shows_the_earlier_runs_steps_and_describe_lists_the_earlier_runs(
    capfd,
    server,  # noqa: F811
):
    kubeconfig, _ = server
    code, out, err = run(
        capfd, "describe", "big", "--run", "run0", "-n", "ns", "--kubeconfig", kubeconfig
    )
    assert code == 0, err
    assert "Run:        run0" in out and "Failed" in out
    assert [line.split()[0] for line in out.splitlines() if line.startswith("old")] == ["old"]
    code, out, err = run(capfd, "describe", "big", "-n", "ns", "--kubeconfig", kubeconfig)
    assert code == 0, err
    assert "Earlier runs, newest first" in out
    [row] = [line.split() for line in out.splitlines() if line.startswith("run0")]
    assert row[:4] == ["run0", "1", "Failed", "Failed"] and row[-1] == "old"


def test_get_run_needs_a_plan_name(capfd, server):  # noqa: F811
    kubeconfig, _ = server
    code, _, err = run(capfd, "get", "--run", "run0", "-n", "ns", "--kubeconfig", kubeconfig)
    assert code == 2 and "get NAME --run ID" in err


def test_history_without_an_archive_lists_the_current_run_then_the_earlier_ones():
    from planops.cli.history import in_cluster_rows, select  # noqa: PLC0415
    from tests.unit.test_archive_row import plan  # noqa: PLC0415

    p = plan("p", phase="Running", run="cur", generation=2, run_generation=2)
    p["status"]["finishedAt"] = None
    p["status"]["history"] = [EARLIER]
    rows = in_cluster_rows(p)
    assert [(r["runId"], r["phase"], r["generation"]) for r in rows] == [
        ("cur", "Running", 2),
        ("run0", "Failed", 1),
    ]
    assert rows[1]["failedStep"] == "old" and rows[1]["durationSeconds"] == 7.0
    assert rows[1]["specDigest"] is None  # generation 1's spec is not the Plan's any more
    assert [r["runId"] for r in select(rows, phase="Failed")] == ["run0"]


@pytest.fixture
def dropped_records(monkeypatch: pytest.MonkeyPatch) -> None:
    """`run0` keeps only its summary: the history byte budget deleted its PlanReports (the
    server still lists one, as a deletion not done yet would: it must not be shown)."""

    def with_history() -> tuple[dict[str, Any], list[dict[str, Any]]]:
        plan, objects = ORIGINAL()
        plan["status"]["history"] = [{**EARLIER, "recordsKept": False}]
        return plan, objects

    monkeypatch.setattr(served, "recorded_objects", with_history)


def test_get_and_describe_run_of_a_run_without_records_show_its_summary_and_say_why(
    capfd,
    dropped_records,
    server,  # noqa: F811
):
    kubeconfig, asked = server
    code, out, err = run(
        capfd, "get", "big", "--run", "run0", "-n", "ns", "-o", "json", "--kubeconfig", kubeconfig
    )
    assert code == 0, err
    st = json.loads(out)["status"]
    assert st["phase"] == "Failed" and st["failedStep"] == "old" and st["report"]["steps"] == []
    assert st["recordsKept"] is False and "history byte budget" in st["recordsDropped"]
    assert asked == []  # its PlanReports are not read
    code, out, err = run(
        capfd, "get", "big", "--run", "run0", "-n", "ns", "--kubeconfig", kubeconfig
    )
    assert code == 0 and "big" in out and "history byte budget" in err
    code, out, err = run(
        capfd, "describe", "big", "--run", "run0", "-n", "ns", "--kubeconfig", kubeconfig
    )
    assert code == 0, err
    assert "Run:        run0" in out and "Records:    none shown:" in out
    assert "history byte budget" in out and not any(
        line.startswith("old") for line in out.splitlines()
    )
