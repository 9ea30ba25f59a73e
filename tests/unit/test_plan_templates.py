"""Templates (PlanTemplate, ClusterPlanTemplate): the one validator's refusals of a Plan from a
template (spec.templateRef), and its reconcile against the in-memory API: it runs the template's
steps under the Plan's own Capsule, records what it ran, runs that snapshot to the end whatever
happens to the template, and only for an author who may read the template."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from planops.api import parse_document
from planops.api.capsule_models import CapsuleSpec
from planops.api.models import PlanSpec
from planops.api.names import ANNOTATION_AUTHOR, LABEL_RUN
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
    assert "template" not in status  # what it may not read is not shown in its status either


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


# -- a template step -------------------------------------------------------------------------------


def _step_plan(c: Cluster, steps: list[dict[str, Any]]) -> None:
    meta = {"name": "p", "namespace": "ns", "uid": "uid-p", "generation": 1}
    meta["annotations"] = {ANNOTATION_AUTHOR: ALICE}
    spec = {"capsule": "default", "steps": steps}
    c.kube.put(
        "plan",
        {"apiVersion": "planops.dev/v1alpha1", "kind": "Plan", "metadata": meta, "spec": spec},
    )


USES = [
    {"id": "b", "template": REF, "input": {"repo": "r"}},
    {"id": "use", "shell": "echo {{b.json.image}}", "dependsOn": ["b"]},
]


def test_a_template_step_runs_as_a_child_plan_under_the_callers_capsule():
    c = _cluster()
    _step_plan(c, USES)
    c.reconcile()
    (child,) = [p for n, p in c.plans().items() if n != "p"]
    assert child["spec"]["capsule"] == "default"  # the caller's: a template grants nothing
    assert child["spec"]["input"] == {"repo": "r", "tag": "latest"}
    assert [s["id"] for s in child["spec"]["steps"]] == ["build", "test"]
    ran = json.loads(child["metadata"]["annotations"]["planops.dev/template"])
    assert ran == {"kind": "ClusterPlanTemplate", "name": "build", "uid": "t-uid", "generation": 3}
    assert child["metadata"]["labels"]["planops.dev/depth"] == "1"
    # the child's output becomes the step's, read by a later step
    child["metadata"]["creationTimestamp"] = "2027-01-15T08:00:00Z"
    child["status"] = {"phase": "Succeeded", "report": {"steps": [], "output": {"image": "r:1"}}}
    c.reconcile()
    command = c.step_jobs()["use"]["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command == ["echo", "r:1"]


LATER = [
    {"id": "first", "shell": "echo first"},
    {"id": "b", "template": REF, "input": {"repo": "r"}, "dependsOn": ["first"]},
]


def _edit_template(c: Cluster) -> None:
    template = c.kube.get("clusterplantemplate", "", "build")
    assert template is not None
    template["spec"]["steps"] = [{"id": "other", "shell": "echo changed"}]
    template["spec"]["output"] = {"image": "{{other.output}}"}
    template["metadata"]["generation"] = 4
    template["metadata"]["resourceVersion"] = "v4"


def _child_steps(c: Cluster) -> list[str]:
    """The steps of the child Plan of the Plan's current run."""
    (child,) = [
        p
        for n, p in c.plans().items()
        if n != "p" and p["metadata"]["labels"][LABEL_RUN] == c.run()
    ]
    return [s["id"] for s in child["spec"]["steps"]]


