"""Fault injection on the real test cluster (marker `faults`): two operator replicas with leader
election, as the chart runs them, each reaching the API server through a relay the test can cut;
the cluster's own components are stopped and started with tests/cluster/restart.

These tests run after the e2e suite (tests/faults sorts after tests/e2e) because they stop the
cluster's components; each leaves the cluster whole again (tests/cluster/up restarts anything
still down).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import CLUSTER, Kube
from tests.e2e.conftest import (
    Operator,
    capsule,
    crds,  # noqa: F401 - the fixture, for these tests too
    start_operator,
)

WATCH = "f-*"


class Relay:
    """A TCP relay to the API server that can drop every connection and refuse new ones for a
    while: what a network partition does to one client, while the server runs on."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.lock = threading.Lock()
        self.conns: list[socket.socket] = []
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open = True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if not self.open:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self, seconds: float) -> None:
        """Drop every connection (RST) and refuse new ones for `seconds`."""
        self.open = False
        with self.lock:
            conns, self.conns = self.conns, []
        for s in conns:
            try:
                s.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
                )
                s.close()
            except OSError:
                pass
        time.sleep(seconds)
        self.open = True

    def close(self) -> None:
        self.open = False
        self.listener.close()


def relayed_kubeconfig(kubeconfig: str, port: int, path: Path) -> str:
    cfg = yaml.safe_load(Path(kubeconfig).read_text())
    for c in cfg["clusters"]:
        c["cluster"]["server"] = f"https://127.0.0.1:{port}"
    path.write_text(yaml.safe_dump(cfg))
    path.chmod(0o600)
    return str(path)


@dataclass
class Replica:
    name: str
    op: Operator
    relay: Relay


class Pair:
    """Two operator replicas electing a leader with a Lease, each behind its own relay."""

    def __init__(self, kube: Kube, kubeconfig: str, tmp: Path, lease_ns: str, *extra: str) -> None:
        self.kube, self.kubeconfig, self.tmp, self.lease_ns = kube, kubeconfig, tmp, lease_ns
        self.extra = extra  # more operator flags, for both replicas
        self.lease = f"planops-{uuid.uuid4().hex[:6]}"
        server = yaml.safe_load(Path(kubeconfig).read_text())["clusters"][0]["cluster"]["server"]
        host, port = server.removeprefix("https://").rsplit(":", 1)
        self.target = (host, int(port))
        self.replicas: dict[str, Replica] = {}
        for name in ("op-a", "op-b"):
            self.start(name)

    def start(self, name: str) -> Replica:
        relay = Relay(self.target)
        cfg = relayed_kubeconfig(self.kubeconfig, relay.port, self.tmp / f"{name}.kubeconfig")
        os.environ["POD_NAME"] = name  # the Lease identity (the chart sets it from the pod)
        try:
            op = start_operator(
                cfg,
                [WATCH],
                self.tmp / f"{name}.log",
                "--leader-elect",
                f"--leader-election-id={self.lease}",
                f"--leader-election-namespace={self.lease_ns}",
                *self.extra,
            )
        finally:
            del os.environ["POD_NAME"]
        self.replicas[name] = Replica(name, op, relay)
        return self.replicas[name]

    def holder(self) -> str | None:
        got = self.kube.run(
            "get", "lease", self.lease, "-n", self.lease_ns, "-o", "json", check=False
        )
        if got.returncode != 0:
            return None
        return json.loads(got.stdout)["spec"].get("holderIdentity") or None

    def leader(self, timeout: float = 60) -> Replica:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            holder = self.holder()
            if holder in self.replicas and self.replicas[holder].op.proc.poll() is None:
                return self.replicas[holder]
            time.sleep(0.2)
        raise AssertionError(f"no replica took the Lease {self.lease} in {timeout}s")

    def standby(self) -> Replica:
        lead = self.leader()
        return next(r for r in self.replicas.values() if r is not lead)

    def kill(self, replica: Replica) -> float:
        os.killpg(replica.op.proc.pid, signal.SIGKILL)
        replica.op.proc.wait()
        return time.time()

    def logs(self) -> str:
        return "\n".join(f"--- {r.name} ---\n{r.op.logs()[-5000:]}" for r in self.replicas.values())

    def stop(self) -> None:
        for r in self.replicas.values():
            r.op.stop()
            r.relay.close()


