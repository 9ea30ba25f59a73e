"""What the benches measure with, on the test cluster: who asks the API server how much (each
client its own identity, classified by a FlowSchema of its own, counted by the API server's
`apiserver_flowcontrol_dispatched_requests_total`), the operator started so that it is counted,
and a process's CPU and memory from /proc. Shared by bench/vs_peers.py and bench/scale.py.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.cluster.kwok import versions  # noqa: E402
from tests.conftest import KUBECTL, Kube  # noqa: E402
from tests.e2e.conftest import Operator, start_operator  # noqa: E402

__all__ = [
    "Cluster",
    "Watch",
    "ended",
    "pct",
    "proc_cpu_s",
    "proc_peak_rss_mib",
    "proc_rss_mib",
    "start_counted_operator",
    "versions",
]


class Cluster:
    """The test cluster the bench talks to: its directory (CA, ports) is the kubeconfig's."""

    def __init__(self, kubeconfig: str) -> None:
        self.kubeconfig = kubeconfig
        self.dir = Path(kubeconfig).resolve().parent
        self.kube = Kube(kubeconfig)
        ports = dict(
            line.split("=", 1)
            for line in (self.dir / "ports.env").read_text().split()
            if "=" in line
        )
        self.etcd = f"http://127.0.0.1:{ports['ETCD_PORT']}"
        self.server = json.loads(self.kube.run("config", "view", "--raw", "-o", "json").stdout)[
            "clusters"
        ][0]["cluster"]["server"]
        # what identity() and classify() made cluster-wide, for remove_made()
        self.made: list[tuple[str, str]] = []

    def identity(self, user: str, namespace: str = "default") -> str:
        """A kubeconfig for a client certificate of `user` (bound to cluster-admin): one
        identity per client, so the API server's metrics tell the clients apart."""
        pki, out = self.dir / "pki", self.dir / f"bench-{user}.kubeconfig"
        key, crt = pki / f"bench-{user}.key", pki / f"bench-{user}.crt"
        if not crt.exists():
            subprocess.run(
                ["openssl", "genrsa", "-out", str(key), "2048"], check=True, capture_output=True
            )
            csr = subprocess.run(
                ["openssl", "req", "-new", "-key", str(key), "-subj", f"/CN={user}"],
                check=True,
                capture_output=True,
            ).stdout
            subprocess.run(
                [
                    "openssl",
                    "x509",
                    "-req",
                    "-CA",
                    str(pki / "ca.crt"),
                    "-CAkey",
                    str(pki / "ca.key"),
                    "-CAcreateserial",
                    "-days",
                    "2",
                    "-out",
                    str(crt),
                ],
                input=csr,
                check=True,
                capture_output=True,
            )
        b64 = lambda p: base64.b64encode(p.read_bytes()).decode()  # noqa: E731
        out.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "current-context": "bench",
                    "clusters": [
                        {
                            "name": "bench",
                            "cluster": {
                                "server": self.server,
                                "certificate-authority-data": b64(pki / "ca.crt"),
                            },
                        }
                    ],
                    "users": [
                        {
                            "name": user,
                            "user": {
                                "client-certificate-data": b64(crt),
                                "client-key-data": b64(key),
                            },
                        }
                    ],
                    "contexts": [
                        {
                            "name": "bench",
                            "context": {"cluster": "bench", "user": user, "namespace": namespace},
                        }
                    ],
                }
            )
        )
        self.kube.apply(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": f"bench-{user}"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "cluster-admin",
                },
                "subjects": [
                    {"kind": "User", "name": user, "apiGroup": "rbac.authorization.k8s.io"}
                ],
            }
        )
        self._made("clusterrolebinding", f"bench-{user}")
        return str(out)

    def _made(self, kind: str, name: str) -> None:
        if (kind, name) not in self.made:
            self.made.append((kind, name))

    def remove_made(self) -> None:
        """Deletes what identity() and classify() made cluster-wide (a shared cluster keeps no
        trace of a bench): FlowSchemas before their priority level."""
        order = ("flowschema", "prioritylevelconfiguration", "clusterrolebinding")
        for kind in order:
            names = [n for k, n in self.made if k == kind]
            if names:
                self.kube.run("delete", kind, *names, "--ignore-not-found", check=False)
        self.made.clear()

    def classify(self, name: str, subjects: list[dict[str, Any]]) -> None:
        """A FlowSchema (and a priority level with room enough to never queue) for `subjects`:
        the API server then counts their requests under flow_schema=`name`."""
        self.kube.apply(
            {
                "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
                "kind": "PriorityLevelConfiguration",
                "metadata": {"name": "bench"},
                "spec": {
                    "type": "Limited",
                    "limited": {
                        "nominalConcurrencyShares": 100,
                        "limitResponse": {"type": "Reject"},
                    },
                },
            }
        )
        self.kube.apply(
            {
                "apiVersion": "flowcontrol.apiserver.k8s.io/v1",
                "kind": "FlowSchema",
                "metadata": {"name": name},
                "spec": {
                    "matchingPrecedence": 200,
                    "priorityLevelConfiguration": {"name": "bench"},
                    "rules": [
                        {
                            "subjects": subjects,
                            "resourceRules": [
                                {
                                    "verbs": ["*"],
                                    "apiGroups": ["*"],
                                    "resources": ["*"],
                                    "clusterScope": True,
                                    "namespaces": ["*"],
                                }
                            ],
                            "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}],
                        }
                    ],
                },
            }
        )
        self._made("prioritylevelconfiguration", "bench")
        self._made("flowschema", name)

    def requests(self) -> dict[str, float]:
        """Requests dispatched so far, by FlowSchema (the API server's own counter)."""
        text = self.kube.run("get", "--raw", "/metrics").stdout
        out: dict[str, float] = {}
        for line in text.splitlines():
            if line.startswith("apiserver_flowcontrol_dispatched_requests_total{"):
                labels, value = line.rsplit(" ", 1)
                fs = labels.split('flow_schema="', 1)[1].split('"', 1)[0]
                out[fs] = out.get(fs, 0.0) + float(value)
        return out