def test_a_template_step_runs_the_template_as_the_run_started_not_as_edited_since():
    c = _cluster()
    _step_plan(c, LATER)
    status = c.reconciled()  # the run starts: its step templates are snapshotted
    (rec,) = status["templates"]
    assert {k: rec[k] for k in ("kind", "name", "uid", "generation", "run")} == {
        "kind": "ClusterPlanTemplate",
        "name": "build",
        "uid": "t-uid",
        "generation": 3,
        "run": c.run(),
    }
    assert rec["spec"] == BUILD and "template" not in status  # no templateRef: none of its own
    _edit_template(c)  # between the run's start and the step's dispatch
    gets = len([x for x in c.kube.calls if x[0] == "get_object"])
    c.finish("first", ok=True)
    status = c.reconciled()
    assert _child_steps(c) == ["build", "test"]  # the snapshot's, not `other`
    (child,) = [p for n, p in c.plans().items() if n != "p"]  # the first run's only
    ran = json.loads(child["metadata"]["annotations"]["planops.dev/template"])
    assert ran["generation"] == 3
    assert status["templates"][0]["generation"] == 3  # carried by every status write
    assert len([x for x in c.kube.calls if x[0] == "get_object"]) == gets  # nothing read again
    # a new run (the Plan's spec changed) reads the template again
    c.plan["metadata"]["generation"] = 2
    status = c.reconciled()
    assert status["templates"][0]["generation"] == 4 and status["templates"][0]["run"] == c.run()
    c.finish("first", ok=True)
    c.reconcile()
    assert _child_steps(c) == ["other"]


def test_describe_shows_the_templates_a_run_snapshotted_for_its_template_steps():
    from planops.cli.show import step_template_lines  # noqa: PLC0415

    c = _cluster()
    _step_plan(c, LATER)
    c.reconcile()
    assert step_template_lines(c.plan) == [
        f"ClusterPlanTemplate build (uid t-uid, generation 3; snapshot of run {c.run()})"
    ]


def test_a_run_whose_templates_would_not_fit_its_status_is_refused_saying_so():
    c = _cluster()
    template = c.kube.get("clusterplantemplate", "", "build")
    assert template is not None
    template["spec"]["steps"][1]["shell"] = "echo " + "x" * 800_000
    _step_plan(c, LATER)
    status = c.reconciled()
    assert status["phase"] == "Invalid" and list(c.plans()) == ["p"]
    (error,) = status["errors"]
    assert error["code"] == "limits"
    assert "with the templates it runs" in error["message"], error["message"]


def test_a_template_step_needs_its_authors_get_on_the_template():
    c = _cluster()
    _step_plan(c, USES)
    c.kube.access_denied.add(("clusterplantemplates", "get", "", "build", "alice"))
    status = c.reconciled()
    assert status["phase"] == "Failed" and list(c.plans()) == ["p"]
    # and its status does not show the template it may not read (authors read plans/status)
    assert "templates" not in status and "template" not in status, status


def test_a_template_step_input_outside_the_schema_is_invalid_before_anything_runs():
    c = _cluster()
    _step_plan(c, [{"id": "b", "template": REF, "input": {"rpo": "r"}}])
    status = c.reconciled()
    assert status["phase"] == "Invalid" and list(c.plans()) == ["p"]
    codes = sorted((e["code"], e["path"]) for e in status["errors"])
    assert codes == [("input-schema", "steps[0].input"), ("template-input", "steps[0].input.rpo")]


# -- offline: kubectl-plan validate, graph, run --local with --template ---------------------------

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = str(ROOT / "examples" / "build-and-test.yaml")
RUNS = str(ROOT / "examples" / "build-and-test-run.yaml")
EXAMPLE_CAPSULE = str(ROOT / "examples" / "capsule.yaml")


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "planops.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_a_template_step_runs_locally_and_a_later_step_reads_its_output():
    r = cli(
        "run",
        "--local",
        RUNS,
        "--plan",
        "release-api",
        "--capsule",
        EXAMPLE_CAPSULE,
        "--template",
        EXAMPLE,
    )
    assert r.returncode == 0, r.stderr
    assert "released acme/api:1.4.2" in r.stdout
    assert "delegates to template clusterplantemplate/build-and-test" in r.stderr


