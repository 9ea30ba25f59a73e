"""Which watch events wake a Plan's reconcile: only those that can change a decision. A running
Job's status is written several times by the Job controller and its pod's as it is scheduled,
pulled and started; each would cost a reconcile (four API reads) that learns nothing. The echo of
the reconciler's own status write is no news either."""

from __future__ import annotations

import asyncio
import copy
from types import SimpleNamespace
from typing import Any

from planops.handlers.wiring import Operator
from planops.kube.cache import RunObjects, WatchCache, slim_run_object
from planops.reconciler.effects.reads import RELIST_AFTER, RELIST_FLOOR
from planops.reconciler.reconcile import Reconciler
from planops.reconciler.run.observe import (
    attempt_step,
    job_event_matters,
    owned,
    pod_event_matters,
    pods_by_job,
)

from .fakekube import FakeKube


def job(*conditions: str, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "j"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    conds = [{"type": c, "status": "True"} for c in conditions]
    return {"metadata": meta, "status": {"active": 1, "conditions": conds}}


def pod(phase: str, state: dict[str, Any] | None = None, deleting: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    statuses = [{"state": state}] if state is not None else []
    return {"metadata": meta, "status": {"phase": phase, "containerStatuses": statuses}}


def test_a_running_jobs_status_writes_do_not_wake_its_plan():
    assert not job_event_matters("ADDED", job())
    assert not job_event_matters("MODIFIED", job())
    assert not job_event_matters("MODIFIED", job("SuccessCriteriaMet"))


def test_a_job_that_ended_vanished_or_is_listed_after_a_restart_wakes_its_plan():
    assert job_event_matters("MODIFIED", job("Complete"))
    assert job_event_matters("MODIFIED", job("Failed"))
    assert job_event_matters("DELETED", job())
    assert job_event_matters("MODIFIED", job(deleting=True))
    assert job_event_matters(None, job())  # kopf's initial listing


def test_a_pod_starting_does_not_wake_its_plan():
    assert not pod_event_matters("ADDED", pod("Pending"))
    assert not pod_event_matters(
        "MODIFIED", pod("Pending", {"waiting": {"reason": "ContainerCreating"}})
    )
    assert not pod_event_matters("MODIFIED", pod("Running", {"running": {}}))


def test_a_pod_that_ended_cannot_start_or_is_going_wakes_its_plan():
    assert pod_event_matters("MODIFIED", pod("Succeeded", {"terminated": {"exitCode": 0}}))
    assert pod_event_matters("MODIFIED", pod("Failed", {"terminated": {"exitCode": 1}}))
    assert pod_event_matters("MODIFIED", pod("Running", {"terminated": {"reason": "StartError"}}))
    assert pod_event_matters("MODIFIED", pod("Pending", {"waiting": {"reason": "ErrImagePull"}}))
    assert pod_event_matters("MODIFIED", pod("Running", {"running": {}}, deleting=True))
    assert pod_event_matters("DELETED", pod("Running"))
    assert pod_event_matters(None, pod("Running"))


def test_the_echo_of_the_reconcilers_own_status_write_is_recognised_once():
    kube = FakeKube()
    plan = kube.put("plan", {"metadata": {"namespace": "ns", "name": "p"}, "status": {}})
    r = Reconciler(kube)
    before = plan["metadata"]["resourceVersion"]
    asyncio.run(r._status.write(plan, {"phase": "Running"}))
    written = plan["metadata"]["resourceVersion"]
    assert not r.own_write("ns", "p", before)  # an older version: somebody else's
    assert not r.own_write("ns", "other", written)
    assert r.own_write("ns", "p", written)
    assert not r.own_write("ns", "p", written)  # only once
    asyncio.run(r._status.write(plan, {"phase": "Succeeded"}))
    r.forget("ns", "p")
    assert not r.own_write("ns", "p", "43")  # a deleted Plan's entry is gone


def test_the_capsule_cache_keeps_the_newest_version_and_forgets_deleted_ones():
    cache = WatchCache()

    def capsule(rv: str) -> dict[str, Any]:
        return {"metadata": {"namespace": "ns", "name": "c", "resourceVersion": rv}}

    assert cache.get("ns", "c") is None  # not seen: the caller asks the API
    cache.seen(None, capsule("10"))
    cache.seen("MODIFIED", capsule("9"))  # an older version arriving late is not kept
    assert cache.get("ns", "c") == capsule("10")
    cache.seen("MODIFIED", capsule("12"))
    assert cache.get("ns", "c") == capsule("12")
    cache.seen("DELETED", capsule("13"))
    assert cache.get("ns", "c") is None


def test_a_reconcile_reads_a_cached_capsule_without_a_request():
    kube = FakeKube()  # holds no Capsule: the API would say there is none
    cache = WatchCache()
    r = Reconciler(kube, capsules=cache)
    plan = {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", "generation": 1},
        "spec": {"steps": [{"id": "a", "shell": "echo hi"}]},
    }
    _, _, errors = asyncio.run(r.judge(plan, reuse=True))
    assert [e.code for e in errors] == ["no-capsule"]
    assert [c[0] for c in kube.calls] == ["get_capsule"]  # not cached: asked
    cache.seen(
        "ADDED",
        {
            "metadata": {"namespace": "ns", "name": "default", "resourceVersion": "5"},
            "spec": {"shell": {"allow": ["echo"]}},
        },
    )
    _, _, errors = asyncio.run(r.judge(plan, reuse=True))
    assert errors == [] and len(kube.calls) == 1


NEW = {
    "apiVersion": "planops.dev/v1alpha1",
    "kind": "Plan",
    "metadata": {
        "name": "p",
        "namespace": "ns",
        "uid": "u",
        "generation": 1,
        "resourceVersion": "100",
    },
    "spec": {"steps": [{"id": "a", "shell": "echo hi"}]},
}
CAPSULE = {
    "metadata": {"namespace": "ns", "name": "default", "resourceVersion": "5"},
    "spec": {
        "image": "local/busybox:1",
        "images": ["local/busybox:*"],
        "shell": {"allow": ["echo"]},
    },
}


def _api(plan: dict[str, Any]) -> FakeKube:
    """The API server holding `plan` (what the watch cache shows too) and nothing else."""
    kube = FakeKube()
    kube.put("plan", copy.deepcopy(plan))
    return kube


def test_a_new_plans_first_reconcile_reads_nothing_and_the_next_starts_from_what_it_wrote():
    kube, plans, capsules = _api(NEW), WatchCache(), WatchCache()
    plans.seen("ADDED", NEW)
    capsules.seen("ADDED", CAPSULE)
    runs = RunObjects("planops.dev/plan", "planops.dev/run")
    now = [1_000.0]
    r = Reconciler(kube, plans=plans, capsules=capsules, runs=runs, clock=lambda: now[0])
    asyncio.run(r.reconcile("ns", "p"))
    # no GET of the Plan or Capsule, no lists of earlier runs' objects or of this run's (it has
    # none yet): create the Job, write the status, tell the trace
    assert [c for c in kube.methods() if c != "create_event"] == ["create_job", "patch_plan_status"]
    written = plans.get("ns", "p")
    assert written is not None and written["status"]["phase"] == "Running"
    kube.calls.clear()
    # the run is known now: its Job comes from the cache (written back when it was created),
    # so nothing is listed and nothing is created twice
    asyncio.run(r.reconcile("ns", "p"))
    assert [c for c in kube.methods() if c != "create_event"] == []
    (created,) = kube.of("job")
    kube.objects.pop(("job", "ns", created["metadata"]["name"]))  # deleted; no watch told
    r.check("ns", "p")  # a resync soon after the run started: the watches are trusted
    asyncio.run(r.reconcile("ns", "p"))
    assert "list_jobs" not in kube.methods()
    now[0] += RELIST_FLOOR
    r.check("ns", "p")  # a later resync asks for a real look
    kube.calls.clear()
    asyncio.run(r.reconcile("ns", "p"))
    assert kube.methods()[:1] == ["list_jobs"]  # and the list (empty: the Job is gone) is the truth
    assert runs.of("job", ("ns", "p", written["status"]["run"]["id"])) == []


def test_run_objects_follow_the_watch_and_a_list_is_the_truth():
    runs = RunObjects("planops.dev/plan", "planops.dev/run")

    def job(name: str, rv: str, run: str = "r1") -> dict[str, Any]:
        labels = {"planops.dev/plan": "p", "planops.dev/run": run}
        return {
            "metadata": {"namespace": "ns", "name": name, "resourceVersion": rv, "labels": labels}
        }

    def cached(j: dict[str, Any]) -> dict[str, Any]:
        return slim_run_object("job", j)

    key = ("ns", "p", "r1")
    runs.seen("job", "ADDED", job("a", "5"))
    runs.seen("job", "MODIFIED", job("a", "4"))  # late and older: ignored
    assert runs.of("job", key) == [cached(job("a", "5"))]
    runs.seen("job", "MODIFIED", job("a", "6", run="r2"))  # relabelled: moves
    assert runs.of("job", key) == [] and runs.of("job", ("ns", "p", "r2")) == [
        cached(job("a", "6", "r2"))
    ]
    runs.seen("job", "ADDED", job("b", "7"))
    runs.seen("job", "ADDED", job("c", "9"))
    runs.replace("job", key, [cached(job("b", "8")), cached(job("c", "8"))])  # c: newer held
    assert sorted(runs.of("job", key), key=str) == sorted(
        [cached(job("b", "8")), cached(job("c", "9"))], key=str
    )
    runs.replace("job", key, [])  # a deletion the watch never delivered
    assert runs.of("job", key) == []
    runs.seen("job", "DELETED", job("a", "10", run="r2"))
    assert runs.of("job", ("ns", "p", "r2")) == []


def test_a_runs_cached_objects_keep_what_ownership_and_an_attempt_are_read_from():
    runs = RunObjects("planops.dev/plan", "planops.dev/run")
    labels = {"planops.dev/plan": "p", "planops.dev/run": "r1"}
    owner = [
        {
            "apiVersion": "planops.dev/v1alpha1",
            "uid": "plan-uid",
            "controller": True,
            "kind": "Plan",
            "name": "p",
        }
    ]
    limits = {"limits": {"memory": "64Mi"}}
    job = {
        "metadata": {
            "namespace": "ns",
            "name": "j",
            "uid": "job-uid",
            "labels": labels,
            "ownerReferences": owner,
            "managedFields": [{"manager": "x"}],
        },
        "spec": {
            "activeDeadlineSeconds": 60,
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "containers": [
                        {"name": "step", "image": "i", "env": [{"name": "A"}], "resources": limits}
                    ],
                    "volumes": [{"name": "v"}],
                }
            },
        },
        "status": {"active": 1},
    }
    pod = {
        "metadata": {
            "namespace": "ns",
            "name": "j-x",
            "labels": labels,
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "uid": "job-uid", "controller": True}
            ],
        },
        "spec": {
            "nodeName": "n1",
            "containers": [{"name": "step", "resources": limits, "command": ["sh"]}],
            "tolerations": [{}],
        },
        "status": {"phase": "Running"},
    }
    runs.seen("job", "ADDED", job)
    runs.seen("pod", "ADDED", pod)
    key = ("ns", "p", "r1")
    (j,) = owned(runs.of("job", key), "plan-uid")
    assert pods_by_job(runs.of("pod", key), [j]) == {"j": runs.of("pod", key)[0]}
    assert "managedFields" not in j["metadata"] and "volumes" not in str(j)
    assert j["spec"] == {
        "activeDeadlineSeconds": 60,
        "template": {"spec": {"containers": [{"resources": limits}]}},
    }
    assert j["status"] == {"conditions": []}  # `active` is read by nobody
    assert runs.of("pod", key)[0]["spec"] == {"nodeName": "n1"}
    assert runs.of("pod", key)[0]["status"] == {
        "phase": "Running",
        "conditions": [],
        "containerStatuses": [],
    }


