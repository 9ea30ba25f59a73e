"""Results and artifacts between step pods, end to end on the real node: an operator of its own
(a subprocess) makes each files step's pod (the step as the init container `step`, the
collector `collect` from the operator's image, kube.files_pod) with presigned URLs of a store
the pods reach (a SeaweedFS of this module's own, listening on the node's address: the session's
listens on loopback, which a pod cannot reach). A Capsule's artifactRepository names a Secret in
the operator's namespace that lists the tenant's namespace.

The collector's image: the operator's, built by image/build and imported into the node's
containerd under PLANOPS_TEST_OPERATOR_IMAGE (default: the release tag, as CI builds it once from
the same tree; a shared node's developer sets a tag of their own, so as not to replace it)."""

from __future__ import annotations

import base64
import os
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from planops import __version__
from planops.store import Repository, RunKeys, Store
from tests.cluster.s3 import S3, server
from tests.cluster.s3 import Store as WeedStore
from tests.conftest import ROOT, Kube
from tests.e2e.conftest import Operator, capsule, plan, start_operator, steps, wait_plan

pytestmark = [pytest.mark.cluster, pytest.mark.node, pytest.mark.artifacts]

PREFIX = "e2e-files"


@pytest.fixture(scope="module")
def collector_image(kubeconfig: str, node: dict[str, Any]) -> str:
    """The operator's image on the node (image/build --import; cached base: seconds)."""
    name = os.environ.get("PLANOPS_TEST_OPERATOR_IMAGE", f"ghcr.io/planops/operator:{__version__}")
    sock = Path(kubeconfig).parent / "run" / "containerd.sock"
    done = subprocess.run(
        [str(ROOT / "image" / "build"), "--import", str(sock)],
        capture_output=True,
        text=True,
        timeout=1200,
        env={**os.environ, "PLANOPS_IMAGE_NAME": name},
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return name


@pytest.fixture(scope="module")
def pod_store(node: dict[str, Any]) -> Iterator[S3]:
    """A SeaweedFS on the node's internal address (the pods' bridge reaches it)."""
    addresses = node["status"].get("addresses") or []
    ip = next(a["address"] for a in addresses if a["type"] == "InternalIP")
    with server(ip) as s3:
        yield s3


def _secret(name: str, ns: str, s3: S3, tenant: str) -> dict[str, Any]:
    def b64(v: str) -> str:
        return base64.b64encode(v.encode()).decode()

    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            "name": name,
            "namespace": ns,
            "annotations": {"planops.dev/artifact-namespaces": tenant},
        },
        "data": {"accessKeyId": b64(s3.access_key), "secretAccessKey": b64(s3.secret_key)},
    }


@pytest.fixture
def files_operator(
    kube: Kube,
    kubeconfig: str,
    crds: None,
    busybox: str,
    pod_store: S3,
    collector_image: str,
    tmp_path: Path,
) -> Iterator[tuple[str, Operator]]:
    """A tenant namespace whose Capsule names the store, the operator's namespace with the
    credentials Secret, and an operator watching the tenant."""
    ns, system = f"files-{uuid.uuid4().hex[:8]}", f"files-sys-{uuid.uuid4().hex[:8]}"
    for name in (ns, system):
        kube.run("create", "namespace", name)
    repository = {
        "endpoint": pod_store.endpoint,
        "bucket": pod_store.bucket,
        "insecure": True,
        "keyPrefix": PREFIX,
        "credentialsSecret": {"name": "s3-creds"},
    }
    kube.apply(capsule(busybox, artifactRepository=repository), "-n", ns)
    kube.apply(_secret("s3-creds", system, pod_store, ns))
    op = start_operator(
        kubeconfig,
        [ns],
        tmp_path / "op.log",
        "--artifact-secrets-namespace",
        system,
        "--collector-image",
        collector_image,
    )
    try:
        yield ns, op
    finally:
        op.stop()
        for name in (ns, system):
            kube.run("delete", "namespace", name, "--wait=false", check=False)


def _done(kube: Kube, ns: str, name: str, op: Operator, timeout: float = 180) -> dict[str, Any]:
    try:
        return wait_plan(kube, ns, name, ("Succeeded", "Failed", "Invalid"), timeout=timeout)
    except AssertionError as e:
        raise AssertionError(f"{e}\noperator log:\n{op.logs()[-4000:]}") from None


