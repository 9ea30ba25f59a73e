"""Fixtures for tests that need the real test control plane (marker `cluster`).

The cluster: the one named by PLANOPS_TEST_KUBECONFIG if set (a developer's running cluster, see
tests/cluster/up), otherwise one started for this session by `tests/cluster/up --with-node` in a
temporary directory and stopped by tests/cluster/down at the end, pass or fail.

Tests that need pods to really run also carry the `node` marker and use the `node` fixture, which
fails (never skips) when the cluster has no Ready node.

Tests only touch namespaces they create (the `namespace` fixture), never anything else.

`pytest -n N` (pytest-xdist; .ci/run) runs N sessions on ONE running cluster, which must be
given (PLANOPS_TEST_KUBECONFIG): each worker is a session of its own, with its own e2e operator
and namespaces (tests/e2e/conftest.py); what is cluster-wide is changed under `cluster_lock`, and
tests that must not be spread over workers are kept together (tests/xdist_groups.py) or run
afterwards (docs/test-cluster.md, "Parallel runs").
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import settings

from .cluster.s3 import s3_store  # noqa: F401 - the session's SeaweedFS (marker artifacts)
from .hypothesis_profiles import CI_PROFILE
from .layer_times import pytest_runtest_logreport, pytest_sessionfinish
from .xdist_groups import pytest_xdist_make_scheduler

# hooks: .ci/run's layer times; the groups of `pytest -n`
__all__ = ["pytest_runtest_logreport", "pytest_sessionfinish", "pytest_xdist_make_scheduler"]

# deterministic property tests, in CI and for a plain `pytest`; the wide random search is asked
# for by name: `pytest --hypothesis-profile=wide` (tests/hypothesis_profiles.py)
settings.load_profile(CI_PROFILE)

ROOT = Path(__file__).resolve().parents[1]
CLUSTER = ROOT / "tests" / "cluster"


def _versions() -> dict[str, str]:
    lines = (CLUSTER / "versions.env").read_text().splitlines()
    return dict(line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))


CACHE = Path(os.environ.get("PLANOPS_CACHE", Path.home() / ".cache" / "planops"))
KUBECTL = CACHE / "bin" / f"kubernetes-{_versions()['K8S_VERSION']}" / "kubectl"
HELM = CACHE / "bin" / f"helm-{_versions()['HELM_VERSION']}" / "helm"


@pytest.fixture(scope="session")
def helm() -> str:
    """The real helm of tests/cluster/versions.env, built from its Go module when missing
    (`tests/cluster/build helm`, cached like the cluster's binaries)."""
    if not HELM.exists():
        subprocess.run([str(CLUSTER / "build"), "helm"], check=True, stdout=subprocess.DEVNULL)
    return str(HELM)


class Kube:
    """kubectl against the test cluster (the real binary of the cluster's release)."""

    def __init__(self, kubeconfig: str) -> None:
        self.kubeconfig = kubeconfig

    def run(
        self,
        *args: str,
        input: str | None = None,
        check: bool = True,
        token: str | None = None,
        timeout: float = 60,
    ) -> subprocess.CompletedProcess[str]:
        cmd = [
            str(KUBECTL),
            "--kubeconfig",
            self._token_kubeconfig(token) if token else self.kubeconfig,
        ]
        proc = subprocess.run(
            [*cmd, *args], input=input, capture_output=True, text=True, timeout=timeout
        )
        if check and proc.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} failed ({proc.returncode}): {proc.stderr}"
            )
        return proc

    def _token_kubeconfig(self, token: str) -> str:
        """A kubeconfig with the same cluster and *only* this bearer token (no client cert)."""
        cfg = yaml.safe_load(Path(self.kubeconfig).read_text())
        cluster = cfg["clusters"][0]
        out = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [cluster],
            "users": [{"name": "token", "user": {"token": token}}],
            "contexts": [
                {"name": "token", "context": {"cluster": cluster["name"], "user": "token"}}
            ],
            "current-context": "token",
        }
        path = (
            Path(tempfile.gettempdir())
            / f"planops-token-{hashlib.sha256(token.encode()).hexdigest()[:12]}.kubeconfig"
        )
        path.write_text(yaml.safe_dump(out))
        path.chmod(0o600)
        return str(path)

    def apply(self, manifest: dict[str, Any] | str, *args: str) -> str:
        text = manifest if isinstance(manifest, str) else json.dumps(manifest)
        return self.run("apply", "-f", "-", *args, input=text).stdout

    def get(self, *args: str) -> dict[str, Any]:
        return json.loads(self.run("get", *args, "-o", "json").stdout)  # type: ignore[no-any-return]