def test_a_settled_steps_objects_leave_the_run_cache_and_stay_out():
    """A big run's settled steps are never read again: their Jobs and pods leave the cache at
    once (not when the run ends), and their later events (Complete after the pod, the pod's
    deletion's updates) or a list do not bring them back."""
    runs = RunObjects("planops.dev/plan", "planops.dev/run")
    key = ("ns", "p", "r1")

    def obj(name: str, step: str, rv: str) -> dict[str, Any]:
        labels = {"planops.dev/plan": "p", "planops.dev/run": "r1", "planops.dev/step": step}
        return {
            "metadata": {"namespace": "ns", "name": name, "resourceVersion": rv, "labels": labels}
        }

    for kind, suffix in (("job", ""), ("pod", "-x")):
        runs.seen(kind, "ADDED", obj(f"a1{suffix}", "a", "1"))
        runs.seen(kind, "ADDED", obj(f"b1{suffix}", "b", "1"))

    def names(kind: str) -> list[str]:
        return sorted(o["metadata"]["name"] for o in runs.of(kind, key))

    runs.settle(key, lambda o: o["metadata"]["labels"]["planops.dev/step"] == "a")
    assert names("job") == ["b1"] and names("pod") == ["b1-x"]
    runs.seen("job", "MODIFIED", obj("a1", "a", "2"))  # the Job's Complete, after its pod
    runs.seen("pod", "MODIFIED", obj("a1-x", "a", "2"))
    runs.replace("job", key, [obj("a1", "a", "3"), obj("b1", "b", "3")])  # a list
    assert names("job") == ["b1"] and names("pod") == ["b1-x"]
    runs.seen("job", "ADDED", obj("c1", "c", "4"))  # an unsettled step's: taken
    assert names("job") == ["b1", "c1"]
    runs.close(key)
    assert runs.of("job", key) == [] and runs.of("pod", key) == []