def test_a_plan_from_a_template_runs_locally_with_input_from_the_command_line(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "kind: Plan\napiVersion: planops.dev/v1alpha1\nmetadata: {name: p}\n"
        "spec: {templateRef: {kind: ClusterPlanTemplate, name: build-and-test}}\n"
    )
    args = ("--capsule", EXAMPLE_CAPSULE, "--template", EXAMPLE, "-o", "json")
    r = cli("run", "--local", str(plan), *args, "--input", "repo=acme/x")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert [s["output"] for s in report["steps"]] == ["acme/x:latest", "tested acme/x"]
    refused = cli("validate", str(plan), *args, "--input", "rpo=acme/x")
    assert refused.returncode == 1
    errors = [(e["code"], e["step"], e["path"]) for e in json.loads(refused.stdout)["errors"]]
    assert errors == [
        ("template-input", None, "input.rpo"),
        ("input-schema", None, "input"),  # additionalProperties: false
        ("input-schema", None, "input"),  # required: repo
    ]
    graph = cli("graph", str(plan), *args[:4], "--input", "repo=r")
    assert graph.returncode == 0 and "build" in graph.stdout and "test" in graph.stdout


def test_without_the_template_file_the_plan_is_refused_naming_the_flag(tmp_path):
    r = cli("validate", RUNS, EXAMPLE, "--capsule", EXAMPLE_CAPSULE, "--template", EXAMPLE)
    assert r.returncode == 2 and "defined twice" in r.stderr  # one definition wins nowhere
    r = cli("validate", RUNS, "--capsule", EXAMPLE_CAPSULE, "--template", RUNS)
    assert r.returncode == 2 and "--template expects PlanTemplate" in r.stderr
    plan = tmp_path / "p.yaml"
    plan.write_text("id: p\nsteps: [{id: b, template: {kind: ClusterPlanTemplate, name: build}}]\n")
    r = cli("validate", str(plan), "--capsule", EXAMPLE_CAPSULE, "-o", "json")
    (error,) = json.loads(r.stdout)["errors"]
    assert (error["code"], error["step"], error["path"]) == (
        "no-template",
        "b",
        "steps[0].template",
    )
    assert "pass --template FILE" in error["message"]


def test_submit_from_a_template_creates_a_plan_that_runs_it_with_the_given_input():
    import argparse  # noqa: PLC0415
    import asyncio  # noqa: PLC0415

    from planops.cli.submit import cmd_submit  # noqa: PLC0415

    from .fakekube import FakeKube  # noqa: PLC0415

    kube = FakeKube()
    base = {"files": [], "capsule_name": None, "input_file": None, "wait": False, "timeout": 0}
    args = argparse.Namespace(
        **base, from_template="clustertemplate/build-and-test", input=["repo=acme/x"]
    )
    assert asyncio.run(cmd_submit(kube, args, "ns")) == 0
    (created,) = kube.of("plan", "ns")
    assert created["metadata"]["name"].startswith("build-and-test-")
    assert created["spec"] == {
        "templateRef": {"kind": "ClusterPlanTemplate", "name": "build-and-test"},
        "input": {"repo": "acme/x"},
    }
    for bad in ("cronjob/x", "plantemplate/", "plantemplate/Not_A_Name"):
        args = argparse.Namespace(**base, from_template=bad, input=[])
        assert asyncio.run(cmd_submit(kube, args, "ns")) == 2, bad


def test_describe_shows_which_template_a_plan_ran():
    from planops.cli.show import template_line  # noqa: PLC0415

    c = _cluster()
    c.reconcile()
    line = template_line(c.plan)
    assert line == (
        f"ClusterPlanTemplate build (uid t-uid, generation 3; snapshot of run {c.run()})"
    )
    assert template_line({"spec": {"steps": []}}) is None


def test_a_template_step_inside_a_body_is_judged_against_its_template():
    body = {"template": REF, "input": {"rpo": "{{item}}"}}
    errors = _errors({"steps": [{"id": "m", "map": {"over": ["a"], "do": body}}]})
    assert [e[:3] for e in errors] == [
        ("template-input", "m.do.call", "steps[0].map.do.input.rpo")
    ], errors
    assert "did you mean `repo`?" in errors[0][3]
    good = {"template": REF, "input": {"repo": "{{item}}"}}
    routed = {"id": "t", "template": REF, "input": {"repo": "r"}}
    route = {"if": {"value": "{{input.x}}", "op": "eq", "to": 1}, "then": [routed]}
    assert _errors({"steps": [{"id": "m", "map": {"over": ["a"], "do": good}}]}) == []
    assert _errors({"input": {"x": 1}, "steps": [{"id": "r", "decide": route}]}) == []


