"""Argo CD for real: the GitOps tests' harness (marker `gitops`).

"GitOps through Argo CD" is one of the three ways users run plans, and only the real client says
whether a Plan shows Healthy, drifts OutOfSync, re-runs on a sync or loses its children to a
prune. So these tests run Argo CD v3 itself (tests/cluster/build argocd) out of the cluster on
loopback, the way its own developers run it (ARGOCD_FAKE_IN_CLUSTER: the "in-cluster"
destination is the kubeconfig's cluster):

- redis (Debian's redis-server) on a free loopback port: Argo CD's cache;
- `git daemon` serving bare repositories on loopback, which the tests commit to;
- the repo server, the application controller and the API server (for its resource tree, what
  the UI draws; with authentication off, on loopback only), watching a namespace of their own
  (`argocd-<random>`) holding the Argo CD ConfigMaps, with the project's health checks installed
  in `argocd-cm` exactly as docs/gitops.md says;
- a planops operator for the tests' namespaces (`gitops-*`), as in tests/e2e.

Every process runs in its own process group and is stopped by the fixture that started it, pass
or fail; the namespaces are deleted. Argo CD's CRDs stay installed (cluster-scoped, shared by
every run, like planops' own).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import CACHE, CLUSTER, ROOT, Kube, _versions
from tests.e2e.conftest import Operator, capsule, crds, free_port, start_operator

__all__ = ["crds"]  # the planops CRDs fixture, shared with tests/e2e

ARGOCD_DIR = CACHE / "bin" / f"argocd-{_versions()['ARGOCD_VERSION'].split()[0]}"
NS_PATTERN = "gitops-*"


def health_customizations() -> dict[str, str]:
    """argocd-cm's health keys, exactly as docs/gitops.md tells users to install them."""
    lua = ROOT / "charts" / "planops" / "argocd"
    return {
        "resource.customizations.health.planops.dev_Plan": (lua / "health-plan.lua").read_text(),
        "resource.customizations.health.planops.dev_ScheduledPlan": (
            lua / "health-scheduledplan.lua"
        ).read_text(),
    }


@dataclass
class Proc:
    """A subprocess in a process group of its own, with its output in a file."""

    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def logs(self, tail: int = 4000) -> str:
        return self.log.read_text(errors="replace")[-tail:]

    def alive(self) -> None:
        if self.proc.poll() is not None:
            raise AssertionError(f"{self.name} exited ({self.proc.returncode}):\n{self.logs()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def spawn(name: str, args: list[str], log: Path, env: dict[str, str] | None = None) -> Proc:
    out = log.open("ab")
    proc = subprocess.Popen(
        args,
        stdout=out,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, **(env or {})},
    )
    return Proc(name, proc, log)


