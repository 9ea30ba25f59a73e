"""Retention without a cluster: when a finished Plan is deleted (its TTL, held for the archive),
which Jobs each podGC policy collects and when, and that a collected Job is never taken for an
attempt that vanished. The pure rules (reconciler.history.retention) first, then
Reconciler.reconcile against the in-memory API (fakekube), with an injected clock."""

from __future__ import annotations

import copy
from typing import Any, Literal

import pytest

from planops import metrics
from planops.api import names
from planops.archive.row import archived
from planops.kube import manifests
from planops.kube.cache import WatchCache
from planops.kube.client import ApiError
from planops.reconciler.history import retention
from planops.reconciler.run.observe import Observed
from planops.reconciler.run.status import rfc3339

from .fakekube import FakeKube
from .harness import Cluster

NOW = 1_800_000_000.0
UID = "uid-plan"
CAPSULE = {"image": "busybox:1", "shell": {"allow": ["true", "echo", "sleep"]}}
RUN = manifests.run_id(UID, 1, 1)


def finished(phase: str = "Succeeded", at: float = NOW, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "p", "namespace": "ns", "uid": UID, "resourceVersion": "7"},
        "spec": {"steps": [], **spec},
        "status": {"phase": phase, "finishedAt": rfc3339(at), "run": {"id": RUN}},
    }


def owned_by(plan: dict[str, Any], kind: str) -> dict[str, Any]:
    ref = {"apiVersion": "planops.dev/v1alpha1", "kind": kind, "name": "o", "uid": "u"}
    plan["metadata"]["ownerReferences"] = [{**ref, "controller": True}]
    return plan


# -- the TTL's rules ---------------------------------------------------------------------------


def test_a_finished_plan_waits_out_its_ttl_from_finished_at_then_is_deleted():
    plan = finished(ttlSecondsAfterFinished=30)
    assert retention.ttl_action(plan, NOW + 10, None, None) == retention.TtlAction("wait", NOW + 30)
    assert retention.ttl_action(plan, NOW + 30, None, None).action == "delete"
    failed = finished("Failed", ttlSecondsAfterFinished=0)
    assert retention.ttl_action(failed, NOW, None, None).action == "delete"


def test_only_succeeded_and_failed_runs_have_a_ttl_not_invalid_or_running_ones():
    for phase in ("Invalid", "Running", "Pending"):
        plan = finished(phase, ttlSecondsAfterFinished=0)
        assert retention.ttl_action(plan, NOW + 99, 1, None).action == "keep", phase


def test_the_operators_default_applies_when_the_spec_sets_none_and_the_spec_wins():
    assert retention.ttl_action(finished(), NOW + 99, None, None).action == "keep"
    assert retention.ttl_action(finished(), NOW + 5, 10, None) == retention.TtlAction(
        "wait", NOW + 10
    )
    longer = finished(ttlSecondsAfterFinished=3600)
    assert retention.ttl_action(longer, NOW + 60, 10, None).action == "wait"


def test_a_capsule_steps_child_plan_has_no_ttl_it_goes_with_its_parent():
    child = owned_by(finished(ttlSecondsAfterFinished=0), "Plan")
    assert retention.ttl_action(child, NOW + 99, 0, None).action == "keep"


def test_a_scheduled_run_keeps_to_its_schedules_history_limits_unless_its_template_sets_a_ttl():
    for kind in ("ScheduledPlan", "ClusterScheduledPlan"):
        run = owned_by(finished(), kind)
        assert retention.ttl_action(run, NOW + 99, 10, None).action == "keep", kind
        explicit = owned_by(finished(ttlSecondsAfterFinished=5), kind)
        assert retention.ttl_action(explicit, NOW + 99, 10, None).action == "delete", kind


def test_a_due_plan_is_held_while_its_run_is_not_archived():
    plan = finished(ttlSecondsAfterFinished=0)
    assert retention.ttl_action(plan, NOW + 1, None, archived).action == "hold"
    plan["status"]["archived"] = "an-earlier-run"
    assert retention.ttl_action(plan, NOW + 1, None, archived).action == "hold"
    plan["status"]["archived"] = RUN
    assert retention.ttl_action(plan, NOW + 1, None, archived).action == "delete"


