"""Logs that outlive pods, end to end: an operator of its own (a subprocess, with an artifact
repository: the session's SeaweedFS, tests/cluster/s3.py) on the real cluster and node stores
each ended step's full log (past the capped output), which is there after podGC took the pods;
its TTL deletes the Plan and its stored objects; wrong credentials fail with the repository
named and the run unharmed; a store stopped mid-run fails the upload with a clear error and
never holds the run."""

from __future__ import annotations

import base64
import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from planops.store import Repository, RunKeys, Store
from tests.cluster.s3 import S3, server
from tests.conftest import Kube
from tests.e2e.conftest import (
    Operator,
    capsule,
    plan,
    release_plans,
    start_operator,
    wait_plan,
)
from tests.e2e.test_retention import _until  # the wait that prints the operator's log

pytestmark = [pytest.mark.cluster, pytest.mark.node, pytest.mark.artifacts]

PREFIX = "e2e"
#: ~390 KB: past the output's cap (64 KiB by default), so the stored log is more than the record
LINES = 6000
LONG_STEP = {"id": "a", "shell": f"sh -c 'seq -w 1 {LINES} | sed s/$/-{'x' * 50}/'"}


def _secret(name: str, ns: str, access: str, secret: str) -> dict[str, Any]:
    def b64(v: str) -> str:
        return base64.b64encode(v.encode()).decode()

    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": ns},
        "data": {"accessKeyId": b64(access), "secretAccessKey": b64(secret)},
    }


def _repo_flag(s3: S3, secret: str = "s3-creds") -> str:
    return json.dumps(
        {
            "endpoint": s3.endpoint,
            "bucket": s3.bucket,
            "insecure": True,
            "keyPrefix": PREFIX,
            "credentialsSecret": {"name": secret},
        }
    )


def _reader(s3: S3) -> Store:
    return Store(Repository("t", s3.endpoint, s3.bucket, s3.access_key, s3.secret_key))


@pytest.fixture
def tenant(kube: Kube, crds: None, busybox: str, s3_store: S3) -> Iterator[tuple[str, str]]:
    """A tenant namespace with the example Capsule, and the operator's namespace holding the
    credentials Secrets (right ones and wrong ones)."""
    ns, system = f"artifacts-{uuid.uuid4().hex[:8]}", f"artifacts-sys-{uuid.uuid4().hex[:8]}"
    for name in (ns, system):
        kube.run("create", "namespace", name)
    kube.apply(capsule(busybox), "-n", ns)
    kube.apply(_secret("s3-creds", system, s3_store.access_key, s3_store.secret_key))
    kube.apply(_secret("s3-wrong", system, s3_store.access_key, "not-the-secret-key"))
    try:
        yield ns, system
    finally:
        release_plans(kube, ns)  # the artifact finalizer of an operator stopped by now
        for name in (ns, system):
            kube.run("delete", "namespace", name, "--wait=false", check=False)


def _operator(kubeconfig: str, ns: str, system: str, flag: str, log: Path) -> Operator:
    return start_operator(
        kubeconfig,
        [ns],
        log,
        "--artifact-repository",
        flag,
        "--artifact-secrets-namespace",
        system,
    )


def _stored_logs(s3: S3, ns: str, uid: str) -> list[str]:
    prefix = f"{PREFIX}/{ns}/{uid}/"
    return [o.key for o in _reader(s3).list(prefix) if "/logs/" in o.key]


