"""The archive's SQL against a real PostgreSQL: versioned migrations, idempotent writes keyed by
(Plan uid, run id), what a run's row holds, and `kubectl plan history` reading it."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from dataclasses import replace
from typing import Any

import psycopg
import pytest

from planops.archive.row import row
from planops.archive.store import Store, migrations
from tests.unit.test_archive_row import plan

pytestmark = [pytest.mark.cluster, pytest.mark.archive]


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


async def _store(dsn: str) -> Store:
    s = await Store.connect(dsn)
    await s.migrate()
    return s


def test_migrations_apply_once_in_order_and_are_recorded(dsn: str):
    async def go() -> tuple[list[int], list[int], int, list[tuple[int, str]]]:
        s = await Store.connect(dsn)
        first, again = await s.migrate(), await s.migrate()
        cur = await s.conn.execute(
            "SELECT version, name FROM planops_schema_migrations ORDER BY version"
        )
        recorded = [(int(v), str(n)) for v, n in await cur.fetchall()]
        version = await s.schema_version()
        await s.close()
        return first, again, version, recorded

    first, again, version, recorded = _run(go())
    shipped = [(m.version, m.name) for m in migrations()]
    assert first == [v for v, _ in shipped] and again == []
    assert recorded == shipped and version == shipped[-1][0]


def test_two_replicas_migrating_at_once_apply_each_migration_once(dsn: str):
    async def go() -> list[list[int]]:
        a, b = await Store.connect(dsn), await Store.connect(dsn)
        done = await asyncio.gather(a.migrate(), b.migrate())
        await a.close()
        await b.close()
        return list(done)

    done = _run(go())
    assert sorted(done, key=len) == [[], [m.version for m in migrations()]]


def test_a_run_written_twice_is_one_row(dsn: str):
    async def go() -> tuple[bool, bool, int]:
        s = await _store(dsn)
        r = row(plan())
        first, second = await s.write(r), await s.write(r)
        cur = await s.conn.execute("SELECT count(*) FROM planops_runs")
        count = (await cur.fetchone() or [0])[0]
        await s.close()
        return first, second, int(count)

    assert _run(go()) == (True, False, 1)


def test_two_plans_whose_run_ids_collide_keep_both_runs(dsn: str):
    """Run ids are ten hex digits: two Plans' may be equal; their uids never are."""

    async def go() -> int:
        s = await _store(dsn)
        await s.write(row(plan("one", run="same")))
        await s.write(row(plan("two", run="same")))
        cur = await s.conn.execute("SELECT count(*) FROM planops_runs WHERE run_id = 'same'")
        n = (await cur.fetchone() or [0])[0]
        await s.close()
        return int(n)

    assert _run(go()) == 2


def test_the_row_keeps_spec_inputs_report_labels_and_timings(dsn: str):
    records = [{"stepId": f"s{i}", "status": "success", "output": "x" * 100} for i in range(300)]
    r = row(plan(), records)

    async def go() -> dict[str, Any] | None:
        s = await _store(dsn)
        await s.write(r)
        got = await s.run(r.plan_uid, r.run_id)
        await s.close()
        return got

    got = _run(go())
    assert got is not None
    assert got["report"]["steps"] == records
    assert got["spec"] == r.spec and got["inputs"] == {"n": 3}
    assert got["spec_digest"] == r.spec_digest
    assert got["labels"] == {"app": "x"}
    assert got["capsule"] == "builders" and got["phase"] == "Succeeded"
    assert got["finished_at"].timestamp() - got["started_at"].timestamp() == 42
    assert got["duration_seconds"] == 42.0


def _fill(dsn: str) -> None:
    def at(p: dict[str, Any], finished: str) -> dict[str, Any]:
        p["status"]["finishedAt"] = finished
        p["status"]["startedAt"] = finished
        return p

    rows = [
        row(at(plan("build", run="r1"), "2026-12-01T00:00:00Z")),
        row(at(plan("build", run="r2", phase="Failed", failedStep="a"), "2026-12-02T00:00:00Z")),
        row(at(plan("deploy", run="r3"), "2026-12-03T00:00:00Z")),
        replace(row(at(plan("lint", run="r4"), "2026-12-03T01:00:00Z")), capsule="other"),
        replace(row(at(plan("build", run="r5"), "2026-12-03T02:00:00Z")), namespace="elsewhere"),
    ]

    async def go() -> None:
        s = await _store(dsn)
        for r in rows:
            await s.write(r)
        await s.close()

    _run(go())


