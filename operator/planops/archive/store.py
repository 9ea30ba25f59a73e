"""The archive's SQL: PostgreSQL through psycopg 3 (async), and nothing else of planops.

Migrations are numbered SQL files shipped in the package (migrations/NNN_name.sql), applied in
order, each in its own transaction, and recorded in `planops_schema_migrations`; an advisory
lock makes two operator replicas starting at once apply each one once. A run is written with
INSERT ... ON CONFLICT DO NOTHING on (plan uid, run id): writing it again (after a restart, by a
new leader) changes nothing, which is what makes the queue's retries safe.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from typing import Any

import psycopg
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from planops.archive.row import Row

#: pg_advisory_xact_lock's key for migrations ("planops" in ASCII, as a bigint)
MIGRATION_LOCK = 0x706C616E6F7073
#: the most rows `history` returns
HISTORY_LIMIT = 1000

#: what the database's failures look like to a caller: it is down, unreachable or refused us
DatabaseError = psycopg.Error
#: failures that are one row's, not the database's: the writers go on with the next run
RowRejected = (psycopg.DataError, psycopg.IntegrityError)

#: a JSON escape of U+0000 (an even number of backslashes before it, none escaping it)
_NUL_ESCAPE = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


def dumps(value: Any) -> str:
    """JSON for a jsonb column. PostgreSQL's jsonb refuses U+0000 in a string, which any step
    can print: it becomes U+FFFD, so one run's output cannot stop the archive."""
    return _NUL_ESCAPE.sub(lambda m: m.group(1) + "\\ufffd", json.dumps(value))


_MIGRATION_NAME = re.compile(r"^(\d{3})_[a-z0-9_]+\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str


def migrations() -> list[Migration]:
    """The shipped migrations, in order of their numbers (which must not repeat)."""
    found: list[Migration] = []
    for entry in (resources.files("planops.archive") / "migrations").iterdir():
        m = _MIGRATION_NAME.match(entry.name)
        if m:
            found.append(Migration(int(m.group(1)), entry.name, entry.read_text()))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise ValueError(f"two migrations share a number: {versions}")
    return found


@dataclass(frozen=True)
class Query:
    """What `kubectl plan history` asks: a namespace's runs (None: every namespace), newest
    first, optionally of one Plan, one phase, one Capsule, finished since a time."""

    namespace: str | None = None
    name: str | None = None
    phase: str | None = None
    capsule: str | None = None
    since: float | None = None
    limit: int = HISTORY_LIMIT


def _time(t: float | None) -> datetime | None:
    return datetime.fromtimestamp(t, UTC) if t is not None else None


def _rfc3339(t: datetime | None) -> str | None:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if t is not None else None


class Store:
    """One connection to the archive (autocommit: each statement is its own transaction unless
    a `transaction()` block says otherwise)."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn

    @classmethod
    async def connect(cls, dsn: str, timeout: float = 5.0) -> Store:
        conn = await psycopg.AsyncConnection.connect(
            dsn, autocommit=True, connect_timeout=max(1, int(timeout))
        )
        return cls(conn)

    async def close(self) -> None:
        await self.conn.close()

    @property
    def closed(self) -> bool:
        return bool(self.conn.closed or self.conn.broken)

    async def migrate(self) -> list[int]:
        """Apply the migrations not yet applied; the versions applied now, in order."""
        applied: list[int] = []
        async with self.conn.transaction():
            await self.conn.execute("SELECT pg_advisory_xact_lock(%s)", (MIGRATION_LOCK,))
            await self.conn.execute(
                "CREATE TABLE IF NOT EXISTS planops_schema_migrations ("
                " version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            cur = await self.conn.execute("SELECT version FROM planops_schema_migrations")
            done = {int(r[0]) for r in await cur.fetchall()}
            for m in migrations():
                if m.version in done:
                    continue
                await self.conn.execute(m.sql.encode())  # no parameters: several statements
                await self.conn.execute(
                    "INSERT INTO planops_schema_migrations (version, name) VALUES (%s, %s)",
                    (m.version, m.name),
                )
                applied.append(m.version)
        return applied

    async def schema_version(self) -> int:
        cur = await self.conn.execute(
            "SELECT coalesce(max(version), 0) FROM planops_schema_migrations"
        )
        got = await cur.fetchone()
        return int(got[0]) if got else 0

    async def write(self, r: Row) -> bool:
        """Archive one run; True when this call wrote it, False when it was there already."""
        cur = await self.conn.execute(
            "INSERT INTO planops_runs (plan_uid, run_id, namespace, name, generation, phase,"
            " capsule, created_by, labels, spec_digest, spec, inputs, report, failed_step,"
            " started_at, finished_at, duration_seconds, stored_logs)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"
            " ON CONFLICT (plan_uid, run_id) DO NOTHING",
            (
                r.plan_uid,
                r.run_id,
                r.namespace,
                r.name,
                r.generation,
                r.phase,
                r.capsule,
                r.created_by,
                Jsonb(r.labels, dumps),
                r.spec_digest,
                Jsonb(r.spec, dumps) if r.spec is not None else None,
                Jsonb(r.inputs, dumps) if r.inputs is not None else None,
                Jsonb(r.report, dumps),
                r.failed_step,
                _time(r.started_at),
                _time(r.finished_at),
                r.duration_seconds,
                Jsonb(r.stored_logs, dumps) if r.stored_logs is not None else None,
            ),
        )
        return cur.rowcount == 1

    async def history(self, q: Query) -> list[dict[str, Any]]:
        """The runs `q` asks for, newest first, as `kubectl plan history -o json` prints them."""
        where: list[str] = ["true"]
        params: list[Any] = []
        for column, value in (
            ("namespace", q.namespace),
            ("name", q.name),
            ("phase", q.phase),
            ("capsule", q.capsule),
        ):
            if value is not None:
                where.append(f"{column} = %s")
                params.append(value)
        if q.since is not None:
            where.append("finished_at >= %s")
            params.append(_time(q.since))
        sql = (
            "SELECT namespace, name, plan_uid, run_id, generation, phase, capsule, created_by,"
            " labels, spec_digest, failed_step, started_at, finished_at, duration_seconds,"
            " report->'completed' AS completed FROM planops_runs"
            f" WHERE {' AND '.join(where)}"
            " ORDER BY finished_at DESC NULLS LAST, archived_at DESC LIMIT %s"
        )
        async with self.conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(sql.encode(), [*params, q.limit])
            rows = await cur.fetchall()
        return [
            {
                "namespace": r["namespace"],
                "name": r["name"],
                "uid": r["plan_uid"],
                "runId": r["run_id"],
                "generation": r["generation"],
                "phase": r["phase"],
                "completed": r["completed"],
                "capsule": r["capsule"],
                "createdBy": r["created_by"],
                "labels": r["labels"],
                "specDigest": r["spec_digest"],
                "failedStep": r["failed_step"],
                "startedAt": _rfc3339(r["started_at"]),
                "finishedAt": _rfc3339(r["finished_at"]),
                "durationSeconds": r["duration_seconds"],
            }
            for r in rows
        ]

    async def run(self, plan_uid: str, run_id: str) -> dict[str, Any] | None:
        """One archived run whole (spec, inputs, report), or None."""
        async with self.conn.cursor(row_factory=dict_row) as cur:
            await cur.execute(
                "SELECT * FROM planops_runs WHERE plan_uid = %s AND run_id = %s",
                (plan_uid, run_id),
            )
            return await cur.fetchone()
