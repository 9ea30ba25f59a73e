"""What the reconciler accepts as its own: objects are the run's by their controller reference
(UID), never by labels alone (a pod or Job anyone made with a step's labels is not adopted)."""

from __future__ import annotations

from typing import Any

from planops.kube.cache import slim_run_object
from planops.reconciler.run import observe
from planops.reconciler.run.observe import Observed, controller_uid, owned, pods_by_job

PLAN_UID = "plan-uid"


def job_attempt(job: dict[str, Any], pod: dict[str, Any] | None) -> Observed | None:
    """observe.job_attempt, checked to read the same from the objects as the operator's cache
    keeps them (kube.cache.slim_run_object keeps only what observe reads)."""
    whole = observe.job_attempt(job, pod)
    slim_pod = slim_run_object("pod", pod) if pod is not None else None
    assert observe.job_attempt(slim_run_object("job", job), slim_pod) == whole
    return whole


def obj(
    name: str, owner: str | None, *, controller: bool = True, kind: str = "Plan", **meta: Any
) -> dict[str, Any]:
    api = "batch/v1" if kind == "Job" else "planops.dev/v1alpha1"
    ref = {"apiVersion": api, "kind": kind, "name": "o", "uid": owner, "controller": controller}
    return {"metadata": {"name": name, "ownerReferences": [ref] if owner else [], **meta}}


def job(name: str, uid: str, owner: str = PLAN_UID) -> dict[str, Any]:
    j = obj(name, owner, uid=uid, labels={"planops.dev/step": "a", "planops.dev/attempt": "1"})
    j["status"] = {"conditions": [{"type": "Complete", "status": "True"}]}
    return j


def pod(name: str, owner: str | None, created: str, job_name: str = "j") -> dict[str, Any]:
    return obj(
        name,
        owner,
        kind="Job",
        creationTimestamp=created,
        labels={"batch.kubernetes.io/job-name": job_name, "job-name": job_name},
    )


def test_controller_uid_is_the_controller_references_only():
    assert controller_uid(obj("x", "u")) == "u"
    assert controller_uid(obj("x", "u", controller=False)) is None
    assert controller_uid(obj("x", None)) is None
    assert controller_uid({"metadata": {}}) is None


def test_a_controller_reference_to_our_uid_under_another_kind_or_group_is_not_ours():
    as_job = obj("x", PLAN_UID, kind="Job")  # batch/v1 Job with the Plan's UID
    other_group = obj("y", PLAN_UID)
    other_group["metadata"]["ownerReferences"][0]["apiVersion"] = "evil.example/v1"
    no_version = obj("z", PLAN_UID)
    del no_version["metadata"]["ownerReferences"][0]["apiVersion"]
    assert owned([as_job, other_group, no_version], PLAN_UID) == []
    assert controller_uid(as_job) is None and controller_uid(as_job, "Job") == PLAN_UID
    # a pod is its Job's only when its controller is a batch Job
    jobs = [job("j", "job-uid")]
    plan_kind = obj("j-p", "job-uid", creationTimestamp="2026-01-01T00:00:09Z")
    assert pods_by_job([plan_kind], jobs) == {}
    # a scheduled run is its ScheduledPlan's, not a Plan's of the same UID
    run = obj("r", "sp-uid", kind="ScheduledPlan")
    assert owned([run], "sp-uid", "ScheduledPlan") == [run] and owned([run], "sp-uid") == []


def test_owned_keeps_only_objects_this_plan_controls():
    mine, theirs, loose = obj("a", PLAN_UID), obj("b", "other"), obj("c", None)
    not_controller = obj("d", PLAN_UID, controller=False)
    assert owned([mine, theirs, loose, not_controller], PLAN_UID) == [mine]


def test_a_pod_with_a_steps_labels_but_another_owner_is_not_the_steps_pod():
    jobs = [job("j", "job-uid")]
    real = pod("j-real", "job-uid", "2026-01-01T00:00:00Z")
    forged = pod("j-forged", "someone", "2026-01-01T00:00:09Z")  # newer, same labels
    unowned = pod("j-loose", None, "2026-01-01T00:00:10Z")
    assert pods_by_job([real, forged, unowned], jobs) == {"j": real}
    assert pods_by_job([forged, unowned], jobs) == {}