def _settle_children(c: Cluster, output: Any) -> None:
    for name, child in c.plans().items():
        if name != "p":
            child["metadata"]["creationTimestamp"] = "2027-01-15T08:00:00Z"
            got = output(child) if callable(output) else output
            child["status"] = {"phase": "Succeeded", "report": {"steps": [], "output": got}}


def test_a_capsule_step_inside_a_map_is_observed_as_its_child_plan_settles():
    """A body's child Plans are read as the run's attempts (only the top-level steps' were:
    each item of a map of capsule steps failed as "deleted")."""
    c = _cluster()
    c.capsule("default", {**CAPSULE, "spawn": {"allow": ["other"]}})
    c.capsule("other", {**CAPSULE, "plan": {"steps": [{"id": "x", "shell": "echo hi"}]}})
    body = {"capsule": "other", "input": "do {{item}}"}
    _step_plan(c, [{"id": "m", "map": {"over": ["a", "b"], "concurrency": 2, "do": body}}])
    c.reconcile()
    assert len(c.plans()) == 3
    _settle_children(c, {"n": 1})
    status = c.reconciled()
    assert status["phase"] == "Succeeded", status["report"]["steps"]


def test_a_template_step_inside_a_map_runs_locally(tmp_path):
    plan = tmp_path / "fan.yaml"
    body = {"template": "build-and-test", "input": {"repo": "{{item}}", "tag": "1"}}
    fan = {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": {"name": "fan"},
        "spec": {
            "capsule": "default",
            "steps": [
                {"id": "m", "map": {"over": ["a", "b"], "do": {**body, "template": REF_CLI}}},
                {"id": "show", "shell": "echo got {{m.json.results}}", "dependsOn": ["m"]},
            ],
        },
    }
    plan.write_text(json.dumps(fan))
    r = cli("run", "--local", str(plan), "--capsule", EXAMPLE_CAPSULE, "--template", EXAMPLE)
    assert r.returncode == 0, r.stderr
    assert 'got [{"image": "a:1"}, {"image": "b:1"}]' in r.stdout, r.stdout


REF_CLI = {"kind": "ClusterPlanTemplate", "name": "build-and-test"}


def test_a_template_step_inside_a_map_runs_as_a_child_plan_per_item_from_the_snapshot():
    c = _cluster()
    body = {"template": REF, "input": {"repo": "{{item}}"}}
    _step_plan(c, [{"id": "m", "map": {"over": ["a", "b"], "concurrency": 2, "do": body}}])
    status = c.reconciled()
    assert [t["name"] for t in status["templates"]] == ["build"]  # snapshotted at the start
    _edit_template(c)
    children = {n: p for n, p in c.plans().items() if n != "p"}
    assert sorted(p["spec"]["input"]["repo"] for p in children.values()) == ["a", "b"]
    assert all(
        [s["id"] for s in p["spec"]["steps"]] == ["build", "test"] for p in children.values()
    )
    _settle_children(c, lambda child: {"image": child["spec"]["input"]["repo"]})
    status = c.reconciled()
    assert status["phase"] == "Succeeded", status
    (m,) = [s for s in status["report"]["steps"] if s["stepId"] == "m"]
    assert json.loads(m["output"])["results"] == [{"image": "a"}, {"image": "b"}]


def test_the_webhook_admits_a_plan_whose_template_comes_later_and_refuses_bad_input():
    """GitOps applies in any order: a template not there yet is the reconcile's to judge (it
    stays Invalid until it is); input the template refuses is refused at the door."""
    import asyncio  # noqa: PLC0415
    import copy  # noqa: PLC0415

    from planops.handlers.webhook import Refused, judge_plan  # noqa: PLC0415

    c = _cluster()
    body = copy.deepcopy(c.plan)
    assert asyncio.run(judge_plan(c.reconciler, body, "CREATE", None)) == []
    body["spec"]["input"] = {"rpo": "r"}
    with pytest.raises(Refused, match="did you mean `repo`"):
        asyncio.run(judge_plan(c.reconciler, body, "CREATE", None))
    body["spec"] = {"templateRef": {"name": "later"}}
    assert asyncio.run(judge_plan(c.reconciler, body, "CREATE", None)) == []


