"""An answer approves the one question the operator asked: the ask of one attempt, in one run of
one Plan (reconciler.run.asks: the annotation carries `status.asks[].question`). And a run id is
never used twice within a Plan (status.run.serial), so an old answer annotation left on a Plan
answers no later run: not a re-run with a value used before, not one after the re-run
annotation was taken away (neither needs `use` on the Capsule), which once named the earlier
run's id again and were approved by its answer."""

from __future__ import annotations

import argparse
import asyncio
import json

import pytest

from planops.api import names
from planops.cli import steer
from planops.kube import manifests

from .harness import Cluster
from .test_retry_reconcile import world

ASK = {
    "prompt": "deploy?",
    "outputSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
}
APPROVED = [
    {"id": "approve", "ask": ASK},
    {"id": "deploy", "shell": "true", "dependsOn": ["approve"]},
]


def answer(w: Cluster, step: str = "approve") -> int:
    """`kubectl plan answer p STEP --set ok=true`, against the in-memory API."""
    args = argparse.Namespace(name="p", step=step, set=["ok=true"], decline=False)
    return asyncio.run(steer.cmd_answer(w.kube, args, "ns"))


def rerun(w: Cluster, value: str | None) -> dict[str, object]:
    notes = w.plan["metadata"]["annotations"]
    if value is None:
        notes.pop(names.ANNOTATION_RERUN, None)
    else:
        notes[names.ANNOTATION_RERUN] = value
    return w.reconciled()


def approved_and_deployed(w: Cluster) -> str:
    """The current run asks; it is answered, deploys, and succeeds. Its run id."""
    status = w.reconciled()
    assert [a["stepId"] for a in status["asks"]] == ["approve"] and "deploy" not in w.step_jobs()
    assert answer(w) == 0
    w.reconciled()
    w.finish("deploy", True)
    done = w.reconciled()
    assert done["phase"] == "Succeeded", done
    return str(done["run"]["id"])


@pytest.mark.parametrize("approved", [None, "a"], ids=["taken-away", "used-again"])
def test_an_earlier_runs_approval_never_approves_a_later_run(approved: str | None):
    """A run approved and deployed (re-run value `approved`); a re-run asks, unanswered; the
    re-run value goes back to `approved` (None: the annotation removed). That run asks again:
    the answer still on the Plan answered the earlier run only."""
    w = world(APPROVED)
    if approved is not None:
        w.reconciled()
        rerun(w, approved)
    ids = [approved_and_deployed(w)]
    waiting = rerun(w, "b")
    assert [a["stepId"] for a in waiting["asks"]] == ["approve"]
    ids.append(str(waiting["run"]["id"]))
    rerun(w, approved)
    status = w.reconciled()  # (the ask was asked: an earlier answer would settle it now)
    assert "deploy" not in w.step_jobs(), "the deploy ran again on an earlier run's approval"
    assert [a["stepId"] for a in status["asks"]] == ["approve"]
    assert status["phase"] == "Running" and status["run"]["id"] not in ids, status["run"]
    ids.append(approved_and_deployed(w))
    history = [e["id"] for e in w.status()["history"]]
    assert history[: len(ids) - 1] == ids[-2::-1]  # every run kept its own entry


def test_an_answer_answers_its_question_and_not_the_next_attempts():
    """A declined ask with `retries` asks again: the declining answer, still on the Plan, is no
    answer to the new attempt's question."""
    w = world([{"id": "approve", "ask": ASK, "retries": 1}, *APPROVED[1:]])
    first = w.reconciled()
    (asked,) = first["asks"]
    args = argparse.Namespace(name="p", step="approve", set=[], decline=True)
    assert asyncio.run(steer.cmd_answer(w.kube, args, "ns")) == 0
    written = json.loads(w.plan["metadata"]["annotations"][manifests.answer_annotation("approve")])
    assert written == {"run": first["run"]["id"], "question": asked["question"], "declined": True}
    second = w.reconciled()
    (again,) = second["asks"]
    assert again["attempt"] == 2 and again["question"] != asked["question"]
    assert w.reconciled()["phase"] == "Running"  # the decline did not fail attempt 2 as well
    assert answer(w) == 0
    w.reconciled()
    assert "deploy" in w.step_jobs()


def test_a_question_recorded_without_an_id_gets_one_and_an_answer_without_one_is_not_taken():
    """An ask recorded by an operator that wrote no question id (an upgrade): the next reconcile
    gives it one, and an annotation written without it (an old CLI) does not settle it."""
    w = world(APPROVED)
    status = w.reconciled()
    for a in w.plan["status"]["asks"]:
        del a["question"]
    old = {"run": status["run"]["id"], "answer": {"ok": True}}
    w.plan["metadata"]["annotations"][manifests.answer_annotation("approve")] = json.dumps(old)
    again = w.reconciled()
    assert again["phase"] == "Running" and "deploy" not in w.step_jobs()
    assert again["asks"][0]["question"]
    assert answer(w) == 0
    w.reconciled()
    assert "deploy" in w.step_jobs()