def test_a_reconcile_drops_a_settled_steps_job_and_pod_from_the_run_cache():
    """What RunObjects.settle is for, end to end in the reconciler: once a step's record is
    written, its Job and pod leave the cache (a big run's would otherwise stay until it ends)."""
    steps = [
        {"id": "a", "shell": "echo a"},
        {"id": "b", "shell": "echo b", "dependsOn": ["a"]},
        {"id": "c", "shell": "echo c"},
    ]
    plan = {**NEW, "spec": {"steps": steps}}
    kube, plans, capsules = _api(plan), WatchCache(), WatchCache()
    plans.seen("ADDED", plan)
    capsules.seen("ADDED", CAPSULE)
    runs = RunObjects("planops.dev/plan", "planops.dev/run")
    r = Reconciler(kube, plans=plans, capsules=capsules, runs=runs)
    asyncio.run(r.reconcile("ns", "p"))
    written = plans.get("ns", "p")
    assert written is not None
    key = ("ns", "p", written["status"]["run"]["id"])
    (job_a,) = [j for j in kube.of("job") if attempt_step(j) == "a"]
    job_a["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    pod_a = {
        "metadata": {
            "namespace": "ns",
            "name": "a-pod",
            "uid": "a-pod-uid",
            "labels": job_a["metadata"]["labels"],
            "ownerReferences": [
                {"apiVersion": "batch/v1", "kind": "Job", "uid": job_a["metadata"]["uid"]}
                | {"controller": True}
            ],
        },
        "status": {
            "phase": "Succeeded",
            "containerStatuses": [{"state": {"terminated": {"exitCode": 0}}}],
        },
    }
    kube.put("pod", pod_a)
    kube.logs["a-pod"] = "a\n"
    runs.seen("job", "MODIFIED", job_a)
    runs.seen("pod", "ADDED", pod_a)

    def cached_steps(kind: str) -> list[str | None]:
        return sorted(str(attempt_step(o)) for o in runs.of(kind, key))

    asyncio.run(r.reconcile("ns", "p"))  # a settles (its record written), b starts
    assert cached_steps("job") == ["a", "b", "c"]
    asyncio.run(r.reconcile("ns", "p"))  # reads the run: a's objects are never read again
    assert cached_steps("job") == ["b", "c"] and cached_steps("pod") == []
    runs.seen("pod", "MODIFIED", pod_a)  # a late event of a's pod
    assert cached_steps("pod") == []


