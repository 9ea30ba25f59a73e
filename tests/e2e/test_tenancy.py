"""Tenancy on the real cluster, as a non-admin would meet it (`kubectl --as`): a Plan reaches
exactly what its author is granted.

The chart's admission policies and its plan-author role are rendered by the real helm and
applied; the author `alice` gets plan-author in the test namespace and `use` on the Capsule
`safe` only. Every line of docs/security.md's threat model that concerns authors is one of
these tests.
"""

from __future__ import annotations

import json
import subprocess
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from planops.kube import manifests
from tests.conftest import Kube
from tests.e2e.conftest import NS_PREFIX, capsule, cli, plan, steps, wait_plan

pytestmark = [pytest.mark.cluster, pytest.mark.node]
CHART = Path(__file__).resolve().parents[2] / "charts" / "planops"
#: the release the policies are rendered as: this session's own (its cluster-wide policies and
#: roles are named after it), so that a parallel session (pytest -n) removing its copy at the end
#: of its module leaves this one's in place
RELEASE = f"tenancy-{NS_PREFIX.split('-')[1]}"
AUTHOR = "alice"
AUTHOR_KEY = "planops.dev/author"  # who last changed what a Plan does (the API server writes it)


def chart_docs(helm: str, *show: str, release: str = RELEASE) -> list[dict[str, Any]]:
    out = subprocess.run(
        [
            helm,
            "template",
            release,
            str(CHART),
            "--set",
            "rbac.aggregateToDefaultRoles=false",
            *(a for s in show for a in ("--show-only", f"templates/{s}")),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [d for d in yaml.safe_load_all(out) if d]


def as_author(kube: Kube, *args: str, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return kube.run(f"--as={AUTHOR}", *args, input=input, check=False)


@pytest.fixture(scope="module")
def policies(kube: Kube, helm: str) -> Iterator[None]:
    """The chart's admission policies and plan-author role, applied and active."""
    docs = chart_docs(helm, "admission-policy.yaml", "rbac-users.yaml")
    text = "\n---\n".join(json.dumps(d) for d in docs)
    kube.run("apply", "-f", "-", input=text)
    probe_ns = f"t-{uuid.uuid4().hex[:10]}"
    kube.run("create", "namespace", probe_ns)
    try:
        # active once the API server has loaded the policy: an author's dry-run create is refused
        probe = plan("probe", {"id": "a", "shell": "echo"}, capsule="nope")
        probe["metadata"]["namespace"] = probe_ns
        grant(kube, probe_ns, [])
        deadline = time.monotonic() + 60
        while True:
            done = as_author(kube, "create", "--dry-run=server", "-f", "-", input=json.dumps(probe))
            if done.returncode != 0 and "may not use Capsule" in done.stderr:
                break
            assert time.monotonic() < deadline, f"the policies never became active: {done.stderr}"
            time.sleep(0.5)
        # ... and the author is recorded (the mutating policy is loaded on its own)
        probe["spec"]["capsule"] = "default"
        while True:
            out = kube.run(
                "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(probe)
            ).stdout
            if AUTHOR_KEY in (json.loads(out)["metadata"].get("annotations") or {}):
                break
            assert time.monotonic() < deadline, "the author record never became active"
            time.sleep(0.5)
        yield
    finally:
        kube.run("delete", "namespace", probe_ns, "--wait=false", check=False)
        kube.run("delete", "-f", "-", "--ignore-not-found", input=text, check=False)


def bind(kube: Kube, ns: str, name: str, user: str, role: str, kind: str = "ClusterRole") -> None:
    """The RoleBinding `name` in `ns`: `user` gets the `kind` `role` there."""
    kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": user}],
        }
    )


def grant(kube: Kube, ns: str, capsules: list[str], release: str = RELEASE) -> None:
    """alice: plan-author in `ns` (the role of the chart's release `release`), and `use` on
    exactly `capsules` there."""
    bind(kube, ns, "alice-plan-author", AUTHOR, f"{release}-planops-plan-author")
    if not capsules:
        return
    kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "use-capsules", "namespace": ns},
            "rules": [
                {
                    "apiGroups": ["planops.dev"],
                    "resources": ["capsules"],
                    "resourceNames": capsules,
                    "verbs": ["use"],
                }
            ],
        }
    )
    bind(kube, ns, "alice-use-capsules", AUTHOR, "use-capsules", kind="Role")


@pytest.fixture
def tenant(kube: Kube, ns: str, busybox: str, policies: None) -> str:
    """A watched namespace with Capsules `safe` (alice may use it; it may spawn `worker`),
    `worker` (a plan of its own) and `privileged` (a service account token); alice may use
    `safe` only."""
    kube.apply(capsule(busybox, name="safe", spawn={"allow": ["worker"]}), "-n", ns)
    kube.apply(
        capsule(busybox, name="worker", plan={"steps": [{"id": "work", "shell": "echo done"}]}),
        "-n",
        ns,
    )
    kube.apply(capsule(busybox, name="privileged", automountServiceAccountToken=True), "-n", ns)
    grant(kube, ns, ["safe"])
    return ns