def no_cluster_of_our_own() -> str | None:
    """Why this session may not start a cluster of its own, or None: a pytest-xdist worker would
    start one each, and only one kubelet node runs on a machine."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return None
    return (
        "pytest -n: the workers share one cluster, and only one kubelet node runs on a "
        "machine: start it (tests/cluster/up --with-node) and set PLANOPS_TEST_KUBECONFIG"
    )


@pytest.fixture(scope="session")
def kubeconfig(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    given = os.environ.get("PLANOPS_TEST_KUBECONFIG")
    if given:
        yield given
        return
    refused = no_cluster_of_our_own()
    if refused:
        pytest.fail(refused, pytrace=False)
    cluster_dir = tmp_path_factory.mktemp("cluster")
    env = {**os.environ, "PLANOPS_CLUSTER_DIR": str(cluster_dir)}
    up = subprocess.run(
        [str(CLUSTER / "up"), "--with-node"], env=env, capture_output=True, text=True
    )
    try:
        if up.returncode != 0:
            pytest.fail(f"tests/cluster/up failed:\n{up.stderr[-4000:]}", pytrace=False)
        yield str(cluster_dir / "admin.kubeconfig")
    finally:
        subprocess.run([str(CLUSTER / "down")], env=env, capture_output=True, text=True)


@contextlib.contextmanager
def cluster_lock(kubeconfig: str, what: str) -> Iterator[None]:
    """Held while this session changes `what`, a cluster-wide object that another session on the
    same cluster (a pytest-xdist worker, another worktree's run) may be changing at the same
    moment: `kubectl apply` of an object two sessions create at once fails with AlreadyExists
    in one of them. A lock file per cluster and object, in the machine's temporary directory."""
    with cluster_lock_file(kubeconfig, what).open("a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def cluster_lock_file(kubeconfig: str, what: str) -> Path:
    key = hashlib.sha256(f"{Path(kubeconfig).resolve()}\0{what}".encode()).hexdigest()[:16]
    return Path(tempfile.gettempdir()) / f"planops-cluster-{key}.lock"


@pytest.fixture(scope="session")
def kube(kubeconfig: str) -> Kube:
    return Kube(kubeconfig)


@pytest.fixture
def namespace(kube: Kube) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards (without waiting)."""
    name = f"t-{uuid.uuid4().hex[:10]}"
    kube.run("create", "namespace", name)
    # kube-controller-manager's serviceaccount controller makes `default` a moment after the
    # namespace, later on a loaded machine. `--for=create` waits for it to appear: a `--for`
    # condition on a named object that does not exist yet fails at once with NotFound.
    kube.run("wait", "--for=create", "-n", name, "serviceaccount/default", "--timeout=60s")
    try:
        yield name
    finally:
        kube.run("delete", "namespace", name, "--wait=false", check=False)


@pytest.fixture(scope="session")
def node(kube: Kube) -> dict[str, Any]:
    """The Ready node of the test cluster (fails when there is none: pods must really run).
    Simulated nodes (tests/cluster/kwok.py, label planops.dev/kwok) run nothing: never them."""
    nodes = kube.get("nodes")["items"]
    ready = [
        n
        for n in nodes
        if "planops.dev/kwok" not in (n["metadata"].get("labels") or {})
        and any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in n["status"].get("conditions", [])
        )
    ]
    if not ready:
        pytest.fail(
            "the test cluster has no Ready node: start it with tests/cluster/up --with-node",
            pytrace=False,
        )
    return ready[0]  # type: ignore[no-any-return]


@pytest.fixture(scope="session")
def busybox(node: dict[str, Any]) -> str:
    """The busybox image imported into the node (by tests/cluster/images.py)."""
    for image in node["status"].get("images", []):
        for name in image.get("names") or []:
            if name.startswith("docker.io/local/busybox:"):
                return name.removeprefix("docker.io/")  # type: ignore[no-any-return]
    pytest.fail("the node has no local/busybox image (tests/cluster/images.py)", pytrace=False)


# every test knows its own outcome in its fixtures' teardown (request.node.rep_call): the
# e2e, faults and gitops fixtures print the operator's log of a failed test
@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Any:
    rep = yield
    setattr(item, f"rep_{rep.when}", rep)
    return rep