# -- podGC's rules -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("policy", "phase", "collects"),
    [
        ("OnStepCompletion", "Failed", True),
        ("OnPlanCompletion", "Succeeded", True),
        ("OnPlanCompletion", "Failed", True),
        ("OnPlanSuccess", "Succeeded", True),
        ("OnPlanSuccess", "Failed", False),
        ("Never", "Succeeded", False),
        (None, "Succeeded", False),
        ("OnPlanCompletion", "Invalid", False),
    ],
)
def test_what_each_pod_gc_policy_collects_once_the_run_finished(policy, phase, collects):
    plan = finished(phase, **({"podGC": policy} if policy else {}))
    assert retention.collects_at_end(plan) is collects
    plan["status"]["jobsCollected"] = RUN  # done once per run
    assert retention.collects_at_end(plan) is False


def test_on_step_completion_collects_the_jobs_of_settled_steps_only_never_child_plans():
    def seen(step: str, attempt: int, kind: Literal["job", "plan"] = "job") -> Observed:
        return Observed(step, attempt, f"{step}-{attempt}", kind, NOW, None)

    observed = [seen("a", 1), seen("a", 2), seen("b", 1), seen("c", 1, "plan")]
    assert retention.settled_jobs(observed, {"a", "c"}) == ["a-1", "a-2"]


# -- in the reconcile --------------------------------------------------------------------------


def world(steps: list[dict[str, Any]], **spec: Any) -> Cluster:
    """A namespace with one Plan `p` (and its Capsule) and the reconciler (tests.unit.harness)."""
    c = Cluster({"default": CAPSULE})
    c.new_plan("p", steps=steps, uid=UID, **spec)
    return c


def deleted_jobs(kube: FakeKube) -> list[str]:
    return [n for m, _, n in kube.calls if m == "delete_job"]


def test_on_step_completion_deletes_a_settled_steps_job_after_recording_its_output():
    w = world(
        [{"id": "a", "shell": "echo a"}, {"id": "b", "shell": "echo b", "dependsOn": ["a"]}],
        podGC="OnStepCompletion",
    )
    w.reconcile()
    w.end("a", output="from a\n")
    w.reconcile()
    assert w.jobs() == [w.job_name("b")]  # a's Job collected; b's, in flight, kept
    (a,) = [s for s in w.status()["report"]["steps"] if s["stepId"] == "a"]
    assert a["status"] == "success" and a["output"] == "from a"
    # the next reconcile does not take a's missing Job for a vanished attempt
    w.reconcile()
    assert w.status()["phase"] == "Running"
    assert [f["stepId"] for f in w.status()["inFlight"]] == ["b"]
    w.end("b", output="from b\n")
    w.reconcile()
    assert w.status()["phase"] == "Succeeded" and w.jobs() == []
    assert [s["output"] for s in w.status()["report"]["steps"]] == ["from a", "from b"]


def test_a_settled_steps_job_is_kept_until_the_status_recording_it_is_written():
    w = world(
        [{"id": "a", "shell": "echo a"}, {"id": "b", "shell": "sleep 1"}],
        podGC="OnStepCompletion",
    )
    w.reconcile()
    w.end("a", output="from a\n")
    w.kube.refuse("patch_plan_status", 500, "etcd is down")
    with pytest.raises(ApiError):
        w.reconcile()
    assert w.job_name("a") in w.jobs()  # its output is recorded nowhere yet
    w.reconcile()
    assert w.status()["report"]["steps"][0]["output"] == "from a"
    w.end("b")
    w.reconcile()
    w.reconcile()  # the run's end collects what a step's own collection missed
    assert w.status()["phase"] == "Succeeded" and w.jobs() == []


def test_on_step_completion_keeps_a_failed_attempts_job_while_its_retry_runs():
    w = world([{"id": "a", "shell": "true", "retries": 1}], podGC="OnStepCompletion")
    w.reconcile()
    w.end("a", 1, ok=False)
    w.reconcile()
    assert w.jobs() == [w.job_name("a", 1), w.job_name("a", 2)]  # the step is not settled
    w.reconcile()  # attempt 1 is not started again as if it had never run
    assert [n for m, _, n in w.kube.calls if m == "create_job"].count(w.job_name("a", 1)) == 1
    w.end("a", 2)
    w.reconcile()
    assert w.status()["phase"] == "Succeeded" and w.jobs() == []


