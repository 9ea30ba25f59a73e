"""The chart's UI server as the chart deploys it (`ui.enabled`): the operator image (image/build,
imported into the node's containerd) runs `python -m planops.uiserver` under the chart's own UI
ServiceAccount and ClusterRole, in a namespace enforcing the `restricted` Pod Security Standard,
and serves a user's token as that user. Only the chart's ui.yaml and plan-author role are applied
(rendered by the real helm), in namespaces of this test's own: no cluster-wide policy or CRD is
taken over, so it runs beside other sessions."""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import Kube
from tests.e2e.conftest import plan
from tests.e2e.test_chart_install import _can_i, operator_image
from tests.e2e.test_uiserver_browser import chart_ui

pytestmark = [pytest.mark.cluster, pytest.mark.node, pytest.mark.uiserver, pytest.mark.helm]
__all__ = ["operator_image"]  # the image fixture of test_chart_install
RELEASE = f"uic-{uuid.uuid4().hex[:6]}"


def _get(address: str, path: str, token: str | None) -> tuple[int, Any]:
    request = urllib.request.Request(f"http://{address}:8443{path}")
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as r:
            body = r.read()
            return r.status, json.loads(body) if path.startswith("/namespaces") else body
    except urllib.error.HTTPError as e:
        return e.code, None


@pytest.fixture(scope="module")
def deployed(kube: Kube, helm: str, crds: None, operator_image: str) -> Iterator[str]:
    """The chart's UI objects applied in a fresh `restricted` namespace, rolled out."""
    ns = f"{RELEASE}-sys"
    kube.run("create", "namespace", ns)
    kube.run("label", "namespace", ns, "pod-security.kubernetes.io/enforce=restricted")
    text = "\n---\n".join(json.dumps(d) for d in chart_ui(helm, RELEASE, ns))
    try:
        kube.run("apply", "-f", "-", input=text)
        kube.run(
            "rollout",
            "status",
            f"deployment/{RELEASE}-planops-ui",
            "-n",
            ns,
            "--timeout=240s",
            timeout=260,
        )
        yield ns
    finally:
        kube.run("delete", "-f", "-", "--ignore-not-found", "--wait=false", input=text, check=False)
        kube.run("delete", "namespace", ns, "--wait=false", check=False)


def test_the_charts_ui_server_runs_restricted_and_serves_a_user_as_themselves(
    kube: Kube, deployed: str
):
    ns, name = deployed, f"{RELEASE}-planops-ui"
    deadline = time.monotonic() + 60
    while True:
        slices = kube.get("endpointslices", "-n", ns, "-l", f"kubernetes.io/service-name={name}")
        addresses = [
            a for s in slices["items"] for e in s["endpoints"] or [] for a in e["addresses"]
        ]
        if addresses or time.monotonic() > deadline:
            break
        time.sleep(1)
    (address,) = addresses
    assert _get(address, "/healthz", None)[0] == 200
    ui = f"system:serviceaccount:{ns}:{name}"
    assert _can_i(kube, ui, "create", "tokenreviews.authentication.k8s.io", None)
    assert _can_i(kube, ui, "impersonate", "users", None)
    for verb, resource in [("list", "plans.planops.dev"), ("get", "secrets"), ("list", "pods")]:
        assert not _can_i(kube, ui, verb, resource, ns), (verb, resource)
    work = f"{RELEASE}-work"
    kube.run("create", "namespace", work)
    try:
        kube.run("create", "serviceaccount", "reader", "-n", work)
        kube.run(
            "create",
            "rolebinding",
            "reader-plan-author",
            f"--clusterrole={RELEASE}-planops-plan-author",
            f"--serviceaccount={work}:reader",
            "-n",
            work,
        )
        kube.apply(plan("seen", {"id": "a", "shell": "true"}), "-n", work)
        token = kube.run("create", "token", "reader", "-n", work, "--duration=10m").stdout.strip()
        status, body = _get(address, f"/namespaces/{work}/api/plans", token)
        assert status == 200 and [p["name"] for p in body["items"]] == ["seen"], body
        assert _get(address, f"/namespaces/{work}/api/plans", None)[0] == 401
        assert _get(address, f"/namespaces/{ns}/api/plans", token)[0] == 403
    finally:
        kube.run("delete", "namespace", work, "--wait=false", check=False)
