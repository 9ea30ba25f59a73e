"""Reading stored logs and artifacts with no credential, end to end: an operator of its own
(a subprocess) signs reading URLs into each Plan's status.stored; `kubectl plan logs` reads a
step's full log after podGC took its pod, and `kubectl plan artifacts` lists a run's artifacts
and `artifacts get` downloads one, its sha256 checked. The CLI is the user's: it holds no
store credential and reads no Secret."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.s3 import S3
from tests.conftest import Kube
from tests.e2e.conftest import Operator, cli, plan, steps, wait_plan
from tests.e2e.test_artifacts import (  # noqa: F401 - fixtures
    _done,
    collector_image,
    files_operator,
    pod_store,
)
from tests.e2e.test_retention import _until
from tests.e2e.test_stored_logs import LINES, LONG_STEP, _operator, _repo_flag, tenant  # noqa: F401

pytestmark = [pytest.mark.cluster, pytest.mark.node, pytest.mark.artifacts]


def _signed(kube: Kube, ns: str, name: str, step: str) -> bool:
    status = kube.get("plan", name, "-n", ns)["status"]
    run = status["run"]["id"]
    entry = next((e for e in status.get("stored") or [] if e["run"] == run), None)
    return entry is not None and any(k.startswith(f"{step}/") for k in entry.get("signatures", {}))


def test_logs_reads_the_stored_log_after_pod_gc(
    kube: Kube,
    kubeconfig: str,
    tenant: tuple[str, str],  # noqa: F811 - the fixture imported above
    s3_store: S3,
    tmp_path: Path,
) -> None:
    ns, system = tenant
    op = _operator(kubeconfig, ns, system, _repo_flag(s3_store), tmp_path / "op.log")
    try:
        kube.apply(plan("readlogs", LONG_STEP, podGC="OnStepCompletion"), "-n", ns)
        done = wait_plan(kube, ns, "readlogs", ("Succeeded", "Failed"), timeout=180)
        assert done["status"]["phase"] == "Succeeded", done["status"]
        _until(
            "the step's pod gone",
            lambda: not kube.get("pods", "-n", ns, "-l", "planops.dev/plan=readlogs")["items"],
            90,
            op,
        )
        _until("the reading URLs signed", lambda: _signed(kube, ns, "readlogs", "a"), 60, op)

        def whole() -> Any:
            got = cli(kubeconfig, "logs", "readlogs", "a", "-n", ns)
            lines = got.stdout.splitlines()
            return got.returncode == 0 and len(lines) == LINES and (got, lines)

        got, lines = _until("the whole log read by kubectl plan logs", whole, 60, op)
        assert lines[-1].startswith(f"{LINES}-"), lines[-3:]
        assert "from the artifact repository" in got.stderr
        record = steps(kube.get("plan", "readlogs", "-n", ns))["a"]
        assert len(got.stdout) > len(record.get("output") or "")  # past the capped output
        tail = cli(kubeconfig, "logs", "readlogs", "a", "-n", ns, "--tail", "2")
        assert len(tail.stdout.splitlines()) == 2
    finally:
        op.stop()


def test_artifacts_lists_and_gets_a_file_with_its_checksum(
    kube: Kube,
    kubeconfig: str,
    files_operator: tuple[str, Operator],  # noqa: F811 - the fixture imported above
    tmp_path: Path,
) -> None:
    ns, op = files_operator
    a = {
        "id": "a",
        "shell": "sh -c 'seq 1 5000 > out.txt'",
        "outputs": {"artifacts": [{"name": "numbers", "path": "out.txt"}]},
    }
    kube.apply(plan("arts", a), "-n", ns)
    done = _done(kube, ns, "arts", op)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    (record,) = steps(done)["a"]["artifacts"]
    listed = cli(kubeconfig, "artifacts", "arts", "-n", ns)
    assert listed.returncode == 0, listed.stderr
    row = listed.stdout.splitlines()[1].split()
    assert row == ["a", "numbers", str(record["size"]), record["sha256"], "no"], listed.stdout
    _until("the reading URLs signed", lambda: _signed(kube, ns, "arts", "a"), 60, op)
    to = tmp_path / "numbers.txt"
    got = cli(kubeconfig, "artifacts", "get", "arts", "a", "numbers", "-n", ns, "-o", str(to))
    assert got.returncode == 0, got.stderr
    assert "sha256 checked" in got.stderr
    want = "".join(f"{i}\n" for i in range(1, 5001)).encode()
    assert to.read_bytes() == want
    assert hashlib.sha256(want).hexdigest() == record["sha256"]
    wrong = cli(kubeconfig, "artifacts", "get", "arts", "a", "numbrs", "-n", ns, "-o", str(to))
    assert wrong.returncode == 2 and "did you mean 'numbers'" in wrong.stderr
