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

import contextlib
import os
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
from tests.conftest import Kube
from tests.e2e.conftest import (
    Operator,
    capsule,
    operator_image_on_node,
    plan,
    release_plans,
    start_operator,
    steps,
    wait_plan,
)
from tests.e2e.test_stored_logs import _secret as stored_logs_secret

pytestmark = [pytest.mark.cluster, pytest.mark.node, pytest.mark.artifacts]

PREFIX = "e2e-files"


@pytest.fixture(scope="module")
def collector_image(kubeconfig: str, node: dict[str, Any]) -> str:
    """The operator's image on the node (image/build --import; cached base: seconds)."""
    name = os.environ.get("PLANOPS_TEST_OPERATOR_IMAGE", f"ghcr.io/planops/operator:{__version__}")
    return operator_image_on_node(kubeconfig, name)


@pytest.fixture(scope="module")
def pod_store(node: dict[str, Any]) -> Iterator[S3]:
    """A SeaweedFS on the node's internal address (the pods' bridge reaches it)."""
    with server(node_ip(node)) as s3:
        yield s3


def node_ip(node: dict[str, Any]) -> str:
    """The node's address, which its pods reach over their bridge."""
    addresses = node["status"].get("addresses") or []
    return next(str(a["address"]) for a in addresses if a["type"] == "InternalIP")


def _secret(name: str, ns: str, s3: S3, tenant: str) -> dict[str, Any]:
    """The credentials Secret in the operator's namespace, listing the tenant's namespace."""
    secret = stored_logs_secret(name, ns, s3.access_key, s3.secret_key)
    secret["metadata"]["annotations"] = {"planops.dev/artifact-namespaces": tenant}
    return secret


@contextlib.contextmanager
def tenant_and_operator(
    kube: Kube, kubeconfig: str, busybox: str, s3: S3, image: str, log: Path, prefix: str = ""
) -> Iterator[tuple[str, Operator]]:
    """A tenant namespace whose Capsule names the store, the operator's namespace with the
    credentials Secret, and an operator watching the tenant."""
    ns, system = f"files-{uuid.uuid4().hex[:8]}", f"files-sys-{uuid.uuid4().hex[:8]}"
    for name in (ns, system):
        kube.run("create", "namespace", name)
    repository = {
        "endpoint": s3.endpoint,
        "bucket": s3.bucket,
        "insecure": True,
        "credentialsSecret": {"name": "s3-creds"},
        **({"keyPrefix": prefix} if prefix else {}),
    }
    try:
        kube.apply(capsule(busybox, artifactRepository=repository), "-n", ns)
        kube.apply(_secret("s3-creds", system, s3, ns))
        flags = ("--artifact-secrets-namespace", system, "--collector-image", image)
        op = start_operator(kubeconfig, [ns], log, *flags)
        try:
            yield ns, op
        finally:
            op.stop()
    finally:
        release_plans(kube, ns)  # the artifact finalizer of an operator stopped by now
        for name in (ns, system):
            kube.run("delete", "namespace", name, "--wait=false", check=False)


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
    with tenant_and_operator(
        kube, kubeconfig, busybox, pod_store, collector_image, tmp_path / "op.log", PREFIX
    ) as found:
        yield found


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


def _pass_on(
    kube: Kube, ns: str, op: Operator, name: str, make: str, out: str, into: str, read: str
) -> dict[str, Any]:
    """Step a leaves artifact `x` at `out` (made by `make`), step b reads it placed at `into`
    (by `read`): the settled Plan, which must have succeeded."""
    a = {"id": "a", "shell": make, "outputs": {"artifacts": [{"name": "x", "path": out}]}}
    b = {
        "id": "b",
        "shell": read,
        "dependsOn": ["a"],
        "inputs": {"artifacts": [{"from": "{{a.artifacts.x}}", "path": into}]},
    }
    kube.apply(plan(name, a, b), "-n", ns)
    done = _done(kube, ns, name, op)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    return done


def test_a_file_passes_between_two_steps(
    kube: Kube, files_operator: tuple[str, Operator], pod_store: S3
):
    ns, op = files_operator
    make = "sh -c 'echo hello-file > out.txt'"
    done = _pass_on(kube, ns, op, "file", make, "out.txt", "in/got.txt", "cat in/got.txt")
    got = steps(done)
    (record,) = got["a"]["artifacts"]
    assert record["size"] == len("hello-file\n") and not record.get("directory")
    assert got["b"]["output"] == "hello-file"
    uid, run = done["metadata"]["uid"], done["status"]["run"]["id"]
    key = RunKeys(PREFIX, ns, uid, run).artifact("a", "x")
    s3 = pod_store
    reader = Store(Repository("t", s3.endpoint, s3.bucket, s3.access_key, s3.secret_key))
    assert reader.get_bytes(key) == b"hello-file\n"


def test_a_directory_artifact_is_archived_and_unpacked(
    kube: Kube, files_operator: tuple[str, Operator]
):
    ns, op = files_operator
    make = "sh -c 'mkdir -p d/sub && echo deep > d/sub/y && echo top > d/x'"
    done = _pass_on(kube, ns, op, "dir", make, "d", "got", "cat got/sub/y got/x")
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
    log = tmp_path / "op.log"
    ip = node_ip(node)
    with (
        server(ip) as s3,
        tenant_and_operator(kube, kubeconfig, busybox, s3, collector_image, log) as (ns, op),
    ):
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


def test_an_oom_killed_step_that_moves_files_names_its_memory_limit(
    kube: Kube, files_operator: tuple[str, Operator]
):
    """The step is the init container `step` (the collector is the pod's container): its
    OOM kill is read from it and named with its own limit, as a plain step's."""
    ns, op = files_operator
    hog = {
        "id": "hog",
        # exec: dd is the container's process (a shell's child killed, the shell exits 0)
        "shell": "sh -c 'exec dd if=/dev/zero of=/dev/null bs=256M count=1'",
        "results": [{"name": "v"}],
        "resources": {"limits": {"memory": "32Mi"}},
    }
    kube.apply(plan("oom", hog), "-n", ns)
    done = _done(kube, ns, "oom", op)
    assert done["status"]["phase"] == "Failed", done["status"]
    # containerd reports OOMKilled only when its OOM event beats the exit event: either reading
    assert steps(done)["hog"]["error"] in (
        "OOMKilled: the container exceeded its memory limit (32Mi)",
        "exit code 137: killed (SIGKILL), most likely for exceeding its memory limit (32Mi); "
        "raise resources.limits.memory if the step needs more",
    )
