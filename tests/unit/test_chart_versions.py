"""The chart on every Kubernetes version it claims (Chart.yaml: kubeVersion >=1.29): rendered by
the real helm as `helm install` renders it against an API server of that version (its discovery:
every group/version and group/version/Kind it serves, passed as --api-versions), every object
is of a kind that server serves, and the admission policies come in the version it serves (v1,
a beta the admin turned on) or are left out, with NOTES.txt saying what is then lost.

SERVED_1_29 is what a kube-apiserver v1.29 serves with its default flags (`kubectl
api-resources`): ValidatingAdmissionPolicy is beta there (v1beta1) and off by default; v1 came
with 1.30, MutatingAdmissionPolicy v1 with 1.36 (v1beta1 in 1.34 and 1.35, off by default).
tests/e2e/test_chart_install.py checks the 1.36 list against the test cluster's discovery."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

CHART = Path(__file__).resolve().parents[2] / "charts" / "planops"
pytestmark = [pytest.mark.cluster, pytest.mark.helm]

ADMISSION = "admissionregistration.k8s.io"
#: group/version -> the kinds a default kube-apiserver v1.29 serves there
SERVED_1_29: dict[str, set[str]] = {
    "v1": {
        "Binding",
        "ComponentStatus",
        "ConfigMap",
        "Endpoints",
        "Event",
        "LimitRange",
        "Namespace",
        "Node",
        "PersistentVolume",
        "PersistentVolumeClaim",
        "Pod",
        "PodTemplate",
        "ReplicationController",
        "ResourceQuota",
        "Secret",
        "Service",
        "ServiceAccount",
    },
    f"{ADMISSION}/v1": {"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"},
    "apiextensions.k8s.io/v1": {"CustomResourceDefinition"},
    "apiregistration.k8s.io/v1": {"APIService"},
    "apps/v1": {"ControllerRevision", "DaemonSet", "Deployment", "ReplicaSet", "StatefulSet"},
    "authentication.k8s.io/v1": {"SelfSubjectReview", "TokenReview"},
    "authorization.k8s.io/v1": {
        "LocalSubjectAccessReview",
        "SelfSubjectAccessReview",
        "SelfSubjectRulesReview",
        "SubjectAccessReview",
    },
    "autoscaling/v1": {"HorizontalPodAutoscaler"},
    "autoscaling/v2": {"HorizontalPodAutoscaler"},
    "batch/v1": {"CronJob", "Job"},
    "certificates.k8s.io/v1": {"CertificateSigningRequest"},
    "coordination.k8s.io/v1": {"Lease"},
    "discovery.k8s.io/v1": {"EndpointSlice"},
    "events.k8s.io/v1": {"Event"},
    "flowcontrol.apiserver.k8s.io/v1": {"FlowSchema", "PriorityLevelConfiguration"},
    "flowcontrol.apiserver.k8s.io/v1beta3": {"FlowSchema", "PriorityLevelConfiguration"},
    "networking.k8s.io/v1": {"Ingress", "IngressClass", "NetworkPolicy"},
    "node.k8s.io/v1": {"RuntimeClass"},
    "policy/v1": {"PodDisruptionBudget"},
    "rbac.authorization.k8s.io/v1": {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"},
    "scheduling.k8s.io/v1": {"PriorityClass"},
    "storage.k8s.io/v1": {
        "CSIDriver",
        "CSINode",
        "CSIStorageCapacity",
        "StorageClass",
        "VolumeAttachment",
    },
}
VALIDATING = {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
MUTATING = {"MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"}


def served(minor: int, *, betas: frozenset[str] = frozenset()) -> dict[str, set[str]]:
    """What a kube-apiserver 1.`minor` serves (of the groups above): the policies in v1 from the
    release where they are GA, and the betas named (`validating`, `mutating`) where they exist
    and the admin turned them on."""
    out = {gv: set(kinds) for gv, kinds in SERVED_1_29.items()}
    if minor >= 30:
        out[f"{ADMISSION}/v1"] |= VALIDATING
    elif "validating" in betas:
        out[f"{ADMISSION}/v1beta1"] = set(VALIDATING)
    if minor >= 36:
        out[f"{ADMISSION}/v1"] |= MUTATING
    elif "mutating" in betas and minor >= 34:
        out.setdefault(f"{ADMISSION}/v1beta1", set()).update(MUTATING)
    if minor >= 32:
        del out["flowcontrol.apiserver.k8s.io/v1beta3"]  # removed in 1.32
    return out


def api_versions(found: dict[str, set[str]]) -> list[str]:
    """--api-versions as helm builds them from discovery: each group/version and each
    group/version/Kind (pkg/action GetVersionSet)."""
    flags = []
    for gv, kinds in sorted(found.items()):
        flags += ["--api-versions", gv]
        flags += [arg for k in sorted(kinds) for arg in ("--api-versions", f"{gv}/{k}")]
    return flags


def render(helm: str, chart: Path, *args: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [helm, "template", "po", str(chart), "--namespace", "planops-system", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A copy of the chart that also renders its NOTES.txt, as a ConfigMap (`helm template`
    prints manifests only, and `helm install --dry-run` takes no Kubernetes version)."""
    chart = tmp_path_factory.mktemp("chart") / "planops"
    shutil.copytree(CHART, chart)
    shutil.copy(chart / "templates" / "NOTES.txt", chart / "files" / "notes-probe.txt")
    (chart / "templates" / "notes-probe.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: notes-probe}\n"
        'data: {notes: {{ tpl (.Files.Get "files/notes-probe.txt") . | toJson }}}\n'
    )
    return chart


