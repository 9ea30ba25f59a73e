"""Observe: what the cluster says about a run's attempts, as plain facts (pure functions).

A Job's attempt is settled by the Job's terminal condition (Complete / Failed), or earlier by its
pod: phase Succeeded, or its one container reported terminated with exit code 0 (the kubelet
writes the terminal phase only once it has torn the pod down, about a second later, and the Job
controller follows that; a container of a `restartPolicy: Never` pod that exited 0 does not run
again). A failure is never read from a pod that has not ended, and a pod being deleted waits for
the Job's verdict; its error is made readable from the pod: exit code, OOMKilled, deadline.
A pod that cannot start (image pull, bad config) would otherwise sit until the deadline (Argo's
"stuck Running" complaint): it fails the attempt at once, with the kubelet's reason; so does one
whose step container waits for a service (a sidecar, kube.step_pod) that cannot start or keeps
crashing before it is ready. Sidecars are init containers: `containerStatuses` hold the step's
container alone, so "its one container exited 0" settles a pod with services too. A step that
moves files (kube.files_pod) is the init container `step` (its exit code, reason and error read
from it), and its pod settles when the collector `collect`, its one container, exited 0; a
failed `fetch` or `collect` fails the attempt with the collector's message, and `collect`'s
message (`Observed.collected`) carries the results and artifacts (reconciler.run.moved).

Never raises on what it reads: labels, annotations (and a child Plan's status) can be written by
anyone allowed to edit the objects. An object whose labels do not name an attempt of ours (no
step, an attempt that is not a positive decimal number such as `planops.dev/attempt: "one"`) is
not an attempt: `job_attempt` and `child_attempt` return None and the reconciler skips it, as
if it were not there (it is not deleted: it may be someone else's). Other fields that are not
what the API server would write read as absent.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, replace
from typing import Any, Literal

from planops.api.names import LABEL_ATTEMPT, LABEL_STEP
from planops.engine.delegation import delegated_output
from planops.engine.report import parse_rfc3339
from planops.kube.manifests import full_value

Obj = dict[str, Any]

#: Waiting reasons that will not resolve by themselves.
CANNOT_START = {
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
}


@dataclass(frozen=True)
class Observed:
    """One attempt as the cluster shows it."""

    step_id: str
    attempt: int
    object_name: str
    kind: Literal["job", "plan"]
    started_at: float
    status: Literal["success", "failed"] | None  # None: still running
    error: str | None = None
    finished_at: float | None = None
    pod: str | None = None  # the Job's pod, to read its log
    termination_message: str | None = None
    output: str | None = None  # child plans: known without reading a log
    stuck: bool = False  # failed because its pod cannot start: the Job must be deleted
    #: the container never started (the node failed to start it): AttemptFact.never_ran
    never_ran: bool = False
    #: the collector's termination message of a pod that moves files (kube.files_pod)
    collected: str | None = None


def _obj(value: Any) -> Obj:
    """`value` if it is an object, else an empty one (a field that is not what it should be)."""
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _time(value: Any) -> float | None:
    return parse_rfc3339(value) if isinstance(value, str) else None


def _condition(obj: Obj, kind: str) -> Obj | None:
    for c in _list(_obj(obj.get("status")).get("conditions")):
        if isinstance(c, dict) and c.get("type") == kind and c.get("status") == "True":
            return c
    return None


#: An attempt number as planops writes it (str(int), from 1); nothing else is an attempt.
_ATTEMPT = re.compile(r"[1-9][0-9]{0,8}")


def _ident(obj: Obj) -> tuple[str, int, str] | None:
    """(step id, attempt, object name); None when the object is not an attempt of ours."""
    meta = _obj(obj.get("metadata"))
    step = attempt_step(obj)
    attempt = _text(_obj(meta.get("labels")).get(LABEL_ATTEMPT))
    name = _text(meta.get("name"))
    if step is None or attempt is None or not _ATTEMPT.fullmatch(attempt) or not name:
        return None
    return step, int(attempt), name


def attempt_step(obj: Obj) -> str | None:
    """The step a Job or child Plan is an attempt of, read from its labels alone (cheap: a
    reconcile skips the attempts of settled steps before reading their outcome)."""
    return full_value(_obj(obj.get("metadata")), LABEL_STEP)


def _container(pod: Obj | None) -> Obj:
    """The step's container status: the init container `step` of a pod that moves files
    (kube.files_pod), else the pod's one container."""
    return _init(pod, STEP) or _final(pod)


