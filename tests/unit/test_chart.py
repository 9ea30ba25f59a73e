"""The Helm chart, rendered by the real helm: lint, schema refusals, the restricted pod, policy
values -> operator flags, least-privilege RBAC with every rule explained, CRDs as templates."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from planops.api import crd, names
from planops.main import _parser

CHART = Path(__file__).resolve().parents[2] / "charts" / "planops"
# the real helm, built from Go when missing: not a Python-only test (`-m "not cluster"` skips it)
pytestmark = [pytest.mark.cluster, pytest.mark.helm]


def render(helm: str, *args: str) -> list[dict[str, Any]]:
    out = subprocess.run(
        [helm, "template", "po", str(CHART), "--namespace", "planops-system", *args],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def kinds(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def test_lint_strict(helm: str):
    done = subprocess.run([helm, "lint", "--strict", str(CHART)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    "bad",
    [
        ["--set", "workerz=3"],  # a typo
        ["--set", "policy.maxCpu=lots"],  # not a quantity
        ["--set", "workers=0"],
        ["--set", "createConcurrency=0"],
        ["--set", "createConcurrency=257"],  # beyond the operator's bound
        ["--set", "policy.maxSteps=30001"],  # beyond the CRD's bound
        ["--set", "reports.statusRecords=101"],  # beyond the status bound
        ["--set", "reports.historyBytes=16777217"],  # beyond the operator's bound
        ["--set", "image.pullPolicy=Sometimes"],
        ["--set", "resourceQuota.plans=0"],
        ["--set", "resourceQuota.namespaces={Team_A}"],  # not a namespace name
    ],
)
def test_the_schema_refuses_bad_values(helm: str, bad: list[str]):
    done = subprocess.run(
        [helm, "template", "po", str(CHART), *bad], capture_output=True, text=True
    )
    assert done.returncode != 0 and "values don't meet the specifications" in done.stderr


def test_the_operator_pod_is_restricted_and_its_flags_come_from_the_values(helm: str):
    docs = render(
        helm,
        "--set",
        "policy.maxCpu=2,policy.maxMemory=4Gi,workers=5,reports.historyBytes=1048576,"
        "createConcurrency=32",
        "--set",
        "policy.allowedImages={registry.example/*,ghcr.io/planops/*}",
    )
    (dep,) = kinds(docs, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    assert dep["spec"]["replicas"] == 2 and dep["spec"]["strategy"]["type"] == "RollingUpdate"
    assert dep["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"]["type"] == "RuntimeDefault"
    (c,) = pod["containers"]
    assert c["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "readOnlyRootFilesystem": True,
        "capabilities": {"drop": ["ALL"]},
    }
    assert c["image"] == "ghcr.io/planops/operator:0.1.0"
    assert c["resources"]["limits"] and c["resources"]["requests"]
    args = c["args"]
    assert "--max-cpu=2" in args and "--max-memory=4Gi" in args and "--workers=5" in args
    assert "--allowed-images=registry.example/*,ghcr.io/planops/*" in args
    assert "--all-namespaces" in args
    assert f"--collector-image={c['image']}" in args  # the step pods' collector: this image
    parsed = _parser().parse_args(args)  # the operator accepts every flag the chart passes
    assert parsed.max_cpu == "2" and parsed.workers == 5 and parsed.all_namespaces
    assert parsed.history_report_bytes == 1048576 and parsed.create_concurrency == 32
    assert parsed.leader_elect and parsed.leader_election_id == "po-planops"
    assert parsed.leader_election_namespace == "planops-system"
    assert (
        parsed.leader_elect_lease_duration,
        parsed.leader_elect_renew_deadline,
        parsed.leader_elect_retry_period,
    ) == (15.0, 10.0, 2.0)
    (pod_name,) = [e for e in c["env"] if e["name"] == "POD_NAME"]
    assert pod_name["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"


def _rules(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [r for d in kinds(docs, kind) if "operator" in d["metadata"]["name"] for r in d["rules"]]


def test_operator_rbac_is_least_privilege(helm: str):
    docs = render(helm)
    rules = _rules(docs, "ClusterRole")
    granted = {
        (g, r, v) for x in rules for g in x["apiGroups"] for r in x["resources"] for v in x["verbs"]
    }
    assert all("*" not in (g, r, v) for g, r, v in granted)
    for forbidden in [
        ("", "secrets", "get"),
        ("", "secrets", "list"),
        ("", "configmaps", "get"),
        ("", "pods", "create"),
        ("", "pods/exec", "create"),
        ("planops.dev", "capsules", "patch"),
        ("planops.dev", "plans", "patch"),
        ("planops.dev", "plans", "update"),
        ("rbac.authorization.k8s.io", "rolebindings", "create"),
    ]:
        assert forbidden not in granted, forbidden
    for needed in [
        ("batch", "jobs", "create"),
        ("", "pods/log", "get"),
        ("planops.dev", "plans/status", "patch"),
        ("planops.dev", "capsules", "get"),
        ("", "namespaces", "list"),
    ]:
        assert needed in granted, needed


def test_watch_namespaces_gives_roles_there_and_nothing_namespaced_cluster_wide(helm: str):
    docs = render(helm, "--set", "watchNamespaces={team-a,team-b}")
    roles = [r for r in kinds(docs, "Role") if not r["metadata"]["name"].endswith("-election")]
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-a", "team-b"]
    cluster = {r for x in _rules(docs, "ClusterRole") for r in x["resources"]}
    # subjectaccessreviews: cluster-scoped, and they read nothing (may an author use a Capsule?)
    assert cluster == {
        "clusterplantemplates",
        "clusterscheduledplans",
        "clusterscheduledplans/status",
        "namespaces",
        "subjectaccessreviews",
    }
    args = kinds(docs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--namespace=team-a" in args and "--all-namespaces" not in args


def test_user_roles_aggregate_and_edit_cannot_touch_capsules(helm: str):
    docs = render(helm)
    by_name = {d["metadata"]["name"]: d for d in kinds(docs, "ClusterRole")}
    edit = by_name["po-planops-edit"]
    assert edit["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert {r for x in edit["rules"] for r in x["resources"]} == {
        "plans",
        "scheduledplans",
        "plantriggers",
    }
    admin = by_name["po-planops-admin"]
    assert "rbac.authorization.k8s.io/aggregate-to-edit" not in admin["metadata"]["labels"]
    assert admin["rules"][0]["resources"] == ["capsules"]
    docs = render(helm, "--set", "rbac.capsulesToAdmin=false")
    assert "po-planops-admin" not in {d["metadata"]["name"] for d in kinds(docs, "ClusterRole")}


def test_cluster_plan_templates_are_readable_by_every_author_by_default(helm: str):
    """A ClusterPlanTemplate grants nothing (it runs under the caller's Capsule): every
    authenticated user may read, so run, one by default; a namespace's PlanTemplates come with
    plan-author; a value binds other groups, or none."""
    docs = render(helm)
    (binding,) = [
        d
        for d in kinds(docs, "ClusterRoleBinding")
        if d["metadata"]["name"] == "po-planops-template-reader"
    ]
    assert binding["subjects"] == [
        {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}
    ]
    roles = {d["metadata"]["name"]: d for d in kinds(docs, "ClusterRole")}
    reader = roles["po-planops-template-reader"]["rules"]
    assert reader == [
        {
            "apiGroups": ["planops.dev"],
            "resources": ["clusterplantemplates"],
            "verbs": ["get", "list", "watch"],
        }
    ]
    author = {
        (r, v)
        for x in roles["po-planops-plan-author"]["rules"]
        for r in x["resources"]
        for v in x["verbs"]
    }
    assert ("plantemplates", "get") in author and ("plantemplates", "create") not in author
    docs = render(helm, "--set", "rbac.clusterTemplateReaders=null")
    assert "po-planops-template-reader" not in {
        d["metadata"]["name"] for d in kinds(docs, "ClusterRoleBinding")
    }


def test_the_crds_are_templates_kept_on_uninstall_and_equal_to_the_generated_ones(helm: str):
    docs = kinds(render(helm), "CustomResourceDefinition")
    generated = {
        yaml.safe_load(t)["metadata"]["name"]: yaml.safe_load(t) for t in crd.render().values()
    }
    assert {d["metadata"]["name"] for d in docs} == set(generated)
    for d in docs:
        assert d["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
        assert d["spec"] == generated[d["metadata"]["name"]]["spec"]
    assert kinds(render(helm, "--set", "crds.install=false"), "CustomResourceDefinition") == []


def test_a_resource_quota_on_plans_and_planreports_is_opt_in_one_per_listed_namespace(
    helm: str,
):
    assert kinds(render(helm), "ResourceQuota") == []
    listed = render(helm, "--set", "resourceQuota.namespaces={team-a}")
    assert kinds(listed, "ResourceQuota") == []  # listed, not enabled
    docs = render(
        helm,
        "--set",
        "resourceQuota.enabled=true",
        "--set",
        "resourceQuota.namespaces={team-a,team-b}",
        "--set",
        "resourceQuota.planReports=300",
    )
    quotas = kinds(docs, "ResourceQuota")
    assert [q["metadata"]["namespace"] for q in quotas] == ["team-a", "team-b"]
    assert quotas[0]["spec"]["hard"] == {
        "count/plans.planops.dev": "500",
        "count/planreports.planops.dev": "300",
        "count/scheduledplans.planops.dev": "50",
    }


def test_service_monitor_is_opt_in(helm: str):
    assert kinds(render(helm), "ServiceMonitor") == []
    (sm,) = kinds(render(helm, "--set", "metrics.serviceMonitor.enabled=true"), "ServiceMonitor")
    assert sm["spec"]["endpoints"][0]["port"] == "metrics"


def test_tenant_labels_are_on_by_default_and_a_value_drops_them(helm: str):
    def args(*values: str) -> list[str]:
        (deploy,) = kinds(render(helm, *values), "Deployment")
        return list(deploy["spec"]["template"]["spec"]["containers"][0]["args"])

    assert "--no-metrics-tenant-labels" not in args()
    assert "--no-metrics-tenant-labels" in args("--set", "metrics.tenantLabels=false")


def test_the_webhook_is_scoped_to_watched_namespaces_and_keeps_its_certificate(helm: str):
    docs = render(helm, "--set", "watchNamespaces={team-a}")
    (hook,) = kinds(docs, "ValidatingWebhookConfiguration")
    w, scheduled, cluster_scheduled = hook["webhooks"]
    assert w["failurePolicy"] == "Ignore" and w["clientConfig"]["service"]["path"] == "/plans"
    assert w["rules"][0]["resources"] == ["plans"]
    assert w["namespaceSelector"]["matchExpressions"][0]["values"] == ["team-a"]
    (secret,) = [s for s in kinds(docs, "Secret") if s["metadata"]["name"].endswith("webhook-cert")]
    assert w["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
    # ScheduledPlans and ClusterScheduledPlans: the same server, each on its handler's path
    for hook_, plural, scope in (
        (scheduled, "scheduledplans", "Namespaced"),
        (cluster_scheduled, "clusterscheduledplans", "Cluster"),
    ):
        assert hook_["clientConfig"]["service"]["path"] == f"/{plural}"
        assert hook_["rules"][0]["resources"] == [plural] and hook_["rules"][0]["scope"] == scope
        assert hook_["clientConfig"]["caBundle"] == secret["data"]["ca.crt"]
    assert "namespaceSelector" in scheduled and "namespaceSelector" not in cluster_scheduled
    args = kinds(docs, "Deployment")[0]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--webhook-port=9443" in args
    assert (
        kinds(render(helm, "--set", "webhook.enabled=false"), "ValidatingWebhookConfiguration")
        == []
    )


def _policy_list(policy: dict[str, Any], variable: str) -> list[str]:
    (v,) = [v for v in policy["spec"]["variables"] if v["name"] == variable]
    return re.findall(r"'([^']+)'", v["expression"])


def test_the_admission_policies_reserve_exactly_the_keys_the_operator_writes(helm: str):
    docs = render(helm)
    policies = {d["metadata"]["name"]: d for d in kinds(docs, "ValidatingAdmissionPolicy")}
    bindings = {d["spec"]["policyName"] for d in kinds(docs, "ValidatingAdmissionPolicyBinding")}
    assert (
        set(policies)
        == bindings
        == {
            "po-planops-capsule-use",
            "po-planops-managed-plans",
            "po-planops-plan-reports",
            "po-planops-owned-objects",
        }
    )
    owned_objects = policies["po-planops-owned-objects"]["spec"]
    assert [r["resources"] for r in owned_objects["matchConstraints"]["resourceRules"]] == [
        ["jobs"],
        ["pods", "pods/ephemeralcontainers"],  # a debug container joins the step's processes
    ]
    assert "check('manage')" in owned_objects["validations"][0]["expression"]
    # the spec of a run's Job or pod is the operator's too: a pod's image is mutable, and the
    # kubelet restarts the step's container in the new one (tests/e2e/test_tenancy.py)
    (spec_changed,) = [v for v in owned_objects["variables"] if v["name"] == "specChanged"]
    assert "object.spec != oldObject.spec" in spec_changed["expression"]
    (touched,) = [v for v in owned_objects["variables"] if v["name"] == "touched"]
    assert "variables.specChanged" in touched["expression"]
    # ... and so are its labels: a step's pod carries no other mark, and once an editor had
    # taken them off, the policy no longer matched it (its image was anyone's to change)
    assert "variables.labelsRemoved.size() > 0" in touched["expression"]
    reports = policies["po-planops-plan-reports"]["spec"]
    assert reports["matchConstraints"]["resourceRules"][0]["resources"] == ["planreports"]
    assert "check('manage')" in reports["validations"][0]["expression"]
    managed = policies["po-planops-managed-plans"]
    assert _policy_list(managed, "labels") == list(names.RESERVED_LABELS)
    assert _policy_list(managed, "annotations") == list(names.RESERVED_ANNOTATIONS)
    use = policies["po-planops-capsule-use"]
    assert use["spec"]["failurePolicy"] == "Fail"
    assert use["spec"]["matchConstraints"]["resourceRules"][0]["resources"] == [
        "plans",
        "scheduledplans",
        "plantriggers",
    ]
    assert "check('use')" in use["spec"]["validations"][0]["expression"]
    assert "!variables.act" in use["spec"]["validations"][0]["expression"]
    (record,) = kinds(docs, "MutatingAdmissionPolicy")
    (bound,) = kinds(docs, "MutatingAdmissionPolicyBinding")
    assert record["metadata"]["name"] == bound["spec"]["policyName"] == "po-planops-record-author"
    assert record["spec"]["failurePolicy"] == "Fail"
    # the author of a ClusterScheduledPlan is recorded too (its runs are checked in each
    # namespace), though no capsule-use policy applies to it (it has no namespace)
    (recorded,) = record["spec"]["matchConstraints"]["resourceRules"]
    (used,) = use["spec"]["matchConstraints"]["resourceRules"]
    assert recorded == {**used, "resources": [*used["resources"], "clusterscheduledplans"]}
    deployment = next(d for d in docs if d["kind"] == "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert "--require-author-record" in container["args"]
    unrecorded = render(helm, "--set", "admissionPolicy.recordAuthor=false")
    deployment = next(d for d in unrecorded if d["kind"] == "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    assert "--require-author-record" not in container["args"]

    # one definition of an author's act: the check of `use` and the record of the author agree
    def act(policy: dict[str, Any]) -> list[dict[str, Any]]:
        wanted = {"notActs", "newMarks", "oldMarks", "newRefs", "oldRefs", "orphaning", "act"}
        return [v for v in policy["spec"]["variables"] if v["name"] in wanted]

    assert len(act(use)) == 7 and act(record) == act(use) == act(managed)
    assert _policy_list(use, "notActs") == [
        names.ANNOTATION_CANCEL,
        names.ANNOTATION_RERUN,
        names.ANNOTATION_AUTHOR,
    ]  # not retry: with --from it picks what runs again, an act that needs `use`; not
    # cancel-run-finally either: it makes the finally steps run (a plain cancel runs none)
    assert names.ANNOTATION_AUTHOR.replace("/", "~1") in str(record["spec"]["mutations"])
    off = render(helm, "--set", "admissionPolicy.enabled=false")
    assert kinds(off, "ValidatingAdmissionPolicy") == kinds(off, "MutatingAdmissionPolicy") == []
    older = render(helm, "--set", "admissionPolicy.recordAuthor=false")  # Kubernetes < 1.36
    assert kinds(older, "MutatingAdmissionPolicy") == []
    assert len(kinds(older, "ValidatingAdmissionPolicy")) == 4


def _granted(role: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {
        (g, r, v)
        for x in role["rules"]
        for g in x["apiGroups"]
        for r in x["resources"]
        for v in x["verbs"]
    }


def test_the_operator_may_use_every_capsule_and_manage_plans(helm: str):
    granted = {
        (g, r, v)
        for x in _rules(render(helm), "ClusterRole")
        for g in x["apiGroups"]
        for r in x["resources"]
        for v in x["verbs"]
    }
    assert ("planops.dev", "capsules", "use") in granted
    assert ("planops.dev", "plans", "manage") in granted
    # may an author still use a Capsule (reconciler.run.authors): create reviews, nothing else there
    assert {(g, r, v) for g, r, v in granted if g == "authorization.k8s.io"} == {
        ("authorization.k8s.io", "subjectaccessreviews", "create")
    }
    for verb in ("create", "patch", "list", "delete"):  # a run's report (reconciler.history.chunks)
        assert ("planops.dev", "planreports", verb) in granted


def test_the_plan_author_role_reaches_plans_and_nothing_that_runs_code(helm: str):
    by_name = {d["metadata"]["name"]: d for d in kinds(render(helm), "ClusterRole")}
    author = _granted(by_name["po-planops-plan-author"])
    assert ("planops.dev", "plans", "create") in author
    assert ("planops.dev", "scheduledplans", "patch") in author
    assert ("", "pods/log", "get") in author
    assert ("planops.dev", "planreports", "list") in author  # describe / get -o json read them
    assert ("batch", "jobs", "list") in author  # `kubectl plan logs` checks a pod's owner
    for g, r, v in author:
        assert r not in ("secrets", "configmaps", "serviceaccounts"), (g, r, v)
        assert not (r.startswith(("pods", "jobs")) and v not in ("get", "list")), (g, r, v)
        assert not (r == "capsules" and v not in ("get", "list", "watch")), (g, r, v)
        assert not r.endswith("/status") or v in ("get", "list", "watch"), (g, r, v)
        assert r != "planreports" or v in ("get", "list", "watch"), (g, r, v)  # only read them
        assert v not in ("use", "manage", "*", "escalate", "bind", "impersonate"), (g, r, v)
    admin = _granted(by_name["po-planops-admin"])
    assert ("planops.dev", "capsules", "use") in admin
    edit = _granted(by_name["po-planops-edit"])
    assert not any(v == "use" for _, _, v in edit)
    assert not any(r == "planreports" for _, r, _ in edit | admin)  # written by the operator only
    assert ("planops.dev", "planreports", "get") in _granted(by_name["po-planops-view"])


def test_two_replicas_with_a_lease_a_pdb_and_spread_over_nodes(helm: str):
    docs = render(helm)
    (pdb,) = kinds(docs, "PodDisruptionBudget")
    assert pdb["spec"]["maxUnavailable"] == 1
    (dep,) = kinds(docs, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    anti = pod["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert anti[0]["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    roles = {d["metadata"]["name"]: d for d in kinds(docs, "Role")}
    lease = roles["po-planops-leader-election"]
    assert lease["metadata"]["namespace"] == "planops-system"
    assert _granted(lease) == {
        ("coordination.k8s.io", "leases", "create"),
        ("coordination.k8s.io", "leases", "get"),
        ("coordination.k8s.io", "leases", "update"),
    }
    assert lease["rules"][1]["resourceNames"] == ["po-planops"]
    one = render(helm, "--set", "replicas=1,leaderElection.enabled=false")
    (dep,) = kinds(one, "Deployment")
    assert dep["spec"]["strategy"]["type"] == "Recreate" and kinds(one, "PodDisruptionBudget") == []
    args = dep["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--leader-elect" not in args
