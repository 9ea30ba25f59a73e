"""Logs that outlive pods (reconciler.effects.stored_logs) against a real SeaweedFS: an ended
attempt's full log lands at its key, off the reconcile; a repository that cannot be used (wrong
credentials, a Secret that does not list the namespace, the store down) is logged with its name
and never fails or holds the reconcile."""

from __future__ import annotations

import asyncio
import base64
import logging
import socket
import time
import uuid

import pytest

from planops.api.artifact_models import ArtifactGC, ArtifactRepository
from planops.api.capsule_models import CapsuleSpec
from planops.kube.manifests import PlanRef
from planops.reconciler.effects.stored_logs import StoredLogs
from planops.reconciler.run.observe import Observed
from planops.store import Repository, RunKeys, Store
from planops.store.repositories import ANNOTATION_NAMESPACES
from tests.cluster.s3 import S3
from tests.unit.fakekube import FakeKube

pytestmark = [pytest.mark.cluster, pytest.mark.artifacts]

OPERATOR_NS = "planops-system"
LOG = "".join(f"line {i}: {'x' * 60}\n" for i in range(20_000))  # ~1.3 MB, past any cap


def _secret(access: str, secret: str, namespaces: str | None = None) -> dict[str, object]:
    def b64(v: str) -> str:
        return base64.b64encode(v.encode()).decode()

    meta: dict[str, object] = {"name": "creds", "namespace": OPERATOR_NS, "resourceVersion": "1"}
    if namespaces:
        meta["annotations"] = {ANNOTATION_NAMESPACES: namespaces}
    return {"metadata": meta, "data": {"accessKeyId": b64(access), "secretAccessKey": b64(secret)}}


def _repo(endpoint: str, bucket: str) -> ArtifactRepository:
    return ArtifactRepository.model_validate(
        {
            "endpoint": endpoint,
            "bucket": bucket,
            "insecure": True,
            "keyPrefix": "logs-test",
            "credentialsSecret": {"name": "creds"},
        }
    )


def _setup(s3: S3, secret_key: str, namespaces: str | None = None) -> tuple[FakeKube, PlanRef]:
    kube = FakeKube()
    kube.objects[("secret", OPERATOR_NS, "creds")] = _secret(s3.access_key, secret_key, namespaces)
    kube.logs["pod-1"] = LOG
    ref = PlanRef("team-a", "p", uuid.uuid4().hex, "r1")
    return kube, ref


def _ended() -> list[Observed]:
    return [Observed("build", 1, "job-1", "job", 0.0, "success", pod="pod-1")]


def _reader(s3: S3) -> Store:
    return Store(Repository("t", s3.endpoint, s3.bucket, s3.access_key, s3.secret_key))


def test_a_full_log_is_stored_at_its_key(s3_store: S3) -> None:
    kube, ref = _setup(s3_store, s3_store.secret_key)
    stored = StoredLogs(kube, _repo(s3_store.endpoint, s3_store.bucket), OPERATOR_NS)

    async def go() -> None:
        await stored.keep(ref, "default", CapsuleSpec(), _ended())
        await stored.uploads.drain(timeout=60)

    asyncio.run(go())
    key = RunKeys("logs-test", "team-a", ref.uid, "r1").log("build", 1)
    assert _reader(s3_store).get_bytes(key).decode() == LOG
    assert stored.uploads.done == 1


def test_a_capsules_repository_needs_the_secret_to_list_its_namespace(
    s3_store: S3, caplog: pytest.LogCaptureFixture
) -> None:
    kube, ref = _setup(s3_store, s3_store.secret_key, namespaces="team-b")
    capsule = CapsuleSpec(artifact_repository=_repo(s3_store.endpoint, s3_store.bucket))
    stored = StoredLogs(kube, None, OPERATOR_NS)
    with caplog.at_level(logging.WARNING):
        asyncio.run(stored.keep(ref, "safe", capsule, _ended()))
    assert "Capsule team-a/safe" in caplog.text
    assert "does not list namespace team-a" in caplog.text
    prefix = RunKeys("logs-test", "team-a", ref.uid, "r1").run_prefix
    assert _reader(s3_store).list(prefix) == []