def apply_as_author(kube: Kube, ns: str, obj: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return as_author(kube, "apply", "-n", ns, "-f", "-", input=json.dumps(obj))


def test_an_author_runs_a_plan_on_a_capsule_they_may_use(kube: Kube, tenant: str):
    done = apply_as_author(
        kube, tenant, plan("ok", {"id": "hi", "shell": "echo hi"}, capsule="safe")
    )
    assert done.returncode == 0, done.stderr
    obj = wait_plan(kube, tenant, "ok")
    assert obj["status"]["phase"] == "Succeeded"
    assert steps(obj)["hi"]["output"] == "hi"


@pytest.mark.parametrize("named", ["privileged", None, "does-not-exist"])
def test_naming_a_capsule_the_author_may_not_use_is_refused(
    kube: Kube, tenant: str, named: str | None
):
    spec = {"capsule": named} if named else {}
    done = apply_as_author(kube, tenant, plan("grab", {"id": "hi", "shell": "echo hi"}, **spec))
    assert done.returncode != 0
    capsule_name = named or "default"  # a Plan without spec.capsule runs under `default`
    assert f"alice may not use Capsule {capsule_name} in namespace {tenant}" in done.stderr
    assert 'RBAC verb "use" on capsules.planops.dev' in done.stderr
    assert kube.run("get", "plan", "grab", "-n", tenant, check=False).returncode != 0


def test_switching_a_plan_to_another_capsule_is_refused_annotating_it_is_not(
    kube: Kube, tenant: str
):
    done = apply_as_author(
        kube, tenant, plan("mine", {"id": "hi", "shell": "echo hi"}, capsule="safe")
    )
    assert done.returncode == 0, done.stderr
    wait_plan(kube, tenant, "mine")
    patch = json.dumps({"spec": {"capsule": "privileged"}})
    done = as_author(kube, "patch", "plan", "mine", "-n", tenant, "--type=merge", "-p", patch)
    assert done.returncode != 0 and "may not use Capsule privileged" in done.stderr
    assert kube.get("plan", "mine", "-n", tenant)["spec"]["capsule"] == "safe"
    done = as_author(kube, "annotate", "plan", "mine", "-n", tenant, "planops.dev/rerun=1")
    assert done.returncode == 0, done.stderr  # rerun, cancel, answers: no Capsule change


def test_a_scheduled_plan_on_a_capsule_the_author_may_not_use_is_refused(kube: Kube, tenant: str):
    def scheduled(name: str, cap: str) -> dict[str, Any]:
        return {
            "apiVersion": "planops.dev/v1alpha1",
            "kind": "ScheduledPlan",
            "metadata": {"name": name},
            "spec": {
                "schedule": "0 3 * * *",
                "suspend": True,
                "planTemplate": {"spec": {"capsule": cap, "steps": [{"id": "a", "shell": "echo"}]}},
            },
        }

    done = apply_as_author(kube, tenant, scheduled("nightly", "privileged"))
    assert done.returncode != 0 and "may not use Capsule privileged" in done.stderr
    assert "ScheduledPlan runs only under a Capsule" in done.stderr
    done = apply_as_author(kube, tenant, scheduled("nightly", "safe"))
    assert done.returncode == 0, done.stderr
    patch = json.dumps({"spec": {"planTemplate": {"spec": {"capsule": "privileged"}}}})
    done = as_author(
        kube, "patch", "scheduledplan", "nightly", "-n", tenant, "--type=merge", "-p", patch
    )
    assert done.returncode != 0 and "may not use Capsule privileged" in done.stderr


def test_the_operators_child_plans_cannot_be_changed_or_forged_by_an_author(
    kube: Kube, tenant: str
):
    parent = plan(
        "parent",
        {"id": "delegate", "capsule": "worker", "input": "do it"},
        capsule="safe",
    )
    done = apply_as_author(kube, tenant, parent)
    assert done.returncode == 0, done.stderr
    assert steps(wait_plan(kube, tenant, "parent"))["delegate"]["output"] == "done"
    (child,) = kube.get("plans", "-n", tenant, "-l", "planops.dev/parent=parent")["items"]
    name = child["metadata"]["name"]
    # even with `use` on the child's Capsule (else that refuses the edits first), only the
    # operator may change the Plans it manages
    grant(kube, tenant, ["safe", "worker"])

    edit = json.dumps({"spec": {"steps": [{"id": "work", "shell": "cat /etc/passwd"}]}})
    done = as_author(kube, "patch", "plan", name, "-n", tenant, "--type=merge", "-p", edit)
    assert done.returncode != 0 and "a Plan that planops manages" in done.stderr
    done = as_author(kube, "label", "plan", name, "-n", tenant, "planops.dev/depth-")
    assert done.returncode != 0 and "a Plan that planops manages" in done.stderr
    done = as_author(
        kube, "label", "plan", name, "-n", tenant, "--overwrite", "planops.dev/depth=0"
    )
    assert done.returncode != 0

    forged = plan("forged", {"id": "work", "shell": "echo forged"}, capsule="safe")
    forged["metadata"]["labels"] = {"planops.dev/parent": "parent", "planops.dev/depth": "0"}
    done = apply_as_author(kube, tenant, forged)
    assert done.returncode != 0 and "may not create a Plan that planops manages" in done.stderr
    forged["metadata"] = {
        "name": "forged",
        "annotations": {"planops.dev/lineage": ""},
    }
    assert apply_as_author(kube, tenant, forged).returncode != 0
    forged["metadata"] = {
        "name": "forged",
        "ownerReferences": [
            {
                "apiVersion": "planops.dev/v1alpha1",
                "kind": "Plan",
                "name": "parent",
                "uid": kube.get("plan", "parent", "-n", tenant)["metadata"]["uid"],
            }
        ],
    }
    assert apply_as_author(kube, tenant, forged).returncode != 0


def test_an_author_reads_a_plans_report_objects_and_cannot_forge_or_edit_one_even_with_rbac(
    kube: Kube, tenant: str
):
    """PlanReports are the operator's: plan-author reads them; a role granting every verb on
    them still cannot create or change one (the chart's admission policy)."""
    # the first output is longer than a status repeats of a record that is not the newest, so
    # the report goes to a PlanReport (a run whose status repeats all of it writes none)
    long = {"id": "a", "shell": "echo " + "a" * 2000}
    keep = {"over": [1], "where": {"value": "{{item}}", "op": "gte", "to": 0}}
    last = {"id": "b", "filter": keep, "dependsOn": ["a"]}
    done = apply_as_author(kube, tenant, plan("rep", long, last, capsule="safe"))
    assert done.returncode == 0, done.stderr
    wait_plan(kube, tenant, "rep")
    listed = as_author(kube, "get", "planreports", "-n", tenant, "-l", "planops.dev/plan=rep")
    assert listed.returncode == 0, listed.stderr
    (chunk,) = json.loads(as_author(kube, "get", "planreports", "-n", tenant, "-o", "json").stdout)[
        "items"
    ]
    assert [r["stepId"] for r in chunk["records"]] == ["a", "b"]
    kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "reports-writer", "namespace": tenant},
            "rules": [{"apiGroups": ["planops.dev"], "resources": ["planreports"], "verbs": ["*"]}],
        }
    )
    kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "alice-reports-writer", "namespace": tenant},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Role",
                "name": "reports-writer",
            },
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": AUTHOR}],
        }
    )
    forged = {**chunk, "metadata": {"name": "forged", "labels": chunk["metadata"]["labels"]}}
    done = as_author(kube, "create", "-n", tenant, "-f", "-", input=json.dumps(forged))
    assert done.returncode != 0 and "may not create a PlanReport" in done.stderr, done.stderr
    edit = json.dumps([{"op": "replace", "path": "/records/0/status", "value": "failed"}])
    name = chunk["metadata"]["name"]
    done = as_author(kube, "patch", "planreport", name, "-n", tenant, "--type=json", "-p", edit)
    assert done.returncode != 0 and "may not change a PlanReport" in done.stderr, done.stderr
    assert kube.get("planreport", name, "-n", tenant)["records"][0]["status"] == "success"


def test_the_refusal_holds_with_no_operator_running(
    kube: Kube, namespace: str, busybox: str, policies: None
):
    """`namespace` is watched by no operator: whatever is refused here, the API server refused
    alone."""
    for name in ("safe", "privileged"):
        kube.apply(capsule(busybox, name=name), "-n", namespace)
    grant(kube, namespace, ["safe"])
    done = apply_as_author(
        kube, namespace, plan("p", {"id": "a", "shell": "echo"}, capsule="privileged")
    )
    assert done.returncode != 0 and "may not use Capsule privileged" in done.stderr
    done = apply_as_author(kube, namespace, plan("p", {"id": "a", "shell": "echo"}, capsule="safe"))
    assert done.returncode == 0, done.stderr
    assert (kube.get("plan", "p", "-n", namespace).get("status") or {}) == {}  # nobody ran it


