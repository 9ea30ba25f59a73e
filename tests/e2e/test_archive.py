"""The archive end to end: the operator (a subprocess, `--archive`) on the real test cluster
writes every finished run to a real PostgreSQL (tests/cluster/postgres.py), through a database
outage of 30 s during a burst of Plans and through SIGKILLs of the operator, with no run lost and
none doubled: one row per run, and every Plan's status naming the run it archived.

The Plans' steps are `filter` steps, which the operator settles itself (no pod): what is tested
is the archive, not the node.
"""

from __future__ import annotations

import asyncio
import json
import random
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from tests.cluster.postgres import Postgres, postgres  # noqa: F401 - the session's server
from tests.conftest import Kube
from tests.e2e.conftest import Operator, capsule, plan, start_operator

pytestmark = [pytest.mark.cluster, pytest.mark.archive]

#: more records than the status repeats (--status-records 3): the run's report is in PlanReports
STEPS = [
    {
        "id": f"f{i}",
        "filter": {"over": [1, 2, 3, i], "where": {"value": "{{item}}", "op": "gt", "to": 1}},
    }
    for i in range(8)
]


@pytest.fixture
def archive_ns(kube: Kube, crds: None) -> Iterator[str]:
    name = f"archive-{uuid.uuid4().hex[:8]}"
    kube.run("create", "namespace", name)
    kube.apply(capsule("local/busybox:1.35.0"), "-n", name)
    try:
        yield name
    finally:
        kube.run("delete", "namespace", name, "--wait=false", check=False)


def _operator(
    kubeconfig: str, ns: str, dsn: str, log: Path, monkeypatch: pytest.MonkeyPatch, *extra: str
) -> Operator:
    monkeypatch.setenv("PLANOPS_ARCHIVE_DSN", dsn)
    return start_operator(kubeconfig, [ns], log, "--archive", "--status-records", "3", *extra)


def _burst(kube: Kube, ns: str, names: list[str]) -> None:
    items = [plan(n, *STEPS) for n in names]
    kube.apply({"apiVersion": "v1", "kind": "List", "items": items}, "-n", ns)


def _plans(kube: Kube, ns: str) -> list[dict[str, Any]]:
    return list(kube.get("plans", "-n", ns)["items"])


def _wait(what: str, check: Any, timeout: float, op: Operator | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.5)
    logs = op.logs()[-4000:] if op else ""
    raise AssertionError(f"timed out waiting for {what}\n{logs}")