def wait_port(p: Proc, port: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        p.alive()
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
            return
        time.sleep(0.3)
    raise AssertionError(f"{p.name} did not listen on 127.0.0.1:{port}:\n{p.logs()}")


@contextlib.contextmanager
def running(p: Proc) -> Iterator[Proc]:
    try:
        yield p
    finally:
        p.stop()


@pytest.fixture(scope="session")
def argocd_bin() -> Path:
    """Argo CD of tests/cluster/versions.env, built from its Go module when missing."""
    if not (ARGOCD_DIR / "argocd").exists():
        subprocess.run([str(CLUSTER / "build"), "argocd"], check=True, stdout=subprocess.DEVNULL)
    return ARGOCD_DIR


@pytest.fixture(scope="session")
def redis(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Debian's redis-server on a free loopback port, nothing saved to disk."""
    d = tmp_path_factory.mktemp("redis")
    port = free_port()
    args = ["redis-server", "--bind", "127.0.0.1", "--port", str(port), "--save", ""]
    args += ["--appendonly", "no", "--dir", str(d)]
    with running(spawn("redis-server", args, d / "redis.log")) as p:
        wait_port(p, port)
        yield f"127.0.0.1:{port}"


@dataclass
class GitServer:
    base: Path
    port: int
    work: Path

    def repo(self, name: str) -> Repo:
        bare = self.base / f"{name}.git"
        git("init", "-q", "--bare", "-b", "main", str(bare))
        clone = self.work / name
        git("clone", "-q", str(bare), str(clone))
        return Repo(url=f"git://127.0.0.1:{self.port}/{name}.git", dir=clone)


def git(*args: str, cwd: Path | None = None) -> str:
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "gitops test",
        "GIT_AUTHOR_EMAIL": "test@planops.invalid",
        "GIT_COMMITTER_NAME": "gitops test",
        "GIT_COMMITTER_EMAIL": "test@planops.invalid",
        "GIT_CONFIG_GLOBAL": "/dev/null",
    }
    proc = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout


@dataclass
class Repo:
    """A working clone of a bare repository that git daemon serves; commit() pushes."""

    url: str
    dir: Path

    def commit(self, message: str, files: dict[str, Any]) -> str:
        """Write (a manifest: dict or list of dicts, or None to delete) and push; the commit."""
        for name, content in files.items():
            path = self.dir / name
            if content is None:
                git("rm", "-q", name, cwd=self.dir)
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            docs = content if isinstance(content, list) else [content]
            path.write_text(yaml.safe_dump_all(docs, sort_keys=False))
            git("add", name, cwd=self.dir)
        git("commit", "-q", "-m", message, cwd=self.dir)
        git("push", "-q", "origin", "HEAD:main", cwd=self.dir)
        return git("rev-parse", "HEAD", cwd=self.dir).strip()


@pytest.fixture(scope="session")
def git_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GitServer]:
    """`git daemon` serving bare repositories (read only) on a free loopback port."""
    base = tmp_path_factory.mktemp("git")
    port = free_port()
    args = ["git", "daemon", "--reuseaddr", "--export-all", f"--base-path={base}"]
    args += ["--listen=127.0.0.1", f"--port={port}", str(base)]
    with running(spawn("git daemon", args, base.parent / "git-daemon.log")) as p:
        wait_port(p, port)
        yield GitServer(base, port, tmp_path_factory.mktemp("clones"))


@dataclass
class ArgoCD:
    """Argo CD's components for one session, and how the tests talk to them."""

    kube: Kube
    namespace: str
    api: str
    procs: list[Proc] = field(default_factory=list)

    def logs(self) -> str:
        return "\n".join(f"--- {p.name} ---\n{p.logs(6000)}" for p in self.procs)

    def alive(self) -> None:
        for p in self.procs:
            p.alive()

    def application(
        self, name: str, repo: Repo, dest: str, path: str = ".", **sync: Any
    ) -> dict[str, Any]:
        """An Application syncing REPO's PATH to namespace DEST automatically, with prune."""
        app = {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Application",
            "metadata": {"name": name, "namespace": self.namespace},
            "spec": {
                "project": "default",
                "source": {"repoURL": repo.url, "targetRevision": "main", "path": path},
                "destination": {"server": "https://kubernetes.default.svc", "namespace": dest},
                "syncPolicy": {"automated": {"prune": True, "selfHeal": True}, **sync},
            },
        }
        self.kube.apply(app)
        return app

    def app(self, name: str) -> dict[str, Any]:
        return self.kube.get("application", name, "-n", self.namespace)

    def refresh(self, name: str, kind: str = "normal") -> None:
        """Ask the controller to look at git now (the UI's Refresh / Hard Refresh)."""
        self.kube.run(
            "annotate",
            "application",
            name,
            "-n",
            self.namespace,
            f"argocd.argoproj.io/refresh={kind}",
            "--overwrite",
        )

    def get(self, path: str) -> dict[str, Any]:
        """GET the API server's REST API (authentication is off; loopback only)."""
        with urllib.request.urlopen(self.api + path, timeout=30) as r:
            return json.loads(r.read())  # type: ignore[no-any-return]

    def tree(self, name: str) -> dict[str, Any]:
        """Argo CD's resource tree of an Application: what its UI draws."""
        return self.get(f"/api/v1/applications/{name}/resource-tree?appNamespace={self.namespace}")

    def wait(
        self,
        name: str,
        until: Callable[[dict[str, Any]], bool],
        timeout: float = 180,
        what: str = "",
    ) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        obj: dict[str, Any] = {}
        while time.monotonic() < deadline:
            self.alive()
            obj = self.app(name)
            if until(obj):
                return obj
            time.sleep(1)
        raise AssertionError(
            f"application {name}: not {what or 'as expected'} after {timeout}s: "
            f"{json.dumps(obj.get('status'), indent=1)[:4000]}"
        )