def test_a_later_generation_stops_the_objects_of_earlier_runs():
    second = {**NEW, "metadata": {**NEW["metadata"], "generation": 2}}
    kube, plans, capsules = _api(second), WatchCache(), WatchCache()
    plans.seen("ADDED", second)
    capsules.seen("ADDED", CAPSULE)
    r = Reconciler(kube, plans=plans, capsules=capsules)
    asyncio.run(r.reconcile("ns", "p"))
    assert kube.methods()[:3] == ["list_jobs", "list_plans", "list_pvcs"]


def test_a_running_plans_duration_alone_is_not_written_but_its_end_is():
    kube = FakeKube()
    running = {"phase": "Running", "progress": "1/2", "duration": "1s"}
    plan = kube.put("plan", {"metadata": {"namespace": "ns", "name": "p"}, "status": running})
    r = Reconciler(kube)

    def patches() -> int:
        return sum(1 for c in kube.calls if c[0] == "patch_plan_status")

    asyncio.run(r._status.write(plan, {**running, "duration": "3s"}))
    assert patches() == 0  # no patch: only the clock moved
    asyncio.run(r._status.write(plan, {**running, "progress": "2/2", "duration": "3s"}))
    assert patches() == 1  # a real change carries the new duration with it
    done = {**running, "phase": "Succeeded", "duration": "4s"}
    plan["status"] = {**done, "duration": "3s"}
    asyncio.run(r._status.write(plan, done))
    assert patches() == 2  # a finished plan's duration is final: written


