"""A user's deletion of a Plan (reconciler.effects.plan_deletion) against a real SeaweedFS: the
Plan's prefix is emptied (another Plan's objects stay) and its finalizer removed, so the
in-memory API lets it go; a store that is down is retried with a Warning Event naming the
repository, and given up after the bound (the Plan goes, an Event says what was left)."""

from __future__ import annotations

import asyncio
import socket
import uuid
from typing import Any

from planops.api import names
from planops.reconciler.effects.plan_deletion import PlanDeletion
from planops.reconciler.effects.stored_logs import StoredLogs
from planops.reconciler.run.status import rfc3339
from planops.store import RunKeys
from tests.cluster.s3 import S3
from tests.store.test_stored_logs import OPERATOR_NS, _reader, _repo, _secret, pytestmark
from tests.unit.fakekube import FakeKube

__all__ = ["pytestmark"]
NOW = 1_800_000_000.0


def _world(s3: S3, endpoint: str) -> tuple[FakeKube, StoredLogs, dict[str, Any]]:
    kube = FakeKube()
    kube.objects[("secret", OPERATOR_NS, "creds")] = _secret(s3.access_key, s3.secret_key)
    stored = StoredLogs(kube, _repo(endpoint, s3.bucket), OPERATOR_NS, gc_seconds=60)
    plan = kube.put(
        "plan",
        {
            "apiVersion": "planops.dev/v1alpha1",
            "kind": "Plan",
            "metadata": {
                "name": "p",
                "namespace": "team-a",
                "uid": uuid.uuid4().hex,
                "finalizers": [names.FINALIZER_ARTIFACTS],
            },
            "spec": {"steps": []},
            "status": {"phase": "Running"},
        },
    )
    kube.deleted_at = rfc3339(NOW) or ""
    asyncio.run(kube.delete_plan("team-a", "p"))  # kubectl delete: held by the finalizer
    return kube, stored, plan


def test_the_plans_prefix_is_emptied_then_the_plan_goes(s3_store: S3) -> None:
    kube, stored, plan = _world(s3_store, s3_store.endpoint)
    reader = _reader(s3_store)
    mine = RunKeys("logs-test", "team-a", plan["metadata"]["uid"], "r1")
    other = RunKeys("logs-test", "team-a", uuid.uuid4().hex, "r1")
    for keys in (mine, other):
        reader.put_bytes(keys.log("s", 1), b"log")
        reader.put_bytes(keys.artifact("s", "dist"), b"tarball")
    held = kube.get("plan", "team-a", "p")
    assert held is not None
    deletion = PlanDeletion(kube, stored, lambda: NOW + 1)
    assert asyncio.run(deletion.deleted(held)) is None
    assert reader.list(mine.plan_prefix) == []
    assert len(reader.list(other.plan_prefix)) == 2  # another Plan's objects stay
    assert kube.get("plan", "team-a", "p") is None


def test_a_store_that_is_down_is_retried_then_given_up_with_an_event(s3_store: S3) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    kube, stored, _ = _world(s3_store, f"http://127.0.0.1:{port}")
    now = [NOW + 10]
    deletion = PlanDeletion(kube, stored, lambda: now[0])
    held = kube.get("plan", "team-a", "p")
    assert held is not None
    assert asyncio.run(deletion.deleted(held)) == 5.0
    assert kube.get("plan", "team-a", "p") is not None
    (failed,) = kube.events
    assert failed["reason"] == "ArtifactGCFailed" and f"127.0.0.1:{port}" in failed["message"]
    now[0] = NOW + 60
    assert asyncio.run(deletion.deleted(kube.get("plan", "team-a", "p"))) is None
    assert kube.get("plan", "team-a", "p") is None
    gave_up = kube.events[-1]
    assert gave_up["reason"] == "ArtifactGCAbandoned" and gave_up["type"] == "Warning"
    assert "the store failed for 60s" in gave_up["message"]