def test_on_step_completion_collects_a_map_items_jobs_without_losing_an_item():
    w = world(
        [
            {"id": "m", "map": {"over": ["x", "y", "z"], "do": {"shell": "echo {{item}}"}}},
            {"id": "after", "shell": "echo after", "dependsOn": ["m"]},
        ],
        podGC="OnStepCompletion",
    )
    w.reconcile()
    ended: set[str] = set()
    for _ in range(20):
        for name in set(w.jobs()) - ended:
            w.end_job(name, output=f"{name}\n")
            ended.add(name)
        w.reconcile()
        assert "deleted before the attempt finished" not in str(w.status())
        if w.status()["phase"] == "Succeeded":
            break
    assert w.status()["phase"] == "Succeeded" and w.jobs() == []
    assert len(ended) == 4  # three items and `after`, each run once
    assert [s["status"] for s in w.status()["report"]["steps"]] == ["success"] * 5


def test_never_the_default_keeps_every_job():
    w = world([{"id": "a", "shell": "echo a"}])
    w.reconcile()
    w.end("a")
    assert w.reconcile() is None  # nothing more to look at
    assert w.status()["phase"] == "Succeeded" and w.jobs() == [w.job_name("a")]
    assert w.reconcile() is None
    assert deleted_jobs(w.kube) == [] and "list_jobs" not in [m for m, _, _ in w.kube.calls[-3:]]


@pytest.mark.parametrize(
    ("policy", "ok", "kept"),
    [
        ("OnPlanCompletion", False, False),
        ("OnPlanSuccess", True, False),
        ("OnPlanSuccess", False, True),
    ],
)
def test_a_finished_runs_jobs_are_collected_once_by_its_policy(policy, ok, kept):
    w = world([{"id": "a", "shell": "echo a"}, {"id": "b", "shell": "echo b"}], podGC=policy)
    w.reconcile()
    w.end("a")
    assert w.reconcile() is None and w.jobs() == [w.job_name("a"), w.job_name("b")]
    before = metrics.jobs_collected.labels(policy)._value.get()
    w.end("b", ok=ok)
    assert w.reconcile() == 0.0  # finished: looked at again at once
    w.reconcile()
    assert w.jobs() == ([w.job_name("a"), w.job_name("b")] if kept else [])
    assert metrics.jobs_collected.labels(policy)._value.get() - before == (0 if kept else 2)
    assert w.status().get("jobsCollected") == (None if kept else RUN)
    w.kube.calls.clear()
    w.reconcile()  # marked: not listed again
    assert "list_jobs" not in [m for m, _, _ in w.kube.calls]


def test_a_job_that_copies_the_runs_labels_but_is_not_the_plans_is_never_collected():
    # anyone who may create a Job can copy labels; only the controller reference makes it ours
    w = world([{"id": "a", "shell": "echo a"}], podGC="OnPlanCompletion")
    w.reconcile()
    job = w.kube.get("job", "ns", w.job_name("a"))
    assert job is not None
    w.kube.put(
        "job",
        {
            "metadata": {
                "name": "someone-elses",
                "labels": dict(job["metadata"]["labels"]),
                "ownerReferences": [
                    {
                        "apiVersion": "planops.dev/v1alpha1",
                        "kind": "Plan",
                        "name": "p",
                        "uid": "another-owner",
                        "controller": True,
                    }
                ],
            }
        },
    )
    w.end("a")
    w.reconcile()
    w.reconcile()
    assert w.status()["jobsCollected"] == RUN
    assert w.jobs() == ["someone-elses"]


def test_a_cancelled_runs_jobs_are_collected_by_on_plan_completion():
    w = world([{"id": "a", "shell": "sleep 100"}], podGC="OnPlanCompletion")
    w.reconcile()
    plan = w.kube.get("plan", "ns", "p")
    assert plan is not None
    plan["metadata"]["annotations"] = {names.ANNOTATION_CANCEL: "enough"}
    assert w.reconcile() == 0.0  # stopped: looked at again at once
    assert w.status()["phase"] == "Failed"
    w.reconcile()
    assert w.status()["jobsCollected"] == RUN and w.jobs() == []


def test_a_finished_plan_is_deleted_when_its_ttl_passed_and_a_restart_times_it_the_same():
    w = world([{"id": "a", "shell": "echo a"}], ttlSecondsAfterFinished=30)
    w.reconcile()
    w.end("a")
    w.reconcile()  # finishes now
    assert w.status()["phase"] == "Succeeded"
    w.now += 10
    assert w.reconcile() == pytest.approx(20.05)  # the wake-up, from finishedAt
    w.reconciler = w.operator()  # a restarted operator: the same wake-up, from the status
    assert w.reconcile() == pytest.approx(20.05)
    before = metrics.plans_deleted_by_ttl._value.get()
    w.now += 20
    assert w.reconcile() is None
    assert w.kube.get("plan", "ns", "p") is None
    assert metrics.plans_deleted_by_ttl._value.get() - before == 1