def test_the_newest_of_a_jobs_own_pods_is_its_pod():
    jobs = [job("j", "job-uid")]
    old = pod("j-1", "job-uid", "2026-01-01T00:00:00Z")
    new = pod("j-2", "job-uid", "2026-01-01T00:00:05Z")
    assert pods_by_job([new, old], jobs)["j"] is new


def test_a_creation_time_that_is_no_text_is_the_oldest_and_never_a_crash():
    """The API server writes creationTimestamp as an RFC 3339 string, but the operator reads any
    JSON it is given without raising: a time that is no text sorts before every real one, even
    nested past Python's recursion limit (str() of it raised RecursionError)."""
    deep: Any = "2026-01-01T00:00:09Z"
    for _ in range(5000):
        deep = {"k": deep}
    jobs = [job("j", "job-uid")]
    real = pod("j-1", "job-uid", "2026-01-01T00:00:00Z")
    odd = [pod(f"j-odd-{i}", "job-uid", "x") for i in range(4)]
    for p, created in zip(odd, [deep, [deep], 99, {"t": "2027-01-01T00:00:00Z"}], strict=True):
        p["metadata"]["creationTimestamp"] = created
    assert pods_by_job([real, *odd], jobs)["j"] is real
    assert pods_by_job([*odd, real], jobs)["j"] is real


def test_job_attempt_reads_the_pod_it_is_given():
    observed = job_attempt(job("j", "job-uid"), pod("j-real", "job-uid", "2026-01-01T00:00:00Z"))
    assert observed.status == "success" and observed.pod == "j-real"


def failed_job() -> dict[str, Any]:
    j = job("j", "job-uid")
    j["status"] = {
        "conditions": [
            {
                "type": "Failed",
                "status": "True",
                "reason": "BackoffLimitExceeded",
                "message": "Job has reached the specified backoff limit",
            }
        ]
    }
    return j


def test_a_failed_attempt_whose_pod_is_gone_says_so():
    observed = job_attempt(failed_job(), None)
    assert observed.status == "failed"
    assert observed.error is not None and observed.error.startswith("its pod is gone: deleted")
    assert "BackoffLimitExceeded" in observed.error


def test_a_pod_deleted_while_running_names_its_node_and_the_disruption():
    p = pod("j-1", "job-uid", "2026-01-01T00:00:00Z")
    p["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    p["spec"] = {"nodeName": "node-7"}
    p["status"] = {
        "conditions": [
            {
                "type": "DisruptionTarget",
                "status": "True",
                "reason": "DeletionByTaintManager",
                "message": "Taint manager: deleting due to NoExecute taint key "
                "node.kubernetes.io/unreachable",
            }
        ],
        "containerStatuses": [{"state": {"terminated": {"exitCode": 137}}}],
    }
    observed = job_attempt(failed_job(), p)
    assert observed.error == (
        "its pod was deleted while the step ran on node node-7 (DeletionByTaintManager: Taint "
        "manager: deleting due to NoExecute taint key node.kubernetes.io/unreachable)"
    )


def test_an_ordinary_failure_keeps_its_exit_code():
    p = pod("j-1", "job-uid", "2026-01-01T00:00:00Z")
    p["status"] = {"containerStatuses": [{"state": {"terminated": {"exitCode": 3}}}]}
    assert job_attempt(failed_job(), p).error == "exit code 3"


def test_an_oom_kill_reads_as_one_even_when_the_runtime_reports_only_the_exit_code():
    p = pod("j-1", "job-uid", "2026-01-01T00:00:00Z")
    j = failed_job()
    j["spec"] = {
        "template": {"spec": {"containers": [{"resources": {"limits": {"memory": "32Mi"}}}]}}
    }
    p["status"] = {
        "containerStatuses": [{"state": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}}]
    }
    assert job_attempt(j, p).error == "OOMKilled: the container exceeded its memory limit (32Mi)"
    # containerd's exit event beat its OOM event: the kubelet saw only Error / 137
    p["status"] = {
        "containerStatuses": [{"state": {"terminated": {"exitCode": 137, "reason": "Error"}}}]
    }
    assert job_attempt(j, p).error == (
        "exit code 137: killed (SIGKILL), most likely for exceeding its memory limit (32Mi); "
        "raise resources.limits.memory if the step needs more"
    )
    j["spec"] = {}  # no memory limit: nothing to blame
    assert job_attempt(j, p).error == "exit code 137"