@pytest.mark.parametrize(
    ("verb", "resource", "allowed"),
    [
        ("create", "plans.planops.dev", True),
        ("patch", "scheduledplans.planops.dev", True),
        ("get", "plans.planops.dev --subresource=status", True),
        ("get", "pods --subresource=log", True),
        ("list", "capsules.planops.dev", True),
        ("use", "capsules.planops.dev/safe", True),
        ("use", "capsules.planops.dev/privileged", False),
        ("use", "capsules.planops.dev/default", False),
        ("manage", "plans.planops.dev", False),
        ("patch", "plans.planops.dev --subresource=status", False),
        ("list", "planreports.planops.dev", True),
        ("create", "planreports.planops.dev", False),
        ("patch", "planreports.planops.dev", False),
        ("create", "capsules.planops.dev", False),
        ("patch", "capsules.planops.dev", False),
        ("create", "pods", False),
        ("delete", "pods", False),
        ("list", "jobs.batch", True),  # `kubectl plan logs`: is the pod's Job the Plan's?
        ("get", "jobs.batch", True),
        ("create", "jobs.batch", False),
        ("patch", "jobs.batch", False),
        ("delete", "jobs.batch", False),
        ("get", "secrets", False),
        ("list", "secrets", False),
        ("list", "configmaps", False),
        ("create", "pods --subresource=exec", False),
        ("create", "rolebindings.rbac.authorization.k8s.io", False),
        ("create", "serviceaccounts --subresource=token", False),
        ("create", "persistentvolumeclaims", False),
    ],
)
def test_what_a_plan_author_may_do(
    kube: Kube, tenant: str, verb: str, resource: str, allowed: bool
):
    args = ("auth", "can-i", verb, *resource.split(), "-n", tenant, f"--as={AUTHOR}")
    done = kube.run(*args, check=False)
    assert done.stdout.strip() == ("yes" if allowed else "no"), (verb, resource, done.stdout)


def forge_step_pod(kube: Kube, ns: str, busybox: str, name: str) -> dict[str, str]:
    """Run Plan `name` (one step `work` printing `real` after 4 s) and, while its pod runs,
    create a newer pod with the same labels printing `FORGED` (someone who may create pods, an
    admin or another controller, not a plan author). The labels copied."""
    kube.apply(plan(name, {"id": "work", "shell": "sh -c 'sleep 4; echo real'"}), "-n", ns)
    selector = f"planops.dev/plan={name}"
    wait_plan(
        kube,
        ns,
        name,
        phases=("Running",),
        until=lambda o: bool(kube.get("pods", "-n", ns, "-l", selector)["items"]),
    )
    (real,) = kube.get("pods", "-n", ns, "-l", selector)["items"]
    labels = dict(real["metadata"]["labels"])
    labels.pop("controller-uid", None)
    labels.pop("batch.kubernetes.io/controller-uid", None)
    forged = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{name}-forged", "namespace": ns, "labels": labels},
        "spec": {
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65534},
            "containers": [
                {
                    "name": "step",
                    "image": busybox,
                    "command": ["echo", "FORGED"],
                    "securityContext": {"allowPrivilegeEscalation": False},
                }
            ],
        },
    }
    kube.apply(forged)
    return labels


def test_a_pod_made_with_a_steps_labels_is_not_taken_for_the_step(
    kube: Kube, ns: str, busybox: str
):
    """Someone who may create pods copies a running step's labels onto a pod of their own that
    prints something else, newer than the real one: the step's output is still its own pod's."""
    labels = forge_step_pod(kube, ns, busybox, "victim")
    obj = wait_plan(kube, ns, "victim", timeout=120)
    assert obj["status"]["run"]["id"] == labels["planops.dev/run"]
    assert steps(obj)["work"]["output"] == "real"


def test_kubectl_plan_logs_never_shows_a_pod_made_with_a_steps_labels(
    kube: Kube, kubeconfig: str, ns: str, busybox: str
):
    """The forged pod is the newest with the step's labels and has ended (its log says
    `FORGED`): `kubectl plan logs` shows the step's own pod, chosen by owner UIDs."""
    forge_step_pod(kube, ns, busybox, "logged")
    wait_plan(kube, ns, "logged", timeout=120)
    deadline = time.monotonic() + 60
    while kube.get("pod", "logged-forged", "-n", ns)["status"].get("phase") != "Succeeded":
        assert time.monotonic() < deadline, "the forged pod did not run"
        time.sleep(0.5)
    done = cli(kubeconfig, "logs", "logged", "work", "-n", ns)
    assert (done.returncode, done.stdout) == (0, "real\n"), done.stderr


def test_a_tools_credentials_reach_the_tool_and_no_shell_step(kube: Kube, ns: str, busybox: str):
    secret = "s3cret-token-value"
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "registry", "namespace": ns},
            "stringData": {"token": secret},
        }
    )
    publish = {
        "name": "publish",
        "image": busybox,
        "command": [
            "sh",
            "-c",
            f'test "$TOKEN" = {secret} && test "$(cat /var/run/secrets/registry/token)" = '
            f"{secret} && echo granted",
        ],
        "env": [
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "registry", "key": "token"}}}
        ],
        "secretMounts": [{"secretName": "registry", "mountPath": "/var/run/secrets/registry"}],
    }
    cap = capsule(busybox)
    cap["spec"]["tools"].append(publish)
    cap["spec"]["shell"]["allow"] += ["env"]
    kube.apply(cap, "-n", ns)
    kube.apply(
        plan(
            "creds",
            {"id": "tool", "tool": "publish"},
            {"id": "env", "shell": "env"},
            {"id": "file", "shell": "cat /var/run/secrets/registry/token", "onError": "continue"},
        ),
        "-n",
        ns,
    )
    obj = wait_plan(kube, ns, "creds", timeout=120)
    rep = steps(obj)
    assert (rep["tool"]["status"], rep["tool"]["output"]) == ("success", "granted")
    assert rep["env"]["status"] == "success" and "PLANOPS_STEP=env" in rep["env"]["output"]
    assert "TOKEN" not in rep["env"]["output"]
    assert rep["file"]["status"] == "failed"
    assert secret not in json.dumps(obj)
    events = kube.get("events", "-n", ns)["items"]
    assert secret not in json.dumps(events)


def test_the_kubelet_expands_nothing_a_plan_gives_a_step(kube: Kube, ns: str):
    """Kubernetes expands $(VAR) in a container's command and env: a plan's words and a tool's
    input reach the step exactly as written or rendered, never expanded a second time."""
    kube.apply(
        plan(
            "dollars",
            {"id": "words", "shell": "echo $(PLANOPS_STEP) {{input.x}} $$"},
            {"id": "tool", "tool": "echo-input", "input": {"v": "$(PLANOPS_PLAN)"}},
            input={"x": "$(PLANOPS_ATTEMPT)"},
        ),
        "-n",
        ns,
    )
    rep = steps(wait_plan(kube, ns, "dollars"))
    assert rep["words"]["output"] == "$(PLANOPS_STEP) $(PLANOPS_ATTEMPT) $$"
    assert json.loads(rep["tool"]["output"]) == {"v": "$(PLANOPS_PLAN)"}


