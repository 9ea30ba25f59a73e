"""Templates (PlanTemplate, ClusterPlanTemplate): the one validator's refusals of a Plan from a
template (spec.templateRef), and its reconcile against the in-memory API: it runs the template's
steps under the Plan's own Capsule, records what it ran, runs that snapshot to the end whatever
happens to the template, and only for an author who may read the template."""

from __future__ import annotations

import json
from typing import Any

import pytest
from pydantic import ValidationError

from planops.api import parse_document
from planops.api.capsule_models import CapsuleSpec
from planops.api.models import PlanSpec
from planops.api.names import ANNOTATION_AUTHOR
from planops.api.template_models import PlanTemplateSpec
from planops.engine import capsules, validate
from planops.engine.plan_templates import templates
from planops.reconciler.run import templating

from .harness import Cluster

CAPSULE = {"image": "busybox:1", "shell": {"allow": ["echo"]}}
BUILD = {
    "inputSchema": {
        "type": "object",
        "properties": {"repo": {"type": "string"}, "tag": {"type": "string"}},
        "required": ["repo"],
    },
    "input": {"tag": "latest"},
    "steps": [
        {"id": "build", "shell": "echo {{input.repo}}:{{input.tag}}"},
        {"id": "test", "shell": "echo tested", "dependsOn": ["build"]},
    ],
    "output": {"image": "{{build.output}}"},
}
ALICE = json.dumps({"username": "alice", "groups": ["system:authenticated"]})


def _errors(plan: dict[str, Any], template: dict[str, Any] | None = BUILD) -> list[tuple]:
    spec = PlanSpec.model_validate(plan)
    found = {}
    if template is not None:
        found[("ClusterPlanTemplate", "build")] = PlanTemplateSpec.model_validate(template)
    cap = CapsuleSpec.model_validate(CAPSULE)
    errors = validate(spec, capsules({"default": cap}), templates=templates(found))
    return [(e.code, e.step, e.path, e.message) for e in errors]


REF = {"kind": "ClusterPlanTemplate", "name": "build"}


# -- the validator ---------------------------------------------------------------------------------


def test_a_plan_from_a_template_with_fitting_input_is_valid():
    assert _errors({"templateRef": REF, "input": {"repo": "r"}}) == []


def test_a_missing_template_is_refused_naming_it():
    (error,) = _errors({"templateRef": REF, "input": {"repo": "r"}}, template=None)
    assert error[:3] == ("no-template", None, "templateRef.name")
    assert "ClusterPlanTemplate 'build' not found in the cluster" in error[3]


def test_input_is_judged_against_the_template_schema_every_reason_at_once():
    errors = _errors({"templateRef": REF, "input": {"rpo": "r", "tag": 3}})
    assert ("template-input", None, "input.rpo") in [e[:3] for e in errors]
    (typo,) = [e for e in errors if e[0] == "template-input"]
    assert "did you mean `repo`?" in typo[3]
    schema = sorted(e[2:] for e in errors if e[0] == "input-schema")
    assert schema == [
        ("input", "'repo' is a required property"),
        ("input.tag", "3 is not of type 'string'"),
    ]


def test_a_template_grants_nothing_what_the_callers_capsule_lacks_is_refused_naming_it():
    template = {**BUILD, "steps": [{"id": "push", "shell": "docker push x"}], "output": {}}
    (error,) = _errors({"templateRef": REF, "input": {"repo": "r"}}, template)
    code, step, path, message = error
    assert (code, step, path) == ("shell-not-allowed", "push", "steps[0].shell")
    assert message.startswith("clusterplantemplate/build: binary 'docker'")
    assert "shell.allow" in message


def test_a_plan_from_a_template_declares_no_steps_of_its_own():
    with pytest.raises(ValidationError, match="from the template only: remove steps"):
        PlanSpec.model_validate({"templateRef": REF, "steps": []})
    with pytest.raises(ValidationError, match="steps"):
        PlanSpec.model_validate({})


