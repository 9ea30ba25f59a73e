"""The chart's trigger receiver installed on the test cluster (triggers.enabled), from the
operator's image (image/build): its Deployment becomes available in a `restricted` namespace,
answers through its Service, and its ServiceAccount holds exactly the receiver's rights
(docs/security.md, "The trigger receiver").

A release of its own, without the CRDs (the session's `crds` fixture applied them): the CRDs'
field owners on a shared cluster are whoever applied them last, and this test is about the
receiver, not the CRDs (tests/e2e/test_chart_install.py installs them).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.conftest import Kube
from tests.e2e.test_chart_install import (  # noqa: F401 (operator_image: a fixture)
    CHART,
    Release,
    _can_i,
    _helm,
    operator_image,
    uninstall,
)

pytestmark = [pytest.mark.cluster, pytest.mark.node, pytest.mark.triggers]


@pytest.fixture(scope="module")
def release(
    kube: Kube,
    kubeconfig: str,
    helm: str,
    operator_image: str,  # noqa: F811 (the fixture)
    crds: None,
) -> Iterator[Release]:
    tag = uuid.uuid4().hex[:6]
    rel = Release(f"tr{tag}", f"trig-sys-{tag}", f"trig-work-{tag}")
    for ns in (rel.system, rel.work):
        kube.run("create", "namespace", ns)
        kube.run("label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted")
    values = [
        f"watchNamespaces={{{rel.work}}}",
        "crds.install=false,webhook.enabled=false,replicas=1",
        "triggers.enabled=true,triggers.replicas=1",
    ]
    try:
        _helm(
            helm, kubeconfig, "install", rel.name, str(CHART), "-n", rel.system,
            *(a for v in values for a in ("--set", v)), "--wait", "--timeout", "5m",
        )  # fmt: skip
        yield rel
    finally:
        uninstall(kube, helm, rel)


def test_the_trigger_receiver_runs_and_holds_only_its_rights(kube: Kube, release: Release):
    name = f"{release.name}-planops-trigger-receiver"
    kube.run("rollout", "status", f"deployment/{name}", "-n", release.system, "--timeout=300s")
    proxy = f"/api/v1/namespaces/{release.system}/services/{name}:http/proxy"
    assert kube.run("get", "--raw", f"{proxy}/healthz").stdout.strip() == "ok"
    # a delivery to a trigger that does not exist: refused, nothing read for it
    answer = kube.run(
        "create", "--raw", f"{proxy}/hooks/{release.work}/none", "-f", "-", input="{}",
        check=False,
    )  # fmt: skip
    assert "NotFound" in answer.stdout + answer.stderr
    sa = f"system:serviceaccount:{release.system}:{name}"
    for verb, resource in [
        ("get", "plantriggers.planops.dev"),
        ("patch", "plantriggers.planops.dev/status"),
        ("create", "events"),
        ("impersonate", "users"),
        ("impersonate", "groups"),
    ]:
        assert _can_i(kube, sa, verb, resource, release.work), (verb, resource)
    for verb, resource in [
        ("get", "secrets"),
        ("create", "plans.planops.dev"),
        ("list", "plantriggers.planops.dev"),
        ("patch", "plantriggers.planops.dev"),
        ("get", "capsules.planops.dev"),
        ("create", "pods"),
    ]:
        assert not _can_i(kube, sa, verb, resource, release.work), (verb, resource)