def _run_job(name: str, rv: str, run: str = "r1") -> dict[str, Any]:
    labels = {"planops.dev/plan": "p", "planops.dev/run": run}
    meta = {"namespace": "ns", "name": name, "resourceVersion": rv, "labels": labels}
    return {"metadata": {**meta, "managedFields": [{"manager": "kubelet"}]}, "status": {}}


def test_caches_keep_no_field_ownership_bookkeeping():
    runs, plans = RunObjects("planops.dev/plan", "planops.dev/run"), WatchCache()
    runs.seen("pod", "ADDED", _run_job("a", "5"))
    plans.seen("ADDED", _run_job("p", "5"))
    for kept in (runs.of("pod", ("ns", "p", "r1"))[0], plans.get("ns", "p")):
        assert kept is not None and "managedFields" not in kept["metadata"]
        assert kept["metadata"]["labels"] == {"planops.dev/plan": "p", "planops.dev/run": "r1"}


def test_an_ended_runs_objects_leave_the_cache_and_do_not_come_back():
    runs = RunObjects("planops.dev/plan", "planops.dev/run")
    runs.seen("job", "ADDED", _run_job("a", "5"))
    runs.seen("pod", "ADDED", _run_job("a-x", "6"))
    runs.seen("job", "ADDED", _run_job("b", "5", run="r2"))
    runs.close(("ns", "p", "r1"))
    assert runs.of("job", ("ns", "p", "r1")) == [] and runs.of("pod", ("ns", "p", "r1")) == []
    runs.seen("pod", "MODIFIED", _run_job("a-x", "7"))  # the Job controller's late update
    assert runs.of("pod", ("ns", "p", "r1")) == []
    assert len(runs.of("job", ("ns", "p", "r2"))) == 1  # another run of the Plan: kept