@pytest.fixture
def pair(
    kube: Kube, kubeconfig: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[Pair]:
    request.getfixturevalue("crds")
    lease_ns = f"lease-{uuid.uuid4().hex[:8]}"
    kube.run("create", "namespace", lease_ns)
    p = Pair(kube, kubeconfig, tmp_path, lease_ns)
    try:
        yield p
    finally:
        failed = request.node.rep_call.failed if hasattr(request.node, "rep_call") else True
        if failed:
            print(p.logs())
        p.stop()
        kube.run("delete", "namespace", lease_ns, "--wait=false", check=False)


@pytest.fixture
def fns(kube: Kube, busybox: str) -> Iterator[str]:
    """A namespace both replicas watch, holding the test Capsule `default`."""
    name = f"f-{uuid.uuid4().hex[:10]}"
    kube.run("create", "namespace", name)
    kube.apply(capsule(busybox), "-n", name)
    try:
        yield name
    finally:
        kube.run("delete", "namespace", name, "--wait=false", check=False)


class Cluster:
    """The test cluster's own components: tests/cluster/restart and up, on the cluster whose
    directory holds the session's kubeconfig."""

    def __init__(self, kubeconfig: str) -> None:
        self.env = {**os.environ, "PLANOPS_CLUSTER_DIR": str(Path(kubeconfig).parent)}

    def restart(self, component: str, *args: str) -> str:
        done = subprocess.run(
            [str(CLUSTER / "restart"), component, *args],
            env=self.env,
            capture_output=True,
            text=True,
        )
        assert done.returncode == 0, done.stderr
        return done.stderr

    def heal(self) -> None:
        """Whatever a test left down is started again (tests/cluster/up restarts it)."""
        done = subprocess.run(
            [str(CLUSTER / "up"), "--with-node"], env=self.env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr


@pytest.fixture
def cluster(kubeconfig: str) -> Iterator[Cluster]:
    c = Cluster(kubeconfig)
    try:
        yield c
    finally:
        c.heal()


def in_background(fn: Any, *args: Any) -> threading.Thread:
    t = threading.Thread(target=fn, args=args, daemon=True)
    t.start()
    return t


def jobs_per_attempt(kube: Kube, ns: str, plan: str) -> Counter[tuple[str, str]]:
    jobs = kube.get("jobs", "-n", ns, "-l", f"planops.dev/plan={plan}")["items"]
    return Counter(
        (
            j["metadata"].get("annotations", {}).get("planops.dev/step-id")
            or j["metadata"]["labels"]["planops.dev/step"],
            j["metadata"]["labels"]["planops.dev/attempt"],
        )
        for j in jobs
    )


class StandInNode:
    """A second Node that stays Ready (its Lease renewed from here) and takes no pods (tainted).

    With one node, losing it is losing every node, and the node lifecycle controller then assumes
    its own connectivity is at fault and evicts nothing ("master disruption mode"). A platform
    team's cluster has other nodes; this gives the test cluster one, as far as that controller
    is concerned."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube
        self.name = f"stand-in-{uuid.uuid4().hex[:6]}"
        self.stopped = threading.Event()

    def start(self) -> None:
        self.kube.apply(
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {"name": self.name, "labels": {"planops.dev/stand-in": "true"}},
                "spec": {
                    "taints": [
                        {"key": "planops.dev/stand-in", "value": "true", "effect": "NoSchedule"}
                    ]
                },
            }
        )
        self._status()
        self.kube.apply(
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": "kube-node-lease"},
                "spec": {"holderIdentity": self.name, "leaseDurationSeconds": 40},
            }
        )
        threading.Thread(target=self._renew, daemon=True).start()

    def _status(self) -> None:
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        ready = {
            "type": "Ready",
            "status": "True",
            "reason": "StandIn",
            "message": "a stand-in node of the fault tests",
            "lastHeartbeatTime": now,
            "lastTransitionTime": now,
        }
        self.kube.run(
            "patch",
            "node",
            self.name,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": {"conditions": [ready]}}),
            check=False,
        )

    def _renew(self) -> None:
        while not self.stopped.wait(4):
            now = time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())
            self.kube.run(
                "patch",
                "lease",
                self.name,
                "-n",
                "kube-node-lease",
                "--type=merge",
                "-p",
                json.dumps({"spec": {"renewTime": now}}),
                check=False,
            )
            self._status()

    def stop(self) -> None:
        self.stopped.set()
        self.kube.run("delete", "node", self.name, "--wait=false", check=False)
        self.kube.run("delete", "lease", self.name, "-n", "kube-node-lease", check=False)
