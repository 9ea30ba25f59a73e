"""Retention waits for the archive, on the real cluster and a real PostgreSQL: with the
database stopped, a finished Plan whose ttlSecondsAfterFinished passed long ago stays (deleting
it would lose its run: its PlanReports go with it), and so does a ScheduledPlan's run past its
history limits (`successfulRunsHistoryLimit: 0`); once the database is back and the run is
archived, the Plan is deleted, and its row is in the archive."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.postgres import Postgres, postgres  # noqa: F401 - the session's server
from tests.conftest import Kube
from tests.e2e.conftest import Operator, capsule, plan, start_operator, wait_plan
from tests.e2e.test_archive import _metric, _rows, _wait

pytestmark = [pytest.mark.cluster, pytest.mark.archive]

FILTER = {
    "id": "f",
    "filter": {"over": [1, 2, 3], "where": {"value": "{{item}}", "op": "gt", "to": 1}},
}


@pytest.fixture
def retention_ns(kube: Kube, crds: None) -> Iterator[str]:
    name = f"retain-{uuid.uuid4().hex[:8]}"
    kube.run("create", "namespace", name)
    kube.apply(capsule("local/busybox:1.35.0"), "-n", name)
    try:
        yield name
    finally:
        kube.run("delete", "namespace", name, "--wait=false", check=False)


@dataclass
class Archiving:
    """A namespace of the test's own, watched by an operator of its own writing to a database
    of its own (on the session's PostgreSQL server)."""

    ns: str
    dsn: str
    op: Operator


@pytest.fixture
def archiving(
    kubeconfig: str,
    retention_ns: str,
    postgres: Postgres,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Archiving]:
    dsn = postgres.create_database(f"t_{uuid.uuid4().hex[:12]}")
    monkeypatch.setenv("PLANOPS_ARCHIVE_DSN", dsn)
    op = start_operator(kubeconfig, [retention_ns], tmp_path / "operator.log", "--archive")
    try:
        yield Archiving(retention_ns, dsn, op)
    finally:
        if not postgres.running():
            postgres.start()
        op.stop()


def test_a_ttld_plan_is_not_deleted_until_its_run_is_archived(
    kube: Kube,
    archiving: Archiving,
    postgres: Postgres,  # noqa: F811
):
    ns, dsn, op = archiving.ns, archiving.dsn, archiving.op
    postgres.stop()
    kube.apply(plan("kept", FILTER, ttlSecondsAfterFinished=1), "-n", ns)
    done = wait_plan(kube, ns, "kept", ("Succeeded",), timeout=60)
    run = done["status"]["run"]["id"]
    _wait(
        "the metric saying the database is down",
        lambda: _metric(op, "planops_archive_database_up") == 0,
        30,
        op,
    )
    time.sleep(10)  # ten times its TTL, and several resyncs (3 s)
    held = kube.get("plan", "kept", "-n", ns)
    assert held["metadata"]["uid"] == done["metadata"]["uid"]
    assert held["status"].get("archived") is None
    assert (_metric(op, "planops_plans_deleted_by_ttl_total") or 0) == 0
    postgres.start()
    _wait(
        "the Plan deleted once archived",
        lambda: kube.run("get", "plan", "kept", "-n", ns, check=False).returncode != 0,
        90,
        op,
    )
    rows = [r for r in _rows(dsn, ns) if r["name"] == "kept"]
    assert [(r["run_id"], r["phase"]) for r in rows] == [(run, "Succeeded")]
    assert _metric(op, "planops_plans_deleted_by_ttl_total") == 1


def test_a_scheduled_plan_with_history_limit_zero_keeps_its_run_until_archived(
    kube: Kube,
    archiving: Archiving,
    postgres: Postgres,  # noqa: F811
):
    """`successfulRunsHistoryLimit: 0` deleted each run as soon as it succeeded, before the
    archive wrote it: the author's runs never reached the archive. With the database stopped,
    the run that succeeds is kept past the limit (a gauge counts it); once the database is back
    and the run archived, the limit deletes it, and its row is in the archive."""
    ns, dsn, op = archiving.ns, archiving.dsn, archiving.op
    scheduled = {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "ScheduledPlan",
        "metadata": {"name": "nightly"},
        "spec": {
            "schedule": "* * * * *",
            "concurrencyPolicy": "Forbid",
            "successfulRunsHistoryLimit": 0,
            "planTemplate": {"spec": {"steps": [FILTER]}},
        },
    }
    postgres.stop()
    kube.apply(scheduled, "-n", ns)

    def succeeded() -> list[dict[str, Any]]:
        runs = kube.get("plans", "-n", ns, "-l", "planops.dev/scheduled-by=nightly")["items"]
        return [r for r in runs if (r.get("status") or {}).get("phase") == "Succeeded"]

    run = _wait("a scheduled run that succeeded", succeeded, 150, op)[0]
    name, run_id = run["metadata"]["name"], run["status"]["run"]["id"]
    time.sleep(10)  # several resyncs (3 s), each a reconcile of the schedule
    assert kube.run("get", "plan", name, "-n", ns, check=False).returncode == 0
    assert (_metric(op, "planops_scheduled_runs_kept_for_archive") or 0) >= 1
    kube.apply({**scheduled, "spec": {**scheduled["spec"], "suspend": True}}, "-n", ns)
    postgres.start()
    _wait(
        "the run deleted once archived",
        lambda: kube.run("get", "plan", name, "-n", ns, check=False).returncode != 0,
        90,
        op,
    )
    rows = [(r["name"], r["run_id"], r["phase"]) for r in _rows(dsn, ns)]
    assert (name, run_id, "Succeeded") in rows
    assert (_metric(op, "planops_runs_deleted_unarchived_total") or 0) == 0
