"""End-to-end fixtures: the CRDs, a running operator, namespaces with a Capsule.

The operator runs as a real subprocess (`planops-operator`) against the test cluster, watching
namespaces named `NS_PREFIX*`: `e2e-` and a tag of this test session, so two sessions on one
cluster (a developer's and a CI run, or two worktrees) never reconcile each other's plans (tests
that need an operator of their own, like the restart test, use other names). Its log is printed
when a test fails, to see why.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ROOT, Kube, cluster_lock

OPERATOR = [sys.executable, "-m", "planops.main"]
#: 3 s: a test waits at most that for what no event announces. Every resync lists each active
#: run's Jobs and pods, so a measurement of a big plan runs the chart's 60 s
#: (PLANOPS_E2E_RESYNC_SECONDS=60; docs/performance.md, "At scale")
RESYNC_SECONDS = os.environ.get("PLANOPS_E2E_RESYNC_SECONDS", "3")
#: the namespaces of this test session's operator (see the module's docstring); a pytest-xdist
#: worker is a session of its own (a process: this module is imported in each)
NS_PREFIX = f"e2e-{uuid.uuid4().hex[:6]}-"


def free_port() -> int:
    """A free loopback port below the kernel's ephemeral range: a port the kernel handed out
    (bind to 0) may be handed out again to another process's outgoing connection before the
    operator binds it, which made a restarted operator fail with "Address already in use"."""
    low = 32768
    with contextlib.suppress(OSError, ValueError):
        low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    for _ in range(100):
        port = random.randrange(max(1024, low - 12000), low)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Operator:
    proc: subprocess.Popen[bytes]
    log: Path
    metrics_port: int
    health_port: int

    def logs(self) -> str:
        return self.log.read_text(errors="replace")

    def metrics(self) -> str:
        with urllib.request.urlopen(
            f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5
        ) as r:
            return str(r.read().decode())

    def sample(self, name: str, **labels: str) -> float | None:
        """The value of the series `name` whose labels include `labels` (their sum when several
        do: a label left out is summed over); None when none does."""
        found = [
            s.value
            for family in text_string_to_metric_families(self.metrics())
            for s in family.samples
            if s.name == name and labels.items() <= s.labels.items()
        ]
        return sum(found) if found else None

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()


def start_healthy(
    args: list[str], log: Path, health: str, what: str, timeout: float = 60
) -> subprocess.Popen[bytes]:
    """`args` started in a session of its own (its output appended to `log`), returned once
    `health` (a URL: its /healthz) answers; AssertionError with the log's tail when it exits or
    does not answer within `timeout` (then it is killed)."""
    proc = subprocess.Popen(
        args, stdout=log.open("ab"), stderr=subprocess.STDOUT, start_new_session=True, cwd=ROOT
    )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"{what} exited ({proc.returncode}):\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(health, timeout=2):
                return proc
        except OSError:
            time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    raise AssertionError(f"{what} did not become healthy:\n{log.read_text()[-3000:]}")


def start_operator(kubeconfig: str, namespaces: list[str], log: Path, *extra: str) -> Operator:
    metrics_port, health_port = free_port(), free_port()
    while health_port == metrics_port:
        health_port = free_port()
    args = [
        *OPERATOR,
        "--kubeconfig",
        kubeconfig,
        "--metrics-port",
        str(metrics_port),
        "--health-port",
        str(health_port),
        "--resync-seconds",
        RESYNC_SECONDS,
        *extra,
    ]
    for ns in namespaces:
        args += ["--namespace", ns]
    health = f"http://127.0.0.1:{health_port}/healthz"
    proc = start_healthy(args, log, health, "the operator")
    return Operator(proc, log, metrics_port, health_port)


def operator_image_on_node(kubeconfig: str, name: str | None = None) -> str:
    """image/build, imported into the node's containerd (cached base: seconds; cold: minutes),
    as `name` (default: the release tag); its name."""
    sock = Path(kubeconfig).parent / "run" / "containerd.sock"
    env = {**os.environ, "PLANOPS_IMAGE_NAME": name} if name else None
    done = subprocess.run(
        [str(ROOT / "image" / "build"), "--import", str(sock)],
        capture_output=True,
        text=True,
        timeout=1200,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return name or done.stdout.strip()


@pytest.fixture(scope="session")
def crds(kube: Kube) -> None:
    with cluster_lock(kube.kubeconfig, "crds"):  # every xdist worker applies them at its start
        kube.run("apply", "-f", str(ROOT / "crds"))
    kube.run(
        "wait",
        "--for=condition=Established",
        "crd/plans.planops.dev",
        "crd/capsules.planops.dev",
        "crd/planreports.planops.dev",
        "--timeout=60s",
    )
    deadline = time.monotonic() + 30  # discovery catches up with a new CRD shortly after
    while kube.run("get", "plans", "-A", check=False).returncode != 0:
        assert time.monotonic() < deadline, "the Plan resource never became available"
        time.sleep(0.5)


@pytest.fixture(scope="session")
def operator(
    kubeconfig: str, crds: None, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Operator]:
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    op = start_operator(kubeconfig, [NS_PREFIX + "*"], log)
    try:
        _sees_new_namespaces(Kube(kubeconfig), op)
        yield op
    finally:
        op.stop()


def _sees_new_namespaces(kube: Kube, op: Operator) -> None:
    """The operator reconciles a Plan in a namespace created just after it started.

    That is the window in which kopf's namespace discovery missed a new namespace for good
    (seen twice in this project's runs; planops.handlers.kopf_adapter corrects it, and
    test_namespace_discovery.py makes the window certain). This checks the running operator
    has the correction, before any test depends on it."""
    name = f"{NS_PREFIX}canary"
    kube.run("create", "namespace", name)
    try:
        kube.apply(plan("canary", {"id": "a", "shell": "true"}), "-n", name)  # no Capsule
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if (kube.get("plan", "canary", "-n", name).get("status") or {}).get("phase"):
                return
            time.sleep(0.3)
    finally:
        kube.run("delete", "namespace", name, "--wait=false", check=False)
    raise AssertionError(
        f"the operator never reconciled a Plan in new namespace {name}:\n{op.logs()[-3000:]}"
    )


@pytest.fixture
def ns(
    kube: Kube, operator: Operator, busybox: str, request: pytest.FixtureRequest
) -> Iterator[str]:
    """A namespace the session operator watches, holding the example Capsule `default`."""
    name = f"{NS_PREFIX}{uuid.uuid4().hex[:10]}"
    kube.run("create", "namespace", name)
    kube.apply(capsule(busybox), "-n", name)
    try:
        yield name
    finally:
        failed = request.node.rep_call.failed if hasattr(request.node, "rep_call") else False
        if failed:
            print(f"--- operator log (last 6000 chars) ---\n{operator.logs()[-6000:]}")
        if failed and os.environ.get("PLANOPS_KEEP_FAILED"):
            print(f"--- namespace {name} kept for inspection (PLANOPS_KEEP_FAILED) ---")
        else:
            kube.run("delete", "namespace", name, "--wait=false", check=False)


#: the image of the examples' Capsules
EXAMPLE_IMAGE = "busybox:1.36.1"


def capsule(busybox: str, name: str = "default", **spec: Any) -> dict[str, Any]:
    """The example Capsule (examples/capsule.yaml) with the node's busybox image (the example's
    is Docker Hub's, which the test node cannot pull), allowing every local/busybox tag."""
    doc = yaml.safe_load((ROOT / "examples" / "capsule.yaml").read_text())
    text = json.dumps(doc).replace(EXAMPLE_IMAGE, busybox)
    doc = json.loads(text)
    doc["spec"]["images"] = ["local/busybox:*"]
    doc["metadata"]["name"] = name
    doc["spec"]["tools"].append({"name": "nap", "image": busybox, "command": ["sleep", "2"]})
    # The tests script their steps' behaviour (exit codes, timing, files) with `sh -c`; a real
    # Capsule must not allow an interpreter (the example does not: docs/security.md).
    doc["spec"]["shell"]["allow"].append("sh")
    doc["spec"].update(spec)
    return doc  # type: ignore[no-any-return]