def test_a_job_squatting_a_steps_name_is_not_adopted(kube: Kube, ns: str, busybox: str):
    """Job names are deterministic: someone who may create Jobs can take the next attempt's
    name first. The operator adopts a Job only when the Plan is its controller; the attempt
    fails saying why, and the squatter is left alone."""
    kube.apply(
        plan(
            "target",
            {"id": "first", "shell": "sleep 4"},
            {"id": "next", "shell": "echo real", "dependsOn": ["first"], "onError": "continue"},
        ),
        "-n",
        ns,
    )
    obj = wait_plan(
        kube,
        ns,
        "target",
        phases=("Running",),
        until=lambda o: bool((o.get("status") or {}).get("run", {}).get("id")),
    )
    name = manifests.child_name("target", obj["status"]["run"]["id"], "next", 1)
    squatter = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 65534},
                    "containers": [
                        {
                            "name": "step",
                            "image": busybox,
                            "command": ["echo", "SQUATTER"],
                            "securityContext": {"allowPrivilegeEscalation": False},
                        }
                    ],
                }
            }
        },
    }
    kube.apply(squatter)
    rep = steps(wait_plan(kube, ns, "target", timeout=120))
    assert rep["next"]["status"] == "failed"
    assert "already exists and is not this Plan's" in rep["next"]["error"]
    assert "SQUATTER" not in (rep["next"]["output"] or "")
    assert kube.get("job", name, "-n", ns)["metadata"]["name"] == name  # left alone


EDITOR = "mallory"  # Kubernetes `edit` in the namespace: may create Jobs and pods, is no author


def grant_edit(kube: Kube, ns: str) -> None:
    """mallory: Kubernetes' `edit` in `ns` (Jobs, pods; the chart's roles do not aggregate
    into it here, so no Plans)."""
    bind(kube, ns, "mallory-edit", EDITOR, "edit")


def running(
    kube: Kube, ns: str, obj: dict[str, Any], until: Callable[[dict[str, Any]], bool]
) -> dict[str, Any]:
    """`obj` applied (as an admin), once it runs as `until` wants it."""
    kube.apply(obj, "-n", ns)
    return wait_plan(kube, ns, obj["metadata"]["name"], phases=("Running",), until=until)


def step_job(name: str, ns: str, busybox: str, labels: dict[str, str], owner: dict[str, Any]):
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": ns, "labels": labels, "ownerReferences": [owner]},
        "spec": {
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "restartPolicy": "Never",
                    "securityContext": {"runAsNonRoot": True, "runAsUser": 65534},
                    "containers": [
                        {
                            "name": "step",
                            "image": busybox,
                            "command": ["echo", "FORGED"],
                            "securityContext": {"allowPrivilegeEscalation": False},
                        }
                    ],
                },
            }
        },
    }


def test_someone_with_edit_cannot_make_the_job_or_pod_the_operator_would_take_for_a_step(
    kube: Kube, tenant: str, busybox: str
):
    """`edit` may create Jobs and pods, and read a Plan's UID: it writes the next attempt's Job
    first, under its deterministic name, with the Plan as its controller (apiVersion, kind and
    UID all right) and the step's labels, so that the operator would adopt it and read its log
    as the step's output. The API server refuses it (only the operator makes a run's Jobs and,
    through the Job controller, their pods); the step's output is its own."""
    grant_edit(kube, tenant)
    obj = running(
        kube,
        tenant,
        plan(
            "target",
            {"id": "first", "shell": "sleep 15"},  # the forger is well ahead of the operator
            {"id": "next", "shell": "echo real", "dependsOn": ["first"]},
            capsule="safe",
        ),
        until=lambda o: bool((o.get("status") or {}).get("run", {}).get("id")),
    )
    ref = manifests.PlanRef(tenant, "target", obj["metadata"]["uid"], obj["status"]["run"]["id"])
    name = manifests.child_name("target", ref.run, "next", 1)
    forged = step_job(name, tenant, busybox, ref.labels("next", 1), ref.owner())
    forged["metadata"]["ownerReferences"][0].pop("blockOwnerDeletion")  # edit may not set it

    def as_editor(*args: str, body: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        return kube.run(f"--as={EDITOR}", *args, "-f", "-", input=json.dumps(body), check=False)

    unowned = step_job(f"{name}-x", tenant, busybox, ref.labels("next", 1), ref.owner())
    unowned["metadata"].pop("ownerReferences")  # the labels alone (candidates) are refused too
    deadline = time.monotonic() + 30  # the policy loaded (the fixture waited for another one)
    while as_editor("create", "--dry-run=server", body=unowned).returncode == 0:
        assert time.monotonic() < deadline, "`edit` may create a Job with a step's labels"
        time.sleep(0.5)
    plain = step_job("plain", tenant, busybox, {"app": "mine"}, ref.owner())
    plain["metadata"].pop("ownerReferences")
    ok = as_editor("create", "--dry-run=server", body=plain)
    assert ok.returncode == 0, ok.stderr  # edit may create Jobs: the refusal below is planops'
    done = as_editor("create", body=forged)
    assert done.returncode != 0, "a Job with the Plan as controller was created by `edit`"
    assert "may not create a Job that carries planops marks" in done.stderr, done.stderr
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "target-pod", "namespace": tenant, "labels": ref.labels("next", 1)},
        "spec": forged["spec"]["template"]["spec"],
    }
    refused_pod = as_editor("create", "--dry-run=server", body=pod)
    assert "may not create a pod that carries planops marks" in refused_pod.stderr
    result = wait_plan(kube, tenant, "target", timeout=120)
    assert result["status"]["phase"] == "Succeeded", result["status"]
    assert steps(result)["next"]["output"] == "real"


def editor_meets_tests_running(
    kube: Kube, ns: str, name: str, *steps: dict[str, Any]
) -> dict[str, Any]:
    """mallory has `edit` in `ns`; Plan `name` of `steps` then `deploy` (after `tests`) runs,
    with `tests` in flight."""
    grant_edit(kube, ns)
    deploy = {"id": "deploy", "shell": "echo deployed", "dependsOn": ["tests"]}
    return running(
        kube,
        ns,
        plan(name, *steps, deploy, capsule="safe"),
        until=lambda o: [f["stepId"] for f in o["status"].get("inFlight") or []] == ["tests"],
    )