def sync_status(app: dict[str, Any]) -> str:
    return str(((app.get("status") or {}).get("sync") or {}).get("status", ""))


def health_status(app: dict[str, Any]) -> str:
    return str(((app.get("status") or {}).get("health") or {}).get("status", ""))


def synced_at(app: dict[str, Any], revision: str) -> bool:
    sync = (app.get("status") or {}).get("sync") or {}
    return bool(sync.get("status") == "Synced" and sync.get("revision") == revision)


def _manifests(argocd_bin: Path) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for f in sorted((argocd_bin / "crds").glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(f.read_text()) if d]
    return docs


@pytest.fixture(scope="session")
def argocd(
    kube: Kube,
    kubeconfig: str,
    argocd_bin: Path,
    redis: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[ArgoCD]:
    """Argo CD's repo server, application controller and API server, out of the cluster."""
    for crd in _manifests(argocd_bin):
        kube.apply(crd, "--server-side", "--force-conflicts")
    deadline = time.monotonic() + 60  # a CRD just created has no conditions for a moment
    while (
        kube.run(
            "wait",
            "--for=condition=Established",
            "crd/applications.argoproj.io",
            "crd/appprojects.argoproj.io",
            "--timeout=30s",
            check=False,
        ).returncode
        != 0
    ):
        assert time.monotonic() < deadline, "Argo CD's CRDs never became Established"
        time.sleep(1)
    ns = f"argocd-{uuid.uuid4().hex[:8]}"
    kube.run("create", "namespace", ns)
    d = tmp_path_factory.mktemp("argocd")
    procs: list[Proc] = []
    try:
        label = {"app.kubernetes.io/part-of": "argocd"}
        cm = {"apiVersion": "v1", "kind": "ConfigMap"}
        kube.apply(
            {
                **cm,
                "metadata": {"name": "argocd-cm", "namespace": ns, "labels": label},
                "data": health_customizations(),
            }
        )
        kube.apply({**cm, "metadata": {"name": "argocd-rbac-cm", "namespace": ns, "labels": label}})
        kube.apply(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": "argocd-secret", "namespace": ns, "labels": label},
                "stringData": {"server.secretkey": secrets.token_urlsafe(32)},
            }
        )
        kube.apply(
            {
                "apiVersion": "argoproj.io/v1alpha1",
                "kind": "AppProject",
                "metadata": {"name": "default", "namespace": ns},
                "spec": {
                    "sourceRepos": ["*"],
                    "destinations": [{"server": "*", "namespace": "*"}],
                    "clusterResourceWhitelist": [{"group": "*", "kind": "*"}],
                },
            }
        )
        home = d / "home"
        home.mkdir()
        env = {
            "KUBECONFIG": kubeconfig,
            "ARGOCD_FAKE_IN_CLUSTER": "true",
            "ARGOCD_GPG_ENABLED": "false",
            "HOME": str(home),
            # the repo server runs git-verify-wrapper.sh, shipped beside the binary
            "PATH": f"{argocd_bin}:{os.environ['PATH']}",
            "TMPDIR": str(d),
        }
        repo_port, repo_metrics = free_port(), free_port()
        repo = spawn(
            "argocd-repo-server",
            [
                str(argocd_bin / "argocd-repo-server"),
                "--address=127.0.0.1",
                f"--port={repo_port}",
                "--metrics-address=127.0.0.1",
                f"--metrics-port={repo_metrics}",
                f"--redis={redis}",
                "--disable-tls",
                "--client-ca-path=",  # its default is a file of an in-cluster install
                "--logformat=text",
            ],
            d / "repo-server.log",
            env,
        )
        procs.append(repo)
        wait_port(repo, repo_port)
        common = [
            f"--kubeconfig={kubeconfig}",
            f"--namespace={ns}",
            f"--repo-server=127.0.0.1:{repo_port}",
            "--repo-server-plaintext",
            f"--redis={redis}",
            "--logformat=text",
        ]
        ctrl_metrics = free_port()
        ctrl = spawn(
            "argocd-application-controller",
            [
                str(argocd_bin / "argocd-application-controller"),
                *common,
                f"--metrics-port={ctrl_metrics}",
                # how often it compares with git by itself; the tests also ask for a refresh
                "--app-resync=30",
                "--status-processors=4",
                "--operation-processors=4",
            ],
            d / "application-controller.log",
            env,
        )
        procs.append(ctrl)
        wait_port(ctrl, ctrl_metrics)
        api_port, api_metrics = free_port(), free_port()
        server = spawn(
            "argocd-server",
            [
                str(argocd_bin / "argocd-server"),
                *common,
                "--address=127.0.0.1",
                f"--port={api_port}",
                "--metrics-address=127.0.0.1",
                f"--metrics-port={api_metrics}",
                "--insecure",
                "--disable-auth",
                "--dex-server=",
                f"--staticassets={d}",
            ],
            d / "server.log",
            env,
        )
        procs.append(server)
        wait_port(server, api_port)
        yield ArgoCD(kube, ns, f"http://127.0.0.1:{api_port}", procs)
    finally:
        for p in reversed(procs):
            p.stop()
        # Applications carry no finalizer here (the tests' own fixture deletes them first), so
        # the namespace goes at once.
        kube.run("delete", "namespace", ns, "--wait=false", check=False)