def test_a_finished_plans_reconcile_drops_its_runs_objects():
    kube, plans, capsules = _api(NEW), WatchCache(), WatchCache()
    plans.seen("ADDED", NEW)
    capsules.seen("ADDED", CAPSULE)
    runs = RunObjects("planops.dev/plan", "planops.dev/run")
    r = Reconciler(kube, plans=plans, capsules=capsules, runs=runs)
    asyncio.run(r.reconcile("ns", "p"))  # dispatches the Job (written back to the cache)
    written = plans.get("ns", "p")
    assert written is not None
    key = ("ns", "p", written["status"]["run"]["id"])
    assert len(runs.of("job", key)) == 1
    plans.seen("MODIFIED", {**written, "status": {**written["status"], "phase": "Succeeded"}})
    asyncio.run(r.reconcile("ns", "p"))
    assert runs.of("job", key) == []


def _two_steps(
    clock: list[float],
) -> tuple[FakeKube, WatchCache, RunObjects, Reconciler, tuple[str, str, str]]:
    """A run of two steps a and b whose first reconcile created both Jobs (and cached them)."""
    two = [{"id": "a", "shell": "echo a"}, {"id": "b", "shell": "echo b"}]
    kube, plans, capsules = _api({**NEW, "spec": {"steps": two}}), WatchCache(), WatchCache()
    kube.logs["a-pod"] = ""
    plans.seen("ADDED", {**NEW, "spec": {"steps": two}})
    capsules.seen("ADDED", CAPSULE)
    runs = RunObjects("planops.dev/plan", "planops.dev/run")
    r = Reconciler(kube, plans=plans, capsules=capsules, runs=runs, clock=lambda: clock[0])
    asyncio.run(r.reconcile("ns", "p"))
    written = plans.get("ns", "p")
    assert written is not None
    return kube, plans, runs, r, ("ns", "p", written["status"]["run"]["id"])


