"""The Job of an attempt and the child Plan of a capsule step, field by field: what the pod may do
(securityContext), what it gets (limits, env, volumes), and how it is found again and owned
(labels, annotations, owner references). test_manifests.py checks names and labels at their
longest; this file checks that each field is there and right."""

from __future__ import annotations

import json
from typing import Any

from planops.api import Step
from planops.api.names import (
    ANNOTATION_DELEGATION,
    ANNOTATION_LINEAGE,
    ANNOTATION_OBJECTIVE,
    ANNOTATION_SPAWNED_BY,
    ANNOTATION_STEP_ID,
    LABEL_ATTEMPT,
    LABEL_DEPTH,
    LABEL_PARENT,
    LABEL_PLAN,
    LABEL_RUN,
    LABEL_STEP,
)
from planops.engine import Dispatch
from planops.engine.facts import Kind
from planops.kube import manifests
from planops.kube.manifests import PlanRef, full_value

from .helpers import capsule

REF = PlanRef("team-a", "nightly", "uid-7", "r0123456789", depth=2, lineage=("root", "mid"))
OWNER = {
    "apiVersion": "planops.dev/v1alpha1",
    "kind": "Plan",
    "name": "nightly",
    "uid": "uid-7",
    "controller": True,
    "blockOwnerDeletion": True,
}

TOOL_CAPSULE = capsule(
    tools=[
        {
            "name": "deploy",
            "image": "registry.example/deploy:1",
            "command": ["deploy", "--from-env"],
            "env": [
                {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "t"}}},
                {"name": "MODE", "value": "fast"},
            ],
            "secretMounts": [
                {"secretName": "kubeconfig", "mountPath": "/etc/kube"},
                {"secretName": "ssh", "mountPath": "/etc/ssh-keys"},
            ],
        }
    ],
    resources={"limits": {"memory": "1Gi", "cpu": "2"}},
    serviceAccountName="runner",
    nodeFailureTolerationSeconds=30,
    readOnlyPaths=["/inputs/", "config"],
)


def dispatch(kind: Kind, **step: Any) -> Dispatch:
    s = Step.model_validate({"id": "deploy-it", **step})
    words = s.shell.split() if s.shell else None
    return Dispatch(s, 3, kind, step.get("input"), words)


def tool_job(**kw: Any) -> dict[str, Any]:
    d = dispatch(
        "tool",
        tool="deploy",
        input={"price": "$(HOME) $5"},
        resources={"limits": {"memory": "512Mi"}},
    )
    return manifests.job(
        REF, d, TOOL_CAPSULE, "registry.example/deploy:1", timeout_seconds=600, **kw
    )


def test_a_job_is_owned_by_its_plan_and_named_for_its_attempt():
    job = tool_job()
    meta = job["metadata"]
    assert (job["apiVersion"], job["kind"]) == ("batch/v1", "Job")
    assert meta["namespace"] == "team-a"
    assert meta["ownerReferences"] == [OWNER]
    assert meta["name"] == manifests.child_name("nightly", REF.run, "deploy-it", 3)
    assert len(meta["name"]) <= 63 and meta["name"].startswith("nightly-deploy-it-3-")
    labels = {
        LABEL_PLAN: "nightly",
        LABEL_RUN: REF.run,
        LABEL_STEP: "deploy-it",
        LABEL_ATTEMPT: "3",
        "app.kubernetes.io/managed-by": "planops",
    }
    # every label holds its whole value: no annotation copies them (full_value reads labels)
    assert meta["labels"] == labels and "annotations" not in meta
    template = job["spec"]["template"]["metadata"]  # the pod is found by the same labels
    assert template == {"labels": labels}
    assert full_value(meta, LABEL_STEP) == "deploy-it" and full_value(meta, LABEL_PLAN) == "nightly"


def test_a_job_never_retries_itself_and_its_deadlines_come_from_the_step_timeout():
    spec = tool_job()["spec"]
    assert spec["backoffLimit"] == 0  # planops owns retries: each attempt its own Job
    assert spec["activeDeadlineSeconds"] == 600 + manifests.QUEUE_ALLOWANCE_SECONDS
    pod = spec["template"]["spec"]
    assert pod["activeDeadlineSeconds"] == 600
    assert pod["restartPolicy"] == "Never"


def test_a_jobs_pod_runs_restricted():
    pod = tool_job()["spec"]["template"]["spec"]
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "runAsUser": 65534,
        "runAsGroup": 65534,
        "fsGroup": 65534,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    (container,) = pod["containers"]
    assert container["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
    }
    assert pod["automountServiceAccountToken"] is False
    assert pod["enableServiceLinks"] is False
    assert pod["serviceAccountName"] == "runner"
    assert pod["tolerations"] == [
        {"key": k, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}
        for k in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
    ]


