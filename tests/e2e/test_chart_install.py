"""The Helm chart installed on the test cluster: the operator's image (image/build, imported into
the node's containerd) runs under the chart's ServiceAccount and RBAC in a namespace that enforces
the `restricted` Pod Security Standard, runs a Plan, and can do what it must and nothing more."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import ROOT, Kube
from tests.e2e.conftest import capsule, operator_image_on_node, plan, steps, wait_plan

# pytest -n: one worker runs it, with the other cluster-wide tests (tests/xdist_groups.py)
pytestmark = [pytest.mark.cluster, pytest.mark.node]
CHART = ROOT / "charts" / "planops"


def _helm(helm: str, kubeconfig: str, *args: str, timeout: float = 300) -> str:
    done = subprocess.run(
        [helm, "--kubeconfig", kubeconfig, *args], capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"helm {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def operator_image(kubeconfig: str, node: dict[str, Any]) -> str:
    """image/build, imported into the node's containerd (cached base: seconds; cold: minutes)."""
    return operator_image_on_node(kubeconfig)


class Release:
    def __init__(self, name: str, system: str, work: str) -> None:
        self.name, self.system, self.work = name, system, work

    @property
    def sa(self) -> str:
        return f"system:serviceaccount:{self.system}:{self.name}-planops"


@pytest.fixture(scope="module")
def release(
    kube: Kube, kubeconfig: str, helm: str, operator_image: str, busybox: str
) -> Iterator[Release]:
    tag = uuid.uuid4().hex[:6]
    rel = Release(f"po{tag}", f"chart-sys-{tag}", f"chart-work-{tag}")
    for ns in (rel.system, rel.work):
        kube.run("create", "namespace", ns)
        kube.run("label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted")
    try:
        _helm(
            helm,
            kubeconfig,
            "install",
            rel.name,
            str(CHART),
            "-n",
            rel.system,
            "--set",
            f"watchNamespaces={{{rel.work}}}",
            "--set",
            "resyncSeconds=3,jsonLogs=false",
            "--take-ownership",  # the CRDs the session's operator tests applied with kubectl
            "--wait",
            "--timeout",
            "5m",
        )
        deadline = time.monotonic() + 60  # the chart installed the CRDs: discovery catches up
        while kube.run(
            "apply", "-f", "-", "-n", rel.work, input=json.dumps(capsule(busybox)), check=False
        ).returncode:
            assert time.monotonic() < deadline, "the Capsule kind never became available"
            time.sleep(0.5)
        yield rel
    finally:
        uninstall(kube, helm, rel)


def uninstall(kube: Kube, helm: str, rel: Release) -> None:
    """The release uninstalled and its namespaces deleted (best effort: a fixture's teardown)."""
    subprocess.run(
        [helm, "--kubeconfig", kube.kubeconfig, "uninstall", rel.name, "-n", rel.system, "--wait"],
        capture_output=True,
        timeout=300,
    )
    for ns in (rel.system, rel.work):
        kube.run("delete", "namespace", ns, "--wait=false", check=False)


REPLICAS = 2  # the chart's default


def _pods(kube: Kube, rel: Release, timeout: float = 120) -> list[dict[str, Any]]:
    """The operator's pods (after an upgrade, old ones may still be terminating)."""
    selector = f"app.kubernetes.io/instance={rel.name}"
    deadline = time.monotonic() + timeout
    while True:
        pods = [
            p
            for p in kube.get("pods", "-n", rel.system, "-l", selector)["items"]
            if not p["metadata"].get("deletionTimestamp")
        ]
        if len(pods) == REPLICAS:
            return pods
        assert time.monotonic() < deadline, [p["metadata"]["name"] for p in pods]
        time.sleep(1)


def _holder(kube: Kube, rel: Release) -> str | None:
    got = kube.run(
        "get", "lease", f"{rel.name}-planops", "-n", rel.system, "-o", "json", check=False
    )
    return json.loads(got.stdout)["spec"].get("holderIdentity") if got.returncode == 0 else None


def _leader(kube: Kube, rel: Release, timeout: float = 60) -> dict[str, Any]:
    """The pod holding the Lease (its identity is its pod name)."""
    deadline = time.monotonic() + timeout
    while True:
        by_name = {p["metadata"]["name"]: p for p in _pods(kube, rel)}
        holder = _holder(kube, rel)
        if holder in by_name:
            return by_name[holder]
        assert time.monotonic() < deadline, f"no pod holds the Lease ({holder})"
        time.sleep(0.5)