def plan(name: str, *steps: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": {"name": name},
        "spec": {"steps": list(steps), **spec},
    }


def wait_plan(
    kube: Kube,
    ns: str,
    name: str,
    phases: tuple[str, ...] = ("Succeeded", "Failed", "Invalid"),
    timeout: float = 120,
    until: Callable[[dict[str, Any]], bool] | None = None,
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    obj: dict[str, Any] = {}
    while time.monotonic() < deadline:
        obj = kube.get("plan", name, "-n", ns)
        status = obj.get("status") or {}
        if status.get("phase") in phases and (until is None or until(obj)):
            return obj
        time.sleep(0.3)
    raise AssertionError(
        f"plan {ns}/{name} not in {phases} after {timeout}s: "
        f"{json.dumps(obj.get('status'), indent=1)[:3000]}"
    )


def steps(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {s["stepId"]: s for s in obj["status"]["report"]["steps"]}


#: the bounds a Plan's status and each of its PlanReports stay under (reconciler/run/status.py,
#: reconciler/history/chunks.py), a chunk with room for the metadata the API server adds
STATUS_BOUND = 452 * 1024
CHUNK_BOUND = 512 * 1024 + 16 * 1024


def dense(obj: Any) -> int:
    return len(json.dumps(obj, separators=(",", ":")))


def report_records(kube: Kube, ns: str, name: str) -> list[dict[str, Any]]:
    """Every record of Plan `name`'s PlanReports in order, checking that the chunks continue
    one another and that each is under its bound."""
    found = sorted(
        kube.get("planreports", "-n", ns, "-l", f"planops.dev/plan={name}")["items"],
        key=lambda c: c["chunk"],
    )
    first = 0
    for c in found:
        where = c["metadata"]["name"]
        assert c["first"] == first and c["count"] == len(c["records"]), where
        assert dense(c) <= CHUNK_BOUND, where
        first += c["count"]
    return [r for c in found for r in c["records"]]


def events(kube: Kube, ns: str, name: str) -> list[str]:
    items = kube.get("events", "-n", ns, "--field-selector", f"involvedObject.name={name}")["items"]
    return [e["reason"] for e in sorted(items, key=lambda e: e.get("eventTime") or "")]


def cli(kubeconfig: str, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    """`kubectl-plan ARGS --kubeconfig KUBECONFIG` as a subprocess."""
    return subprocess.run(
        [sys.executable, "-m", "planops.cli.main", *args, "--kubeconfig", kubeconfig],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def namespace_policy(
    name: str, ns: str, rule: dict[str, Any], validation: dict[str, Any]
) -> list[dict[str, Any]]:
    """A ValidatingAdmissionPolicy of one rule and one validation, and its binding that denies
    in namespace `ns` only (a test's own: other sessions' namespaces are untouched)."""
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {"resourceRules": [rule]},
                "validations": [validation],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}
                },
            },
        },
    ]


def release_plans(kube: Kube, ns: str) -> None:
    """Every Plan of `ns` without its finalizers (the artifact finalizer of an operator with a
    repository, docs/artifacts.md): once that operator is stopped, the namespace's deletion
    would otherwise wait for them for ever."""
    found = kube.run("get", "plans", "-n", ns, "-o", "name", check=False).stdout.split()
    patch = json.dumps({"metadata": {"finalizers": None}})
    for name in found:
        kube.run("patch", name, "-n", ns, "--type=merge", "-p", patch, check=False)