def test_a_job_without_capsule_extras_has_none_of_them():
    d = dispatch("shell", shell="echo hi")
    pod = manifests.job(REF, d, capsule(), "busybox", timeout_seconds=5)["spec"]["template"]["spec"]
    for key in ("serviceAccountName", "tolerations", "nodeSelector", "volumes"):
        assert key not in pod
    (container,) = pod["containers"]
    assert "volumeMounts" not in container and "workingDir" not in container
    assert container["resources"] == {
        "requests": {"cpu": "10m", "memory": "32Mi"},
        "limits": {"cpu": "1", "memory": "256Mi"},
    }


def test_a_jobs_pod_goes_where_its_capsule_says_with_the_capsules_tolerations_first():
    placed = capsule(
        nodeSelector={"type": "kwok", "example.com/pool": "batch"},
        tolerations=[
            {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"},
            {"key": "dedicated", "value": "ci"},
            {"key": "maint", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 9},
        ],
        nodeFailureTolerationSeconds=30,
    )
    d = dispatch("shell", shell="echo hi")
    pod = manifests.job(REF, d, placed, "busybox", timeout_seconds=5)["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"type": "kwok", "example.com/pool": "batch"}
    assert pod["tolerations"] == [
        {"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "dedicated", "operator": "Equal", "value": "ci"},
        {"key": "maint", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 9},
    ] + [
        {"key": k, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 30}
        for k in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
    ]


def test_a_jobs_container_gets_the_steps_limits_over_the_capsules():
    (container,) = tool_job()["spec"]["template"]["spec"]["containers"]
    assert container["resources"]["limits"] == {"memory": "512Mi", "cpu": "2"}
    assert container["resources"]["requests"] == {"cpu": "10m", "memory": "32Mi"}
    assert container["image"] == "registry.example/deploy:1"
    assert container["imagePullPolicy"] == "IfNotPresent"
    assert container["name"] == "step"
    assert container["terminationMessagePolicy"] == "FallbackToLogsOnError"


def test_a_tool_container_gets_its_input_its_identity_and_its_own_credentials():
    (container,) = tool_job()["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["deploy", "--from-env"]  # the Capsule owner's, as written
    env = {e["name"]: e for e in container["env"]}
    assert [e["name"] for e in container["env"]] == [
        "PLANOPS_PLAN",
        "PLANOPS_STEP",
        "PLANOPS_ATTEMPT",
        "PLANOPS_INPUT",
        "TOKEN",
        "MODE",
    ]
    assert env["PLANOPS_PLAN"]["value"] == "nightly"
    assert env["PLANOPS_STEP"]["value"] == "deploy-it"
    assert env["PLANOPS_ATTEMPT"]["value"] == "3"
    # every $ doubled: the kubelet turns $$ back into $ and expands nothing
    assert env["PLANOPS_INPUT"]["value"] == json.dumps({"price": "$$(HOME) $$5"})
    assert env["TOKEN"] == {
        "name": "TOKEN",
        "valueFrom": {"secretKeyRef": {"name": "creds", "key": "t", "optional": False}},
    }
    assert env["MODE"] == {"name": "MODE", "value": "fast"}


def test_a_tools_secrets_are_mounted_read_only_and_readable_by_the_group_alone():
    pod = tool_job()["spec"]["template"]["spec"]
    assert pod["volumes"] == [
        {"name": "secret-0", "secret": {"secretName": "kubeconfig", "defaultMode": 0o440}},
        {"name": "secret-1", "secret": {"secretName": "ssh", "defaultMode": 0o440}},
    ]
    assert pod["containers"][0]["volumeMounts"] == [
        {"name": "secret-0", "mountPath": "/etc/kube", "readOnly": True},
        {"name": "secret-1", "mountPath": "/etc/ssh-keys", "readOnly": True},
    ]


def test_a_tool_step_without_input_gets_an_empty_object():
    d = dispatch("tool", tool="deploy")
    job = manifests.job(REF, d, TOOL_CAPSULE, "x", timeout_seconds=1)
    env = {
        e["name"]: e.get("value") for e in job["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["PLANOPS_INPUT"] == "{}"


def test_a_shell_step_gets_its_words_no_input_and_no_tool_credentials():
    d = dispatch("shell", shell="echo $(HOME) done")
    job = manifests.job(REF, d, TOOL_CAPSULE, "busybox", timeout_seconds=1)
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["echo", "$$(HOME)", "done"]
    assert [e["name"] for e in container["env"]] == [
        "PLANOPS_PLAN",
        "PLANOPS_STEP",
        "PLANOPS_ATTEMPT",
    ]
    assert "volumes" not in pod  # the secrets are the tool's only


def test_a_workspace_is_mounted_with_the_capsules_read_only_paths():
    job = tool_job(workspace_claim="ws-claim")
    pod = job["spec"]["template"]["spec"]
    container = pod["containers"][0]
    assert container["volumeMounts"][2:5] == [
        {"name": "workspace", "mountPath": "/workspace"},
        {
            "name": "workspace",
            "mountPath": "/workspace/inputs",
            "subPath": "inputs",
            "readOnly": True,
        },
        {
            "name": "workspace",
            "mountPath": "/workspace/config",
            "subPath": "config",
            "readOnly": True,
        },
    ]
    assert pod["volumes"][2:3] == [
        {"name": "workspace", "persistentVolumeClaim": {"claimName": "ws-claim"}}
    ]


def test_a_shell_step_works_in_the_workspace():
    d = dispatch("shell", shell="make")
    job = manifests.job(REF, d, TOOL_CAPSULE, "busybox", timeout_seconds=1, workspace_claim="c")
    (container,) = job["spec"]["template"]["spec"]["containers"]
    assert container["workingDir"] == "/workspace"
    assert container["volumeMounts"][0] == {"name": "workspace", "mountPath": "/workspace"}


def test_a_tool_works_in_a_private_empty_directory_not_in_the_workspace():
    """Earlier steps write the workspace: a tool bearing credentials that read a relative path
    (a config file, a plugin, `.npmrc`) would read theirs. Its working directory is its own
    emptyDir; the workspace stays at /workspace for tools that name it."""
    pod = tool_job(workspace_claim="ws-claim")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    workdir = container["workingDir"]
    assert workdir != "/workspace" and not workdir.startswith("/workspace/")
    (mount,) = [m for m in container["volumeMounts"] if m["mountPath"] == workdir]
    assert "subPath" not in mount and not mount.get("readOnly")
    (volume,) = [v for v in pod["volumes"] if v["name"] == mount["name"]]
    assert volume == {"name": mount["name"], "emptyDir": {}}
    assert {"name": "workspace", "mountPath": "/workspace"} in container["volumeMounts"]


def test_every_step_of_a_run_with_a_workspace_is_told_where_it_is():
    for job in (tool_job(workspace_claim="c"), shell_job(workspace_claim="c")):
        env = {
            e["name"]: e.get("value")
            for e in job["spec"]["template"]["spec"]["containers"][0]["env"]
        }
        assert env["PLANOPS_WORKSPACE"] == "/workspace"
    for job in (tool_job(), shell_job()):
        env = {e["name"] for e in job["spec"]["template"]["spec"]["containers"][0]["env"]}
        assert "PLANOPS_WORKSPACE" not in env


def shell_job(**kw: Any) -> dict[str, Any]:
    d = dispatch("shell", shell="make")
    return manifests.job(REF, d, TOOL_CAPSULE, "busybox", timeout_seconds=1, **kw)


def test_a_tool_without_a_workspace_keeps_its_images_working_directory():
    (container,) = tool_job()["spec"]["template"]["spec"]["containers"]
    assert "workingDir" not in container


def test_a_child_plan_runs_the_target_capsules_plan_owned_by_its_parent():
    d = dispatch("capsule", capsule="builder", input={"objective": "build " + "x" * 5000})
    child = manifests.child_plan(
        REF, d, "builder", {"steps": [{"id": "s", "shell": "true"}], "capsule": "evil"}
    )
    meta = child["metadata"]
    assert (child["apiVersion"], child["kind"]) == ("planops.dev/v1alpha1", "Plan")
    assert meta["name"] == manifests.child_name("nightly", REF.run, "deploy-it", 3)
    assert meta["namespace"] == "team-a"
    assert meta["ownerReferences"] == [OWNER]
    assert meta["labels"] == {
        LABEL_PARENT: "nightly",
        LABEL_RUN: REF.run,
        LABEL_STEP: "deploy-it",
        LABEL_ATTEMPT: "3",
        LABEL_DEPTH: "3",  # one below its parent's
        "app.kubernetes.io/managed-by": "planops",
    }
    ann = meta["annotations"]
    assert ann[LABEL_PARENT] == "nightly" and ann[ANNOTATION_STEP_ID] == "deploy-it"
    assert ann[ANNOTATION_LINEAGE] == "root,mid,builder"
    assert ann[ANNOTATION_SPAWNED_BY] == "uid-7"
    assert len(ann[ANNOTATION_DELEGATION]) == 16
    assert ann[ANNOTATION_OBJECTIVE] == ("build " + "x" * 5000)[:4096]
    assert child["spec"] == {
        "steps": [{"id": "s", "shell": "true"}],
        "capsule": "builder",
        "input": {"objective": "build " + "x" * 5000},  # the whole text, not the annotation's
    }


def test_a_child_plans_objective_is_its_input_text():
    d = dispatch("capsule", capsule="builder", input="just do it")
    child = manifests.child_plan(REF, d, "builder", {})
    assert child["metadata"]["annotations"][ANNOTATION_OBJECTIVE] == "just do it"
    other = manifests.child_plan(
        REF, dispatch("capsule", capsule="b", input="x")._replace(attempt=4), "builder", {}
    )
    assert other["metadata"]["name"] != child["metadata"]["name"]  # each attempt its own
    assert (
        other["metadata"]["annotations"][ANNOTATION_DELEGATION]
        != child["metadata"]["annotations"][ANNOTATION_DELEGATION]
    )
