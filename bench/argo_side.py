"""Argo Workflows as a side of bench/vs_peers.py: its workflow-controller (built by
`tests/cluster/build argo`) run out of the cluster with its documented defaults, or with its
documented throughput tuning (more workflow workers, higher client QPS/burst, a pod-creation rate
limit; Argo's scaling guide, argo-workflows.readthedocs.io/en/latest/scaling/), and the workloads
as Workflow DAGs of one `true` template.

Every Argo pod carries the emissary executor (argoexec as an init container and a `wait`
sidecar): its image is made here from the built argoexec without Docker (image/ocitar.py), and
the wait container writes WorkflowTaskResults with the pod's ServiceAccount, so each namespace
gets that account and the RBAC from Argo's quick-start manifests.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tarfile
import tempfile
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "image"))

from bench.artifact_work import argo_pass, argo_repository  # noqa: E402
from bench.measure import versions  # noqa: E402
from bench.peer_sides import BUSYBOX, ArtifactStore, PeerCluster, Side, store_secret  # noqa: E402
from ocitar import image, layer  # noqa: E402
from tests.e2e.conftest import free_port  # noqa: E402

CACHE = Path(os.environ.get("PLANOPS_CACHE", Path.home() / ".cache" / "planops"))


class Argo(Side):
    client = "bench-argo"
    runs_resource = "workflows.argoproj.io"

    def __init__(self, tuned: bool) -> None:
        self.tuned = tuned
        self.name = "argo_tuned" if tuned else "argo"
        self.bin = CACHE / "bin" / f"argo-{versions()['ARGO_VERSION']}"
        self.flags = ["--workflow-workers", "64", "--qps", "100", "--burst", "150"] if tuned else []
        self.config: dict[str, str] = {}
        if tuned:
            self.config["resourceRateLimit"] = "limit: 100\nburst: 200\n"
        self.settings = {
            "controller": f"argo workflow-controller {versions()['ARGO_VERSION']}",
            "flags": self.flags or "defaults (--workflow-workers 32, --qps 20, --burst 30)",
            "configmap": self.config or "defaults (resourceRateLimit: none)",
            "executor": "emissary (argoexec init + wait sidecar)",
        }

    files = True
    #: the store's keys, in each namespace of artifact runs (Argo mounts them into its executor)
    SECRET = "bench-s3"

    def use_store(self, store: ArtifactStore) -> None:
        self.config["artifactRepository"] = argo_repository(
            store.endpoint, store.bucket, self.SECRET
        )
        self.store = store
        self.settings["artifactRepository"] = self.config["artifactRepository"]

    def prepare_files(self, cluster: PeerCluster, ns: str) -> None:
        self.prepare(cluster, ns)
        cluster.kube.apply(store_secret(self.SECRET, ns, self.store), "-n", ns)

    def artifact_pass(self, name: str) -> dict[str, Any]:
        tasks, templates = argo_pass(BUSYBOX)
        wf = self._wf(name, tasks)
        wf["spec"]["templates"] = [wf["spec"]["templates"][0], *templates]
        return wf

    def executor_image(self, cluster: PeerCluster) -> str:
        ref = f"local/argoexec:{versions()['ARGO_VERSION']}"
        with tempfile.TemporaryDirectory() as tmp:
            entries: list[tuple[str, dict[str, object]]] = [
                (d, {"kind": tarfile.DIRTYPE, "mode": 0o755}) for d in ("bin", "etc")
            ]
            entries.append(("tmp", {"kind": tarfile.DIRTYPE, "mode": 0o1777}))
            entries.append(
                ("bin/argoexec", {"data": (self.bin / "argoexec").read_bytes(), "mode": 0o755})
            )
            entries.append(
                (
                    "etc/passwd",
                    {
                        "data": b"root:x:0:0:root:/:/bin/argoexec\n"
                        b"nobody:x:65534:65534:nobody:/:/bin/false\n"
                    },
                )
            )
            tar = image(
                Path(tmp),
                ref,
                [layer(entries)],
                {
                    "Env": ["PATH=/bin"],
                    "Entrypoint": ["argoexec"],
                    "User": "0",
                },
            )
            cluster.import_image(tar)
        return ref

    def start(self, cluster: PeerCluster, namespaces: list[str]) -> None:
        if not (self.bin / "workflow-controller").exists():
            raise SystemExit(f"Argo is not built: run tests/cluster/build argo ({self.bin})")
        cluster.kube.run("apply", "--server-side", "-f", str(self.bin / "crds"))
        home = namespaces[0]
        kc = cluster.identity("bench-argo", namespace=home)
        cluster.classify("bench-argo", [{"kind": "User", "user": {"name": "bench-argo"}}])
        metrics, telemetry = free_port(), free_port()
        self.config.update(
            {
                "metricsConfig": f"enabled: true\nport: {metrics}\n",
                "telemetryConfig": f"enabled: false\nport: {telemetry}\n",
            }
        )
        cluster.kube.apply(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "workflow-controller-configmap"},
                "data": self.config,
            },
            "-n",
            home,
        )
        image_ref = self.executor_image(cluster)
        self.log = Path(tempfile.gettempdir()) / f"vs-peers-{self.name}-{uuid.uuid4().hex[:6]}.log"
        # one controller for the whole cluster (its default): the bench's namespaces only hold
        # its runs
        self.proc = subprocess.Popen(
            [
                str(self.bin / "workflow-controller"),
                "--kubeconfig",
                kc,
                "--executor-image",
                image_ref,
                "--executor-image-pull-policy",
                "IfNotPresent",
                *self.flags,
            ],
            stdout=self.log.open("ab"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "LEADER_ELECTION_IDENTITY": f"bench-{self.name}"},
        )
        self.pid = self.proc.pid
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise SystemExit(f"argo exited: {self.log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{metrics}/metrics", timeout=2):
                    break
            except OSError:
                time.sleep(0.3)
        time.sleep(3)  # the leader's informers sync

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(20)
        except subprocess.TimeoutExpired:
            self.proc.kill()

    def cleanup(self, cluster: PeerCluster) -> None:
        cluster.kube.run(
            "delete", "-f", str(self.bin / "crds"), "--ignore-not-found", timeout=120, check=False
        )

    def prepare(self, cluster: PeerCluster, ns: str) -> None:
        cluster.kube.apply(
            {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "argo-exec"}},
            "-n",
            ns,
        )
        cluster.kube.apply(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": {"name": "executor"},
                "rules": [
                    {
                        "apiGroups": ["argoproj.io"],
                        "resources": ["workflowtaskresults"],
                        "verbs": ["create", "patch"],
                    }
                ],
            },
            "-n",
            ns,
        )
        cluster.kube.apply(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "executor"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": "executor",
                },
                "subjects": [{"kind": "ServiceAccount", "name": "argo-exec", "namespace": ns}],
            },
            "-n",
            ns,
        )

    def pod_flow(self, namespaces: list[str]) -> list[dict[str, Any]]:
        return [
            {"kind": "ServiceAccount", "serviceAccount": {"name": "argo-exec", "namespace": ns}}
            for ns in namespaces
        ]

    @staticmethod
    def _wf(name: str, tasks: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "apiVersion": "argoproj.io/v1alpha1",
            "kind": "Workflow",
            "metadata": {"name": name},
            "spec": {
                "entrypoint": "main",
                "serviceAccountName": "argo-exec",
                "templates": [
                    {"name": "main", "dag": {"tasks": tasks}},
                    {"name": "true", "container": {"image": BUSYBOX, "command": ["true"]}},
                ],
            },
        }

    def one_step(self, name: str) -> dict[str, Any]:
        wf = self._wf(name, [])
        wf["spec"]["entrypoint"] = "true"
        wf["spec"]["templates"] = wf["spec"]["templates"][1:]
        return wf

    def chain(self, name: str, n: int) -> dict[str, Any]:
        tasks = [{"name": "s0", "template": "true"}]
        tasks += [
            {"name": f"s{i}", "template": "true", "depends": f"s{i - 1}"} for i in range(1, n)
        ]
        return self._wf(name, tasks)

    def fanout(self, name: str, n: int) -> dict[str, Any]:
        tasks = [{"name": f"f{i}", "template": "true"} for i in range(n)]
        tasks.append(
            {"name": "join", "template": "true", "depends": " && ".join(f"f{i}" for i in range(n))}
        )
        return self._wf(name, tasks)

    def step_of(self, pod: dict[str, Any]) -> tuple[str, str] | None:
        meta = pod["metadata"]
        wf = (meta.get("labels") or {}).get("workflows.argoproj.io/workflow")
        node = (meta.get("annotations") or {}).get("workflows.argoproj.io/node-name")
        if wf is None or node is None:
            return None
        return wf, node.rsplit(".", 1)[-1] if "." in node else "only"