def test_wrong_credentials_name_the_repository(
    s3_store: S3, caplog: pytest.LogCaptureFixture
) -> None:
    kube, ref = _setup(s3_store, "not-the-secret")
    stored = StoredLogs(kube, _repo(s3_store.endpoint, s3_store.bucket), OPERATOR_NS)

    async def go() -> None:
        await stored.keep(ref, "default", CapsuleSpec(), _ended())
        await stored.uploads.drain(timeout=60)

    with caplog.at_level(logging.WARNING):
        asyncio.run(go())
    assert stored.uploads.failed == 1
    assert "artifact repository the operator's default" in caplog.text
    assert "SignatureDoesNotMatch" in caplog.text
    assert "not-the-secret" not in caplog.text


def test_a_store_that_is_down_never_holds_the_reconcile(
    s3_store: S3, caplog: pytest.LogCaptureFixture
) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kube, ref = _setup(s3_store, s3_store.secret_key)
    stored = StoredLogs(kube, _repo(f"http://127.0.0.1:{port}", "bkt"), OPERATOR_NS)

    async def go() -> float:
        started = time.monotonic()
        await stored.keep(ref, "default", CapsuleSpec(), _ended())
        handed_over = time.monotonic() - started
        await stored.uploads.drain(timeout=60)
        return handed_over

    with caplog.at_level(logging.WARNING):
        handed_over = asyncio.run(go())
    assert handed_over < 2.0  # the reconcile's share: the log's copy, not the upload
    assert stored.uploads.failed == 1
    assert f"127.0.0.1:{port}" in caplog.text


def test_runs_dropped_from_the_history_take_their_objects_but_never_an_unarchived_one(
    s3_store: S3,
) -> None:
    kube, ref = _setup(s3_store, s3_store.secret_key)
    stored = StoredLogs(kube, _repo(s3_store.endpoint, s3_store.bucket), OPERATOR_NS)
    reader = _reader(s3_store)
    runs = {r: RunKeys("logs-test", "team-a", ref.uid, r) for r in ("r1", "r2", "r3", "r4")}
    for k in runs.values():
        reader.put_bytes(k.log("s", 1), b"log")
    plan = {"metadata": {"namespace": "team-a", "name": "p", "uid": ref.uid}, "spec": {}}
    dropped = [
        {"id": "r1", "phase": "Succeeded", "archived": True},
        {"id": "r2", "phase": "Succeeded"},  # not archived yet
        {"id": "r3", "phase": "Failed", "archived": True},  # the new run's own id
    ]

    async def go(archive: bool) -> None:
        await stored.forget_runs(plan, dropped, "r3", archive)
        await stored.uploads.drain(timeout=60)

    asyncio.run(go(archive=True))
    left = {k.key.split("/")[3] for k in reader.list(runs["r1"].plan_prefix)}
    assert left == {"r2", "r3", "r4"}  # r1 deleted; r2 waits for the archive; r3 is the new run
    asyncio.run(go(archive=False))
    left = {k.key.split("/")[3] for k in reader.list(runs["r1"].plan_prefix)}
    assert left == {"r3", "r4"}
    # Never keeps them
    keep = _repo(s3_store.endpoint, s3_store.bucket).model_copy(
        update={"artifact_gc": ArtifactGC(strategy="Never")}
    )
    kept = StoredLogs(kube, keep, OPERATOR_NS)
    asyncio.run(kept.forget_plan(plan))
    assert {k.key.split("/")[3] for k in reader.list(runs["r1"].plan_prefix)} == {"r3", "r4"}

    async def all_runs() -> None:
        await stored.forget_plan(plan)
        await stored.uploads.drain(timeout=60)

    asyncio.run(all_runs())
    assert reader.list(runs["r1"].plan_prefix) == []