def _final(pod: Obj | None) -> Obj:
    """The pod's (first) container: the step's, or the collector of a pod that moves files."""
    statuses = _list(_obj(_obj(pod).get("status")).get("containerStatuses"))
    return _obj(statuses[0]) if statuses else {}


def _init(pod: Obj | None, name: str) -> Obj:
    for c in _list(_obj(_obj(pod).get("status")).get("initContainerStatuses")):
        if _obj(c).get("name") == name:
            return _obj(c)
    return {}


#: the step's container (kube.manifests.CONTAINER) and the file movers' (kube.files_pod)
STEP, FETCH, COLLECT = "step", "fetch", "collect"


def _terminated(status: Obj) -> Obj:
    return _obj(_obj(status.get("state")).get("terminated"))


def _mover_error(pod: Obj | None) -> str | None:
    """Why the pod's `fetch` or `collect` failed (the collector's message says: a store down,
    an artifact past its bound, a wrong checksum), when one did."""
    if not _moving(pod):  # not a pod that moves files (a service is never named so)
        return None
    for name, status in ((FETCH, _init(pod, FETCH)), (COLLECT, _moving(pod))):
        term = _terminated(status)
        if term and (term.get("exitCode") != 0 or term.get("signal")):
            said = collector_error(_text(term.get("message")))
            code = f"exit code {term.get('exitCode')}"
            return f"{name} failed: {said or _text(term.get('reason')) or code}"
    return None


def _moving(pod: Obj | None) -> Obj:
    """The `collect` container's status, when the pod moves files."""
    final = _final(pod)
    return final if final.get("name") == COLLECT and _init(pod, STEP) else {}


def collector_error(message: str | None) -> str | None:
    """The `error` of a collector's termination message (planops.collector), if it says one."""
    try:
        said = json.loads(message or "")
    except ValueError:
        return None
    error = said.get("error") if isinstance(said, dict) else None
    return error if isinstance(error, str) else None


def _step_limits(pod_spec: Obj) -> Obj:
    """The step's limits: its init container `step`'s in a pod that moves files, else its one."""
    step = [c for c in _list(pod_spec.get("initContainers")) if _obj(c).get("name") == STEP]
    step = step or _list(pod_spec.get("containers"))
    return _obj(_obj(_obj(step[0] if step else {}).get("resources")).get("limits"))


def _pod_error(pod: Obj | None, limits: Obj | None) -> str | None:
    term = _obj(_obj(_container(pod).get("state")).get("terminated"))
    if not term:
        return None
    memory = (limits or {}).get("memory")
    if term.get("reason") == "OOMKilled":
        return (
            f"OOMKilled: the container exceeded its memory limit{f' ({memory})' if memory else ''}"
        )
    code = term.get("exitCode")
    if term.get("signal"):
        return f"killed by signal {term['signal']}"
    if code == SIGKILLED and memory:
        # The runtime reports OOMKilled only when its OOM event beats the exit event (a race in
        # containerd 1.6/1.7): a SIGKILL under a memory limit is most often the OOM killer.
        return (
            f"exit code {code}: killed (SIGKILL), most likely for exceeding its memory limit "
            f"({memory}); raise resources.limits.memory if the step needs more"
        )
    return f"exit code {code}" if code is not None else _text(term.get("reason"))


#: 128 + SIGKILL: what a container killed by the kernel's OOM killer exits with
SIGKILLED = 137


#: terminated reasons of a container the node failed to start (its command never ran)
NEVER_STARTED = ("StartError", "ContainerCannotRun")


def _start_error(pod: Obj | None) -> str | None:
    """Why the node could not start the step's container, when that is why it ended (the
    kubelet or the runtime failing, e.g. restarted while starting it): the step's code never
    ran, so starting it again is safe."""
    term = _obj(_obj(_container(pod).get("state")).get("terminated"))
    if term.get("reason") not in NEVER_STARTED:
        return None
    message = _text(term.get("message")) or ""
    return f"the node could not start the container ({term.get('reason')}: {message[:300]})"


