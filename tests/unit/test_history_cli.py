"""`kubectl plan history` without an archive: the cluster's Plans as rows, filtered and ordered
as the archive's query does (planops.cli.history), and --since's forms."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from planops.cli.history import in_cluster_row, in_cluster_rows, select, since
from tests.unit.test_archive_row import plan

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("text", "back"),
    [("90m", 5400), ("2d", 172800), ("1h30m", 5400), ("45s", 45), ("1.5h", 5400)],
)
def test_since_takes_a_duration_back_from_now(text: str, back: float):
    assert since(text, NOW) == NOW - back


def test_since_takes_a_time():
    assert since("2026-12-03T10:00:00Z", NOW) == NOW - 7200


@pytest.mark.parametrize("bad", ["yesterday", "5x", "", "-1h", "12h later"])
def test_since_refuses_what_is_neither(bad: str):
    with pytest.raises(ValueError, match="a duration"):
        since(bad, NOW)


def _row(name: str, phase: str, finished: str | None, capsule: str = "builders") -> dict:
    p = plan(name, phase=phase)
    p["spec"]["capsule"] = capsule
    p["status"]["finishedAt"] = finished
    return in_cluster_row(p)


ROWS = [
    _row("old", "Succeeded", "2026-12-01T00:00:00Z"),
    _row("new", "Failed", "2026-12-03T11:00:00Z"),
    _row("mid", "Succeeded", "2026-12-02T00:00:00Z", capsule="other"),
    _row("live", "Running", None),
]


def test_rows_come_newest_first_with_unfinished_runs_on_top():
    assert [r["name"] for r in select(ROWS)] == ["live", "new", "mid", "old"]


def test_each_filter_keeps_only_its_runs():
    assert [r["name"] for r in select(ROWS, phase="Succeeded")] == ["mid", "old"]
    assert [r["name"] for r in select(ROWS, capsule="other")] == ["mid"]
    assert [r["name"] for r in select(ROWS, name="old")] == ["old"]
    assert [r["name"] for r in select(ROWS, since_=since("1d", NOW))] == ["new"]


def test_a_cluster_row_has_the_archives_fields():
    r = in_cluster_row(plan("p"))
    assert r["runId"] == "abc123"
    assert r["durationSeconds"] == 42.0
    assert r["specDigest"].startswith("sha256:")
    assert r["capsule"] == "builders"


def test_a_cluster_row_names_the_capsule_each_run_ran_under():
    """As the archive's row does (archive.row.capsule_ran): the run's recorded Capsule, and each
    earlier run's from its history entry, not the Plan's Capsule now."""
    p = plan("p", generation=2, run_generation=2)
    p["spec"]["capsule"] = "other"
    p["status"]["run"]["capsule"] = "other"
    p["status"]["history"] = [
        {"id": "old1", "generation": 1, "phase": "Failed", "capsule": "builders"},
        {"id": "old0", "generation": 1, "phase": "Failed"},  # an older operator recorded none
    ]
    rows = in_cluster_rows(p)
    assert [(r["runId"], r["capsule"]) for r in rows] == [
        ("abc123", "other"),
        ("old1", "builders"),
        ("old0", None),
    ]
