"""The reconciler's own rules, checked without a cluster: each test drives Reconciler.reconcile
against the in-memory API (fakekube.FakeKube) with an injected clock and looks at what it wrote
(the Plan's status, the Jobs it created or deleted). The cluster's e2e tests run the same paths
for real; these fail within seconds when a rule is lost."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from planops.api import names
from planops.kube import manifests
from planops.kube.client import ApiError
from planops.kube.errors import ErrorKind
from planops.reconciler.reconcile import CONFLICT_ROUNDS

from .harness import Cluster

NOW = 1_800_000_000.0
UID = "uid-plan"
CAPSULE = {"image": "busybox:1", "shell": {"allow": ["true", "sleep"]}}


def world(
    steps: list[dict[str, Any]], capsule: dict[str, Any] | None = CAPSULE, **spec: Any
) -> Cluster:
    """A namespace with one Plan `p` (and its Capsule) and the reconciler (tests.unit.harness)."""
    c = Cluster({"default": capsule} if capsule is not None else {})
    c.new_plan("p", steps=steps, uid=UID, **spec)
    return c


def test_an_attempt_the_cluster_refused_is_remembered_and_counts_against_retries():
    w = world([{"id": "a", "shell": "true", "retries": 1, "retryBackoff": {"duration": "10s"}}])
    w.kube.deny("create_job", 'admission webhook "x" denied the request', times=None)
    first = w.reconciled()
    assert first["phase"] == "Pending"  # nothing could start yet
    assert [r["attempt"] for r in first["refusedAttempts"]] == [1]
    w.now += 11  # the retry's backoff passed
    second = w.reconciled()
    assert second["phase"] == "Failed"
    assert [n for m, _, n in w.kube.calls if m == "create_job"] == [
        w.job_name("a", 1),
        w.job_name("a", 2),
    ]
    assert "refused by the cluster's admission policy" in json.dumps(second)


def test_a_job_of_the_attempts_name_owned_by_another_object_is_not_adopted():
    w = world([{"id": "a", "shell": "true"}])
    squatter = {
        "metadata": {
            "name": w.job_name("a", 1),
            "namespace": "ns",
            "labels": manifests.PlanRef("ns", "p", UID, "r").labels("a", 1),
            "ownerReferences": [{"uid": "someone-else", "controller": True}],
        }
    }
    w.kube.put("job", squatter)
    status = w.reconciled()
    assert status["phase"] == "Failed"
    assert "already exists and is not this Plan's" in json.dumps(status)
    assert w.kube.get("job", "ns", w.job_name("a", 1)) == squatter  # left alone


def test_a_job_of_the_attempts_name_that_is_ours_is_adopted():
    w = world([{"id": "a", "shell": "sleep 100"}])
    w.reconciled()
    job = w.kube.get("job", "ns", w.job_name("a", 1))
    assert job is not None
    w.plan.pop("status")  # a crash before the status write: the next reconcile creates again
    status = w.reconciled()
    assert status["phase"] == "Running"
    assert [i["attempt"] for i in status["inFlight"]] == [1]


def test_cancel_deletes_what_runs_and_fails_the_plan():
    w = world([{"id": "a", "shell": "sleep 100"}, {"id": "b", "shell": "sleep 100"}])
    w.reconciled()
    assert len(w.kube.of("job")) == 2
    w.annotate(names.ANNOTATION_CANCEL, "not needed")
    status = w.reconciled()
    assert w.kube.of("job") == []
    assert status["phase"] == "Failed"
    assert "cancelled (not needed)" in json.dumps(status)


def test_a_plan_past_its_active_deadline_is_stopped_like_a_cancel():
    w = world([{"id": "a", "shell": "sleep 100"}], activeDeadlineSeconds=30)
    w.reconciled()
    w.now += 31
    status = w.reconciled()
    assert w.kube.of("job") == []
    assert status["phase"] == "Failed"
    assert "activeDeadlineSeconds" in json.dumps(status)


ASK = {
    "prompt": "go?",
    "outputSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
}


def test_an_answer_annotation_settles_the_ask():
    w = world([{"id": "q", "ask": ASK}])
    first = w.reconciled()
    (ask,) = first["asks"]
    assert ask["stepId"] == "q" and ask["question"]
    given = {"run": first["run"]["id"], "question": ask["question"], "answer": {"ok": True}}
    w.annotate(manifests.answer_annotation("q"), json.dumps(given))
    second = w.reconciled()
    assert second["phase"] == "Succeeded"
    assert "asks" not in second


def test_an_answer_to_another_run_is_not_taken():
    w = world([{"id": "q", "ask": ASK}])
    w.reconciled()
    w.annotate(manifests.answer_annotation("q"), json.dumps({"run": "old", "answer": {"ok": True}}))
    assert w.reconciled()["phase"] == "Running"


def test_an_ask_takes_its_timeout_bounded_by_the_capsules_maximum():
    w = world([{"id": "q", "ask": ASK}], capsule={**CAPSULE, "maxTimeoutSeconds": 5})
    (ask,) = w.reconciled()["asks"]
    assert ask["deadline"] == "2027-01-15T08:00:05.000Z"  # NOW + 5 s, not an hour
    w.now += 6
    status = w.reconciled()
    assert status["phase"] == "Failed"  # whenUnanswered: fail (the default)


def test_an_invalid_plan_runs_once_its_capsule_exists():
    w = world([{"id": "a", "shell": "sleep 100"}], capsule=None)
    assert w.reconciled()["phase"] == "Invalid"
    w.capsule("default", CAPSULE)
    assert w.reconciled()["phase"] == "Running"
    assert len(w.kube.of("job")) == 1


def test_a_request_the_cluster_refuses_fails_the_attempt_and_a_transient_error_retries_it():
    w = world([{"id": "a", "shell": "true", "onError": "continue"}, {"id": "b", "shell": "true"}])
    w.kube.refuse("create_job", 422, "spec.x: Invalid value", name=w.job_name("a", 1), times=None)
    w.kube.refuse("create_job", 500, "etcd is down", name=w.job_name("b", 1))
    with pytest.raises(ApiError):  # transient: the queue retries the whole reconcile
        w.reconciled()
    status = w.reconciled()
    assert "the cluster refused the step's Job: spec.x: Invalid value" in json.dumps(status)
    assert [j["metadata"]["name"] for j in w.kube.of("job")] == [w.job_name("b", 1)]


def test_a_status_write_that_conflicts_is_decided_again_without_a_second_job():
    w = world([{"id": "a", "shell": "sleep 100"}])
    w.kube.refuse("patch_plan_status", 409, "the object has been modified")
    status = w.reconciled()  # read again, decided again, written: no error
    assert status["phase"] == "Running"
    assert len(w.kube.of("job")) == 1
    assert w.kube.methods().count("get_plan") == 2  # the second read is the API's


def test_a_status_write_that_keeps_conflicting_is_retried_by_the_queue():
    w = world([{"id": "a", "shell": "sleep 100"}])
    w.kube.refuse("patch_plan_status", 409, "the object has been modified", times=None)
    with pytest.raises(ApiError) as raised:
        w.reconciled()
    assert raised.value.kind is ErrorKind.CONFLICT
    assert w.kube.methods().count("patch_plan_status") == CONFLICT_ROUNDS
    assert len(w.kube.of("job")) == 1


def test_a_slow_api_server_slows_a_reconcile_but_changes_nothing():
    w = world([{"id": f"s{i}", "shell": "sleep 100"} for i in range(20)])
    w.kube.delay = 0.01
    status = w.reconciled()
    assert status["phase"] == "Running" and len(w.kube.of("job")) == 20


# -- finally steps after a stop (engine.finally_steps, reconciler.run.stopping) --------------------

SLEEPY_FINALLY = {"finally": [{"id": "clean", "shell": "sleep 100"}]}


def job_of(w: Cluster, step: str) -> dict[str, Any] | None:
    return w.kube.get("job", "ns", w.job_name(step, 1))


def pod_deadline(job: dict[str, Any]) -> int:
    return int(job["spec"]["template"]["spec"]["activeDeadlineSeconds"])


def test_past_its_deadline_a_plan_stops_its_steps_and_runs_its_finally_steps():
    w = world(
        [{"id": "a", "shell": "sleep 100"}, {"id": "b", "shell": "true", "dependsOn": ["a"]}],
        activeDeadlineSeconds=30,
        **{"finally": [{"id": "clean", "shell": "true"}]},
    )
    w.reconciled()
    w.now += 31
    status = w.reconciled()
    assert job_of(w, "a") is None  # stopped
    clean = job_of(w, "clean")
    assert clean is not None and pod_deadline(clean) == 599  # the budget's rest, not an hour
    assert status["phase"] == "Running"
    assert "the finally steps run" in status["conditions"][0]["message"]
    w.kube.finish_job(clean, True, "2027-01-15T08:00:35Z", "cleaned\n")
    w.now += 4
    status = w.reconciled()
    assert status["phase"] == "Failed"
    (cond,) = status["conditions"]
    assert cond["reason"] == "DeadlineExceeded" and "activeDeadlineSeconds (30s)" in cond["message"]
    report = status["report"]
    assert [(s["stepId"], s["status"]) for s in report["steps"]] == [
        ("a", "failed"),
        ("clean", "success"),
    ]  # b never ran
    assert (report["completed"], report["failedStep"]) == (False, None)
    assert [(h["reason"], h["steps"]) for h in report["stopped"]] == [("DeadlineExceeded", "main")]
    assert job_of(w, "b") is None


def test_a_cancel_that_asks_for_the_finally_steps_runs_them_and_holds_once_written():
    w = world(
        [{"id": "a", "shell": "sleep 100"}, {"id": "b", "shell": "true", "dependsOn": ["a"]}],
        **SLEEPY_FINALLY,
    )
    w.reconciled()
    w.annotate(names.ANNOTATION_CANCEL_RUN_FINALLY, "tidy up")
    status = w.reconciled()
    assert job_of(w, "a") is None and job_of(w, "clean") is not None
    assert status["phase"] == "Running"
    # taking the annotation away does not resume the steps the cancel stopped
    del w.plan["metadata"]["annotations"][names.ANNOTATION_CANCEL_RUN_FINALLY]
    w.now += 1
    assert w.reconciled()["phase"] == "Running"
    assert job_of(w, "b") is None
    # a plain cancel stops the finally steps too
    w.annotate(names.ANNOTATION_CANCEL, "enough")
    w.now += 1
    status = w.reconciled()
    assert job_of(w, "clean") is None
    assert status["phase"] == "Failed"
    assert status["conditions"][0]["reason"] == "Cancelled"
    errors = {s["stepId"]: s["error"] for s in status["report"]["steps"]}
    assert errors == {"a": "cancelled (tidy up)", "clean": "cancelled (enough)"}


def test_the_finally_steps_budget_stops_them_when_it_runs_out():
    w = world([{"id": "a", "shell": "true"}], finallyTimeoutSeconds=20, **SLEEPY_FINALLY)
    w.reconciled()
    a = job_of(w, "a")
    assert a is not None
    w.kube.finish_job(a, True, "2027-01-15T08:00:02Z", "")
    w.now += 2
    wake = asyncio.run(w.reconciler.reconcile("ns", "p"))
    clean = job_of(w, "clean")
    assert clean is not None and pod_deadline(clean) == 20
    assert wake is not None and 19.9 < wake < 20.1  # looked at again when the budget ends
    w.now += 21
    status = w.reconciled()
    assert job_of(w, "clean") is None
    assert status["phase"] == "Failed"
    (cond,) = status["conditions"]
    assert cond["reason"] == "DeadlineExceeded" and "finallyTimeoutSeconds (20s)" in cond["message"]
    assert status["report"]["completed"] is False


def test_kubectl_plan_cancel_run_finally_writes_the_request_the_operator_runs_finally_for(
    capsys: pytest.CaptureFixture[str],
):
    from planops.cli import steer  # noqa: PLC0415
    from planops.cli.parser import build as _parser  # noqa: PLC0415

    w = world([{"id": "a", "shell": "sleep 100"}], **SLEEPY_FINALLY)
    w.reconciled()
    plain = _parser().parse_args(["cancel", "p", "-n", "ns"])
    assert plain.run_finally is False  # the default stays: a cancel runs no finally step
    args = _parser().parse_args(["cancel", "p", "--run-finally", "-n", "ns"])
    assert asyncio.run(steer.cmd_cancel(w.kube, args, "ns")) == 0
    assert "its finally steps run" in capsys.readouterr().out
    annotations = w.plan["metadata"]["annotations"]
    assert set(annotations) == {names.ANNOTATION_CANCEL_RUN_FINALLY}  # not the plain one
    assert annotations[names.ANNOTATION_CANCEL_RUN_FINALLY].startswith(
        "kubectl plan cancel --run-finally at "
    )
    w.now += 1
    w.reconciled()
    assert job_of(w, "a") is None and job_of(w, "clean") is not None
    assert asyncio.run(steer.cmd_cancel(w.kube, plain, "ns")) == 0  # then a plain one stops them
    w.now += 1
    assert w.reconciled()["phase"] == "Failed" and job_of(w, "clean") is None


# -- what a reconcile reads makes no request of its own; what it does is the actuator's ---------


def test_a_job_whose_pod_cannot_start_fails_its_attempt_and_is_deleted_once_decided():
    w = world([{"id": "a", "shell": "sleep 100", "retries": 1}])
    w.reconciled()
    job = w.kube.get("job", "ns", w.job_name("a", 1))
    assert job is not None
    w.kube.put(
        "pod",
        {
            "metadata": {
                "name": "a-pod",
                "labels": job["metadata"]["labels"],
                "ownerReferences": [
                    {"kind": "Job", "name": job["metadata"]["name"], "uid": job["metadata"]["uid"]}
                    | {"apiVersion": "batch/v1", "controller": True}
                ],
            },
            "status": {
                "phase": "Pending",
                "containerStatuses": [
                    {"state": {"waiting": {"reason": "ImagePullBackOff", "message": "no image"}}}
                ],
            },
        },
    )
    w.kube.calls.clear()
    status = w.reconciled()
    assert status["phase"] == "Running" and [f["attempt"] for f in status["inFlight"]] == [2]
    assert w.kube.get("job", "ns", w.job_name("a", 1)) is None
    methods = w.kube.methods()
    # read, then decided (the retry created), then acted on: the delete is the actuator's
    assert methods.index("list_pods") < methods.index("create_job") < methods.index("delete_job")
    assert methods.index("delete_job") < methods.index("patch_plan_status")


def test_the_workspace_claim_is_created_once_per_run_not_at_every_reconcile():
    w = world([{"id": "a", "shell": "sleep 100"}], workspace={"size": "1Gi"})
    for _ in range(3):
        w.now += 1
        w.reconciled()
    assert w.status()["phase"] == "Running"
    assert w.kube.methods().count("create_pvc") == 1
    assert len(w.kube.of("pvc")) == 1