def _pod_succeeded(pod: Obj | None) -> bool:
    """The step's one container exited 0: with phase Succeeded (the kubelet's verdict), or
    already before it, while the kubelet tears the pod down (its phase is still Pending or
    Running for about a second; `restartPolicy: Never` does not start the container again).
    Not a pod that is being deleted (a step stopped by SIGTERM may exit 0: the Job decides) nor
    one whose phase says otherwise."""
    status = _obj(_obj(pod).get("status"))
    term = _terminated(_final(pod))  # a pod that moves files: its collector ends it
    if term.get("exitCode") != 0 or term.get("signal"):
        return False
    if status.get("phase") == "Succeeded":
        return True
    return (
        status.get("phase") in ("Pending", "Running")
        and len(_list(status.get("containerStatuses"))) == 1
        and not _obj(_obj(pod).get("metadata")).get("deletionTimestamp")
    )


#: a service that keeps failing before it is ready: the step's container would never start
SERVICE_CRASHING = "CrashLoopBackOff"
#: why the step's container waits while its pod's init containers (its services) start
WAITS_FOR_SERVICES = "PodInitializing"


def _service_stuck(pod: Obj | None) -> str | None:
    """Why the step's container will never start, when a service of its pod (a sidecar: an
    init container, kube.step_pod) cannot start (its image, its config) or keeps crashing
    before it is ready, while the step's container waits for it (it has not started: it would
    otherwise sit until its deadline, with no word of the service)."""
    step = _obj(_obj(_container(pod).get("state")).get("waiting"))
    if step.get("reason") != WAITS_FOR_SERVICES:
        return None
    for c in _list(_obj(_obj(pod).get("status")).get("initContainerStatuses")):
        waiting = _obj(_obj(_obj(c).get("state")).get("waiting"))
        reason = waiting.get("reason")
        if reason in CANNOT_START or reason == SERVICE_CRASHING:
            what = (
                "keeps crashing before it is ready"
                if reason == SERVICE_CRASHING
                else "cannot start"
            )
            message = _text(waiting.get("message")) or ""
            service = _text(_obj(c).get("name")) or "?"
            return f"service {service} {what}: {reason}: {message[:300]}".rstrip(": ")
    return None


def _disruption(pod: Obj | None) -> Obj | None:
    for c in _list(_obj(_obj(pod).get("status")).get("conditions")):
        if (
            isinstance(c, dict)
            and c.get("type") == "DisruptionTarget"
            and c.get("status") == "True"
        ):
            return c
    return None


def _disrupted(pod: Obj | None) -> bool:
    """A pod the cluster is taking away (DisruptionTarget: evicted from a lost node, preempted,
    drained) while its Job has not ended: with the node gone it may never end by itself."""
    if pod is None or not _obj(pod.get("metadata")).get("deletionTimestamp"):
        return False
    return _disruption(pod) is not None


def _gone(pod: Obj | None, job_says: str) -> str | None:
    """Why a failed attempt's pod is missing or being deleted, when it is: deleted by hand,
    evicted, or its node lost (a disruption condition, set by the cluster, says which)."""
    if pod is None:
        return (
            "its pod is gone: deleted (by hand or by an eviction) or lost with its node before "
            f"the step finished (the Job says {job_says})"
        )
    if not _obj(pod.get("metadata")).get("deletionTimestamp"):
        return None
    node = _text(_obj(pod.get("spec")).get("nodeName"))
    where = f" on node {node}" if node else ""
    c = _disruption(pod)
    why = f" ({c.get('reason')}: {c.get('message')})" if c is not None else ""
    return f"its pod was deleted while the step ran{where}{why}"