def _completed(job: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The Job marked Complete, and its pod: Succeeded."""
    done = {"type": "Complete", "status": "True", "lastTransitionTime": "2026-01-01T00:00:01Z"}
    meta = {**job["metadata"], "resourceVersion": "900"}
    job = {**job, "metadata": meta, "status": {"succeeded": 1, "conditions": [done]}}
    owner = {"apiVersion": "batch/v1", "kind": "Job", "uid": meta["uid"], "controller": True}
    pod = {
        "metadata": {
            "namespace": "ns",
            "name": "a-pod",
            "resourceVersion": "901",
            "labels": meta["labels"],
            "ownerReferences": [owner],
        },
        "status": {"phase": "Succeeded", "containerStatuses": [{"state": {"terminated": {}}}]},
    }
    return job, pod


def test_a_settled_steps_pod_gone_does_not_make_later_reconciles_list_the_run():
    # The pod garbage collector deletes terminated pods past a cluster-wide threshold (12,500 by
    # default): in a big run the pods of many settled steps are gone. Only an unsettled Job that
    # ended without its pod at hand makes the cache untrustworthy; a settled one must not, or
    # every later reconcile lists the whole run.
    kube, plans, runs, r, key = _two_steps([1_000.0])
    (job_a,) = [j for j in runs.of("job", key) if attempt_step(j) == "a"]
    job_a, pod_a = _completed({**job_a, "metadata": {**job_a["metadata"], "uid": "job-a"}})
    runs.seen("job", "MODIFIED", job_a)
    runs.seen("pod", "ADDED", pod_a)
    kube.calls.clear()
    asyncio.run(r.reconcile("ns", "p"))  # a settles from the cache: its log read, its record
    assert "list_jobs" not in kube.methods() and "stream_log" in kube.methods()
    written = plans.get("ns", "p")
    assert written is not None and written["status"]["counts"]["success"] == 1
    runs.seen("pod", "DELETED", pod_a)  # garbage-collected
    kube.calls.clear()
    asyncio.run(r.reconcile("ns", "p"))
    assert "list_jobs" not in kube.methods() and "list_pods" not in kube.methods()


def test_a_runs_list_holds_no_settled_steps_objects():
    # A big run's list (the resync's look at 20,000 Jobs) once held every Job and pod of the run,
    # settled steps' too, beside the cache: a jump of ~50 MiB at each. Now what the list keeps
    # of a settled step's Job or pod is nothing, as its page arrives.
    now = [1_000.0]
    kube, plans, runs, r, key = _two_steps(now)
    (job_a,) = [j for j in kube.of("job") if attempt_step(j) == "a"]
    job_a, pod_a = _completed(job_a)
    kube.put("job", copy.deepcopy(job_a))
    kube.put("pod", copy.deepcopy(pod_a))
    runs.seen("job", "MODIFIED", job_a)
    runs.seen("pod", "ADDED", pod_a)
    asyncio.run(r.reconcile("ns", "p"))  # a settles
    written = plans.get("ns", "p")
    assert written is not None and written["status"]["counts"]["success"] == 1
    held: dict[str, list[str]] = {}
    for method in ("list_jobs", "list_pods"):
        listing = getattr(kube, method)

        async def recorded(*args: Any, _listing: Any = listing, _m: str = method) -> Any:
            got = await _listing(*args)
            held[_m] = [attempt_step(o) or "" for o in got]
            return got

        setattr(kube, method, recorded)
    now[0] += RELIST_FLOOR
    r.check("ns", "p")  # the resync asks for a real look
    asyncio.run(r.reconcile("ns", "p"))
    assert held["list_jobs"] == ["b"]  # a's Job is in the API server, but not held by the list
    assert "a" not in held.get("list_pods", [])
    assert [attempt_step(j) for j in runs.of("job", key)] == ["b"]


def test_a_job_missing_from_the_cache_fails_its_step_only_once_a_list_confirms_it():
    # The cache lost a Job the API server still holds (a relist's older snapshot once did):
    # the step must not fail as "deleted". A Job really deleted still fails it, after one list.
    kube, plans, runs, r, key = _two_steps([1_000.0])
    (job_b,) = [j for j in runs.of("job", key) if attempt_step(j) == "b"]
    runs.seen("job", "DELETED", job_b)  # gone from the cache only
    kube.calls.clear()
    asyncio.run(r.reconcile("ns", "p"))
    assert "list_jobs" in kube.methods()
    written = plans.get("ns", "p")
    assert written is not None and written["status"]["counts"].get("failed", 0) == 0
    assert [attempt_step(j) for j in runs.of("job", key)].count("b") == 1  # set right
    kube.objects.pop(("job", "ns", job_b["metadata"]["name"]))  # now really deleted
    runs.seen("job", "DELETED", job_b)
    kube.calls.clear()
    asyncio.run(r.reconcile("ns", "p"))
    assert "list_jobs" in kube.methods()
    written = plans.get("ns", "p")
    assert written is not None and written["status"]["counts"]["failed"] == 1


def test_a_resync_lists_a_run_again_only_when_its_last_list_is_old_for_what_it_cost():
    # A big run's list (20,000 Jobs, every resync) was a third of the operator's CPU for it,
    # to confirm what the watches had shown: the resync lists a run again once RELIST_AFTER
    # times its last list's duration has passed, and RELIST_FLOOR since its last list or its
    # start here (a small run's list at every resync was two requests a running Plan).
    now = [1_000.0]
    list_seconds = [5.0]

    def slow(*_: Any) -> None:  # a list takes its time
        now[0] += list_seconds[0]

    kube = FakeKube()
    kube.on("list_jobs", slow)
    kube.put("plan", copy.deepcopy(NEW))
    plans, capsules = WatchCache(), WatchCache()
    plans.seen("ADDED", NEW)
    capsules.seen("ADDED", CAPSULE)
    runs = RunObjects("planops.dev/plan", "planops.dev/run")
    r = Reconciler(kube, plans=plans, capsules=capsules, runs=runs, clock=lambda: now[0])
    asyncio.run(r.reconcile("ns", "p"))  # the run starts: nothing to list yet

    def lists_at_resync(after: float) -> bool:
        now[0] += after
        r.check("ns", "p")
        kube.calls.clear()
        asyncio.run(r.reconcile("ns", "p"))
        return "list_jobs" in kube.methods()

    assert not lists_at_resync(60)  # started here 60 s ago: its creations are in the cache
    assert lists_at_resync(RELIST_FLOOR)  # long since: listed (it took 5 s)
    list_seconds[0] = 200.0  # (the run is huge now: its list takes 200 s)
    assert lists_at_resync(RELIST_FLOOR)  # the floor since a list of 5 s
    assert not lists_at_resync(RELIST_FLOOR + 60)  # not before 20 times 200 s
    assert lists_at_resync(RELIST_AFTER * 200 - RELIST_FLOOR - 60)
    list_seconds[0] = 0.01  # (the run is small again: its list takes 10 ms)
    assert lists_at_resync(RELIST_AFTER * 200)
    assert not lists_at_resync(60)  # a list of 10 ms: not at every resync
    assert lists_at_resync(RELIST_FLOOR)
    kube.calls.clear()
    r.forget("ns", "p")  # other checks than the resync's are not put off
    asyncio.run(r.reconcile("ns", "p"))
    assert "list_jobs" in kube.methods()


def _step_object(name: str, step: str, rv: str, run: str = "r1", **status: Any) -> dict[str, Any]:
    labels = {"planops.dev/plan": "p", "planops.dev/run": run, "planops.dev/step": step}
    meta = {"namespace": "ns", "name": name, "resourceVersion": rv, "labels": labels}
    return {"metadata": meta, "status": status}


def test_an_ended_runs_or_a_settled_steps_objects_wake_no_reconcile():
    """A step's Job and pod are written several times after the step settled (the pod's phase,
    the Job's Complete, the job-tracking finalizer taken off) and after the run ended: no
    reconcile reads them (RunObjects.seen says so), so they wake none; an unsettled step's
    still do, and so does anything of a run this replica has not seen end."""
    op = Operator.__new__(Operator)
    op.runs = RunObjects("planops.dev/plan", "planops.dev/run")
    woken: list[tuple[str, str]] = []
    op.queue = SimpleNamespace(put=woken.append)  # type: ignore[assignment]
    done = {"conditions": [{"type": "Complete", "status": "True"}]}
    ended = {"phase": "Succeeded", "containerStatuses": [{"state": {"terminated": {}}}]}

    op.job_event("ADDED", _step_object("a1", "a", "1"))
    op.job_event("MODIFIED", _step_object("a1", "a", "2", **done))
    assert woken == [("ns", "p")]  # an unsettled step's Job ended: news
    op.runs.settle(("ns", "p", "r1"), lambda o: o["metadata"]["labels"]["planops.dev/step"] == "a")
    op.job_event("MODIFIED", _step_object("a1", "a", "3", **done))
    op.pod_event("MODIFIED", _step_object("a1-x", "a", "3", **ended))
    op.job_event("DELETED", _step_object("a1", "a", "4", **done))
    assert woken == [("ns", "p")]  # a settled step's: none
    op.pod_event("MODIFIED", _step_object("b1-x", "b", "5", **ended))
    assert woken == [("ns", "p")] * 2  # another step's pod ended: news

    op.runs.close(("ns", "p", "r1"))
    op.pod_event("MODIFIED", _step_object("b1-x", "b", "6", **ended))
    op.job_event("MODIFIED", _step_object("b1", "b", "6", **done))
    assert woken == [("ns", "p")] * 2  # the run ended: none
    op.job_event("MODIFIED", _step_object("c1", "c", "7", run="r2", **done))
    assert woken == [("ns", "p")] * 3  # another run's: news