def test_the_installed_operator_runs_a_plan_under_the_charts_account(kube: Kube, release: Release):
    pods = _pods(kube, release)
    for p in pods:
        assert p["spec"]["serviceAccountName"] == f"{release.name}-planops"
        assert p["status"]["phase"] == "Running"
    pod = _leader(kube, release)
    kube.apply(
        plan(
            "in-cluster",
            {"id": "hello", "shell": "echo hello from the chart"},
            {"id": "bye", "shell": "echo {{hello.output}}", "dependsOn": ["hello"]},
        ),
        "-n",
        release.work,
    )
    obj = wait_plan(kube, release.work, "in-cluster", timeout=180)
    assert obj["status"]["phase"] == "Succeeded", json.dumps(obj["status"])[:2000]
    assert steps(obj)["bye"]["output"] == "hello from the chart"
    logs = kube.run("logs", "-n", release.system, pod["metadata"]["name"]).stdout
    assert "forbidden" not in logs.lower(), logs[-3000:]


def _can_i(kube: Kube, who: str, verb: str, resource: str, ns: str | None) -> bool:
    """`kubectl auth can-i` (a subresource as resource/sub, e.g. pods/log)."""
    resource, _, sub = resource.partition("/")
    args = ["auth", "can-i", verb, resource, "--as", who]
    args += [f"--subresource={sub}"] if sub else []
    args += ["-n", ns] if ns else []
    return kube.run(*args, check=False).stdout.strip() == "yes"


def _can(kube: Kube, rel: Release, verb: str, resource: str, ns: str | None = None) -> bool:
    return _can_i(kube, rel.sa, verb, resource, ns)


def test_the_operator_rbac_is_least_privilege(kube: Kube, release: Release):
    work = release.work
    for verb, resource in [
        ("create", "jobs.batch"),
        ("delete", "jobs.batch"),
        ("get", "pods/log"),
        ("list", "pods"),
        ("patch", "plans.planops.dev/status"),
        ("create", "plans.planops.dev"),
        ("get", "capsules.planops.dev"),
        ("create", "events"),
    ]:
        assert _can(kube, release, verb, resource, work), (verb, resource)
    for verb, resource in [
        ("get", "secrets"),
        ("list", "secrets"),
        ("get", "configmaps"),
        ("create", "pods"),
        ("create", "pods/exec"),
        ("patch", "capsules.planops.dev"),
        ("patch", "plans.planops.dev"),
        ("update", "plans.planops.dev"),
        ("create", "rolebindings.rbac.authorization.k8s.io"),
        ("create", "serviceaccounts/token"),
    ]:
        assert not _can(kube, release, verb, resource, work), (verb, resource)
    # nothing in a namespace it does not watch, not even reading Plans
    assert not _can(kube, release, "list", "plans.planops.dev", "default")
    assert not _can(kube, release, "create", "jobs.batch", "default")
    assert _can(kube, release, "list", "namespaces")  # ClusterScheduledPlans select by label
    # may an author still use a Capsule? (before a scheduled run or a re-run)
    assert _can(kube, release, "create", "subjectaccessreviews.authorization.k8s.io")
    assert not _can(kube, release, "delete", "namespaces")


def test_user_roles_are_aggregated_into_edit_and_view(kube: Kube, release: Release):
    work = release.work
    kube.run("create", "rolebinding", "dev-edit", "--clusterrole=edit", "--user=dev", "-n", work)
    kube.run("create", "rolebinding", "ro-view", "--clusterrole=view", "--user=ro", "-n", work)
    deadline = time.monotonic() + 30  # aggregation is done by the controller manager
    while not _user_can(kube, "dev", "create", "plans.planops.dev", work):
        assert time.monotonic() < deadline, "edit never got Plans"
        time.sleep(0.5)
    assert not _user_can(kube, "dev", "patch", "capsules.planops.dev", work)
    assert not _user_can(kube, "dev", "patch", "plans.planops.dev/status", work)
    assert _user_can(kube, "ro", "get", "plans.planops.dev", work)
    assert not _user_can(kube, "ro", "create", "plans.planops.dev", work)


def _user_can(kube: Kube, user: str, verb: str, resource: str, ns: str) -> bool:
    return _can_i(kube, user, verb, resource, ns)


def test_metrics_are_served_through_the_service(kube: Kube, release: Release):
    slices = kube.get(
        "endpointslices",
        "-n",
        release.system,
        "-l",
        f"kubernetes.io/service-name={release.name}-planops-metrics",
    )["items"]
    addresses = [a for s in slices for e in s["endpoints"] for a in e["addresses"]]
    assert len(addresses) == REPLICAS
    port = slices[0]["ports"][0]["port"]
    leading = []
    for address in addresses:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://{address}:{port}/metrics", timeout=5) as r:
                    text = r.read().decode()
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(1)
        assert "planops_plans_total" in text and "planops_steps_running" in text
        leading += [line for line in text.splitlines() if line.startswith("planops_leader ")]
    assert sorted(leading) == ["planops_leader 0.0", "planops_leader 1.0"]  # one acts


