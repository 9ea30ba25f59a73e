"""A user's `kubectl delete plan` of a Plan that stores objects, without a cluster: the pure
decisions (reconciler.history.deletion: who gets the finalizer, the archive's wait, the bound on
a store that fails), then the reconcile against the in-memory API (fakekube, which keeps an
object with finalizers as deleted until the last goes) with a store that records what it was
asked to delete (the real store's side: tests/store/test_plan_deletion_store.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from planops.api import CapsuleSpec, names
from planops.api.artifact_models import ArtifactRepository
from planops.archive.row import archived
from planops.reconciler.effects.stored_logs import StoredLogs
from planops.reconciler.history import deletion
from planops.reconciler.run.status import rfc3339
from planops.store.client import StoreError
from planops.store.repositories import RepositoryError

from .fakekube import FakeKube
from .harness import Cluster

F = names.FINALIZER_ARTIFACTS
NOW = 1_800_000_000.0
CAPSULE = {"image": "busybox:1", "shell": {"allow": ["true", "echo", "sleep"]}}
REPO = {
    "endpoint": "http://127.0.0.1:9",
    "bucket": "bkt",
    "insecure": True,
    "credentialsSecret": {"name": "creds"},
}


def plan(**meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": "u1", "resourceVersion": "3", **meta},
        "status": {"phase": "Succeeded", "run": {"id": "r1"}},
    }


# -- the pure rules ----------------------------------------------------------------------------


def test_only_a_plan_whose_repository_collects_gets_the_finalizer_once():
    assert deletion.wants_finalizer(plan(), None, REPO)  # the default repository
    assert deletion.wants_finalizer(plan(), REPO, None)  # its Capsule's
    assert not deletion.wants_finalizer(plan(), None, None)  # no repository: a plain plan
    never = {**REPO, "artifactGC": {"strategy": "Never"}}
    assert not deletion.wants_finalizer(plan(), never, REPO)  # its Capsule's keeps them
    assert not deletion.wants_finalizer(plan(finalizers=[F]), None, REPO)
    assert not deletion.wants_finalizer(plan(deletionTimestamp="2026-01-01T00:00:00Z"), REPO, REPO)


def test_the_patches_keep_other_controllers_finalizers_and_the_version_read():
    p = plan(finalizers=["other.io/x"])
    assert deletion.with_finalizer(p) == {
        "metadata": {"finalizers": ["other.io/x", F], "resourceVersion": "3"}
    }
    assert deletion.without_finalizer(plan(finalizers=["other.io/x", F])) == {
        "metadata": {"finalizers": ["other.io/x"], "resourceVersion": "3"}
    }
    assert deletion.without_finalizer(plan(finalizers=[F]))["metadata"]["finalizers"] is None


def deleting(at: float = NOW, **status: Any) -> dict[str, Any]:
    p = plan(finalizers=[F], deletionTimestamp=rfc3339(at))
    p["status"].update(status)
    return p


def test_a_deleted_plan_waits_for_the_archive_within_the_bound_then_keeps_its_objects():
    on = archived  # the archive's question: is status.archived the run's id
    held = deletion.decide(deleting(), NOW + 10, on, give_up=600)
    assert held.action == "hold" and held.wake is not None and 2 <= held.wake <= 60
    assert deletion.decide(deleting(archived="r1"), NOW + 10, on).action == "collect"
    assert deletion.decide(deleting(), NOW + 10, None).action == "collect"  # no archive
    late = deletion.decide(deleting(), NOW + 600, on, give_up=600)
    assert late.action == "abandon" and "archive" in late.why and "kept" in late.why
    assert deletion.decide(plan(), NOW, on).action == "none"  # not deleted
    assert deletion.decide(plan(deletionTimestamp=rfc3339(NOW)), NOW, on).action == "none"


def test_a_failing_store_is_retried_with_a_growing_pause_then_given_up():
    pauses = [deletion.after_failure(t, 600, "down").wake for t in (0, 10, 100, 300)]
    assert pauses == [2.0, 5.0, 50.0, 60.0]
    assert deletion.after_failure(599, 600, "down").wake == 1.5  # never past the bound
    gone = deletion.after_failure(600, 600, "connection refused")
    assert gone.action == "abandon" and "connection refused" in gone.why


def test_the_steps_hold_the_objects_only_for_a_while():
    assert deletion.decide(deleting(), NOW + 1, None).wait_for_steps
    assert not deletion.decide(deleting(), NOW + deletion.STEPS_WAIT, None).wait_for_steps


# -- in the reconcile --------------------------------------------------------------------------


class FakeStore:
    """What the deletion asks of the store: the prefixes deleted, or a failure."""

    def __init__(self) -> None:
        self.deleted: list[str] = []
        self.down = False

    def delete_prefix(self, prefix: str) -> int:
        if self.down:
            raise StoreError("artifact repository t (http://s3, bucket b)", "list", "refused")
        self.deleted.append(prefix)
        return 2


def world(
    monkeypatch: pytest.MonkeyPatch, default: dict[str, Any] | None = REPO, **kw: Any
) -> tuple[Cluster, FakeStore]:
    kube = FakeKube()
    repo = ArtifactRepository.model_validate(default) if default else None
    stored = StoredLogs(kube, repo, "planops-system", gc_seconds=600, **kw)
    store = FakeStore()

    async def targets(plan: dict[str, Any], runs: list[str] | None, strict: bool = False) -> Any:
        if repo is None:
            return None
        return store, [f"{plan['metadata']['namespace']}/{plan['metadata']['uid']}/"]

    monkeypatch.setattr(stored, "targets", targets)
    c = Cluster({"default": CAPSULE}, kube=kube, store=stored)
    c.now = NOW
    c.new_plan("p", steps=[{"id": "a", "shell": "sleep 1"}], uid="u1")
    return c, store


def test_a_plan_that_stores_gets_the_finalizer_before_its_first_job(monkeypatch):
    c, _ = world(monkeypatch)
    c.reconcile()
    assert c.plan["metadata"]["finalizers"] == [F]
    assert c.jobs("p")  # and it runs as before
    patches = [m for m, _, _ in c.kube.calls if m == "patch_plan"]
    c.reconcile()
    assert [m for m, _, _ in c.kube.calls if m == "patch_plan"] == patches  # once


def test_a_plain_plan_gets_no_finalizer_and_no_request(monkeypatch):
    c, _ = world(monkeypatch, default=None)
    c.reconcile()
    assert "finalizers" not in c.plan["metadata"]
    assert not [m for m, _, _ in c.kube.calls if m == "patch_plan"]
    bare = Cluster({"default": CAPSULE})  # an operator without any repository
    bare.new_plan("p", steps=[{"id": "a", "shell": "true"}])
    bare.reconcile()
    assert "finalizers" not in bare.plan["metadata"]


def test_a_users_deletion_stops_the_steps_deletes_the_prefix_then_lets_the_plan_go(monkeypatch):
    c, store = world(monkeypatch)
    c.reconcile()
    job = c.jobs("p")[0]
    c.kube.deleted_at = rfc3339(c.now) or ""
    asyncio_run(c.kube.delete_plan("ns", "p"))  # kubectl delete plan p
    assert c.plan["metadata"]["deletionTimestamp"]  # held by the finalizer
    assert c.reconcile() is None
    assert store.deleted == ["ns/u1/"]
    assert c.kube.get("plan", "ns", "p") is None  # gone
    assert ("delete_job", "ns", job) in c.kube.calls  # its steps stopped first


def test_a_deleted_plan_waits_for_its_archive_row(monkeypatch):
    c, store = world(monkeypatch, archived=archived)
    c.reconcile()
    c.set_phase("p", "Succeeded")
    c.kube.deleted_at = rfc3339(c.now) or ""
    asyncio_run(c.kube.delete_plan("ns", "p"))
    wake = c.reconcile()
    assert wake is not None and store.deleted == []
    c.obj()["status"]["archived"] = c.obj()["status"]["run"]["id"]
    assert c.reconcile() is None and store.deleted == ["ns/u1/"]
    assert c.kube.get("plan", "ns", "p") is None


def test_a_store_that_is_down_is_retried_said_and_given_up_after_the_bound(monkeypatch):
    c, store = world(monkeypatch)
    c.reconcile()
    store.down = True
    c.kube.deleted_at = rfc3339(c.now) or ""
    asyncio_run(c.kube.delete_plan("ns", "p"))
    c.now += 30
    wake = c.reconcile()
    assert wake == 15.0  # half the time since the deletion
    assert c.kube.get("plan", "ns", "p") is not None  # held while it is retried
    (failed,) = [e for e in c.kube.events if e["reason"] == "ArtifactGCFailed"]
    assert failed["type"] == "Warning" and "refused" in failed["message"]
    assert "ns/u1/" in failed["message"]
    c.now += 600
    assert c.reconcile() is None
    assert c.kube.get("plan", "ns", "p") is None  # not held for ever
    (gave_up,) = [e for e in c.kube.events if e["reason"] == "ArtifactGCAbandoned"]
    assert "the store failed for 600s" in gave_up["message"] and "ns/u1/" in gave_up["message"]


def test_another_controllers_finalizer_stays(monkeypatch):
    c, store = world(monkeypatch)
    c.reconcile()
    c.obj()["metadata"]["finalizers"].insert(0, "other.io/x")
    asyncio_run(c.kube.delete_plan("ns", "p"))
    c.reconcile()
    assert store.deleted == ["ns/u1/"]
    assert c.plan["metadata"]["finalizers"] == ["other.io/x"]


def asyncio_run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_a_capsule_gone_first_is_remembered_else_its_deletion_says_it_is_unknown():
    kube = FakeKube()
    kube.objects[("secret", "planops-system", "creds")] = {
        "metadata": {
            "name": "creds",
            "annotations": {"planops.dev/artifact-namespaces": "ns"},
            "resourceVersion": "1",
        },
        "data": {"accessKeyId": "YQ==", "secretAccessKey": "Yg=="},
    }
    stored = StoredLogs(kube, None, "planops-system")
    gone = {"metadata": {"namespace": "ns", "uid": "a1", "name": "p"}, "spec": {"capsule": "safe"}}
    with pytest.raises(RepositoryError, match="Capsule ns/safe is gone"):
        asyncio_run(stored.targets(gone, None, strict=True))
    assert asyncio_run(stored.targets(gone, None)) is None  # the TTL's: nothing to delete
    capsule = CapsuleSpec.model_validate({"artifactRepository": REPO})
    asyncio_run(stored.store_for("ns", "safe", capsule))  # a log stored under it
    found = asyncio_run(stored.targets(gone, None, strict=True))
    assert found is not None and found[1] == ["ns/a1/"]