def test_with_the_archive_on_a_due_plan_waits_for_its_run_to_be_archived():
    w = world([{"id": "a", "shell": "echo a"}], ttlSecondsAfterFinished=0)
    w.reconciler = w.operator(archived=archived)
    w.reconcile()
    w.end("a")
    w.reconcile()
    w.now += 3600  # the database is down for an hour
    assert w.reconcile() is None  # no timer: the archive's mark is a change of the Plan
    assert w.kube.get("plan", "ns", "p") is not None
    plan = w.kube.get("plan", "ns", "p")
    assert plan is not None
    plan["status"]["jobsCollected"] = RUN  # another mark is not the archive's
    plan["metadata"]["resourceVersion"] += "1"
    assert w.reconcile() is None and w.kube.get("plan", "ns", "p") is not None
    plan["status"]["archived"] = RUN  # what the archive writes once the row commits
    w.reconcile()
    assert w.kube.get("plan", "ns", "p") is None


def test_the_operators_default_ttl_deletes_a_plan_that_sets_none():
    w = world([{"id": "a", "shell": "echo a"}])
    w.reconciler = w.operator(default_ttl=5)
    w.reconcile()
    w.end("a")
    assert w.reconcile() == 0.0
    assert w.reconcile() == pytest.approx(5.05)
    w.now += 5
    w.reconcile()
    assert w.kube.get("plan", "ns", "p") is None


def test_a_plan_changed_since_it_was_read_is_not_deleted_by_its_ttl():
    # the reconcile reads the watch's copy; a re-run asked for meanwhile changed the Plan: the
    # deletion's preconditions (uid, resourceVersion) refuse, and it is judged again as it is now
    w = world([{"id": "a", "shell": "echo a"}], ttlSecondsAfterFinished=0)
    w.reconcile()
    w.end("a")
    w.reconcile()
    plan = w.kube.get("plan", "ns", "p")
    assert plan is not None
    cache = WatchCache()
    cache.seen("MODIFIED", copy.deepcopy(plan))
    w.reconciler = w.operator(plans=cache)
    plan["metadata"]["annotations"] = {names.ANNOTATION_RERUN: "again"}
    plan["metadata"]["resourceVersion"] = "999"
    w.reconcile()  # the deletion's Conflict: the Plan is read again and decided again
    assert w.kube.get("plan", "ns", "p") is not None
    assert w.status()["run"]["rerun"] == "again" and w.status()["phase"] == "Running"


def test_an_invalid_plan_is_not_deleted_by_a_ttl():
    w = world([{"id": "a", "shell": "rm -rf /"}], ttlSecondsAfterFinished=0)
    w.reconciler = w.operator(default_ttl=0)
    w.reconcile()
    assert w.status()["phase"] == "Invalid"
    w.now += 99
    w.reconcile()
    assert w.kube.get("plan", "ns", "p") is not None


@pytest.mark.parametrize(
    ("owner", "own_ttl", "deleted"),
    [
        ("ScheduledPlan", None, False),  # kept by its schedule's history limits
        ("ScheduledPlan", 0, True),  # its template's own TTL applies too
        ("Plan", 0, False),  # a capsule step's child goes with its parent
    ],
)
def test_whose_runs_the_operators_default_ttl_deletes(owner, own_ttl, deleted):
    spec = {} if own_ttl is None else {"ttlSecondsAfterFinished": own_ttl}
    w = world([{"id": "a", "shell": "echo a"}], **spec)
    plan = w.kube.get("plan", "ns", "p")
    assert plan is not None
    ref = {"apiVersion": "planops.dev/v1alpha1", "kind": owner, "name": "o", "uid": "owner-uid"}
    plan["metadata"]["ownerReferences"] = [{**ref, "controller": True}]
    w.reconciler = w.operator(default_ttl=0)
    w.reconcile()
    w.end("a")
    w.reconcile()
    w.now += 60
    w.reconcile()
    assert (w.kube.get("plan", "ns", "p") is None) is deleted
