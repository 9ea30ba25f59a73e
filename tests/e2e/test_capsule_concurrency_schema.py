"""A Capsule's `concurrency.maxRunningPlans` as the real API server holds it: below 1 (or not a
number) refused by the CRD's schema, as `kubectl-plan validate` refuses it offline, and the
field explained by `kubectl explain`."""

from __future__ import annotations

import json
from typing import Any

import pytest

from planops.api.documents import parse_document
from tests.conftest import Kube

pytestmark = pytest.mark.cluster


def _capsule(limit: Any) -> dict[str, Any]:
    return {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Capsule",
        "metadata": {"name": "prod", "namespace": "default"},
        "spec": {"concurrency": {"maxRunningPlans": limit}},
    }


@pytest.mark.parametrize("limit", [0, -3, "1", 1, 10_000, 10_001])
def test_the_api_server_and_the_offline_reader_agree_on_max_running_plans(
    kube: Kube, crds: None, limit: Any
):
    doc = _capsule(limit)
    server = kube.run("apply", "--dry-run=server", "-f", "-", input=json.dumps(doc), check=False)
    _, problems = parse_document(doc)
    offline_ok = not problems
    assert (server.returncode == 0) == offline_ok, (server.stderr, problems)
    if not offline_ok:
        assert "maxRunningPlans" in server.stderr, server.stderr


def test_kubectl_explain_teaches_the_field(kube: Kube, crds: None):
    text = kube.run("explain", "capsules.spec.concurrency.maxRunningPlans").stdout
    assert "(1: one at a time, a mutex)" in text, text
    whole = kube.run("explain", "capsules.spec.concurrency").stdout
    assert "wait in phase Pending" in whole and "queue order" in whole, whole