def test_a_finished_jobs_annotation_cannot_make_it_pass_for_a_running_step(kube: Kube, tenant: str):
    """`kubectl annotate job <build's Job> planops.dev/step-id=tests`: the running `tests` would
    settle with build's log, and `deploy` start while the real tests still ran. `edit` is
    refused by the API server (planops annotations on Jobs and pods are the operator's); with
    the policy out of the way (an admin, who holds `manage`, writes it), the operator does not
    read an annotation that disagrees with the label it completes."""
    obj = editor_meets_tests_running(
        kube,
        tenant,
        "gated",
        {"id": "build", "shell": "echo built"},
        {"id": "tests", "shell": "sh -c 'sleep 25; echo tested'", "dependsOn": ["build"]},
    )
    run = obj["status"]["run"]["id"]
    selector = f"planops.dev/plan=gated,planops.dev/run={run},planops.dev/step=build"
    (build,) = kube.get("jobs", "-n", tenant, "-l", selector)["items"]
    (pod,) = kube.get("pods", "-n", tenant, "-l", selector)["items"]
    forged = "planops.dev/step-id=tests"
    for kind, name in (("job", build["metadata"]["name"]), ("pod", pod["metadata"]["name"])):
        done = kube.run(f"--as={EDITOR}", "annotate", kind, name, "-n", tenant, forged, check=False)
        assert done.returncode != 0, f"`edit` annotated the {kind}"
        assert "that carries planops marks (annotation planops.dev/step-id=tests)" in done.stderr
        # ... and may not take the operator's own annotations away either
        kube.run("annotate", kind, name, "-n", tenant, "planops.dev/plan=gated")
        gone = kube.run(
            f"--as={EDITOR}", "annotate", kind, name, "-n", tenant, "planops.dev/plan-", check=False
        )
        assert gone.returncode != 0 and "removed annotation planops.dev/plan=gated" in gone.stderr
    kube.run("annotate", "job", build["metadata"]["name"], "-n", tenant, forged)  # (admin)
    time.sleep(8)  # the Job's event, and two resyncs (3 s in these tests)
    status = kube.get("plan", "gated", "-n", tenant)["status"]
    assert [f["stepId"] for f in status.get("inFlight") or []] == ["tests"], status
    assert [s["stepId"] for s in status["report"]["steps"]] == ["build"], "tests settled early"
    done = wait_plan(kube, tenant, "gated", timeout=120)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    got = steps(done)
    assert got["tests"]["output"] == "tested" and got["deploy"]["output"] == "deployed"
    assert got["deploy"]["startedAt"] >= got["tests"]["finishedAt"]