def test_the_full_log_is_read_after_pod_gc_and_goes_with_the_ttl(
    kube: Kube, kubeconfig: str, tenant: tuple[str, str], s3_store: S3, tmp_path: Path
) -> None:
    ns, system = tenant
    op = _operator(kubeconfig, ns, system, _repo_flag(s3_store), tmp_path / "op.log")
    try:
        kube.apply(
            plan("logs", LONG_STEP, podGC="OnStepCompletion", ttlSecondsAfterFinished=25),
            "-n",
            ns,
        )
        done = wait_plan(kube, ns, "logs", ("Succeeded", "Failed"), timeout=180)
        assert done["status"]["phase"] == "Succeeded", done["status"]
        uid, run = done["metadata"]["uid"], done["status"]["run"]["id"]
        _until(
            "the step's pod gone",
            lambda: not kube.get("pods", "-n", ns, "-l", "planops.dev/plan=logs")["items"],
            90,
            op,
        )
        key = RunKeys(PREFIX, ns, uid, run).log("a", 1)
        _until("the log stored", lambda: key in _stored_logs(s3_store, ns, uid), 60, op)
        text = _reader(s3_store).get_bytes(key).decode()
        lines = text.splitlines()
        assert len(lines) == LINES and lines[-1].startswith(f"{LINES}-"), lines[-3:]
        record = done["status"]["report"]["steps"][0]
        assert len(text) > len(record.get("output") or "")  # more than the capped output
        # the TTL deletes the Plan, and its stored objects go with it
        _until(
            "the Plan deleted",
            lambda: kube.run("get", "plan", "logs", "-n", ns, check=False).returncode != 0,
            90,
            op,
        )
        _until("its objects deleted", lambda: not _stored_logs(s3_store, ns, uid), 60, op)
    finally:
        op.stop()


def test_wrong_credentials_name_the_repository_and_the_run_is_unharmed(
    kube: Kube, kubeconfig: str, tenant: tuple[str, str], s3_store: S3, tmp_path: Path
) -> None:
    ns, system = tenant
    flag = _repo_flag(s3_store, secret="s3-wrong")
    op = _operator(kubeconfig, ns, system, flag, tmp_path / "op.log")
    try:
        kube.apply(plan("wrong", {"id": "a", "shell": "echo hi"}), "-n", ns)
        done = wait_plan(kube, ns, "wrong", ("Succeeded", "Failed"), timeout=180)
        assert done["status"]["phase"] == "Succeeded", done["status"]
        said = _until(
            "the failure logged",
            lambda: "SignatureDoesNotMatch" in op.logs() and op.logs(),
            60,
            op,
        )
        assert "artifact repository the operator's default" in said
        assert s3_store.endpoint in said and "not-the-secret-key" not in said
        assert not _stored_logs(s3_store, ns, done["metadata"]["uid"])
    finally:
        op.stop()


def test_a_store_stopped_mid_run_fails_the_upload_clearly_and_never_holds_the_run(
    kube: Kube, kubeconfig: str, tenant: tuple[str, str], tmp_path: Path
) -> None:
    ns, system = tenant
    with server() as s3:
        creds = _secret("s3-creds", system, s3.access_key, s3.secret_key)
        kube.apply(creds)
        op = _operator(kubeconfig, ns, system, _repo_flag(s3), tmp_path / "op.log")
        try:
            steps = [
                {"id": "a", "shell": "echo first"},
                {"id": "b", "shell": "sh -c 'sleep 8; echo second'", "dependsOn": ["a"]},
            ]
            kube.apply(plan("outage", *steps), "-n", ns)
            wait_plan(
                kube,
                ns,
                "outage",
                ("Running",),
                timeout=180,
                until=lambda o: any(
                    s["stepId"] == "a" for s in (o["status"].get("report") or {}).get("steps", [])
                ),
            )
            from tests.cluster.s3 import Store as WeedStore  # noqa: PLC0415

            WeedStore(s3.root).stop()  # the store goes away while b runs
            started = time.monotonic()
            done = wait_plan(kube, ns, "outage", ("Succeeded", "Failed"), timeout=120)
            assert done["status"]["phase"] == "Succeeded", done["status"]
            assert time.monotonic() - started < 60
            said = _until(
                "the failed upload logged", lambda: "not stored" in op.logs() and op.logs(), 90, op
            )
            assert "artifact repository the operator's default" in said
            assert s3.endpoint in said
        finally:
            op.stop()
