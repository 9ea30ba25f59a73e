"""The Kubernetes 1.36 API the chart's version tests assume (tests/unit/test_chart_versions.py)
is the one the test cluster serves, and the chart rendered with that cluster's own discovery (as
`helm install` and Argo CD render it) installs every admission policy as v1."""

from __future__ import annotations

import json

import pytest

from tests.conftest import Kube
from tests.unit.test_chart_versions import CHART, by_kind, render, served, unserved

pytestmark = [pytest.mark.cluster, pytest.mark.helm]


def discovery(kube: Kube) -> dict[str, set[str]]:
    """group/version -> the kinds the cluster serves there (subresources left out)."""
    found: dict[str, set[str]] = {}
    gvs = ["v1"] + [
        v["groupVersion"]
        for g in json.loads(kube.run("get", "--raw", "/apis").stdout)["groups"]
        for v in g["versions"]
    ]
    for gv in gvs:
        path = "/api/v1" if gv == "v1" else f"/apis/{gv}"
        resources = json.loads(kube.run("get", "--raw", path).stdout)["resources"]
        found[gv] = {r["kind"] for r in resources if "/" not in r["name"]}
    return found


def test_the_assumed_1_36_api_is_what_the_test_cluster_serves(kube: Kube, helm: str):
    real = discovery(kube)
    for gv, kinds in served(36).items():
        assert kinds <= real.get(gv, set()), (gv, kinds - real.get(gv, set()))
    version = json.loads(kube.run("version", "-o", "json").stdout)["serverVersion"]["gitVersion"]
    assert version.startswith("v1.36.")
    flags = ["--kube-version", version]
    for gv, kinds in real.items():
        flags += [
            "--api-versions",
            gv,
            *[a for k in kinds for a in ("--api-versions", f"{gv}/{k}")],
        ]
    docs = render(helm, CHART, *flags)
    assert unserved(docs, real) == []
    kinds = by_kind(docs)
    v1 = {"admissionregistration.k8s.io/v1"}
    assert kinds["ValidatingAdmissionPolicy"] == kinds["MutatingAdmissionPolicy"] == v1