def job_and_pod_of_tests(
    kube: Kube, ns: str, name: str
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Plan `name` (`tests`, 25 s, then `deploy`) running before mallory (`edit`): the Job of
    `tests` and its pods, once it has one."""
    obj = editor_meets_tests_running(
        kube, ns, name, {"id": "tests", "shell": "sh -c 'sleep 25; echo tested'"}
    )
    run = obj["status"]["run"]["id"]
    selector = f"planops.dev/plan={name},planops.dev/run={run},planops.dev/step=tests"
    deadline = time.monotonic() + 60
    while not (pods := kube.get("pods", "-n", ns, "-l", selector)["items"]):
        assert time.monotonic() < deadline, "the step's pod never appeared"
        time.sleep(0.5)
    (job,) = kube.get("jobs", "-n", ns, "-l", selector)["items"]
    return job, pods


def test_someone_with_edit_cannot_change_what_a_running_step_runs(kube: Kube, tenant: str):
    """A pod's image is mutable, and the kubelet restarts the container in the new image
    whatever the restart policy: `kubectl set image pod/<tests' pod> step=<an image of mine>`
    ran the step's command in the editor's image, which exits 0 printing what it chooses, and
    `deploy` started on it. A debug container joins the step's processes; a Job's backoffLimit or
    parallelism change how its attempt runs. The API server refuses each (the spec of a run's Job
    or pod is the operator's); a label of the editor's own on the pod stays allowed."""
    job, pods = job_and_pod_of_tests(kube, tenant, "imaged")
    pod = pods[0]["metadata"]["name"]

    def as_editor(*args: str) -> subprocess.CompletedProcess[str]:
        return kube.run(f"--as={EDITOR}", *args, "-n", tenant, check=False)

    image = as_editor("set", "image", f"pod/{pod}", "step=registry.example/forger:1")
    assert image.returncode != 0, "`edit` changed the image of a step's pod"
    assert "may not change a pod that carries planops marks (its spec)" in image.stderr
    patch = '{"spec": {"backoffLimit": 6, "parallelism": 3}}'
    retried = as_editor("patch", "job", job["metadata"]["name"], "--type=merge", "-p", patch)
    assert retried.returncode != 0, "`edit` changed the spec of a step's Job"
    assert "may not change a Job that carries planops marks (its spec)" in retried.stderr
    forger = "--image=registry.example/forger:1"
    debug = as_editor("debug", pod, forger, "--target=step", "--", "true")
    assert debug.returncode != 0, "`edit` added a debug container to a step's pod"
    assert "its spec" in debug.stderr or "forbidden" in debug.stderr.lower(), debug.stderr
    mine = as_editor("label", "pod", pod, "mine=yes")
    assert mine.returncode == 0, mine.stderr  # a label of the editor's own: nothing planops reads
    done = wait_plan(kube, tenant, "imaged", timeout=120)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    got = steps(done)
    assert got["tests"]["output"] == "tested" and got["deploy"]["output"] == "deployed"


@pytest.mark.cisteps
def test_an_author_cannot_choose_the_program_an_allowed_command_runs(kube: Kube, tenant: str):
    """Under a Capsule that allows `cp` and `echo` (and neither a script nor `sh` would be
    needed), `cp /bin/sh ./echo` in the workspace, then `echo -c CODE` with PATH set to the
    workspace, ran sh on the author's code (run --local showed it). So did LD_PRELOAD (any file
    as code in any program), and a claim an earlier step wrote, mounted over /bin. Each Plan
    alice applies is judged Invalid by the validator, with the model's words, and no Job is
    made; a variable of her own runs. (No CRD rule: one per env entry of 30,000 steps exceeds
    the API server's cost budget for a rule.)"""
    for name, step, refused in (
        (
            "path",
            {"shell": "echo -c id", "env": [{"name": "PATH", "value": "/workspace"}]},
            "PATH is the image's: it chooses which program a step's command runs",
        ),
        (
            "preload",
            {"script": "true", "env": [{"name": "LD_PRELOAD", "value": "/workspace/x.so"}]},
            "LD_PRELOAD is the image's",
        ),
        (
            "overbin",
            {"shell": "echo hi", "volumeMounts": [{"name": "data", "mountPath": "/bin"}]},
            "the image's programs and libraries (/bin, /sbin, /lib*, /usr but /usr/src",
        ),
    ):
        done = apply_as_author(kube, tenant, plan(name, {"id": "run", **step}, capsule="safe"))
        assert done.returncode == 0, done.stderr
        obj = wait_plan(kube, tenant, name)
        assert obj["status"]["phase"] == "Invalid", obj["status"]
        assert refused in json.dumps(obj["status"]["errors"]), obj["status"]["errors"]
        jobs = kube.get("jobs", "-n", tenant, "-l", f"planops.dev/plan={name}")["items"]
        assert jobs == [], f"a Job was made for {name}"
    own = {"id": "run", "shell": "echo hi", "env": [{"name": "MYPATH", "value": "/workspace"}]}
    done = apply_as_author(kube, tenant, plan("own", own, capsule="safe"))
    assert done.returncode == 0, done.stderr
    result = wait_plan(kube, tenant, "own", timeout=120)
    assert result["status"]["phase"] == "Succeeded", result["status"]


@pytest.mark.cisteps
def test_someone_with_edit_cannot_take_a_step_pods_labels_off_to_change_it(kube: Kube, tenant: str):
    """The owned-objects policy looked only at Jobs and pods that carried planops' marks, and a
    step's pod carries only labels (its owner is the Job). `kubectl label pod <tests' pod>
    planops.dev/plan- planops.dev/run- …` was admitted (taking a mark off counted as no
    change), and then the pod matched nothing: `kubectl set image` ran the step's command in
    the editor's image, and the operator (which finds the pod by its Job, not by labels) read
    its log as the step's output. Taking a planops label off is refused like adding one; the
    editor's own label still comes and goes."""
    job, pods = job_and_pod_of_tests(kube, tenant, "unlabelled")

    def as_editor(*args: str) -> subprocess.CompletedProcess[str]:
        return kube.run(f"--as={EDITOR}", *args, "-n", tenant, check=False)

    for kind, meta in (("pod", pods[0]["metadata"]), ("job", job["metadata"])):
        ours = [k for k in meta["labels"] if k.startswith("planops.dev/")]
        off = as_editor("label", kind, meta["name"], *(f"{k}-" for k in ours))
        assert off.returncode != 0, f"`edit` took planops' labels off a step's {kind}"
        assert "that carries planops marks (removed label planops.dev/" in off.stderr, off.stderr
        one = as_editor("label", kind, meta["name"], "planops.dev/step-")
        assert one.returncode != 0 and "removed label planops.dev/step=tests" in one.stderr
        assert as_editor("label", kind, meta["name"], "mine=yes").returncode == 0
        assert as_editor("label", kind, meta["name"], "mine-").returncode == 0
    pod = pods[0]["metadata"]["name"]
    image = as_editor("set", "image", f"pod/{pod}", "step=registry.example/forger:1")
    assert image.returncode != 0 and "its spec" in image.stderr, image.stderr
    done = wait_plan(kube, tenant, "unlabelled", timeout=120)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    assert steps(done)["tests"]["output"] == "tested"


READER = "bob"  # plan-author in the namespace, `use` on no Capsule: may re-run, may not answer


def test_an_old_rerun_value_brings_back_no_earlier_run_and_no_approval(
    kube: Kube, kubeconfig: str, tenant: str
):
    """Someone who may annotate Plans but use no Capsule (a re-run needs no `use`) sets the
    re-run value back to one used before, then takes it away: each is a new run with an id of
    its own, which asks again; the answer given to an earlier run approves none of them, and
    every earlier run keeps its history entry."""
    bind(kube, tenant, "bob-plan-author", READER, f"{RELEASE}-planops-plan-author")
    ask = {
        "prompt": "deploy?",
        "outputSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
    }
    gated = plan(
        "approved",
        {"id": "approve", "ask": ask},
        {"id": "deploy", "shell": "echo deployed", "dependsOn": ["approve"]},
        capsule="safe",
    )
    gated["metadata"]["annotations"] = {"planops.dev/rerun": "a"}
    done = apply_as_author(kube, tenant, gated)
    assert done.returncode == 0, done.stderr

    def run_of(rerun: str | None) -> dict[str, Any]:
        """The status of the run the re-run value `rerun` started (once it asked or ended)."""
        return wait_plan(
            kube,
            tenant,
            "approved",
            phases=("Running", "Succeeded", "Failed"),
            until=lambda o: (
                o["status"]["run"].get("rerun") == rerun
                and (bool(o["status"].get("asks")) or o["status"]["phase"] != "Running")
            ),
        )["status"]

    def as_reader(*args: str) -> None:
        done = kube.run(
            f"--as={READER}", "annotate", "plan", "approved", "-n", tenant, *args, check=False
        )
        assert done.returncode == 0, done.stderr  # a re-run is no author's act

    ids = [run_of("a")["run"]["id"]]
    answered = cli(kubeconfig, "answer", "approved", "approve", "--set", "ok=true", "-n", tenant)
    assert answered.returncode == 0, answered.stderr
    assert wait_plan(kube, tenant, "approved")["status"]["phase"] == "Succeeded"
    as_reader("--overwrite", "planops.dev/rerun=b")
    ids.append(run_of("b")["run"]["id"])
    for value in ("a", None):  # a value used before; none
        as_reader("--overwrite", f"planops.dev/rerun={value}" if value else "planops.dev/rerun-")
        run_of(value)
        time.sleep(6)  # an earlier answer would have settled the ask by now
        status = kube.get("plan", "approved", "-n", tenant)["status"]
        assert [s["stepId"] for s in status["report"]["steps"]] == [], "approved by an old answer"
        assert status["phase"] == "Running" and [a["stepId"] for a in status["asks"]] == ["approve"]
        assert status["run"]["id"] not in ids, f"run id {status['run']['id']} used again"
        ids.append(status["run"]["id"])
        assert [e["id"] for e in status["history"]] == ids[-2::-1]
    refused = kube.run(
        f"--as={READER}",
        "annotate",
        "plan",
        "approved",
        "-n",
        tenant,
        "--overwrite",
        'answer.planops.dev/approve={"run": "x", "answer": {"ok": true}}',
        check=False,
    )
    assert refused.returncode != 0 and "may not use Capsule safe" in refused.stderr


# -- an edit is an author's act ----------------------------------------------------------------


def recorded_author(kube: Kube, ns: str, kind: str, name: str) -> str | None:
    """The username the API server recorded as the object's author (None: nothing recorded)."""
    raw = (kube.get(kind, name, "-n", ns)["metadata"].get("annotations") or {}).get(AUTHOR_KEY)
    return json.loads(raw)["username"] if raw else None


def scheduled_plan(name: str, cap: str, schedule: str = "0 3 * * *") -> dict[str, Any]:
    return {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "ScheduledPlan",
        "metadata": {"name": name},
        "spec": {
            "schedule": schedule,
            "planTemplate": {"spec": {"capsule": cap, "steps": [{"id": "a", "shell": "echo"}]}},
        },
    }


@pytest.fixture
def unwatched(kube: Kube, namespace: str, busybox: str, crds: None, policies: None) -> str:
    """A namespace no operator watches (whatever is refused there, the API server refused
    alone) with Capsules `safe` (alice may use it) and `privileged`, and an admin's Plan and
    ScheduledPlan `nightly` under `privileged`."""
    for name in ("safe", "privileged"):
        kube.apply(capsule(busybox, name=name), "-n", namespace)
    grant(kube, namespace, ["safe"])
    nightly = plan("nightly", {"id": "a", "shell": "echo"}, capsule="privileged", input={"x": 1})
    kube.apply(nightly, "-n", namespace)
    kube.apply(scheduled_plan("nightly", "privileged"), "-n", namespace)
    return namespace


def test_every_edit_of_what_a_plan_does_needs_use_on_its_capsule(kube: Kube, unwatched: str):
    """alice may edit Plans in the namespace (plan-author) but not use `privileged`: she may not
    change what the admin's Plan or ScheduledPlan on it does, by any field."""
    token = "cat /var/run/secrets/kubernetes.io/serviceaccount/token"
    answer = json.dumps({"run": "any", "answer": {"ok": True}})
    edits = [
        ("plan", {"spec": {"steps": [{"id": "x", "shell": token}]}}),
        ("plan", {"spec": {"input": {"x": 2}}}),
        ("plan", {"spec": {"workspace": {"size": "1Gi"}}}),
        ("plan", {"metadata": {"annotations": {"answer.planops.dev/a": answer}}}),
        # a cancel that runs the finally steps starts steps on the Capsule: an author's act
        ("plan", {"metadata": {"annotations": {"planops.dev/cancel-run-finally": "please"}}}),
        (
            "scheduledplan",
            {"spec": {"planTemplate": {"spec": {"steps": [{"id": "x", "shell": token}]}}}},
        ),
        ("scheduledplan", {"spec": {"suspend": True}}),
    ]
    for kind, edit in edits:
        before = kube.get(kind, "nightly", "-n", unwatched)
        done = as_author(
            kube, "patch", kind, "nightly", "-n", unwatched, "--type=merge", "-p", json.dumps(edit)
        )
        assert done.returncode != 0, (kind, edit)
        assert f"alice may not use Capsule privileged in namespace {unwatched}" in done.stderr
        after = kube.get(kind, "nightly", "-n", unwatched)
        assert after["spec"] == before["spec"]
        assert after["metadata"].get("annotations") == before["metadata"].get("annotations")


def test_harmless_edits_need_no_capsule_and_leave_the_author_as_it_was(kube: Kube, unwatched: str):
    """A user's own label, a cancel or a re-run request changes nothing the Plan does: anyone
    with update rights may write them, and the recorded author stays the admin. The record itself
    cannot be written by anyone: the API server puts the old value back."""
    assert recorded_author(kube, unwatched, "plan", "nightly") == "admin"
    for args in (
        ("label", "plan", "nightly", "team=blue"),
        ("annotate", "plan", "nightly", "planops.dev/cancel=please"),
        ("annotate", "plan", "nightly", "planops.dev/rerun=1"),
        ("label", "scheduledplan", "nightly", "team=blue"),
    ):
        done = as_author(kube, *args, "-n", unwatched)
        assert done.returncode == 0, (args, done.stderr)
    forged = json.dumps({"username": AUTHOR, "groups": ["system:masters"]})
    for kind in ("plan", "scheduledplan"):
        done = as_author(
            kube,
            "annotate",
            kind,
            "nightly",
            "-n",
            unwatched,
            "--overwrite",
            f"{AUTHOR_KEY}={forged}",
        )
        assert done.returncode == 0, done.stderr  # admitted, and the record restored
        assert recorded_author(kube, unwatched, kind, "nightly") == "admin"
        done = as_author(kube, "annotate", kind, "nightly", "-n", unwatched, f"{AUTHOR_KEY}-")
        assert done.returncode == 0, done.stderr
        assert recorded_author(kube, unwatched, kind, "nightly") == "admin"
    assert kube.get("plan", "nightly", "-n", unwatched)["metadata"]["labels"]["team"] == "blue"


def test_whoever_changes_what_a_plan_does_is_recorded_as_its_author(kube: Kube, unwatched: str):
    mine = plan("mine", {"id": "a", "shell": "echo"}, capsule="safe")
    done = apply_as_author(kube, unwatched, mine)
    assert done.returncode == 0, done.stderr
    assert recorded_author(kube, unwatched, "plan", "mine") == AUTHOR
    raw = kube.get("plan", "mine", "-n", unwatched)["metadata"]["annotations"][AUTHOR_KEY]
    assert "system:authenticated" in json.loads(raw)["groups"]
    edit = json.dumps({"spec": {"input": {"y": 1}}})
    kube.run("patch", "plan", "mine", "-n", unwatched, "--type=merge", "-p", edit)
    assert recorded_author(kube, unwatched, "plan", "mine") == "admin"
    edit = json.dumps({"spec": {"input": {"y": 2}}})  # alice may use `safe`: she edits it back
    done = as_author(kube, "patch", "plan", "mine", "-n", unwatched, "--type=merge", "-p", edit)
    assert done.returncode == 0, done.stderr
    assert recorded_author(kube, unwatched, "plan", "mine") == AUTHOR


def test_planops_owner_references_are_the_operators_to_add_or_remove(kube: Kube, unwatched: str):
    """A child Plan (owned by its parent Plan) and a scheduled run (owned by its ScheduledPlan),
    made as the operator makes them: an author may neither take them out of their owner's hands
    nor hand a Plan of their own to an owner (which would then read it as its step)."""
    parent = kube.get("plan", "nightly", "-n", unwatched)["metadata"]
    schedule = kube.get("scheduledplan", "nightly", "-n", unwatched)["metadata"]

    def owned_by(kind: str, meta: dict[str, Any]) -> list[dict[str, Any]]:
        return [
            {
                "apiVersion": "planops.dev/v1alpha1",
                "kind": kind,
                "name": meta["name"],
                "uid": meta["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ]

    child = plan("child", {"id": "a", "shell": "echo"}, capsule="safe")
    child["metadata"].update(
        labels={"planops.dev/parent": "nightly", "planops.dev/depth": "1"},
        ownerReferences=owned_by("Plan", parent),
    )
    run = plan("run", {"id": "a", "shell": "echo"}, capsule="safe")
    run["metadata"].update(
        labels={"planops.dev/scheduled-by": "nightly"},
        ownerReferences=owned_by("ScheduledPlan", schedule),
    )
    for obj in (child, run):
        kube.apply(obj, "-n", unwatched)  # the admin holds `manage`, as the operator does
        patch = json.dumps([{"op": "remove", "path": "/metadata/ownerReferences"}])
        name = obj["metadata"]["name"]
        done = as_author(kube, "patch", "plan", name, "-n", unwatched, "--type=json", "-p", patch)
        assert done.returncode != 0 and "a Plan that planops manages" in done.stderr, done.stderr
        assert kube.get("plan", name, "-n", unwatched)["metadata"]["ownerReferences"]

    done = apply_as_author(
        kube, unwatched, plan("mine", {"id": "a", "shell": "echo"}, capsule="safe")
    )
    assert done.returncode == 0, done.stderr
    for kind, meta in (("Plan", parent), ("ScheduledPlan", schedule)):
        adopt = json.dumps({"metadata": {"ownerReferences": owned_by(kind, meta)}})
        done = as_author(
            kube, "patch", "plan", "mine", "-n", unwatched, "--type=merge", "-p", adopt
        )
        assert done.returncode != 0 and "a Plan that planops manages" in done.stderr, done.stderr
    assert "ownerReferences" not in kube.get("plan", "mine", "-n", unwatched)["metadata"]

    # the garbage collector still orphans them when their owner is deleted with --cascade=orphan
    kube.run("delete", "plan", "nightly", "-n", unwatched, "--cascade=orphan", "--wait=false")
    deadline = time.monotonic() + 60
    while kube.get("plan", "child", "-n", unwatched)["metadata"].get("ownerReferences"):
        assert time.monotonic() < deadline, "the garbage collector never orphaned the child"
        time.sleep(0.5)
    assert kube.run("get", "plan", "nightly", "-n", unwatched, check=False).returncode != 0


# -- revoking `use` stops the runs started for an author ------------------------------------------


def reasons(kube: Kube, ns: str, name: str) -> list[str]:
    got = kube.get("events", "-n", ns, "--field-selector", f"involvedObject.name={name}")
    return [e["reason"] for e in got["items"]]


def wait_for(what: str, fn: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got:
            return got
        assert time.monotonic() < deadline, f"{what}: not within {timeout}s"
        time.sleep(1)


def test_revoking_use_stops_a_scheduled_plans_runs_and_a_plans_reruns(kube: Kube, tenant: str):
    """alice schedules a run every minute and runs a Plan, on `safe`; then her `use` is revoked.
    The next scheduled time starts no run, and a re-run of her Plan (asked by an admin, who may
    re-run anything) does not start either: both are started for alice, who no longer may."""
    done = apply_as_author(kube, tenant, scheduled_plan("minutely", "safe", "* * * * *"))
    assert done.returncode == 0, done.stderr
    done = apply_as_author(
        kube, tenant, plan("once", {"id": "a", "shell": "echo hi"}, capsule="safe")
    )
    assert done.returncode == 0, done.stderr
    assert recorded_author(kube, tenant, "scheduledplan", "minutely") == AUTHOR

    def runs() -> list[str]:
        got = kube.get("plans", "-n", tenant, "-l", "planops.dev/scheduled-by=minutely")
        return sorted(p["metadata"]["name"] for p in got["items"])

    wait_for("a first scheduled run", runs, 75)  # at the next minute
    assert wait_plan(kube, tenant, "once")["status"]["phase"] == "Succeeded"
    started = runs()
    kube.run("delete", "rolebinding", "alice-use-capsules", "-n", tenant)

    # a re-run of her Plan, and of a run the operator started for her, is started for her too
    for name in ("once", started[0]):
        kube.run("annotate", "plan", name, "-n", tenant, "planops.dev/rerun=after-revoke")
        obj = wait_plan(
            kube,
            tenant,
            name,
            until=lambda o: (o.get("status") or {}).get("run", {}).get("rerun") == "after-revoke",
        )
        (cond,) = obj["status"]["conditions"]
        assert (obj["status"]["phase"], cond["reason"]) == ("Failed", "UseRevoked"), obj["status"]
        message = "alice, who last changed what this Plan does, may no longer use Capsule safe"
        assert message in cond["message"]
        assert "UseRevoked" in reasons(kube, tenant, name)
        # taking the annotation away names the first run again: no way around the check either
        kube.run("annotate", "plan", name, "-n", tenant, "planops.dev/rerun-")
        obj = wait_plan(
            kube,
            tenant,
            name,
            until=lambda o: (
                "rerun" in (o.get("status") or {}).get("run", {})
                and not o["status"]["run"].get("rerun")
            ),
        )
        (cond,) = obj["status"]["conditions"]
        assert (obj["status"]["phase"], cond["reason"]) == ("Failed", "UseRevoked"), obj["status"]

    wait_for(
        "the next scheduled time refused",
        lambda: "UseRevoked" in reasons(kube, tenant, "minutely"),
        75,
    )
    status = kube.get("scheduledplan", "minutely", "-n", tenant)["status"]
    (authorized,) = [c for c in status["conditions"] if c["type"] == "Authorized"]
    assert (authorized["status"], authorized["reason"]) == ("False", "UseRevoked")
    assert "alice" in authorized["message"]
    assert runs() == started  # no run since the grant was revoked


# pytest -n: one worker runs it with the other cluster-wide tests (tests/xdist_groups.py)
def test_revoking_use_stops_a_cluster_scheduled_plans_runs_in_that_namespace(
    kube: Kube, tenant: str
):
    """Writing a ClusterScheduledPlan takes a cluster-wide right, but a run in a namespace runs
    under that namespace's Capsule: carol, allowed to write ClusterScheduledPlans and to use
    `safe` in the tenant namespace, schedules a run every minute there; once her `use` is
    revoked, the next time starts no run there and the `Authorized` condition says why."""
    tag = uuid.uuid4().hex[:8]
    carol, name = f"carol-{tag}", f"every-minute-{tag}"
    kube.run("label", "namespace", tenant, f"planops-csp={tag}")
    role = {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name}
    subject = [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": carol}]
    cluster_scoped = [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name},
            "rules": [
                {
                    "apiGroups": ["planops.dev"],
                    "resources": ["clusterscheduledplans"],
                    "verbs": ["create", "get", "list", "watch", "update", "patch", "delete"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name},
            "roleRef": role,
            "subjects": subject,
        },
    ]
    csp = {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "ClusterScheduledPlan",
        "metadata": {"name": name},
        "spec": {
            "schedule": "* * * * *",
            "namespaceSelector": {"matchLabels": {"planops-csp": tag}},
            "planTemplate": {"spec": {"capsule": "safe", "steps": [{"id": "a", "shell": "echo"}]}},
        },
    }
    try:
        for obj in cluster_scoped:
            kube.apply(obj)
        kube.apply(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "carol-use-capsules", "namespace": tenant},
                "roleRef": {**role, "kind": "Role", "name": "use-capsules"},
                "subjects": subject,
            }
        )
        done = kube.run(f"--as={carol}", "create", "-f", "-", input=json.dumps(csp), check=False)
        assert done.returncode == 0, done.stderr
        raw = (kube.get("clusterscheduledplan", name)["metadata"].get("annotations") or {}).get(
            AUTHOR_KEY
        )
        assert raw and json.loads(raw)["username"] == carol  # recorded like a ScheduledPlan's

        def runs() -> list[str]:
            got = kube.get("plans", "-n", tenant, "-l", f"planops.dev/cluster-scheduled-by={name}")
            return sorted(p["metadata"]["name"] for p in got["items"])

        wait_for("a first run in the namespace", runs, 75)
        started = runs()
        kube.run("delete", "rolebinding", "carol-use-capsules", "-n", tenant)

        def refused() -> dict[str, Any] | None:
            status = kube.get("clusterscheduledplan", name).get("status") or {}
            conds = [c for c in status.get("conditions") or [] if c["type"] == "Authorized"]
            return conds[0] if conds and conds[0]["status"] == "False" else None

        cond = wait_for("the next time refused for carol", refused, 75)
        assert cond["reason"] == "UseRevoked"
        assert f"{carol}, who last changed what this ClusterScheduledPlan does" in cond["message"]
        assert f"namespace {tenant}" in cond["message"]
        assert runs() == started  # no run since the grant was revoked
    finally:
        kube.run("delete", "clusterscheduledplan", name, "--ignore-not-found", check=False)
        for obj in reversed(cluster_scoped):
            kube.run("delete", obj["kind"].lower(), name, "--ignore-not-found", check=False)