def install(helm: str, chart: Path, version: str, found: dict[str, set[str]] | None, *args: str):
    """The objects and the NOTES of an install on that version (`found`: its discovery; None:
    `helm template` without a cluster, --kube-version only)."""
    flags = ["--kube-version", version, *(api_versions(found) if found is not None else [])]
    docs = render(helm, chart, *flags, *args)
    (probe,) = [d for d in docs if d["metadata"]["name"] == "notes-probe"]
    return [d for d in docs if d is not probe], probe["data"]["notes"]


def by_kind(docs: list[dict[str, Any]]) -> dict[str, set[str]]:
    """kind -> the apiVersions it was rendered in."""
    out: dict[str, set[str]] = {}
    for d in docs:
        out.setdefault(d["kind"], set()).add(d["apiVersion"])
    return out


def unserved(docs: list[dict[str, Any]], found: dict[str, set[str]]) -> list[str]:
    return [
        f"{d['apiVersion']}/{d['kind']} {d['metadata']['name']}"
        for d in docs
        if d["kind"] not in found.get(d["apiVersion"], set())
    ]


def require_author(docs: list[dict[str, Any]]) -> bool:
    (dep,) = [d for d in docs if d["kind"] == "Deployment"]
    return "--require-author-record" in dep["spec"]["template"]["spec"]["containers"][0]["args"]


@pytest.mark.parametrize("minor", range(29, 37))
def test_every_object_is_of_a_kind_the_api_server_of_each_claimed_version_serves(
    helm: str, probed: Path, minor: int
):
    found = served(minor)
    docs, _ = install(helm, probed, f"1.{minor}.0", found)
    assert unserved(docs, found) == []
    kinds = by_kind(docs)
    assert ("ValidatingAdmissionPolicy" in kinds) == (minor >= 30)
    assert ("MutatingAdmissionPolicy" in kinds) == (minor >= 36) == require_author(docs)
    # and the same without a cluster: --kube-version alone gives what that version has on
    # by default
    alone, _ = install(helm, probed, f"1.{minor}.0", None)
    assert by_kind(alone) == kinds and require_author(alone) == require_author(docs)


def test_on_1_29_as_it_comes_no_policy_is_installed_and_the_notes_say_what_is_lost(
    helm: str, probed: Path
):
    found = served(29)
    docs, notes = install(helm, probed, "1.29.0", found)
    assert unserved(docs, found) == []
    assert not VALIDATING & by_kind(docs).keys() and not MUTATING & by_kind(docs).keys()
    assert not require_author(docs)
    assert "WARNING: Capsule `use` is NOT enforced on this cluster" in notes
    for lost in (
        "any Plan author may name any Capsule",
        "forge or change the operator's own Plans",
        "guarded by RBAC alone",
        "the Job or pod the operator takes as a step's attempt",
        "--feature-gates=ValidatingAdmissionPolicy=true",
    ):
        assert lost in notes, lost
    assert "NOTE: authors are not recorded" in notes  # nor is the record-author policy there


def test_on_1_29_with_the_beta_turned_on_the_policies_are_v1beta1(helm: str, probed: Path):
    found = served(29, betas=frozenset({"validating"}))
    docs, notes = install(helm, probed, "1.29.0", found)
    assert unserved(docs, found) == []
    kinds = by_kind(docs)
    assert kinds["ValidatingAdmissionPolicy"] == {f"{ADMISSION}/v1beta1"}
    assert kinds["ValidatingAdmissionPolicyBinding"] == {f"{ADMISSION}/v1beta1"}
    names = {d["metadata"]["name"] for d in docs if d["kind"] == "ValidatingAdmissionPolicy"}
    assert names == {
        f"po-planops-{n}" for n in ("capsule-use", "managed-plans", "plan-reports", "owned-objects")
    }
    assert "WARNING" not in notes and "NOTE: authors are not recorded" in notes


@pytest.mark.parametrize("minor", [34, 35])
def test_on_1_34_and_1_35_with_the_beta_turned_on_authors_are_recorded_in_v1beta1(
    helm: str, probed: Path, minor: int
):
    found = served(minor, betas=frozenset({"mutating"}))
    docs, notes = install(helm, probed, f"1.{minor}.0", found)
    assert unserved(docs, found) == []
    kinds = by_kind(docs)
    assert kinds["MutatingAdmissionPolicy"] == {f"{ADMISSION}/v1beta1"}
    assert kinds["ValidatingAdmissionPolicy"] == {f"{ADMISSION}/v1"}
    assert require_author(docs) and "NOTE" not in notes and "WARNING" not in notes


def test_on_1_30_to_1_35_as_they_come_the_notes_say_authors_are_not_recorded(
    helm: str, probed: Path
):
    docs, notes = install(helm, probed, "1.33.0", served(33))
    assert "WARNING" not in notes
    assert "NOTE: authors are not recorded on this cluster" in notes
    assert "does not stop the runs the" in notes and not require_author(docs)


def test_on_1_36_everything_is_v1_and_the_notes_warn_of_nothing(helm: str, probed: Path):
    found = served(36)
    docs, notes = install(helm, probed, "1.36.0", found)
    assert unserved(docs, found) == []
    kinds = by_kind(docs)
    assert (
        kinds["ValidatingAdmissionPolicy"]
        == kinds["MutatingAdmissionPolicy"]
        == {f"{ADMISSION}/v1"}
    )
    assert require_author(docs)
    assert "WARNING" not in notes and "NOTE" not in notes


def test_turned_off_by_value_the_notes_do_not_pretend_the_cluster_lacks_it(helm: str, probed: Path):
    docs, notes = install(
        helm, probed, "1.36.0", served(36), "--set", "admissionPolicy.enabled=false"
    )
    assert not (VALIDATING | MUTATING) & by_kind(docs).keys() and not require_author(docs)
    assert "WARNING" not in notes and "NOTE" not in notes