def test_a_template_declares_no_capsule_and_no_lifecycle():
    doc = {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "PlanTemplate",
        "metadata": {"name": "t"},
        "spec": {**BUILD, "capsule": "admin", "podGC": "Never"},
    }
    _, problems = parse_document(doc)
    (problem,) = problems
    assert problem.path == "spec"
    assert "a template declares no capsule, podGC" in problem.message


# -- the reconcile -------------------------------------------------------------------------------


def _cluster(author: str | None = ALICE) -> Cluster:
    c = Cluster({"default": CAPSULE})
    c.kube.put(
        "clusterplantemplate",
        {
            "metadata": {"name": "build", "uid": "t-uid", "generation": 3},
            "spec": json.loads(json.dumps(BUILD)),
        },
    )
    meta: dict[str, Any] = {"name": "p", "namespace": "ns", "uid": "uid-p", "generation": 1}
    if author:
        meta["annotations"] = {ANNOTATION_AUTHOR: author}
    c.kube.put(
        "plan",
        {
            "apiVersion": "planops.dev/v1alpha1",
            "kind": "Plan",
            "metadata": meta,
            "spec": {"templateRef": REF, "input": {"repo": "r"}},
        },
    )
    return c


def test_a_plan_from_a_cluster_template_runs_its_steps_and_records_what_it_ran():
    c = _cluster()
    status = c.reconciled()
    assert status["phase"] == "Running", status
    assert set(c.step_jobs()) == {"build"}
    recorded = status["template"]
    assert {k: recorded[k] for k in ("kind", "name", "uid", "generation", "run")} == {
        "kind": "ClusterPlanTemplate",
        "name": "build",
        "uid": "t-uid",
        "generation": 3,
        "run": c.run(),
    }
    assert recorded["spec"] == BUILD
    command = c.step_jobs()["build"]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command == ["echo", "r:latest"]  # the Plan's input over the template's defaults


def test_editing_the_template_during_a_run_does_not_change_the_run():
    c = _cluster()
    c.reconcile()
    template = c.kube.get("clusterplantemplate", "", "build")
    assert template is not None
    template["spec"]["steps"] = [{"id": "other", "shell": "echo changed"}]
    template["metadata"]["generation"] = 4
    template["metadata"]["resourceVersion"] += "1"
    c.finish("build", ok=True)
    status = c.reconciled()
    assert set(c.step_jobs()) == {"build", "test"}  # the snapshot's next step, not `other`
    assert status["template"]["generation"] == 3
    c.finish("test", ok=True)
    status = c.reconciled()
    assert status["phase"] == "Succeeded", status
    assert status["report"]["output"] == {"image": "build said hi"}


def test_a_template_deleted_during_a_run_does_not_stop_it():
    c = _cluster()
    c.reconcile()
    del c.kube.objects[("clusterplantemplate", "", "build")]
    c.finish("build", ok=True)
    assert c.reconciled()["phase"] == "Running"
    assert set(c.step_jobs()) == {"build", "test"}


def test_an_author_who_may_not_read_the_template_gets_no_run():
    c = _cluster()
    c.kube.access_denied.add(("clusterplantemplates", "get", "", "build", "alice"))
    status = c.reconciled()
    assert status["phase"] == "Failed" and c.jobs() == []
    (condition,) = [x for x in status["conditions"] if x["type"] == "Succeeded"]
    assert condition["reason"] == templating.REASON
    assert "alice" in condition["message"]
    assert 'may not read ClusterPlanTemplate build (RBAC verb "get"' in condition["message"]
    assert c.events(templating.REASON)


def test_an_author_who_may_read_the_template_is_asked_once_per_run():
    c = _cluster()
    c.reconcile()
    c.reconcile()
    asked = [r for r in c.kube.reviews if r[1] == "clusterplantemplates/build"]
    assert asked == [("", "clusterplantemplates/build", "alice", ["system:authenticated"])]


def test_a_plan_naming_a_missing_template_is_invalid():
    c = _cluster()
    del c.kube.objects[("clusterplantemplate", "", "build")]
    status = c.reconciled()
    assert status["phase"] == "Invalid"
    assert [e["code"] for e in status["errors"]] == ["no-template"]