def test_the_standby_takes_over_when_the_leaders_pod_is_deleted(kube: Kube, release: Release):
    old = _leader(kube, release)["metadata"]["name"]
    gone_at = time.monotonic()
    kube.run("delete", "pod", old, "-n", release.system, "--wait=false")
    deadline = time.monotonic() + 60
    while (holder := _holder(kube, release)) in (old, None):
        assert time.monotonic() < deadline, "the standby never took the Lease"
        time.sleep(0.2)
    print(
        f"in-cluster failover: the Lease went from {old} to {holder} in "
        f"{time.monotonic() - gone_at:.1f}s (a deleted pod releases it on SIGTERM)"
    )
    kube.apply(plan("after-failover", {"id": "a", "shell": "echo still here"}), "-n", release.work)
    obj = wait_plan(kube, release.work, "after-failover", timeout=120)
    assert steps(obj)["a"]["output"] == "still here"


def _apply(kube: Kube, ns: str, manifest: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return kube.run("apply", "-f", "-", "-n", ns, input=json.dumps(manifest), check=False)


def test_the_webhook_refuses_a_plan_that_cannot_run_with_every_reason(kube: Kube, release: Release):
    bad = plan(
        "refused",
        {"id": "a", "tool": "no-such-tool", "dependsOn": ["c"]},
        {"id": "b", "shell": "rm -rf /"},
        {"id": "c", "shell": "echo", "dependsOn": ["a"]},
    )
    deadline = time.monotonic() + 60  # the webhook's endpoint is published shortly after Ready
    while (done := _apply(kube, release.work, bad)).returncode == 0:
        kube.run("delete", "plan", "refused", "-n", release.work, "--wait=true")
        assert time.monotonic() < deadline, "the webhook never refused"
        time.sleep(2)
    assert "denied the request" in done.stderr, done.stderr
    for code in ("unknown-tool", "shell-not-allowed", "cycle"):
        assert f"[{code}]" in done.stderr, done.stderr
    assert kube.run("get", "plan", "refused", "-n", release.work, check=False).returncode != 0
    # a Plan whose Capsule does not exist yet is admitted (GitOps applies in any order)
    later = plan("later", {"id": "a", "shell": "echo"}, capsule="not-yet")
    assert _apply(kube, release.work, later).returncode == 0
    # an annotation on a stored plan is never refused (rerun, cancel, answers)
    done = kube.run("annotate", "plan", "later", "-n", release.work, "planops.dev/rerun=x")
    assert done.returncode == 0
    # ScheduledPlans too: a schedule that cannot be used, a template the validator refuses
    nightly = {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "ScheduledPlan",
        "metadata": {"name": "nightly"},
        "spec": {"schedule": "61 * * * *", "planTemplate": {"spec": bad["spec"]}},
    }
    done = _apply(kube, release.work, nightly)
    assert done.returncode != 0 and "denied the request" in done.stderr, done.stderr
    assert "spec.schedule" in done.stderr and "[cycle]" in done.stderr, done.stderr


def test_upgrade_rolls_new_flags_and_uninstall_keeps_crds_and_plans(
    kube: Kube, kubeconfig: str, helm: str, release: Release
):
    _helm(
        helm,
        kubeconfig,
        "upgrade",
        release.name,
        str(CHART),
        "-n",
        release.system,
        "--reuse-values",
        "--set",
        "policy.maxMemory=128Mi",
        "--wait",
        "--timeout",
        "5m",
    )
    deadline = time.monotonic() + 120
    while True:
        pods = _pods(kube, release)
        rolled = all(
            "--max-memory=128Mi" in p["spec"]["containers"][0]["args"]
            and p["status"].get("phase") == "Running"
            and all(c.get("ready") for c in p["status"].get("containerStatuses", []))
            for p in pods
        )
        if rolled and _holder(kube, release) in {p["metadata"]["name"] for p in pods}:
            break
        assert time.monotonic() < deadline, [p["status"] for p in pods]
        time.sleep(1)
    # the new ceiling applies: the default 256Mi limit is above it (refused at apply by the
    # webhook, whose certificate survived the upgrade; or Invalid if it is not reachable yet)
    deadline = time.monotonic() + 60
    while True:
        done = _apply(kube, release.work, plan("too-big", {"id": "a", "shell": "true"}))
        if done.returncode != 0:
            assert "[limits]" in done.stderr, done.stderr
            break
        obj = wait_plan(kube, release.work, "too-big", timeout=120)
        if obj["status"]["phase"] == "Invalid":
            assert [e["code"] for e in obj["status"]["errors"]] == ["limits"]
            break
        kube.run("delete", "plan", "too-big", "-n", release.work)
        assert time.monotonic() < deadline, obj["status"]
    subprocess.run(
        [
            helm,
            "--kubeconfig",
            kubeconfig,
            "uninstall",
            release.name,
            "-n",
            release.system,
            "--wait",
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    kube.run("get", "crd", "plans.planops.dev")  # kept
    assert kube.get("plan", "in-cluster", "-n", release.work)["metadata"]["name"] == "in-cluster"
    webhooks = kube.get("validatingwebhookconfigurations")["items"]
    assert release.name + "-planops" not in {w["metadata"]["name"] for w in webhooks}
