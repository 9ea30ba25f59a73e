"""The retry annotation in the reconciler (reconciler.run.retrying), against the in-memory API: a
new run (new run id) that creates Jobs only for what runs again, its report starting with the kept
records; one retry per token; refusals as a Warning Event with no run started; a retry asked for
while a run is under way waits for it; the recorded author is asked first, as for a re-run."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from planops.api import names
from planops.cli.steer import retry_refusal
from planops.kube import manifests
from planops.reconciler.run import retrying

from .harness import Cluster

NOW = 1_800_000_000.0
UID = "uid-plan"
ALICE = json.dumps({"username": "alice", "groups": ["team-a"]})
STEPS = [
    {"id": "a", "shell": "true"},
    {"id": "b", "shell": "true", "dependsOn": ["a"]},
    {"id": "c", "shell": "true"},
]


def world(steps: list[dict[str, Any]] = STEPS, status_records: int = 20, **capsule: Any) -> Cluster:
    """A Plan `p` written by alice, a second between reconciles (tests.unit.harness)."""
    spec = {"image": "busybox:1", "shell": {"allow": ["true"]}, **capsule}
    c = Cluster({"default": spec}, tick=1, status_records=status_records)
    c.new_plan("p", steps=steps, uid=UID, annotations={names.ANNOTATION_AUTHOR: ALICE})
    return c


def failed_at_b(status_records: int = 20, **capsule: Any) -> Cluster:
    w = world(status_records=status_records, **capsule)
    w.reconciled()
    w.finish("a", True)
    w.finish("c", True)
    w.reconciled()
    w.finish("b", False)
    assert w.reconciled()["phase"] == "Failed"
    return w


def steps_of(status: dict[str, Any]) -> list[tuple[str, str]]:
    return [(s["stepId"], s["status"]) for s in status["report"]["steps"]]


def test_a_retry_is_a_new_run_that_creates_jobs_only_for_what_runs_again():
    w = failed_at_b()
    first = w.status()
    w.annotate(names.ANNOTATION_RETRY, "t1")
    status = w.reconciled()
    assert status["run"]["id"] != first["run"]["id"]
    assert status["run"]["retryOf"] == first["run"]["id"] and status["run"]["retry"] == "t1"
    assert status["phase"] == "Running"
    assert sorted(w.step_jobs()) == ["b"]  # a and c are not run again
    kept = [s for s in first["report"]["steps"] if s["status"] == "success"]
    assert status["report"]["steps"][: len(kept)] == kept
    assert w.events("RetryStarted") and "running again: b" in w.events("RetryStarted")[0]
    w.finish("b", True)
    done = w.reconciled()
    assert done["phase"] == "Succeeded"
    assert steps_of(done) == [(s["stepId"], "success") for s in kept] + [("b", "success")]


def test_one_retry_per_token():
    w = failed_at_b()
    w.annotate(names.ANNOTATION_RETRY, "t1")
    w.reconciled()
    w.finish("b", False)
    assert w.reconciled()["phase"] == "Failed"
    run = w.status()["run"]["id"]
    assert w.reconciled()["run"]["id"] == run  # the same token again: nothing new
    w.annotate(names.ANNOTATION_RETRY, "t2")  # a new token: a retry of the retry
    assert w.reconciled()["run"]["retryOf"] == run


def test_a_succeeded_plan_is_not_retried_without_from_and_nothing_starts():
    w = world()
    w.reconciled()
    for s in ("a", "c"):
        w.finish(s, True)
    w.reconciled()
    w.finish("b", True)
    before = w.reconciled()
    assert before["phase"] == "Succeeded"
    jobs = len(w.kube.of("job"))
    w.annotate(names.ANNOTATION_RETRY, "t1")
    after = w.reconciled()
    assert after["run"]["id"] == before["run"]["id"] and after["phase"] == "Succeeded"
    assert len(w.kube.of("job")) == jobs
    assert after["run"]["retry"] == "t1"  # seen: not judged again
    (message,) = w.events("RetryRefused")
    assert "succeeded: nothing failed to retry" in message
    w.reconciled()
    assert len(w.events("RetryRefused")) == 1


def test_from_reruns_a_succeeded_step_and_what_depends_on_it():
    w = failed_at_b()
    w.annotate(names.ANNOTATION_RETRY, "t1:from=a")
    status = w.reconciled()
    assert status["run"]["retryFrom"] == "a"
    assert sorted(w.step_jobs()) == ["a"]  # b waits for a; c is kept
    assert steps_of(status) == [("c", "success")]


def test_a_retry_asked_for_while_the_run_is_under_way_waits_for_it_to_end():
    w = world()
    w.reconciled()
    run = w.status()["run"]["id"]
    w.annotate(names.ANNOTATION_RETRY, "t1")
    assert w.reconciled()["run"]["id"] == run  # a and c still run: same run
    w.finish("a", True)
    w.finish("c", True)
    w.reconciled()
    w.finish("b", False)
    assert w.reconciled()["phase"] == "Failed"
    assert w.reconciled()["run"]["retryOf"] == run  # taken up once it ended


def test_a_retry_is_not_started_when_the_plans_author_lost_use():
    w = failed_at_b()
    w.kube.use_denied.add(("ns", "default", "alice"))
    w.annotate(names.ANNOTATION_RETRY, "t1")
    status = w.reconciled()
    assert status["phase"] == "Failed" and w.step_jobs() == {}
    assert status["conditions"][0]["reason"] == "UseRevoked"
    assert ("may_use_capsule", "ns", "default") in w.kube.calls


def test_a_new_generation_with_a_stale_retry_annotation_is_a_full_run():
    w = failed_at_b()
    w.annotate(names.ANNOTATION_RETRY, "t1")
    w.reconciled()
    w.plan["metadata"]["generation"] = 2
    status = w.reconciled()
    assert "retryOf" not in status["run"] and status["run"]["retry"] == "t1"
    assert sorted(w.step_jobs()) == ["a", "c"]


def test_the_annotation_reads_as_token_and_from():
    assert retrying.parse("20270115T080000Z") == ("20270115T080000Z", None)
    assert retrying.parse("t:from=build") == ("t:from=build", "build")


def test_the_earlier_runs_records_are_read_from_its_report_objects_before_they_go():
    w = failed_at_b(status_records=1)  # the status repeats one record: the rest are in chunks
    first = w.status()
    assert first["report"]["reportObjects"] and first["report"]["stepsOmitted"] == 2
    w.annotate(names.ANNOTATION_RETRY, "t1")
    status = w.reconciled()
    assert sorted(w.step_jobs()) == ["b"]
    reports = [r for r in w.kube.of("planreport") if r["run"] == status["run"]["id"]]
    kept = [r["stepId"] for chunk in reports for r in chunk["records"]]
    assert sorted(kept) == ["a", "c"]
    runs = {r["run"] for r in w.kube.of("planreport")}
    assert runs == {status["run"]["id"], first["run"]["id"]}  # the earlier run's: in its history


def test_kubectl_plan_retry_refuses_before_writing_anything():
    def plan(phase: str | None) -> dict[str, Any]:
        status = {"phase": phase} if phase else {}
        return {"metadata": {"name": "p"}, "spec": {"steps": STEPS}, "status": status}

    assert "is Running: a retry starts once a run has ended" in str(
        retry_refusal(plan("Running"), None)
    )
    assert "succeeded: nothing failed" in str(retry_refusal(plan("Succeeded"), None))
    assert retry_refusal(plan("Succeeded"), "b") is None
    assert retry_refusal(plan("Failed"), None) is None
    assert "no such main step" in str(retry_refusal(plan("Failed"), "zz"))


def test_a_huge_retry_annotation_is_recorded_and_told_bounded():
    w = failed_at_b()
    value = "x" * 200_000 + ":from=" + "y" * 50_000
    w.annotate(names.ANNOTATION_RETRY, value)
    status = w.reconciled()
    assert len(status["run"]["retry"]) < 200 and status["phase"] == "Failed"
    (message,) = w.events("RetryRefused")  # --from names no step
    assert len(message) < 500
    run = status["run"]["id"]
    assert w.reconciled()["run"]["id"] == run and len(w.events("RetryRefused")) == 1


def test_a_retry_of_a_plan_refused_now_starts_nothing_and_keeps_the_ended_run():
    w = failed_at_b()
    before = w.status()
    capsule = w.kube.get("capsule", "ns", "default")
    assert capsule is not None
    capsule["spec"]["shell"]["allow"] = ["echo"]  # `true` no longer allowed
    capsule["metadata"]["resourceVersion"] = "999"
    w.annotate(names.ANNOTATION_RETRY, "t1")
    status = w.reconciled()
    assert status["run"]["id"] == before["run"]["id"] and status["phase"] == "Failed"
    assert status["report"] == before["report"]
    (message,) = w.events("RetryRefused")
    assert "the plan is refused now" in message and "shell-not-allowed" in message


def test_a_retried_run_that_waits_for_a_capsule_slot_still_keeps_what_succeeded():
    w = failed_at_b(concurrency={"maxRunningPlans": 1})
    w.kube.put(
        "plan",
        {
            "apiVersion": "planops.dev/v1alpha1",
            "kind": "Plan",
            "metadata": {"name": "other", "namespace": "ns", "uid": "uid-other", "generation": 1},
            "spec": {"steps": [{"id": "x", "shell": "true"}]},
        },
    )
    asyncio.run(w.reconciler.reconcile("ns", "other"))  # holds the Capsule's one slot
    w.annotate(names.ANNOTATION_RETRY, "t1")
    waiting = w.reconciled()
    assert waiting["phase"] == "Pending" and waiting["run"]["retryOf"]
    assert w.step_jobs() == {}
    other = w.kube.get("plan", "ns", "other")
    assert other is not None
    other["status"] = {**other["status"], "phase": "Succeeded"}  # its slot is free
    status = w.reconciled()
    assert status["phase"] == "Running", status
    assert sorted(w.step_jobs()) == ["b"]  # a and c kept, though the run waited before it started
    assert sorted(s for s, _ in steps_of(status)) == ["a", "c"]


def test_a_token_used_again_retries_another_run_under_a_new_id_and_every_run_stays_in_history():
    w = failed_at_b()
    first = w.status()["run"]["id"]
    ids = [first]
    for token in ("t1", "t2", "t1"):
        w.annotate(names.ANNOTATION_RETRY, token)
        w.reconciled()
        w.finish("b", False)
        assert w.reconciled()["phase"] == "Failed"
        assert w.status()["run"]["retryOf"] == ids[-1]
        ids.append(w.status()["run"]["id"])
    assert len(set(ids)) == 4  # t1 again is a retry of t2's run: a new run id
    assert [e["id"] for e in w.status()["history"]] == ids[-2::-1]


def test_no_rerun_value_spells_a_retrys_run_id():
    w = failed_at_b()
    before = w.status()["run"]["id"]
    w.annotate(names.ANNOTATION_RETRY, "t1")
    w.reconciled()
    retried = w.status()["run"]["id"]
    for serial in range(1, 6):  # a full run's id, whatever its number: another hash prefix
        assert manifests.run_id(UID, 1, serial) != retried
    assert retried == retrying.retry_run_id(UID, 1, before, w.status()["run"]["serial"])


def test_a_retry_whose_run_id_the_plan_already_had_starts_under_the_next_one():
    """Ten hex digits may collide by chance: a retry never takes an id the status knows (its
    current run, its history); it counts on to the next number (tests/unit/test_run_ids_chosen.py
    for full runs)."""
    w = failed_at_b()
    before, number = w.status()["run"]["id"], w.status()["run"]["serial"]
    taken = retrying.retry_run_id(UID, 1, before, number + 1)
    # as if an earlier run had had that id (in history)
    w.plan["status"]["history"] = [{"id": taken, "phase": "Failed"}]
    w.annotate(names.ANNOTATION_RETRY, "t1")
    status = w.reconciled()
    assert status["run"]["id"] == retrying.retry_run_id(UID, 1, before, number + 2)
    assert status["run"]["serial"] == number + 2 and status["run"]["retryOf"] == before
    assert [e["id"] for e in status["history"]][:2] == [before, taken]
    assert w.events(retrying.REASON_REFUSED) == []


def test_a_huge_rerun_value_is_recorded_bounded_and_its_run_is_still_retried():
    w = failed_at_b()
    huge = "r" * 200_000
    w.plan["metadata"]["annotations"][names.ANNOTATION_RERUN] = huge
    w.reconciled()
    rerun_run = w.status()["run"]["id"]
    assert rerun_run == manifests.run_id(UID, 1, 2)  # the run's number names it, not the value
    assert len(w.status()["run"]["rerun"]) < 200 and w.status()["run"]["rerun"].startswith("rrr")
    w.finish("a", True)
    w.finish("c", True)
    w.reconciled()
    w.finish("b", False)
    assert w.reconciled()["phase"] == "Failed" and w.status()["run"]["id"] == rerun_run
    w.annotate(names.ANNOTATION_RETRY, "t1")
    assert w.reconciled()["run"]["retryOf"] == rerun_run  # the bounded value still matches
    assert len(json.dumps(w.status())) < 20_000


def test_a_huge_rerun_value_refused_for_its_author_is_told_bounded():
    w = failed_at_b()
    w.kube.use_denied.add(("ns", "default", "alice"))
    w.plan["metadata"]["annotations"][names.ANNOTATION_RERUN] = "r" * 200_000
    w.reconciled()
    (why,) = [e["message"] for e in w.kube.events if e.get("reason") == "UseRevoked"]
    assert why.startswith("re-run rrr") and len(why) < 1000
