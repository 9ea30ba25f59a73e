"""`retry --from` of a Plan whose capsule step's child Plan asked for an approval (in its own
Capsule): the capsule step runs again, a new child that asks again, and what depends on it
waits; the approval given in the earlier run approves nothing now, as for a top-level `ask`
(engine.retry; the operator reads the target Capsules: reconciler.run.retrying.capsule_plans).
Against the in-memory API (fakekube.FakeKube)."""

from __future__ import annotations

import json
from typing import Any

from planops.api import names
from planops.kube import manifests
from planops.reconciler.queue import slots
from planops.reconciler.run.status import rfc3339

from .harness import Cluster
from .test_capsule_concurrency import capsule_spec, cluster

ASK = {
    "prompt": "ship it?",
    "outputSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
}
STEPS = [
    {"id": "approval", "capsule": "gate", "input": "ship it?"},
    {"id": "deploy", "shell": "true", "dependsOn": ["approval"]},
]


def annotate(c: Cluster, name: str, key: str, value: str) -> None:
    obj = c.kube.get("plan", "ns", name)
    assert obj is not None
    obj["metadata"].setdefault("annotations", {})[key] = value
    obj["metadata"]["resourceVersion"] += "1"


def children(c: Cluster) -> list[dict[str, Any]]:
    return [p for p in c.kube.of("plan") if slots.is_child(p)]


def deploys(c: Cluster, run: str) -> list[str]:
    return [
        j["metadata"]["name"]
        for j in c.kube.of("job")
        if j["metadata"]["labels"][names.LABEL_RUN] == run
        and j["metadata"]["labels"][names.LABEL_STEP] == "deploy"
    ]


def complete(c: Cluster, name: str) -> None:
    """The Job `name` succeeded, and its pod."""
    job = c.kube.get("job", "ns", name)
    assert job is not None
    done = {"type": "Complete", "status": "True", "lastTransitionTime": rfc3339(c.now)}
    job["status"] = {"succeeded": 1, "conditions": [done]}
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": name, "controller": True}
    c.kube.put(
        "pod",
        {
            "metadata": {
                "name": f"{name}-pod",
                "labels": job["metadata"]["labels"],
                "ownerReferences": [{**owner, "uid": job["metadata"]["uid"]}],
            },
            "status": {
                "phase": "Succeeded",
                "containerStatuses": [{"state": {"terminated": {"exitCode": 0}}}],
            },
        },
    )
    c.kube.logs[f"{name}-pod"] = "deployed\n"


def approve(c: Cluster, child: str) -> None:
    """The child asks; someone allowed to answers it; it succeeds."""
    c.reconcile(child)
    status = c.status(child)
    (asked,) = status["asks"]
    given = {"run": status["run"]["id"], "question": asked["question"], "answer": {"ok": True}}
    annotate(c, child, manifests.answer_annotation("approve"), json.dumps(given))
    c.reconcile(child)
    assert c.status(child)["phase"] == "Succeeded"


def test_retry_from_runs_a_capsule_step_again_whose_child_asked():
    c = cluster(limit=None)
    c.capsule("gate", capsule_spec(None, plan={"steps": [{"id": "approve", "ask": ASK}]}))
    c.capsule("default", capsule_spec(None, spawn={"allow": ["gate"]}))
    c.new_plan("ship", 1, steps=STEPS)
    c.reconcile("ship")
    (child,) = children(c)
    approve(c, child["metadata"]["name"])
    c.reconcile("ship")
    first = c.status("ship")["run"]["id"]
    (deploy,) = deploys(c, first)
    c.now += 5
    complete(c, deploy)
    c.reconcile("ship")
    assert c.status("ship")["phase"] == "Succeeded"
    annotate(c, "ship", names.ANNOTATION_RETRY, "t1:from=deploy")
    c.now += 10
    c.reconcile("ship")
    run = c.status("ship")["run"]
    assert run["retryFrom"] == "deploy" and run["id"] != first
    assert deploys(c, run["id"]) == [], "deployed again on the earlier run's approval"
    (again,) = children(c)  # the earlier child is gone with its run; a new one asks
    assert again["metadata"]["labels"][names.LABEL_RUN] == run["id"]
    approve(c, again["metadata"]["name"])
    c.reconcile("ship")
    assert deploys(c, run["id"]) != []
