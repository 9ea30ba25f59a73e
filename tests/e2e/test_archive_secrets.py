"""The archive's database error stays the operator's, on the real cluster: an operator started
with `--archive` and a malformed DSN (libpq's error quotes a piece of its password) keeps a
finished run queued, and its `ArchivePending` Warning Event, read by a plan author of the
namespace (`kubectl --as`, the chart's plan-author role), says the archive is behind and nothing
of the error; the operator's log says why, without the password. Both forms of a DSN: a URL and
key=value words. No database is needed: the DSN never reaches one.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Kube
from tests.e2e.conftest import capsule, plan, start_operator, wait_plan
from tests.e2e.test_archive import _wait
from tests.e2e.test_tenancy import AUTHOR, chart_docs, grant

pytestmark = [pytest.mark.cluster]

FILTER = {
    "id": "f",
    "filter": {"over": [1, 2, 3], "where": {"value": "{{item}}", "op": "gt", "to": 1}},
}
#: a malformed DSN of each form, and the pieces of its password libpq's error quotes
DSNS = {
    "url": ("postgresql://planops:s3cr3t%zzpass@127.0.0.1:1/archive", ["s3cr3t", "zzpass"]),
    "key=value": (
        "host=127.0.0.1 port=1 user=planops password=Hunter2 tw0-Words dbname=archive",
        ["Hunter2", "tw0-Words"],
    ),
}


@pytest.fixture
def tenant(kube: Kube, helm: str, crds: None, busybox: str) -> Iterator[str]:
    """A namespace of this test, with a Capsule, where alice has the chart's plan-author role
    (rendered under a release name of this test's own: other sessions' roles are left alone)."""
    tag = uuid.uuid4().hex[:8]
    ns, release = f"secrets-{tag}", f"secrets-{tag}"
    roles = "\n---\n".join(
        json.dumps(d) for d in chart_docs(helm, "rbac-users.yaml", release=release)
    )
    kube.run("create", "namespace", ns)
    kube.apply(capsule(busybox), "-n", ns)
    kube.run("apply", "-f", "-", input=roles)
    grant(kube, ns, [], release=release)
    try:
        yield ns
    finally:
        kube.run("delete", "namespace", ns, "--wait=false", check=False)
        kube.run("delete", "-f", "-", "--ignore-not-found", input=roles, check=False)


@pytest.mark.parametrize("form", sorted(DSNS))
def test_a_tenant_reads_that_the_archive_is_behind_and_nothing_of_the_database_error(
    kube: Kube,
    kubeconfig: str,
    tenant: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    form: str,
):
    dsn, pieces = DSNS[form]
    monkeypatch.setenv("PLANOPS_ARCHIVE_DSN", dsn)
    op = start_operator(kubeconfig, [tenant], tmp_path / "operator.log", "--archive")
    try:
        kube.apply(plan("kept", FILTER), "-n", tenant)
        done = wait_plan(kube, tenant, "kept", ("Succeeded",), timeout=60)
        run = done["status"]["run"]["id"]

        def told() -> list[dict[str, Any]]:
            listed = kube.run(
                f"--as={AUTHOR}",
                "get",
                "events",
                "-n",
                tenant,
                "--field-selector",
                "reason=ArchivePending",
                "-o",
                "json",
            )
            return list(json.loads(listed.stdout)["items"])

        (event,) = _wait("the ArchivePending Event, as alice reads it", told, 60, op)
        message = event["message"]
        assert message.startswith(f"run {run} is not archived yet: the archive is behind")
        assert event["type"] == "Warning"
        for said in ("Error", "dsn", "connection", "127.0.0.1", *pieces):
            assert said not in message, (said, message)
        log = op.logs()
        assert "ProgrammingError" in log  # the operator's log says why ...
        assert not any(p in log for p in pieces), [p for p in pieces if p in log]  # redacted
        assert kube.get("plan", "kept", "-n", tenant)["status"].get("archived") is None
    finally:
        op.stop()
