"""The archive's DSN stays the operator's: while the database cannot be reached, a waiting run's
Plan gets a Warning Event `ArchivePending` in its tenant's namespace that says the archive is
behind and nothing of the database's error (which, for a malformed DSN, quotes the password),
and the operator's log says why, with no piece of the password in it, whatever the DSN's form
(a URL or key=value words). The errors are libpq's own (psycopg reads each DSN before any
connection is tried: no network)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import psycopg
import pytest

from planops.archive.dsn import MASK, redacted, secrets
from planops.archive.queue import Archiver
from planops.archive.store import Store
from planops.kube.cache import WatchCache

from .fakekube import FakeKube
from .test_archive_row import plan

PASSWORD = "Hunter2 tw0-Words"  # a space: unquoted in key=value words, it breaks the DSN
URL_PASSWORD = "s3cr3t%zzpass"  # an invalid escape: libpq quotes it whole

#: malformed DSNs, each as the error libpq gives quotes some piece of its password, and the
#: pieces that must not reach a log
MALFORMED = {
    "url: a bad percent escape": (
        f"postgresql://planops:{URL_PASSWORD}@db.example:5432/archive",
        ["s3cr3t", "zzpass"],
    ),
    "url: an IPv6 host never closed (the whole URL quoted)": (
        f"postgresql://planops:{URL_PASSWORD.replace('%zz', '')}@[fd00::1/archive",
        ["s3cr3t"],
    ),
    "url: a password in the query, an IPv6 host never closed": (
        "postgresql://planops@[fd00::1/archive?password=qu3ry-Secret",
        ["qu3ry-Secret"],
    ),
    "key=value: a password with a space, unquoted": (
        f"host=db.example user=planops password={PASSWORD} dbname=archive",
        ["Hunter2", "tw0-Words"],
    ),
    "key=value: the only word after the password without a value": (
        "password=Solo-Secret tw0th",
        ["Solo-Secret", "tw0th"],
    ),
}


def _libpq_error(dsn: str) -> psycopg.Error:
    """The error connecting with `dsn` gives (read by libpq before any connection)."""

    async def connect() -> None:
        conn = await psycopg.AsyncConnection.connect(dsn, connect_timeout=1)
        await conn.close()

    with pytest.raises(psycopg.Error) as e:
        asyncio.run(connect())
    return e.value


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_libpqs_error_for_a_malformed_dsn_is_logged_without_the_password(case: str):
    dsn, pieces = MALFORMED[case]
    error = str(_libpq_error(dsn))
    assert any(p in error for p in pieces), error  # what would have been logged
    said = redacted(error, dsn)
    assert not any(p in said for p in pieces), said
    assert MASK in said


@pytest.mark.parametrize(
    ("dsn", "password"),
    [
        ("postgresql://u:p%40ss%2Fword@h:5432/db", "p@ss/word"),
        ("postgres://u:pa/ss@h/db", "pa/ss"),
        ("host=h password='it\\'s quoted' user=u", "it's quoted"),
        ("host=h password = spaced user=u", "spaced"),
        ("postgresql://u@h/db?sslmode=require&password=in-query", "in-query"),
    ],
)
def test_the_password_is_found_in_either_form_as_written_or_decoded(dsn: str, password: str):
    assert password in secrets(dsn) or any(password in s for s in secrets(dsn))
    assert password not in redacted(f"echo {dsn} and {password}", dsn)


def test_a_password_spelled_in_any_dsn_the_error_quotes_is_masked():
    said = redacted('bad "postgresql://a:b-secret@h/db" and password=other-secret', None)
    assert "b-secret" not in said and "other-secret" not in said


def test_an_error_without_the_password_is_left_as_it_was():
    dsn = "host=127.0.0.1 port=1 user=planops password=Hunter2-long dbname=x"
    error = 'connection failed: connection to server at "127.0.0.1", port 1 failed: refused'
    assert redacted(error, dsn) == error


class _Events:
    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def put(self, namespace: str, body: dict[str, Any]) -> None:
        self.bodies.append(body)


def _archive_until(connect: Any, dsn: str, done: Any, events: _Events | None = None) -> None:
    """The archive's writer, the database reached by `connect` (the DSN `dsn`), fed one
    finished run, until `done()` says so."""
    cache = WatchCache()
    cache.seen("ADDED", plan("p"))

    async def scenario() -> None:
        archiver = Archiver(connect, FakeKube(), cache, events=events, retry_max=0.01, dsn=dsn)
        assert archiver.offer(plan("p"))
        archiver.start()
        while not done():
            await asyncio.sleep(0.01)
        await archiver.stop()

    asyncio.run(scenario())


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_a_tenant_sees_the_archive_is_behind_and_the_operator_log_says_why_redacted(
    case: str, caplog: pytest.LogCaptureFixture
):
    dsn, pieces = MALFORMED[case]
    events = _Events()
    with caplog.at_level(logging.WARNING, logger="planops.archive"):
        _archive_until(lambda: Store.connect(dsn), dsn, lambda: events.bodies, events)
    (told,) = {e["message"] for e in events.bodies}
    assert told.startswith("run abc123 is not archived yet: the archive is behind")
    assert "Error" not in told and "DSN" not in told and "connection" not in told
    assert not any(p in told for p in pieces)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "ProgrammingError" in logged or "OperationalError" in logged  # the log says why
    assert not any(p in logged for p in pieces), logged


def test_an_unexpected_errors_traceback_is_logged_without_the_password(
    caplog: pytest.LogCaptureFixture,
):
    dsn = "postgresql://planops:Tr4ceback-Secret@db/archive"

    async def connect() -> Store:
        raise ValueError(f"cannot use {dsn}")

    with caplog.at_level(logging.ERROR, logger="planops.archive"):
        _archive_until(connect, dsn, lambda: caplog.records)
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "ValueError" in logged and "Traceback" in logged
    assert "Tr4ceback-Secret" not in logged
    assert not any(r.exc_info for r in caplog.records)  # (a traceback logged raw would say it)