def _history(dsn: str, *args: str) -> list[tuple[str, str]]:
    out = subprocess.run(
        [sys.executable, "-m", "planops.cli.main", "history", "-n", "team", "-o", "json", *args],
        capture_output=True,
        text=True,
        env={"PLANOPS_ARCHIVE_DSN": dsn, "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["source"] == "archive"
    return [(r["name"], r["runId"]) for r in got["runs"]]


def test_history_reads_the_archive_newest_first_and_filters(dsn: str):
    _fill(dsn)
    assert _history(dsn) == [("lint", "r4"), ("deploy", "r3"), ("build", "r2"), ("build", "r1")]
    assert _history(dsn, "build") == [("build", "r2"), ("build", "r1")]
    assert _history(dsn, "--phase", "Failed") == [("build", "r2")]
    assert _history(dsn, "--capsule", "other") == [("lint", "r4")]
    assert _history(dsn, "--since", "2026-12-02T12:00:00Z") == [("lint", "r4"), ("deploy", "r3")]
    assert _history(dsn, "build", "--phase", "Succeeded") == [("build", "r1")]


def test_history_says_when_the_archive_cannot_be_read(dsn: str):
    bad = dsn.replace("dbname=", "dbname=missing_")
    out = subprocess.run(
        [sys.executable, "-m", "planops.cli.main", "history", "-n", "team", "--archive-dsn", bad],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 3
    assert "cannot read the archive" in out.stderr


def test_a_filter_value_is_data_never_sql(dsn: str):
    _fill(dsn)
    assert _history(dsn, "--capsule", "x' OR '1'='1") == []
    assert _history(dsn, "build' OR '1'='1") == []

    async def count() -> int:
        conn = await psycopg.AsyncConnection.connect(dsn)
        cur = await conn.execute("SELECT count(*) FROM planops_runs")
        n = (await cur.fetchone() or [0])[0]
        await conn.close()
        return int(n)

    assert _run(count()) == 5


def test_a_nul_character_in_a_steps_output_cannot_stop_the_archive(dsn: str):
    """PostgreSQL's jsonb refuses U+0000, which any step can print: it is stored as U+FFFD."""
    records = [{"stepId": "a", "status": "success", "output": "before\x00after \\u0000 kept"}]
    p = plan()
    p["metadata"]["labels"] = {"app": "x"}
    p["spec"]["input"] = {"k\x00": "v\x00"}
    r = row(p, records)

    async def go() -> dict[str, Any] | None:
        s = await _store(dsn)
        assert await s.write(r)
        got = await s.run(r.plan_uid, r.run_id)
        await s.close()
        return got

    got = _run(go())
    assert got is not None
    assert got["report"]["steps"][0]["output"] == "before\ufffdafter \\u0000 kept"
    assert got["inputs"] == {"k\ufffd": "v\ufffd"}


def test_migration_002_adds_stored_logs_to_an_existing_table(dsn: str):
    """A database at version 1 with a row (an operator before the column): migrating adds the
    column in place, the old row keeps NULL, a new row points at its steps' stored logs."""
    first = next(m for m in migrations() if m.version == 1)

    async def go() -> tuple[list[int], list[Any]]:
        s = await Store.connect(dsn)
        await s.conn.execute(
            "CREATE TABLE planops_schema_migrations (version integer PRIMARY KEY, name text "
            "NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        await s.conn.execute(first.sql.encode())
        await s.conn.execute(
            "INSERT INTO planops_schema_migrations (version, name) VALUES (1, %s)", (first.name,)
        )
        await s.conn.execute(
            "INSERT INTO planops_runs (plan_uid, run_id, namespace, name, phase, report)"
            " VALUES ('old-uid', 'r0', 'ns', 'old', 'Succeeded', '{}'::jsonb)"
        )
        applied = await s.migrate()
        logs = {"repository": "r", "keys": {"a": ["pre/ns/u/r1/a/logs/1.log"]}}
        await s.write(replace(row(plan()), stored_logs=logs))
        cur = await s.conn.execute("SELECT stored_logs FROM planops_runs ORDER BY name DESC")
        got = [r[0] for r in await cur.fetchall()]
        await s.close()
        return applied, got

    applied, got = _run(go())
    assert applied == [m.version for m in migrations() if m.version > 1]
    assert None in got and {"repository": "r", "keys": {"a": ["pre/ns/u/r1/a/logs/1.log"]}} in got