def _finished(kube: Kube, ns: str, n: int) -> list[dict[str, Any]] | None:
    plans = _plans(kube, ns)
    done = [p for p in plans if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed")]
    return plans if len(done) == n else None


def _all_archived(kube: Kube, ns: str, n: int) -> list[dict[str, Any]] | None:
    plans = _plans(kube, ns)
    marked = [
        p
        for p in plans
        if (p.get("status") or {}).get("archived")
        == ((p.get("status") or {}).get("run") or {}).get("id")
    ]
    return plans if len(marked) == n else None


def _rows(dsn: str, ns: str) -> list[dict[str, Any]]:
    async def go() -> list[dict[str, Any]]:
        conn = await psycopg.AsyncConnection.connect(dsn, row_factory=psycopg.rows.dict_row)
        cur = await conn.execute(
            "SELECT plan_uid, run_id, name, phase, report FROM planops_runs WHERE namespace = %s",
            (ns,),
        )
        rows = await cur.fetchall()
        await conn.close()
        return rows

    return asyncio.run(go())


def _metric(op: Operator, name: str) -> float | None:
    for line in op.metrics().splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return None


def _exactly_one_row_per_run(dsn: str, ns: str, plans: list[dict[str, Any]]) -> None:
    rows = _rows(dsn, ns)
    runs = {(p["metadata"]["uid"], p["status"]["run"]["id"]) for p in plans}
    keys = [(r["plan_uid"], r["run_id"]) for r in rows]
    assert len(keys) == len(set(keys)), "a run archived twice"
    assert set(keys) == runs, f"{len(runs - set(keys))} run(s) missing from the archive"
    for r in rows:  # the whole report, assembled from the PlanReports
        assert [s["stepId"] for s in r["report"]["steps"]] == [s["id"] for s in STEPS]
        assert r["report"]["stepsOmitted"] == 0
        assert r["phase"] == "Succeeded"


def test_a_database_down_for_30s_during_a_burst_loses_no_run_and_doubles_none(
    kube: Kube,
    kubeconfig: str,
    archive_ns: str,
    postgres: Postgres,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
):
    dsn = postgres.create_database(f"t_{uuid.uuid4().hex[:12]}")
    op = _operator(kubeconfig, archive_ns, dsn, tmp_path / "operator.log", monkeypatch)
    names = [f"burst-{i:02d}" for i in range(20)]
    try:
        _burst(kube, archive_ns, names[:2])  # written while the database is up
        _wait("the first runs archived", lambda: _all_archived(kube, archive_ns, 2), 90, op)
        postgres.stop()
        down_at = time.monotonic()
        _burst(kube, archive_ns, names[2:])
        # reconciles never wait for the database: every run finishes while it is down
        _wait("the burst finished", lambda: _finished(kube, archive_ns, 20), 120, op)
        _wait("the metric saying so", lambda: _metric(op, "planops_archive_database_up") == 0, 30)
        assert (_metric(op, "planops_archive_pending_runs") or 0) > 0
        assert _all_archived(kube, archive_ns, 20) is None
        told = _wait(
            "an ArchivePending Event",
            lambda: kube.get(
                "events", "-n", archive_ns, "--field-selector", "reason=ArchivePending"
            )["items"],
            30,
        )
        assert "the archive is behind" in told[0]["message"]
        time.sleep(max(0.0, 30 - (time.monotonic() - down_at)))
        postgres.start()
        plans = _wait("every run archived", lambda: _all_archived(kube, archive_ns, 20), 120, op)
        assert _metric(op, "planops_archive_database_up") == 1
        assert _metric(op, "planops_archive_pending_runs") == 0
        _exactly_one_row_per_run(dsn, archive_ns, plans)
    finally:
        if not postgres.running():
            postgres.start()
        op.stop()


def test_operator_killed_while_archiving_writes_each_run_once(
    kube: Kube,
    kubeconfig: str,
    archive_ns: str,
    postgres: Postgres,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
):
    dsn = postgres.create_database(f"t_{uuid.uuid4().hex[:12]}")
    log = tmp_path / "operator.log"
    rng = random.Random()
    op = _operator(kubeconfig, archive_ns, dsn, log, monkeypatch)
    try:
        _burst(kube, archive_ns, [f"kill-{i:02d}" for i in range(15)])
        for _ in range(3):  # kill it at random points of the burst and of its archiving
            time.sleep(rng.uniform(0.5, 3.0))
            op.stop(signal.SIGKILL)
            op = _operator(kubeconfig, archive_ns, dsn, log, monkeypatch)
        plans = _wait("every run archived", lambda: _all_archived(kube, archive_ns, 15), 120, op)
        _exactly_one_row_per_run(dsn, archive_ns, plans)
        # a re-run is a new run: archived beside the first, which stays
        kube.run(
            "annotate", "plan", "kill-00", "-n", archive_ns, f"planops.dev/rerun={time.time()}"
        )
        _wait(
            "the re-run archived",
            lambda: len([r for r in _rows(dsn, archive_ns) if r["name"] == "kill-00"]) == 2,
            90,
            op,
        )
        op.stop(signal.SIGKILL)  # a restart after everything is archived writes nothing again
        op = _operator(kubeconfig, archive_ns, dsn, log, monkeypatch)
        time.sleep(5)
        assert len(_rows(dsn, archive_ns)) == 16
        assert (_metric(op, 'planops_archive_runs_total{result="written"}') or 0) == 0
        print(json.dumps({"kills": 4, "rows": 16}))
    finally:
        op.stop()


def _holder(kube: Kube, ns: str, lease: str) -> str | None:
    got = kube.run("get", "lease", lease, "-n", ns, "-o", "json", check=False)
    return json.loads(got.stdout)["spec"].get("holderIdentity") if got.returncode == 0 else None


def test_the_leader_killed_while_archiving_the_standby_archives_the_rest_once(
    kube: Kube,
    kubeconfig: str,
    archive_ns: str,
    postgres: Postgres,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
):
    """Two replicas, as the chart runs them: only the Lease holder writes; the new leader finds
    what the old one left from the Plans' statuses."""
    dsn = postgres.create_database(f"t_{uuid.uuid4().hex[:12]}")
    lease = f"archive-{uuid.uuid4().hex[:6]}"
    replicas: dict[str, Operator] = {}
    for name in ("op-a", "op-b"):
        monkeypatch.setenv("POD_NAME", name)
        replicas[name] = _operator(
            kubeconfig,
            archive_ns,
            dsn,
            tmp_path / f"{name}.log",
            monkeypatch,
            "--leader-elect",
            f"--leader-election-id={lease}",
            f"--leader-election-namespace={archive_ns}",
        )
    try:
        first = _wait("a leader", lambda: _holder(kube, archive_ns, lease), 60)
        _burst(kube, archive_ns, [f"lead-{i:02d}" for i in range(15)])
        time.sleep(random.uniform(1.0, 4.0))
        replicas[first].stop(signal.SIGKILL)
        other = next(n for n in replicas if n != first)
        _wait("the standby leading", lambda: _holder(kube, archive_ns, lease) == other, 60)
        plans = _wait(
            "every run archived",
            lambda: _all_archived(kube, archive_ns, 15),
            120,
            replicas[other],
        )
        _exactly_one_row_per_run(dsn, archive_ns, plans)
    finally:
        for op in replicas.values():
            op.stop()