def job_attempt(job: Obj, pod: Obj | None) -> Observed | None:
    """The attempt a Job (and its pod) shows; None when the Job is not an attempt of ours."""
    ident = _ident(job)
    if ident is None:
        return None
    step, attempt, name = ident
    meta = _obj(job.get("metadata"))
    seen = Observed(
        step,
        attempt,
        name,
        "job",
        _time(meta.get("creationTimestamp")) or 0.0,
        None,
        pod=_text(_obj(_obj(pod).get("metadata")).get("name")) if pod is not None else None,
    )
    state = _obj(_container(pod).get("state"))
    done = _condition(job, "Complete")
    # Settled by the Job's Complete, or already by its pod: the kubelet writes phase Succeeded
    # about a second after the container exited (once the pod is torn down) and the Job
    # controller batches pod updates (about 1 s more) before it marks the Job Complete; those
    # seconds would be most of a step-to-step latency. A container that exited 0 does not run
    # again (restartPolicy Never, backoffLimit 0): its pod and its Job can only follow.
    if done is not None or _pod_succeeded(pod):
        finished = (
            done.get("lastTransitionTime")
            if done is not None
            else _obj(state.get("terminated")).get("finishedAt")
        )
        return replace(
            seen,
            status="success",
            finished_at=_time(finished),
            termination_message=_text(_obj(state.get("terminated")).get("message")),
            collected=_text(_terminated(_moving(pod)).get("message")),
        )
    if (failed := _condition(job, "Failed")) is not None:
        return _failed(seen, job, pod, failed, state)
    if _disrupted(pod):  # evicted (its node lost, preempted...): it will not finish
        return replace(seen, status="failed", error=_gone(pod, ""), stuck=True)
    waiting = _obj(state.get("waiting"))
    if waiting.get("reason") not in CANNOT_START:  # the step's movers cannot start either
        waiting = _obj(_obj(_moving(pod).get("state")).get("waiting")) or waiting
    if waiting.get("reason") in CANNOT_START:
        error = f"cannot start: {waiting['reason']}: {waiting.get('message', '')}".rstrip(": ")
        return replace(seen, status="failed", error=error, stuck=True)
    if (stuck := _service_stuck(pod)) is not None:
        return replace(seen, status="failed", error=stuck, stuck=True)
    return seen


def _failed(seen: Observed, job: Obj, pod: Obj | None, failed: Obj, state: Obj) -> Observed:
    """A Job the Job controller marked Failed: why, from its pod when it says more."""
    spec = _obj(job.get("spec"))
    limits = _step_limits(_obj(_obj(spec.get("template")).get("spec")))
    pod_deadline = _obj(_obj(pod).get("spec")).get("activeDeadlineSeconds")
    if _obj(_obj(pod).get("status")).get("reason") == "DeadlineExceeded":
        error = f"deadline exceeded: the attempt ran longer than {pod_deadline}s"
    elif failed.get("reason") == "DeadlineExceeded":
        waited = spec.get("activeDeadlineSeconds")
        error = (
            f"deadline exceeded: the attempt did not finish within {waited}s of its Job's "
            "creation (the cluster had no room to start it in time)"
        )
    else:
        job_says = f"{failed.get('reason')}: {failed.get('message')}"
        error = _gone(pod, job_says) or _mover_error(pod) or _pod_error(pod, limits) or job_says
    start_error = _start_error(pod)
    return replace(
        seen,
        status="failed",
        error=start_error if start_error is not None else error,
        finished_at=_time(failed.get("lastTransitionTime")),
        termination_message=_text(_obj(state.get("terminated")).get("message")),
        never_ran=start_error is not None,
    )


def job_ended(job: Obj) -> bool:
    """The Job has its terminal condition (Complete or Failed)."""
    return _condition(job, "Complete") is not None or _condition(job, "Failed") is not None


def job_event_matters(event_type: str | None, job: Obj) -> bool:
    """Whether a Job event can change what `job_attempt` says (or an attempt's Job vanished):
    the Job controller writes a running Job's status several times (active, ready, start time),
    and reconciling the Plan on each would only read the same facts again."""
    if event_type in (None, "DELETED"):  # the initial listing (after a restart), or gone
        return True
    if _obj(job.get("metadata")).get("deletionTimestamp"):
        return True
    return job_ended(job)


def pod_event_matters(event_type: str | None, pod: Obj) -> bool:
    """Whether a pod event can change what `job_attempt` says of its Job: the pod ended, is
    being taken away, or cannot start. Scheduling, pulling and starting are not news."""
    if event_type in (None, "DELETED") or _obj(pod.get("metadata")).get("deletionTimestamp"):
        return True
    if _obj(pod.get("status")).get("phase") in ("Succeeded", "Failed"):
        return True
    state = _obj(_container(pod).get("state"))
    if _obj(state.get("waiting")).get("reason") in CANNOT_START:
        return True
    return bool(state.get("terminated")) or _service_stuck(pod) is not None


