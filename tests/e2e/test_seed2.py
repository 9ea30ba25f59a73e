"""Seed 2 through the operator: input schema, templates, filter, exit and the plan's output, with
real Jobs (the control steps themselves are evaluated by the decider: no Job)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import Kube
from tests.e2e.conftest import Operator, cli, events, plan, steps, wait_plan

pytestmark = [pytest.mark.cluster, pytest.mark.node]
SCHEMA = {
    "type": "object",
    "required": ["env"],
    "properties": {"env": {"enum": ["dev", "prod"]}, "sizes": {"type": "array"}},
}


def test_templates_filter_and_output_through_the_operator(kube: Kube, ns: str):
    kube.apply(
        plan(
            "typed",
            {
                "id": "big",
                "filter": {
                    "over": "{{input.sizes}}",
                    "where": {"value": "{{item}}", "op": "gt", "to": 2},
                },
            },
            {
                "id": "use",
                "tool": "echo-input",
                "dependsOn": ["big"],
                "input": {"env": "{{input.env}}", "big": "{{big.json.items}}"},
            },
            {
                "id": "say",
                "shell": "echo {{input.env}} has {{big.json.count}}",
                "dependsOn": ["big"],
            },
            inputSchema=SCHEMA,
            input={"env": "prod", "sizes": [1, 5, 2, 7]},
            output={"count": "{{big.json.count}}", "said": "{{say.output}}"},
        ),
        "-n",
        ns,
    )
    obj = wait_plan(kube, ns, "typed")
    rep = steps(obj)
    assert obj["status"]["phase"] == "Succeeded"
    assert json.loads(rep["use"]["output"]) == {"env": "prod", "big": [5, 7]}
    assert rep["say"]["output"] == "prod has 2"
    assert obj["status"]["report"]["output"] == {"count": 2, "said": "prod has 2"}
    jobs = {
        j["metadata"]["labels"]["planops.dev/step"]
        for j in kube.get("jobs", "-n", ns, "-l", "planops.dev/plan=typed")["items"]
    }
    assert jobs == {"use", "say"}  # the filter ran in the operator, not as a Job


def test_input_violating_the_schema_is_invalid_and_nothing_runs(kube: Kube, ns: str):
    kube.apply(
        plan(
            "bad-input",
            {"id": "a", "shell": "echo {{input.env}}"},
            inputSchema=SCHEMA,
            input={"env": "qa"},
        ),
        "-n",
        ns,
    )
    obj = wait_plan(kube, ns, "bad-input")
    assert obj["status"]["phase"] == "Invalid"
    assert [(e["code"], e["path"]) for e in obj["status"]["errors"]] == [
        ("input-schema", "input.env")
    ]


def test_an_exit_ends_the_plan_in_the_cluster(kube: Kube, ns: str):
    kube.apply(
        plan(
            "guarded",
            {
                "id": "guard",
                "exit": {
                    "when": {"value": "{{input.env}}", "op": "eq", "to": "prod"},
                    "status": "error",
                    "message": "not on {{input.env}}",
                },
            },
            {"id": "deploy", "shell": "echo deploying", "dependsOn": ["guard"]},
            input={"env": "prod"},
        ),
        "-n",
        ns,
    )
    obj = wait_plan(kube, ns, "guarded")
    report = obj["status"]["report"]
    assert obj["status"]["phase"] == "Failed"
    assert report["exit"] == {"stepId": "guard", "status": "error", "message": "not on prod"}
    assert list(steps(obj)) == ["guard"]
    assert kube.get("jobs", "-n", ns, "-l", "planops.dev/plan=guarded")["items"] == []


def _window(pod: dict) -> tuple[str, str]:
    term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    return term["startedAt"], term["finishedAt"]


def test_map_items_run_as_real_jobs_within_concurrency_then_reduce_and_decide(
    kube: Kube, ns: str, operator: Operator
):
    kube.apply(
        plan(
            "fleet",
            {
                "id": "scan",
                "map": {
                    "over": "{{input.hosts}}",
                    "concurrency": 2,
                    "do": [
                        {"id": "probe", "shell": "sh -c 'sleep 2; echo {{item}}'"},
                        {"id": "size", "shell": "sh -c 'echo {{index}}'"},
                    ],
                },
            },
            {
                "id": "total",
                "dependsOn": ["scan"],
                "reduce": {
                    "over": "{{scan.results}}",
                    "initial": 0,
                    "do": {
                        "tool": "echo-input",
                        "input": {"acc": "{{accumulator}}", "n": "{{item}}"},
                    },
                },
            },
            {
                "id": "route",
                "dependsOn": ["scan"],
                "decide": {
                    "if": {"value": "{{scan.count}}", "op": "gte", "to": 4},
                    "then": {"shell": "echo many"},
                    "else": {"shell": "echo few"},
                },
            },
            input={"hosts": ["h0", "h1", "h2", "h3"]},
            output={"results": "{{scan.results}}", "branch": "{{route.branch}}"},
        ),
        "-n",
        ns,
    )
    obj = wait_plan(kube, ns, "fleet", timeout=240)
    rep = steps(obj)
    assert obj["status"]["phase"] == "Succeeded", json.dumps(obj["status"])[:3000]
    assert obj["status"]["progress"] == "3/3"  # body steps are reported, not counted
    assert obj["status"]["report"]["output"] == {"results": [0, 1, 2, 3], "branch": "then"}
    assert rep["route.then.call"]["output"] == "many"
    assert json.loads(rep["total"]["output"])["count"] == 4
    pods = kube.get("pods", "-n", ns, "-l", "planops.dev/plan=fleet")["items"]
    labels = sorted(p["metadata"]["labels"]["planops.dev/step"] for p in pods)
    assert [x for x in labels if x.startswith("scan.")] == sorted(
        f"scan.{i}.{s}" for i in range(4) for s in ("probe", "size")
    )
    for kind in ("map", "reduce", "decide", "shell", "tool"):  # under its own kind, body steps too
        assert operator.sample("planops_steps_total", namespace=ns, kind=kind, status="success")
    # concurrency 2: never more than two probes at once (from the containers' own times)
    probes = [
        _window(p) for p in pods if p["metadata"]["labels"]["planops.dev/step"].endswith(".probe")
    ]
    for start, _ in probes:
        running = sum(1 for s, f in probes if s <= start < f)
        assert running <= 2, probes


def test_an_ask_waits_for_kubectl_plan_answer(kube: Kube, kubeconfig: str, ns: str):
    ask = {
        "prompt": "Deploy to {{input.env}}?",
        "outputSchema": {
            "type": "object",
            "properties": {"ok": {"type": "boolean"}, "tier": {"enum": ["gold", "silver"]}},
            "required": ["ok"],
        },
    }
    kube.apply(
        plan(
            "gate",
            {"id": "confirm", "ask": ask},
            {"id": "go", "dependsOn": ["confirm"], "shell": "echo ok={{confirm.answer.ok}}"},
            input={"env": "prod"},
        ),
        "-n",
        ns,
    )
    obj = wait_plan(kube, ns, "gate", ("Running",), until=lambda o: bool(o["status"].get("asks")))
    (waiting,) = obj["status"]["asks"]
    assert waiting["stepId"] == "confirm" and waiting["prompt"] == "Deploy to prod?"
    assert kube.get("jobs", "-n", ns, "-l", "planops.dev/plan=gate")["items"] == []
    bad = cli(kubeconfig, "answer", "gate", "confirm", "--set", "tier=bronze", "-n", ns)
    assert bad.returncode == 2 and "bronze" in bad.stderr
    wrong = cli(kubeconfig, "answer", "gate", "go", "--set", "ok=true", "-n", ns)
    assert wrong.returncode == 2 and "not waiting" in wrong.stderr
    described = cli(kubeconfig, "describe", "gate", "-n", ns)
    assert "Waiting for an answer: step confirm: Deploy to prod?" in described.stdout
    assert "kubectl plan answer gate confirm --set KEY=VALUE" in described.stdout
    good = cli(kubeconfig, "answer", "gate", "confirm", "--set", "ok=yes", "-n", ns)
    assert good.returncode == 0, good.stderr
    obj = wait_plan(kube, ns, "gate")
    rep = steps(obj)
    assert obj["status"]["phase"] == "Succeeded"
    assert json.loads(rep["confirm"]["output"]) == {"answer": {"ok": True}, "answered": True}
    assert rep["go"]["output"] == "ok=true"
    assert "AskWaiting" in events(kube, ns, "gate")


def test_an_unanswered_ask_takes_its_default_after_its_timeout(kube: Kube, ns: str):
    kube.apply(
        plan(
            "quiet",
            {
                "id": "confirm",
                "timeoutSeconds": 2,
                "ask": {
                    "prompt": "Proceed?",
                    "outputSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
                    "whenUnanswered": "default",
                    "default": {"ok": False},
                },
            },
        ),
        "-n",
        ns,
    )
    obj = wait_plan(kube, ns, "quiet", timeout=60)
    assert obj["status"]["phase"] == "Succeeded"
    assert json.loads(steps(obj)["confirm"]["output"]) == {
        "answer": {"ok": False},
        "answered": False,
        "reason": "unavailable",
    }
    assert not obj["status"].get("asks")