def test_a_pod_evicted_from_a_lost_node_fails_its_attempt_before_the_job_ends():
    running = job("j", "job-uid")
    running["status"] = {"active": 1}
    p = pod("j-1", "job-uid", "2026-01-01T00:00:00Z")
    p["metadata"]["deletionTimestamp"] = "2026-01-01T00:01:00Z"
    p["spec"] = {"nodeName": "node-7"}
    p["status"] = {
        "conditions": [
            {"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"}
        ]
    }
    observed = job_attempt(running, p)
    assert observed.status == "failed" and observed.stuck
    assert observed.error is not None and "on node node-7" in observed.error
    p["status"]["conditions"] = []  # being deleted, no disruption: the Job decides
    assert job_attempt(running, p).status is None


def test_a_container_the_node_could_not_start_never_ran():
    p = pod("j-1", "job-uid", "2026-01-01T00:00:00Z")
    p["status"] = {
        "containerStatuses": [
            {
                "state": {
                    "terminated": {
                        "exitCode": 128,
                        "reason": "StartError",
                        "message": "failed to start containerd task: context canceled",
                    }
                }
            }
        ]
    }
    observed = job_attempt(failed_job(), p)
    assert observed is not None and observed.never_ran and observed.status == "failed"
    assert observed.error == (
        "the node could not start the container (StartError: failed to start containerd task: "
        "context canceled)"
    )
    p["status"]["containerStatuses"][0]["state"]["terminated"]["reason"] = "Error"
    assert not job_attempt(failed_job(), p).never_ran  # its code ran and failed


def test_a_pod_that_succeeded_settles_its_attempt_before_the_job_controller_marks_it():
    running = job("j", "job-uid")
    running["status"] = {"active": 1}
    p = pod("j-1", "job-uid", "2026-01-01T00:00:00Z")
    done = {"exitCode": 0, "finishedAt": "2026-01-01T00:00:03Z"}
    p["status"] = {"phase": "Succeeded", "containerStatuses": [{"state": {"terminated": done}}]}
    observed = job_attempt(running, p)
    assert observed.status == "success" and observed.pod == "j-1"
    assert observed.finished_at == 1767225603.0
    # ended otherwise: the Job's condition decides, as before
    p["status"] = {
        "phase": "Failed",
        "containerStatuses": [{"state": {"terminated": {"exitCode": 1}}}],
    }
    assert job_attempt(running, p).status is None
    p["status"] = {
        "phase": "Succeeded",
        "containerStatuses": [{"state": {"terminated": {"exitCode": 2}}}],
    }
    assert job_attempt(running, p).status is None  # the kubelet and the container disagree


