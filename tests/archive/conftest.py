"""The archive's tests run a real PostgreSQL server (tests/cluster/postgres.py), one per
session, and a fresh database per test."""

from __future__ import annotations

import uuid

import pytest

from tests.cluster.postgres import Postgres, postgres  # noqa: F401 - the session's server


@pytest.fixture
def dsn(postgres: Postgres) -> str:  # noqa: F811
    """A database of this test's own."""
    return postgres.create_database(f"t_{uuid.uuid4().hex[:12]}")
