"""A user's `kubectl delete plan`, end to end: an operator of its own (a subprocess, with the
session's SeaweedFS as its default artifact repository) on the real cluster and node puts its
finalizer on a Plan whose run stores objects; `kubectl delete` then returns once the Plan's
prefix in the store is empty and the Plan is gone. With the store stopped, the deletion is
retried, said in a Warning Event, and given up after `--artifact-gc-timeout`: the Plan goes,
and an Event names what was left (reconciler.history.deletion)."""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from planops.api import names
from tests.cluster.s3 import S3, server
from tests.cluster.s3 import Store as WeedStore
from tests.conftest import Kube
from tests.e2e.conftest import (
    Operator,
    capsule,
    plan,
    release_plans,
    start_operator,
    wait_plan,
)
from tests.e2e.test_retention import _until
from tests.e2e.test_stored_logs import PREFIX, _reader, _repo_flag, _secret

pytestmark = [pytest.mark.cluster, pytest.mark.node, pytest.mark.artifacts]


@pytest.fixture
def tenant(kube: Kube, crds: None, busybox: str) -> Iterator[tuple[str, str]]:
    ns, system = f"gc-{uuid.uuid4().hex[:8]}", f"gc-sys-{uuid.uuid4().hex[:8]}"
    for name in (ns, system):
        kube.run("create", "namespace", name)
    kube.apply(capsule(busybox), "-n", ns)
    try:
        yield ns, system
    finally:
        release_plans(kube, ns)
        for name in (ns, system):
            kube.run("delete", "namespace", name, "--wait=false", check=False)


def _operator(kubeconfig: str, tenant: tuple[str, str], s3: S3, log: Path, *extra: str) -> Operator:
    ns, system = tenant
    flags = ["--artifact-repository", _repo_flag(s3), "--artifact-secrets-namespace", system]
    return start_operator(kubeconfig, [ns], log, *flags, *extra)


def _objects(s3: S3, ns: str, uid: str) -> list[str]:
    return [o.key for o in _reader(s3).list(f"{PREFIX}/{ns}/{uid}/")]


def _stored_run(kube: Kube, ns: str, name: str, s3: S3, op: Operator) -> dict[str, Any]:
    """The Plan `name` run to its end, its log stored, with the finalizer."""
    kube.apply(plan(name, {"id": "a", "shell": "echo hi"}), "-n", ns)
    done = wait_plan(kube, ns, name, ("Succeeded", "Failed"), timeout=180)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    assert names.FINALIZER_ARTIFACTS in done["metadata"].get("finalizers", [])
    uid = done["metadata"]["uid"]
    _until("the log stored", lambda: _objects(s3, ns, uid), 60, op)
    return done


def _events(kube: Kube, ns: str, reason: str) -> list[dict[str, Any]]:
    found = kube.get("events", "-n", ns, "--field-selector", f"reason={reason}")
    return list(found["items"])


def test_kubectl_delete_empties_the_plans_prefix_then_the_plan_goes(
    kube: Kube, kubeconfig: str, tenant: tuple[str, str], s3_store: S3, tmp_path: Path
) -> None:
    ns, system = tenant
    kube.apply(_secret("s3-creds", system, s3_store.access_key, s3_store.secret_key))
    op = _operator(kubeconfig, tenant, s3_store, tmp_path / "op.log")
    try:
        uid = _stored_run(kube, ns, "gc", s3_store, op)["metadata"]["uid"]
        started = time.monotonic()
        kube.run("delete", "plan", "gc", "-n", ns, "--timeout=90s")  # waits until it is gone
        assert time.monotonic() - started < 90
        assert kube.run("get", "plan", "gc", "-n", ns, check=False).returncode != 0
        assert _objects(s3_store, ns, uid) == []
    finally:
        op.stop()


def test_a_store_that_is_down_holds_the_deletion_for_the_timeout_only(
    kube: Kube, kubeconfig: str, tenant: tuple[str, str], tmp_path: Path
) -> None:
    ns, system = tenant
    with server() as s3:
        kube.apply(_secret("s3-creds", system, s3.access_key, s3.secret_key))
        log = tmp_path / "op.log"
        op = _operator(kubeconfig, tenant, s3, log, "--artifact-gc-timeout", "20")
        try:
            uid = _stored_run(kube, ns, "down", s3, op)["metadata"]["uid"]
            WeedStore(s3.root).stop()
            kube.run("delete", "plan", "down", "-n", ns, "--wait=false")
            failed = _until(
                "a failed try said", lambda: _events(kube, ns, "ArtifactGCFailed"), 30, op
            )
            assert f"{ns}/{uid}/" in failed[0]["message"], failed[0]["message"]
            assert kube.get("plan", "down", "-n", ns)["metadata"]["deletionTimestamp"]
            _until(
                "the Plan gone after the timeout",
                lambda: kube.run("get", "plan", "down", "-n", ns, check=False).returncode != 0,
                60,
                op,
            )
            (gave_up,) = _events(kube, ns, "ArtifactGCAbandoned")
            assert gave_up["type"] == "Warning"
            assert "the store failed for 20s" in gave_up["message"], gave_up["message"]
            assert f"{ns}/{uid}/" in gave_up["message"]
        finally:
            op.stop()