def start_counted_operator(
    cluster: Cluster, namespaces: list[str], workers: int, *extra: str
) -> tuple[Operator, Path]:
    """The operator of this checkout as the chart runs it (its `workers`, resync every 60 s), as
    the client `bench-planops` in a FlowSchema of its own; returns it and its log file."""
    cluster.kube.run("apply", "-f", str(ROOT / "crds"))
    kc = cluster.identity("bench-planops")
    cluster.classify("bench-planops", [{"kind": "User", "user": {"name": "bench-planops"}}])
    log = Path(tempfile.gettempdir()) / f"bench-planops-{uuid.uuid4().hex[:6]}.log"
    op = start_operator(
        kc, namespaces, log, "--workers", str(workers), "--resync-seconds", "60", *extra
    )
    return op, log


def proc_cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def proc_peak_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def proc_rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def ended(pod: dict[str, Any]) -> bool:
    """The pod's work has ended: its phase is terminal, or every container of it (init
    containers aside) is reported terminated."""
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return True
    containers = status.get("containerStatuses") or []
    return bool(containers) and all("terminated" in (c.get("state") or {}) for c in containers)


def pct(values: list[float], q: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


def watch(kubeconfig: str, resource: str, namespace: str, *output: str) -> subprocess.Popen[str]:
    """`kubectl get RESOURCE --watch` in one namespace, one event at a time on its stdout."""
    return subprocess.Popen(
        [
            str(KUBECTL),
            "--kubeconfig",
            kubeconfig,
            "get",
            resource,
            "-n",
            namespace,
            "--watch",
            "--output-watch-events",
            "-o",
            *output,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )


class Watch:
    """`kubectl get --watch` of one resource in one namespace; `on(seen_at, type, obj)` per event
    (monotonic time taken as the line arrives: both tools are observed the same way)."""

    def __init__(
        self,
        kubeconfig: str,
        resource: str,
        namespace: str,
        on: Callable[[float, str, dict[str, Any]], None],
    ) -> None:
        self.proc = watch(kubeconfig, resource, namespace, "json")
        self.thread = threading.Thread(target=self._read, args=(on,), daemon=True)
        self.thread.start()

    def _read(self, on: Callable[[float, str, dict[str, Any]], None]) -> None:
        assert self.proc.stdout is not None
        buf = ""
        for line in self.proc.stdout:
            now = time.monotonic()
            buf += line
            try:
                ev = json.loads(buf)
            except json.JSONDecodeError:
                continue  # a pretty-printed event spans lines
            buf = ""
            on(now, ev["type"], ev["object"])

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