def test_results_are_read_by_a_later_step(kube: Kube, files_operator: tuple[str, Operator]):
    ns, op = files_operator
    a = {
        "id": "a",
        "shell": "sh -c 'echo 1.2.3 > $PLANOPS_RESULTS/version'",
        "results": [{"name": "version"}],
    }
    b = {"id": "b", "shell": "echo v={{a.results.version}}", "dependsOn": ["a"]}
    kube.apply(plan("results", a, b), "-n", ns)
    done = _done(kube, ns, "results", op)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    got = steps(done)
    assert got["a"]["results"] == {"version": "1.2.3"}, got["a"]
    assert got["b"]["output"] == "v=1.2.3"
    pod = kube.get("pods", "-n", ns, "-l", "planops.dev/step=a")["items"][0]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == ["step"]
    assert [c["name"] for c in pod["containers"]] == ["collect"]


def test_a_file_passes_between_two_steps(
    kube: Kube, files_operator: tuple[str, Operator], pod_store: S3
):
    ns, op = files_operator
    a = {
        "id": "a",
        "shell": "sh -c 'echo hello-file > out.txt'",
        "outputs": {"artifacts": [{"name": "f", "path": "out.txt"}]},
    }
    b = {
        "id": "b",
        "shell": "cat in/got.txt",
        "dependsOn": ["a"],
        "inputs": {"artifacts": [{"from": "{{a.artifacts.f}}", "path": "in/got.txt"}]},
    }
    kube.apply(plan("file", a, b), "-n", ns)
    done = _done(kube, ns, "file", op)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    got = steps(done)
    (record,) = got["a"]["artifacts"]
    assert record["size"] == len("hello-file\n") and not record.get("directory")
    assert got["b"]["output"] == "hello-file"
    uid, run = done["metadata"]["uid"], done["status"]["run"]["id"]
    key = RunKeys(PREFIX, ns, uid, run).artifact("a", "f")
    reader = Store(
        Repository(
            "t", pod_store.endpoint, pod_store.bucket, pod_store.access_key, pod_store.secret_key
        )
    )
    assert reader.get_bytes(key) == b"hello-file\n"


def test_a_directory_artifact_is_archived_and_unpacked(
    kube: Kube, files_operator: tuple[str, Operator]
):
    ns, op = files_operator
    a = {
        "id": "a",
        "shell": "sh -c 'mkdir -p d/sub && echo deep > d/sub/y && echo top > d/x'",
        "outputs": {"artifacts": [{"name": "dir", "path": "d"}]},
    }
    b = {
        "id": "b",
        "shell": "cat got/sub/y got/x",
        "dependsOn": ["a"],
        "inputs": {"artifacts": [{"from": "{{a.artifacts.dir}}", "path": "got"}]},
    }
    kube.apply(plan("dir", a, b), "-n", ns)
    done = _done(kube, ns, "dir", op)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    got = steps(done)
    assert got["a"]["artifacts"][0]["directory"] is True
    assert got["b"]["output"] == "deep\ntop"


def test_the_store_stopped_mid_run_fails_the_step_with_a_clear_error(
    kube: Kube,
    kubeconfig: str,
    crds: None,
    busybox: str,
    collector_image: str,
    node: dict[str, Any],
    tmp_path: Path,
):
    """A store of this test's own, stopped while the step runs: its collector cannot PUT, and
    the step fails at once, naming the artifact and the store's answer, never a hang."""
    addresses = node["status"].get("addresses") or []
    ip = next(a["address"] for a in addresses if a["type"] == "InternalIP")
    ns, system = f"files-{uuid.uuid4().hex[:8]}", f"files-sys-{uuid.uuid4().hex[:8]}"
    with server(ip) as s3:
        for name in (ns, system):
            kube.run("create", "namespace", name)
        repository = {
            "endpoint": s3.endpoint,
            "bucket": s3.bucket,
            "insecure": True,
            "credentialsSecret": {"name": "s3-creds"},
        }
        kube.apply(capsule(busybox, artifactRepository=repository), "-n", ns)
        kube.apply(_secret("s3-creds", system, s3, ns))
        op = start_operator(
            kubeconfig,
            [ns],
            tmp_path / "op.log",
            "--artifact-secrets-namespace",
            system,
            "--collector-image",
            collector_image,
        )
        try:
            a = {
                "id": "a",
                "shell": "sh -c 'sleep 6; echo x > out'",
                "outputs": {"artifacts": [{"name": "out", "path": "out"}]},
            }
            kube.apply(plan("outage", a), "-n", ns)
            wait_plan(kube, ns, "outage", ("Running",), timeout=120)
            WeedStore(s3.root).stop()  # the store goes away while a runs
            started = time.monotonic()
            done = _done(kube, ns, "outage", op, timeout=150)
            assert time.monotonic() - started < 120
            assert done["status"]["phase"] == "Failed", done["status"]
            error = steps(done)["a"].get("error") or ""
            assert "collect failed: artifact 'out'" in error, error
            assert "cannot be reached" in error or "stopped" in error, error
        finally:
            op.stop()
            for name in (ns, system):
                kube.run("delete", "namespace", name, "--wait=false", check=False)
