"""Templates on the real cluster and node: a template step runs as a child Plan under the
caller's Capsule and a later step reads its output; a Plan from a ClusterPlanTemplate runs and
records what it ran; a template edited during a run does not change the run; and an author who
may not `get` the template gets no run (the operator asks the API server as them)."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import Kube
from tests.e2e.conftest import cli, plan, steps, wait_plan
from tests.e2e.test_tenancy import apply_as_author, bind, policies  # noqa: F401 - a fixture

pytestmark = [pytest.mark.cluster, pytest.mark.node, pytest.mark.templates]

BUILD = {
    "inputSchema": {
        "type": "object",
        "required": ["repo"],
        "properties": {"repo": {"type": "string"}, "tag": {"type": "string"}},
    },
    "input": {"tag": "latest"},
    "steps": [
        {"id": "build", "shell": "echo {{input.repo}}:{{input.tag}}"},
        {"id": "test", "shell": "echo tested", "dependsOn": ["build"]},
    ],
    "output": {"image": "{{build.output}}"},
}


@pytest.fixture
def cluster_template(kube: Kube) -> Iterator[str]:
    """A ClusterPlanTemplate of this test alone (cluster-scoped: a name no other session has)."""
    name = f"e2e-build-{uuid.uuid4().hex[:8]}"
    kube.apply(template(name, BUILD))
    try:
        yield name
    finally:
        kube.run("delete", "clusterplantemplate", name, "--ignore-not-found", check=False)


def template(name: str, spec: dict[str, Any], kind: str = "ClusterPlanTemplate") -> dict[str, Any]:
    return {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": spec,
    }


def from_template(name: str, kind: str, template_name: str, **input_: Any) -> dict[str, Any]:
    return {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": {"name": name},
        "spec": {"templateRef": {"kind": kind, "name": template_name}, "input": input_},
    }


def test_a_template_step_runs_and_a_later_step_reads_its_output(
    kube: Kube, ns: str, cluster_template: str
):
    ref = {"kind": "ClusterPlanTemplate", "name": cluster_template}
    kube.apply(
        plan(
            "release",
            {"id": "b", "template": ref, "input": {"repo": "acme/api", "tag": "1.4"}},
            {"id": "use", "shell": "echo got {{b.json.image}}", "dependsOn": ["b"]},
        ),
        "-n",
        ns,
    )
    obj = wait_plan(kube, ns, "release")
    assert obj["status"]["phase"] == "Succeeded", obj["status"]
    assert steps(obj)["use"]["output"] == "got acme/api:1.4"
    assert json.loads(steps(obj)["b"]["output"]) == {"image": "acme/api:1.4"}
    children = kube.get("plans", "-n", ns, "-l", "planops.dev/parent=release")["items"]
    (child,) = children
    assert child["spec"]["capsule"] == "default"  # the caller's: a template grants nothing
    ran = json.loads(child["metadata"]["annotations"]["planops.dev/template"])
    assert ran["kind"] == "ClusterPlanTemplate" and ran["name"] == cluster_template


def test_a_plan_from_a_cluster_template_runs_and_records_what_it_ran(
    kube: Kube, ns: str, cluster_template: str
):
    kube.apply(
        from_template("web", "ClusterPlanTemplate", cluster_template, repo="acme/web"), "-n", ns
    )
    obj = wait_plan(kube, ns, "web")
    assert obj["status"]["phase"] == "Succeeded", obj["status"]
    assert [s["output"] for s in obj["status"]["report"]["steps"]] == ["acme/web:latest", "tested"]
    assert obj["status"]["report"]["output"] == {"image": "acme/web:latest"}
    recorded = obj["status"]["template"]
    live = kube.get("clusterplantemplate", cluster_template)
    assert recorded["uid"] == live["metadata"]["uid"]
    assert recorded["generation"] == live["metadata"]["generation"] == 1
    assert recorded["run"] == obj["status"]["run"]["id"]


def test_editing_a_template_mid_run_does_not_change_the_running_plan(kube: Kube, ns: str):
    slow = {
        **BUILD,
        "steps": [
            {"id": "wait", "shell": "sleep 6"},
            {"id": "build", "shell": "echo v1 {{input.repo}}", "dependsOn": ["wait"]},
        ],
        "output": {"image": "{{build.output}}"},
    }
    kube.apply(template("slow", slow, kind="PlanTemplate"), "-n", ns)
    kube.apply(from_template("p", "PlanTemplate", "slow", repo="r"), "-n", ns)
    wait_plan(kube, ns, "p", ("Running",), until=lambda o: "template" in o["status"])
    edited = {**slow, "steps": [{"id": "other", "shell": "echo v2"}], "output": {}}
    kube.apply(template("slow", edited, kind="PlanTemplate"), "-n", ns)
    assert kube.get("plantemplate", "slow", "-n", ns)["metadata"]["generation"] == 2
    obj = wait_plan(kube, ns, "p")
    assert obj["status"]["phase"] == "Succeeded", obj["status"]
    assert [s["stepId"] for s in obj["status"]["report"]["steps"]] == ["wait", "build"]
    assert steps(obj)["build"]["output"] == "v1 r"
    assert obj["status"]["template"]["generation"] == 1


def test_editing_a_template_before_its_step_is_dispatched_does_not_change_the_step(
    kube: Kube, ns: str
):
    """A template step dispatched after its template was edited runs the template as the run
    started (status.templates), not as it is at dispatch."""
    kube.apply(template("piece", BUILD, kind="PlanTemplate"), "-n", ns)
    kube.apply(
        plan(
            "caller",
            {"id": "wait", "shell": "sleep 6"},
            {
                "id": "b",
                "template": {"name": "piece"},
                "input": {"repo": "r"},
                "dependsOn": ["wait"],
            },
        ),
        "-n",
        ns,
    )
    wait_plan(kube, ns, "caller", ("Running",), until=lambda o: "templates" in o["status"])
    edited = {**BUILD, "steps": [{"id": "other", "shell": "echo v2"}], "output": {}}
    kube.apply(template("piece", edited, kind="PlanTemplate"), "-n", ns)
    obj = wait_plan(kube, ns, "caller")
    assert obj["status"]["phase"] == "Succeeded", obj["status"]
    assert json.loads(steps(obj)["b"]["output"]) == {"image": "r:latest"}  # the snapshot's
    (child,) = kube.get("plans", "-n", ns, "-l", "planops.dev/parent=caller")["items"]
    assert [s["id"] for s in child["spec"]["steps"]] == ["build", "test"]
    (recorded,) = obj["status"]["templates"]
    assert recorded["generation"] == 1 and recorded["name"] == "piece"


def test_a_template_step_in_a_map_body_runs_a_child_plan_per_item(
    kube: Kube, ns: str, cluster_template: str
):
    ref = {"kind": "ClusterPlanTemplate", "name": cluster_template}
    body = {"template": ref, "input": {"repo": "{{item}}"}}
    kube.apply(
        plan("fan", {"id": "m", "map": {"over": ["a", "b"], "concurrency": 2, "do": body}}),
        "-n",
        ns,
    )
    obj = wait_plan(kube, ns, "fan")
    assert obj["status"]["phase"] == "Succeeded", obj["status"]
    results = json.loads(steps(obj)["m"]["output"])["results"]
    assert results == [{"image": "a:latest"}, {"image": "b:latest"}]
    assert [t["name"] for t in obj["status"]["templates"]] == [cluster_template]


def test_an_author_without_get_on_the_template_gets_no_run(
    kube: Kube,
    ns: str,
    policies: None,  # noqa: F811 - the fixture imported above
):
    """alice may write Plans and use the Capsule, but not read the namespace's PlanTemplate:
    the operator asks the API server as her before the run, and nothing runs. Given `get` on
    it, her Plan runs."""
    kube.apply(template("build", BUILD, kind="PlanTemplate"), "-n", ns)
    kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "writes-plans", "namespace": ns},
            "rules": [
                {
                    "apiGroups": ["planops.dev"],
                    "resources": ["plans", "plans/status"],
                    "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
                },
                {
                    "apiGroups": ["planops.dev"],
                    "resources": ["capsules"],
                    "resourceNames": ["default"],
                    "verbs": ["get", "use"],
                },
            ],
        }
    )
    bind(kube, ns, "alice-writes-plans", "alice", "writes-plans", kind="Role")
    done = apply_as_author(kube, ns, from_template("mine", "PlanTemplate", "build", repo="r"))
    assert done.returncode == 0, done.stderr
    obj = wait_plan(kube, ns, "mine")
    assert obj["status"]["phase"] == "Failed", obj["status"]
    (condition,) = [c for c in obj["status"]["conditions"] if c["type"] == "Succeeded"]
    assert condition["reason"] == "TemplateNotAllowed"
    assert (
        "alice" in condition["message"]
        and "may not read PlanTemplate build" in condition["message"]
    )
    assert kube.get("jobs", "-n", ns, "-l", "planops.dev/plan=mine")["items"] == []
    # given `get` on that one template, her next Plan runs
    kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "reads-build", "namespace": ns},
            "rules": [
                {
                    "apiGroups": ["planops.dev"],
                    "resources": ["plantemplates"],
                    "resourceNames": ["build"],
                    "verbs": ["get"],
                }
            ],
        }
    )
    bind(kube, ns, "alice-reads-build", "alice", "reads-build", kind="Role")
    time.sleep(1)  # RBAC's cache in the API server
    done = apply_as_author(kube, ns, from_template("again", "PlanTemplate", "build", repo="r"))
    assert done.returncode == 0, done.stderr
    assert wait_plan(kube, ns, "again")["status"]["phase"] == "Succeeded"


def test_submit_from_a_cluster_template_runs_it_with_the_given_input(
    kube: Kube, kubeconfig: str, ns: str, cluster_template: str
):
    done = cli(
        kubeconfig,
        "submit",
        "--from",
        f"clustertemplate/{cluster_template}",
        "--input",
        "repo=acme/cli",
        "--wait",
        "--timeout",
        "120",
        "-n",
        ns,
    )
    assert done.returncode == 0, done.stderr
    (created,) = kube.get("plans", "-n", ns)["items"]
    assert created["metadata"]["name"].startswith(f"{cluster_template}-")
    assert created["status"]["report"]["output"] == {"image": "acme/cli:latest"}
    described = cli(kubeconfig, "describe", created["metadata"]["name"], "-n", ns)
    assert f"Template:   ClusterPlanTemplate {cluster_template} (uid " in described.stdout


def test_submit_from_a_scheduled_plan_runs_its_template_now_as_a_scheduled_run(
    kube: Kube, kubeconfig: str, ns: str, cluster_template: str
):
    ref = {"kind": "ClusterPlanTemplate", "name": cluster_template}
    kube.apply(
        {
            "apiVersion": "planops.dev/v1alpha1",
            "kind": "ScheduledPlan",
            "metadata": {"name": "nightly"},
            "spec": {
                "schedule": "0 3 1 1 *",  # not due during the test
                "planTemplate": {"spec": {"templateRef": ref, "input": {"repo": "acme/n"}}},
            },
        },
        "-n",
        ns,
    )
    done = cli(
        kubeconfig,
        "submit",
        "--from",
        "scheduledplan/nightly",
        "--wait",
        "--timeout",
        "120",
        "-n",
        ns,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (run,) = kube.get("plans", "-n", ns, "-l", "planops.dev/scheduled-by=nightly")["items"]
    assert run["metadata"]["name"].startswith("nightly-now-")
    assert run["status"]["phase"] == "Succeeded"
    assert run["status"]["report"]["output"] == {"image": "acme/n:latest"}