# -- a ScheduledPlan that runs a template ---------------------------------------------------------


def _schedule_of(template_name: str, **input_: Any) -> dict[str, Any]:
    ref = {"kind": "ClusterPlanTemplate", "name": template_name}
    return {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "ScheduledPlan",
        "metadata": {
            "name": "nightly",
            "namespace": "ns",
            "uid": "s-1",
            "generation": 1,
            "creationTimestamp": "2027-01-15T07:59:30Z",
        },
        "spec": {
            "schedule": "* * * * *",
            "planTemplate": {"spec": {"templateRef": ref, "input": input_}},
        },
    }


def test_a_scheduled_plan_runs_a_template_and_is_judged_with_it():
    import asyncio  # noqa: PLC0415

    from planops.reconciler import ScheduleReconciler  # noqa: PLC0415

    c = _cluster()
    schedules = ScheduleReconciler(c.kube, clock=lambda: 1_800_000_001.0, budget=None)
    assert asyncio.run(schedules.judge("scheduledplans", _schedule_of("build", repo="r"))) == []
    refused = asyncio.run(schedules.judge("scheduledplans", _schedule_of("build", rpo="r")))
    assert any("[template-input]" in e and "did you mean `repo`" in e for e in refused), refused
    c.kube.put("scheduledplan", _schedule_of("build", repo="r"))
    asyncio.run(schedules.reconcile("scheduledplans", "ns", "nightly"))
    (run,) = [p for n, p in c.plans().items() if n != "p"]
    assert run["spec"] == {
        "templateRef": {"kind": "ClusterPlanTemplate", "name": "build"},
        "input": {"repo": "r"},
    }
    c.reconcile(run["metadata"]["name"])
    assert set(c.step_jobs(run["metadata"]["name"])) == {"build"}  # the template's first step


def test_submit_from_a_scheduled_plan_runs_it_now_as_a_scheduled_run_once_per_request():
    import argparse  # noqa: PLC0415
    import asyncio  # noqa: PLC0415

    from planops.api.names import ANNOTATION_SCHEDULED_TIME, LABEL_SCHEDULED_BY  # noqa: PLC0415
    from planops.cli.submit import cmd_submit  # noqa: PLC0415
    from planops.reconciler import ScheduleReconciler  # noqa: PLC0415

    c = _cluster()
    nightly = _schedule_of("build", repo="r")
    nightly["spec"]["schedule"] = "0 3 * * *"  # not due now
    c.kube.put("scheduledplan", nightly)
    schedules = ScheduleReconciler(c.kube, clock=lambda: 1_800_000_001.0, budget=None)
    asyncio.run(schedules.reconcile("scheduledplans", "ns", "nightly"))
    assert list(c.plans()) == ["p"]  # nothing due
    base = {"files": [], "capsule_name": None, "input_file": None, "input": [], "timeout": 0}
    args = argparse.Namespace(**base, from_template="scheduledplan/nightly", wait=False)
    assert asyncio.run(cmd_submit(c.kube, args, "ns")) == 0
    for _ in range(2):  # the token is acted on once
        asyncio.run(schedules.reconcile("scheduledplans", "ns", "nightly"))
    (run,) = [p for n, p in c.plans().items() if n != "p"]
    assert [m for m, *_ in c.kube.calls if m == "create_plan"] == ["create_plan"]
    assert run["metadata"]["name"].startswith("nightly-now-")
    assert run["metadata"]["labels"][LABEL_SCHEDULED_BY] == "nightly"
    assert ANNOTATION_SCHEDULED_TIME in run["metadata"]["annotations"]
    assert run["spec"]["templateRef"]["name"] == "build"
    missing = argparse.Namespace(**base, from_template="scheduledplan/nope", wait=False)
    assert asyncio.run(cmd_submit(c.kube, missing, "ns")) == 2