def child_attempt(child: Obj) -> Observed | None:
    """The attempt a child Plan shows; None when the Plan is not an attempt of ours."""
    ident = _ident(child)
    if ident is None:
        return None
    step, attempt, name = ident
    meta, status = _obj(child.get("metadata")), _obj(child.get("status"))
    started = _time(meta.get("creationTimestamp")) or 0.0
    phase = status.get("phase")
    report = _obj(status.get("report"))
    steps = [s for s in _list(report.get("steps")) if isinstance(s, dict)]
    # the child's output, or its last record's (engine.delegation: as the local runner takes it)
    last = delegated_output({**report, "steps": steps})
    finished = _time(status.get("finishedAt"))
    if phase == "Succeeded":
        return Observed(
            step, attempt, name, "plan", started, "success", finished_at=finished, output=last
        )
    if phase in ("Failed", "Invalid"):
        if phase == "Invalid":
            errors = "; ".join(
                str(e.get("message", ""))
                for e in _list(status.get("errors"))[:5]
                if isinstance(e, dict)
            )
            why = f"child plan {name} is invalid: {errors}"
        else:
            failed = next((s for s in steps if s.get("stepId") == report.get("failedStep")), None)
            if failed is None and isinstance(report.get("failedRecord"), dict):
                failed = report["failedRecord"]  # not among the status's most recent records
            detail = f": step {failed['stepId']} failed: {failed.get('error')}" if failed else ""
            why = f"child plan {name} did not complete{detail}"
        return Observed(step, attempt, name, "plan", started, "failed", why, finished, output=last)
    return Observed(step, attempt, name, "plan", started, None)


#: the API group of each kind that controls what planops reads as its own
_GROUPS = {
    "Plan": "planops.dev",
    "ScheduledPlan": "planops.dev",
    "ClusterScheduledPlan": "planops.dev",
    "Job": "batch",
}


def controller_uid(obj: Obj, kind: str = "Plan") -> str | None:
    """The UID of the object's controller (its ownerReference with `controller: true`) when
    that controller is a `kind` of its API group (a Plan of planops.dev, a Job of batch), else
    None: a reference naming our UID under another kind or group is not ours."""
    for ref in _list(_obj(_obj(obj).get("metadata")).get("ownerReferences")):
        if isinstance(ref, dict) and ref.get("controller") is True:
            group = (_text(ref.get("apiVersion")) or "").rpartition("/")[0]
            if ref.get("kind") != kind or group != _GROUPS.get(kind):
                return None
            return _text(ref.get("uid"))
    return None


def owned(objs: list[Obj], uid: str, kind: str = "Plan") -> list[Obj]:
    """The objects whose controller is the `kind` (a Plan unless said) with `uid`. Labels find
    candidates; only the controller reference makes an object ours: anyone who may create a
    Job, a pod or a Plan can copy labels. A reference to our UID can be written too, by anyone
    who may create the object and can read the UID: the chart's owned-objects admission policy
    lets only the operator (and, for a Job's pods, the Job controller) create or change a Job or
    pod that carries planops' labels or a planops owner (docs/security.md)."""
    return [o for o in objs if controller_uid(o, kind) == uid]


def pods_by_job(pods: list[Obj], jobs: list[Obj]) -> dict[str, Obj]:
    """The (single, backoffLimit 0) pod of each Job, by Job name; the newest if several. A pod
    counts only when the Job is its controller (by UID), whatever its labels say."""
    names = {
        _text(_obj(j.get("metadata")).get("uid")): _text(_obj(j.get("metadata")).get("name"))
        for j in jobs
    }
    out: dict[str, Obj] = {}
    metas = [(_obj(_obj(pod).get("metadata")), pod) for pod in pods]
    # the API server writes the time as RFC 3339 text, which sorts as time; anything else (no
    # API server sends it, but observe reads any JSON without raising) reads as the oldest and is
    # never turned into text: str() of a value nested past the recursion limit raises
    for _, pod in sorted(metas, key=lambda m: _text(m[0].get("creationTimestamp")) or ""):
        job = names.get(controller_uid(pod, "Job"))
        if job:
            out[job] = pod
    return out
