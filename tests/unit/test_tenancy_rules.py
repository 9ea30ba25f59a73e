"""Tenancy rules that need no cluster: a workspace within the Capsule's bounds, credentials that
reach a tool's containers and nothing else, and scheduled-run templates that cannot carry the
labels of the Plans the operator manages."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import ValidationError

from planops.api import CapsuleSpec
from planops.api.schedule_models import ScheduledPlanSpec
from planops.engine import Dispatch, validate
from planops.kube import manifests
from planops.reconciler import ScheduleReconciler
from tests.unit.helpers import capsule, plan, resolver

from .fakekube import FakeKube


def codes(**workspace: Any) -> list[tuple[str, str]]:
    cap = capsule(
        workspace={"claimNames": ["shared"], "maxSize": "5Gi", "storageClassNames": ["fast"]}
    )
    errs = validate(plan({"id": "a", "shell": "echo"}, workspace=workspace), resolver(default=cap))
    return [(e.code, e.path) for e in errs]


@pytest.mark.parametrize(
    ("workspace", "expected"),
    [
        ({"size": "1Gi"}, []),
        ({"size": "5Gi", "storageClassName": "fast"}, []),
        ({"claimName": "shared"}, []),
        ({}, []),  # the default size, 1Gi, on the default class
        ({"claimName": "someone-elses"}, [("workspace", "workspace.claimName")]),
        ({"claimName": "shared", "size": "1Gi"}, [("workspace", "workspace.claimName")]),
        ({"size": "500Ti"}, [("workspace", "workspace.size")]),
        ({"size": "6Gi"}, [("workspace", "workspace.size")]),
        ({"size": "lots"}, [("workspace", "workspace.size")]),
        ({"storageClassName": "premium"}, [("workspace", "workspace.storageClassName")]),
    ],
)
def test_the_workspace_stays_within_the_capsules_bounds(
    workspace: dict[str, Any], expected: list[tuple[str, str]]
):
    assert codes(**workspace) == expected


def test_a_capsule_that_says_nothing_allows_a_small_new_claim_only():
    r = resolver(default=capsule())
    ok = validate(plan({"id": "a", "shell": "echo"}, workspace={"size": "1Gi"}), r)
    assert ok == []
    for ws in ({"size": "2Gi"}, {"claimName": "data"}, {"storageClassName": "standard"}):
        (err,) = validate(plan({"id": "a", "shell": "echo"}, workspace=ws), r)
        assert err.code == "workspace"


CREDENTIALED = {
    "name": "publish",
    "image": "registry.example/publish:1",
    "command": ["publish"],
    "env": [
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "registry", "key": "token"}}},
        {"name": "REGION", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "region"}}},
        {"name": "MODE", "value": "fast"},
    ],
    "secretMounts": [{"secretName": "cloud", "mountPath": "/var/run/secrets/cloud"}],
}


def job_for(step: dict[str, Any], cap: CapsuleSpec, claim: str | None = None) -> dict[str, Any]:
    spec = plan(step)
    kind = "tool" if "tool" in step else "shell"
    d = Dispatch(spec.steps[0], 1, kind, step.get("input"), None)
    ref = manifests.PlanRef("ns", "p", "uid", "run")
    return manifests.job(
        ref, d, cap, "registry.example/x:1", timeout_seconds=60, workspace_claim=claim
    )


def test_a_tools_credentials_reach_its_containers_only():
    cap = capsule(tools=[CREDENTIALED], image="registry.example/x:1")
    tool_job = job_for({"id": "pub", "tool": "publish"}, cap, claim="ws")
    pod = tool_job["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    env = {e["name"]: e for e in c["env"]}
    assert env["TOKEN"]["valueFrom"]["secretKeyRef"] == {
        "name": "registry",
        "key": "token",
        "optional": False,
    }
    assert env["REGION"]["valueFrom"]["configMapKeyRef"]["name"] == "cfg"
    assert env["MODE"] == {"name": "MODE", "value": "fast"}
    secret_volumes = [v for v in pod["volumes"] if "secret" in v]
    assert secret_volumes == [
        {"name": "secret-0", "secret": {"secretName": "cloud", "defaultMode": 0o440}}
    ]
    assert {"name": "secret-0", "mountPath": "/var/run/secrets/cloud", "readOnly": True} in c[
        "volumeMounts"
    ]
    assert any(v.get("persistentVolumeClaim") for v in pod["volumes"])  # workspace kept

    shell_job = job_for({"id": "sh", "shell": "echo hi"}, cap, claim="ws")
    shell_pod = shell_job["spec"]["template"]["spec"]
    text = str(shell_job)
    assert "registry" not in text.replace("registry.example", "") and "cloud" not in text
    assert all("secret" not in v for v in shell_pod["volumes"])
    assert {e["name"] for e in shell_pod["containers"][0]["env"]} == {
        "PLANOPS_PLAN",
        "PLANOPS_STEP",
        "PLANOPS_ATTEMPT",
        "PLANOPS_WORKSPACE",  # the run has a workspace (claim "ws")
    }
    other_tool = job_for({"id": "n", "tool": "notes"}, cap)
    assert "volumes" not in other_tool["spec"]["template"]["spec"]
    assert "TOKEN" not in str(other_tool)


@pytest.mark.parametrize(
    ("change", "why"),
    [
        ({"env": [{"name": "PLANOPS_INPUT", "value": "x"}]}, "PLANOPS_"),
        (
            {
                "env": [
                    {
                        "name": "A",
                        "value": "x",
                        "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}},
                    }
                ]
            },
            "exactly one",
        ),
        ({"env": [{"name": "A"}]}, "exactly one"),
        ({"env": [{"name": "A", "valueFrom": {}}]}, "exactly one"),
        ({"env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}]}, "twice"),
        ({"env": [{"name": "A B", "value": "1"}]}, "pattern"),
        (
            {"secretMounts": [{"secretName": "s", "mountPath": "/workspace/s"}]},
            "outside /workspace",
        ),
        ({"secretMounts": [{"secretName": "s", "mountPath": "/a/../workspace"}]}, "outside"),
        ({"secretMounts": [{"secretName": "s", "mountPath": "relative"}]}, "pattern"),
        ({"secretMounts": [{"secretName": "s", "mountPath": "/planops/tool"}]}, "planops' own"),
        ({"secretMounts": [{"secretName": "s", "mountPath": "//planops"}]}, "planops' own"),
        ({"secretMounts": [{"secretName": "S!", "mountPath": "/s"}]}, "pattern"),
    ],
)
def test_bad_tool_credentials_are_refused_with_a_reason(change: dict[str, Any], why: str):
    tool = {"name": "t", "command": ["x"], **change}
    with pytest.raises(ValidationError, match=why):
        CapsuleSpec.model_validate({"tools": [tool]})


def _api() -> FakeKube:
    kube = FakeKube()
    kube.put("capsule", {"metadata": {"name": "default"}, "spec": {"shell": {"allow": ["echo"]}}})
    return kube


@pytest.mark.parametrize(
    "metadata",
    [
        {"labels": {"planops.dev/parent": "victim"}},
        {"labels": {"planops.dev/depth": "-1"}},
        {"annotations": {"planops.dev/lineage": ""}},
        {"annotations": {"planops.dev/spawned-by": "uid"}},
    ],
)
def test_a_scheduled_runs_template_cannot_carry_the_labels_of_managed_plans(
    metadata: dict[str, Any],
):
    spec = ScheduledPlanSpec.model_validate(
        {
            "schedule": "* * * * *",
            "planTemplate": {
                "metadata": metadata,
                "spec": {"steps": [{"id": "a", "shell": "echo"}]},
            },
        }
    )
    errors = asyncio.run(ScheduleReconciler(_api()).template_errors(spec, "ns"))
    assert len(errors) == 1 and "reserved for planops" in errors[0]
    fine = spec.model_copy(
        update={
            "plan_template": spec.plan_template.model_copy(
                update={
                    "metadata": spec.plan_template.metadata.model_copy(
                        update={"labels": {"team": "a"}, "annotations": {}}
                    )
                }
            )
        }
    )
    assert asyncio.run(ScheduleReconciler(_api()).template_errors(fine, "ns")) == []


def test_a_capsule_can_shorten_how_long_a_step_stays_on_a_lost_node():
    cap = capsule(nodeFailureTolerationSeconds=5)
    pod = job_for({"id": "sh", "shell": "echo hi"}, cap)["spec"]["template"]["spec"]
    assert pod["tolerations"] == [
        {
            "key": "node.kubernetes.io/not-ready",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 5,
        },
        {
            "key": "node.kubernetes.io/unreachable",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 5,
        },
    ]
    default = job_for({"id": "sh", "shell": "echo hi"}, capsule())["spec"]["template"]["spec"]
    assert "tolerations" not in default


def test_the_kubelet_gets_every_dollar_doubled_so_it_expands_nothing():
    cap = capsule(image="registry.example/x:1")
    spec = plan({"id": "sh", "shell": "echo $(PLANOPS_STEP) $$HOME"})
    d = Dispatch(spec.steps[0], 1, "shell", None, ["echo", "$(PLANOPS_STEP)", "$(TOKEN)"])
    ref = manifests.PlanRef("ns", "p", "uid", "run")
    c = manifests.job(ref, d, cap, "registry.example/x:1", timeout_seconds=60)["spec"]["template"][
        "spec"
    ]["containers"][0]
    assert c["command"] == ["echo", "$$(PLANOPS_STEP)", "$$(TOKEN)"]
    tool = Dispatch(plan({"id": "t", "tool": "notes"}).steps[0], 1, "tool", {"v": "$(X)"}, None)
    c = manifests.job(ref, tool, cap, "registry.example/x:1", timeout_seconds=60)["spec"][
        "template"
    ]["spec"]["containers"][0]
    (value,) = [e["value"] for e in c["env"] if e["name"] == "PLANOPS_INPUT"]
    assert value == '{"v": "$$(X)"}'


@pytest.mark.parametrize("path", ["../planops/tool", "a/../../planops", "/", ""])
def test_a_read_only_path_may_not_leave_the_workspace_for_the_tools_directory(path: str):
    with pytest.raises(ValidationError, match="readOnlyPaths"):
        CapsuleSpec.model_validate({"readOnlyPaths": [path]})
    assert CapsuleSpec.model_validate({"readOnlyPaths": ["config/"]}).read_only_paths