@pytest.fixture(scope="session")
def operator(
    kubeconfig: str, crds: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Operator]:
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    op = start_operator(kubeconfig, [NS_PATTERN], log)
    try:
        yield op
    finally:
        op.stop()


@dataclass
class Env:
    """One test's world: a namespace the operator watches, a repository, Argo CD."""

    ns: str
    repo: Repo
    argocd: ArgoCD
    kube: Kube
    busybox: str

    def capsule(self, name: str = "default", **spec: Any) -> dict[str, Any]:
        """The e2e Capsule, in an earlier sync wave than the Plans (docs/gitops.md)."""
        doc = capsule(self.busybox, name=name, **spec)
        doc["metadata"]["annotations"] = {"argocd.argoproj.io/sync-wave": "-1"}
        return doc


@pytest.fixture
def env(
    kube: Kube,
    operator: Operator,
    argocd: ArgoCD,
    git_server: GitServer,
    busybox: str,
    request: pytest.FixtureRequest,
) -> Iterator[Env]:
    name = f"gitops-{uuid.uuid4().hex[:10]}"
    kube.run("create", "namespace", name)
    repo = git_server.repo(name)
    try:
        yield Env(name, repo, argocd, kube, busybox)
    finally:
        failed = request.node.rep_call.failed if hasattr(request.node, "rep_call") else False
        if failed:
            print(f"--- operator log ---\n{operator.logs()[-6000:]}")
            print(argocd.logs())
        # the Application first (it would re-create what the namespace's deletion removes)
        kube.run("delete", "application", name, "-n", argocd.namespace, "--wait=false", check=False)
        kube.run("delete", "namespace", name, "--wait=false", check=False)