def test_a_container_that_exited_0_settles_its_attempt_before_the_kubelet_writes_the_phase():
    """The kubelet writes phase Succeeded only once it has torn the pod down, about a second
    after the container exited: the step-to-step latency a chain pays if it waits for it."""
    running = job("j", "job-uid")
    running["status"] = {"active": 1}
    p = pod("j-1", "job-uid", "2026-01-01T00:00:00Z")
    done = {"exitCode": 0, "finishedAt": "2026-01-01T00:00:03Z", "message": '{"a": 1}'}
    p["status"] = {"phase": "Running", "containerStatuses": [{"state": {"terminated": done}}]}
    observed = job_attempt(running, p)
    assert observed is not None and observed.status == "success"
    assert observed.finished_at == 1767225603.0 and observed.termination_message == '{"a": 1}'
    p["status"]["phase"] = "Pending"  # a pod that ran before the kubelet reported it running
    assert job_attempt(running, p).status == "success"
    # still running, or not only its one container
    p["status"]["containerStatuses"] = [{"state": {"running": {}}}]
    assert job_attempt(running, p).status is None
    p["status"]["containerStatuses"] = [{"state": {"terminated": done}}, {"state": {"running": {}}}]
    assert job_attempt(running, p).status is None
    # exited otherwise, or killed
    p["status"]["containerStatuses"] = [{"state": {"terminated": {**done, "exitCode": 1}}}]
    assert job_attempt(running, p).status is None
    p["status"]["containerStatuses"] = [{"state": {"terminated": {**done, "signal": 15}}}]
    assert job_attempt(running, p).status is None
    # being deleted (a step stopped by SIGTERM may exit 0): the Job decides
    p["status"]["containerStatuses"] = [{"state": {"terminated": done}}]
    p["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:02Z"
    assert job_attempt(running, p).status is None
    # the kubelet's phase says otherwise
    del p["metadata"]["deletionTimestamp"]
    p["status"]["phase"] = "Failed"
    assert job_attempt(running, p).status is None
    p["status"]["phase"] = "Running"
    assert job_attempt(running, p).status == "success"


# -- a pod that moves files (kube.files_pod): the step is the init container `step` -----------


def files_pod(step: dict[str, Any], collect: dict[str, Any] | None, phase: str) -> dict[str, Any]:
    p = pod("j-1", "job-uid", "2026-01-01T00:00:00Z")
    p["status"] = {
        "phase": phase,
        "initContainerStatuses": [{"name": "step", "state": step}],
        "containerStatuses": [{"name": "collect", "state": collect or {"waiting": {}}}],
    }
    return p


def test_a_files_pod_settles_on_its_collector_and_reads_the_step_from_its_init_container():
    running = job("j", "job-uid")
    running["status"] = {"active": 1}
    step = {"terminated": {"exitCode": 0, "finishedAt": "2026-01-01T00:00:03Z", "message": "o"}}
    said = '{"results":{"v":"1"},"artifacts":[]}'
    # the step exited 0 but the collector has not ended: not settled
    assert job_attempt(running, files_pod(step, {"running": {}}, "Running")).status is None
    collect = {"terminated": {"exitCode": 0, "message": said}}
    observed = job_attempt(running, files_pod(step, collect, "Running"))
    assert observed.status == "success" and observed.collected == said
    assert observed.termination_message == "o" and observed.finished_at == 1767225603.0


def test_a_files_pod_fails_with_the_steps_exit_code_or_the_collectors_message():
    step = {"terminated": {"exitCode": 3}}
    assert job_attempt(failed_job(), files_pod(step, None, "Failed")).error == "exit code 3"
    ok = {"terminated": {"exitCode": 0}}
    said = '{"results":{},"error":"artifact \'dist\': the artifact repository cannot be reached"}'
    collect = {"terminated": {"exitCode": 1, "message": said}}
    observed = job_attempt(failed_job(), files_pod(ok, collect, "Failed"))
    assert observed.status == "failed"
    assert observed.error == (
        "collect failed: artifact 'dist': the artifact repository cannot be reached"
    )


def test_a_files_pod_whose_fetch_failed_names_it():
    p = files_pod({"waiting": {"reason": "PodInitializing"}}, None, "Failed")
    fetch = {"terminated": {"exitCode": 1, "message": '{"error":"input artifact \'x\': bad"}'}}
    p["status"]["initContainerStatuses"].insert(0, {"name": "fetch", "state": fetch})
    assert job_attempt(failed_job(), p).error == "fetch failed: input artifact 'x': bad"


def test_a_collector_that_cannot_start_fails_the_attempt_at_once():
    running = job("j", "job-uid")
    running["status"] = {"active": 1}
    done = {"terminated": {"exitCode": 0}}
    pull = {"waiting": {"reason": "ErrImageNeverPull", "message": "no image"}}
    observed = job_attempt(running, files_pod(done, pull, "Running"))
    assert observed.status == "failed" and observed.stuck
    assert observed.error == "cannot start: ErrImageNeverPull: no image"


def test_an_oom_killed_step_that_moves_files_names_its_own_memory_limit():
    """The step is the init container `step` (the first container is the collector): its
    terminated state and its limit are read, and the message is a plain step's."""
    j = failed_job()
    j["spec"] = {
        "template": {
            "spec": {
                "initContainers": [
                    {"name": "fetch", "resources": {"limits": {"memory": "128Mi"}}},
                    {"name": "step", "resources": {"limits": {"memory": "48Mi"}}},
                ],
                "containers": [{"name": "collect", "resources": {"limits": {"memory": "128Mi"}}}],
            }
        }
    }
    oom = {"terminated": {"exitCode": 137, "reason": "OOMKilled"}}
    p = files_pod(oom, None, "Failed")
    assert job_attempt(j, p).error == "OOMKilled: the container exceeded its memory limit (48Mi)"
    p = files_pod({"terminated": {"exitCode": 137, "reason": "Error"}}, None, "Failed")
    assert "most likely for exceeding its memory limit (48Mi)" in (job_attempt(j, p).error or "")
