"""Observe: what the cluster says about a run's attempts, as plain facts (pure functions).

A Job's attempt is settled by the Job's terminal condition (Complete / Failed), never by guessing
from a pod phase, and its error is made readable from the pod: exit code, OOMKilled, deadline.
A pod that cannot start (image pull, bad config) would otherwise sit until the deadline (Argo's
"stuck Running" complaint): it fails the attempt at once, with the kubelet's reason.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from planops.engine.report import parse_rfc3339
from planops.kube.manifests import ANNOTATION_STEP_ID, LABEL_ATTEMPT, LABEL_STEP

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


def _condition(obj: Obj, kind: str) -> Obj | None:
    for c in obj.get("status", {}).get("conditions", []) or []:
        if c.get("type") == kind and c.get("status") == "True":
            return c  # type: ignore[no-any-return]
    return None


def _ident(obj: Obj) -> tuple[str, int]:
    labels = obj["metadata"].get("labels", {})
    step = obj["metadata"].get("annotations", {}).get(ANNOTATION_STEP_ID) or labels[LABEL_STEP]
    return step, int(labels[LABEL_ATTEMPT])


def _container(pod: Obj | None) -> Obj:
    if pod is None:
        return {}
    statuses = pod.get("status", {}).get("containerStatuses") or []
    return statuses[0] if statuses else {}


def _pod_error(pod: Obj | None, limits: Obj | None) -> str | None:
    term = _container(pod).get("state", {}).get("terminated")
    if not term:
        return None
    if term.get("reason") == "OOMKilled":
        memory = (limits or {}).get("memory")
        return (
            f"OOMKilled: the container exceeded its memory limit{f' ({memory})' if memory else ''}"
        )
    code = term.get("exitCode")
    if term.get("signal"):
        return f"killed by signal {term['signal']}"
    return f"exit code {code}" if code is not None else term.get("reason")


def _disrupted(pod: Obj | None) -> bool:
    """A pod the cluster is taking away (DisruptionTarget: evicted from a lost node, preempted,
    drained) while its Job has not ended: with the node gone it may never end by itself."""
    if pod is None or not pod["metadata"].get("deletionTimestamp"):
        return False
    return any(
        c.get("type") == "DisruptionTarget" and c.get("status") == "True"
        for c in pod.get("status", {}).get("conditions") or []
    )


def _gone(pod: Obj | None, job_says: str) -> str | None:
    """Why a failed attempt's pod is missing or being deleted, when it is: deleted by hand,
    evicted, or its node lost (a disruption condition, set by the cluster, says which)."""
    if pod is None:
        return (
            "its pod is gone: deleted (by hand or by an eviction) or lost with its node before "
            f"the step finished (the Job says {job_says})"
        )
    if not pod["metadata"].get("deletionTimestamp"):
        return None
    node = pod.get("spec", {}).get("nodeName")
    where = f" on node {node}" if node else ""
    why = next(
        (
            f" ({c.get('reason')}: {c.get('message')})"
            for c in pod.get("status", {}).get("conditions") or []
            if c.get("type") == "DisruptionTarget" and c.get("status") == "True"
        ),
        "",
    )
    return f"its pod was deleted while the step ran{where}{why}"


def job_attempt(job: Obj, pod: Obj | None) -> Observed:
    step, attempt = _ident(job)
    meta, spec = job["metadata"], job.get("spec", {})
    started = parse_rfc3339(meta.get("creationTimestamp")) or 0.0
    name = meta["name"]
    pod_name = pod["metadata"]["name"] if pod is not None else None
    container = _container(pod)
    term = container.get("state", {}).get("terminated") or {}
    message = term.get("message")
    limits = (
        (spec.get("template", {}).get("spec", {}).get("containers") or [{}])[0]
        .get("resources", {})
        .get("limits")
    )
    if (done := _condition(job, "Complete")) is not None:
        return Observed(
            step,
            attempt,
            name,
            "job",
            started,
            "success",
            finished_at=parse_rfc3339(done.get("lastTransitionTime")),
            pod=pod_name,
            termination_message=message,
        )
    if (failed := _condition(job, "Failed")) is not None:
        finished = parse_rfc3339(failed.get("lastTransitionTime"))
        pod_deadline = (pod or {}).get("spec", {}).get("activeDeadlineSeconds")
        if (pod or {}).get("status", {}).get("reason") == "DeadlineExceeded":
            error = f"deadline exceeded: the attempt ran longer than {pod_deadline}s"
        elif failed.get("reason") == "DeadlineExceeded":
            waited = spec.get("activeDeadlineSeconds")
            error = (
                f"deadline exceeded: the attempt did not finish within {waited}s of its Job's "
                "creation (the cluster had no room to start it in time)"
            )
        else:
            job_says = f"{failed.get('reason')}: {failed.get('message')}"
            error = _gone(pod, job_says) or _pod_error(pod, limits) or job_says
        return Observed(
            step, attempt, name, "job", started, "failed", error, finished, pod_name, message
        )
    if _disrupted(pod):  # evicted (its node lost, preempted...): it will not finish
        return Observed(
            step,
            attempt,
            name,
            "job",
            started,
            "failed",
            _gone(pod, ""),
            None,
            pod_name,
            stuck=True,
        )
    waiting = container.get("state", {}).get("waiting") or {}
    if waiting.get("reason") in CANNOT_START:
        error = f"cannot start: {waiting['reason']}: {waiting.get('message', '')}".rstrip(": ")
        return Observed(
            step, attempt, name, "job", started, "failed", error, None, pod_name, stuck=True
        )
    return Observed(step, attempt, name, "job", started, None, pod=pod_name)


def child_attempt(child: Obj) -> Observed:
    step, attempt = _ident(child)
    meta, status = child["metadata"], child.get("status") or {}
    started = parse_rfc3339(meta.get("creationTimestamp")) or 0.0
    phase = status.get("phase")
    report = status.get("report") or {}
    steps = report.get("steps") or []
    last = steps[-1].get("output") if steps else None
    finished = parse_rfc3339(status.get("finishedAt"))
    if phase == "Succeeded":
        return Observed(
            step,
            attempt,
            meta["name"],
            "plan",
            started,
            "success",
            finished_at=finished,
            output=last,
        )
    if phase in ("Failed", "Invalid"):
        if phase == "Invalid":
            errors = "; ".join(e.get("message", "") for e in status.get("errors", [])[:5])
            why = f"child plan {meta['name']} is invalid: {errors}"
        else:
            failed = next((s for s in steps if s.get("stepId") == report.get("failedStep")), None)
            detail = f": step {failed['stepId']} failed: {failed.get('error')}" if failed else ""
            why = f"child plan {meta['name']} did not complete{detail}"
        return Observed(
            step, attempt, meta["name"], "plan", started, "failed", why, finished, output=last
        )
    return Observed(step, attempt, meta["name"], "plan", started, None)


def controller_uid(obj: Obj) -> str | None:
    """The UID of the object's controller (its ownerReference with `controller: true`)."""
    for ref in obj.get("metadata", {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller") is True:
            uid = ref.get("uid")
            return uid if isinstance(uid, str) else None
    return None


def owned(objs: list[Obj], uid: str) -> list[Obj]:
    """The objects whose controller is the object with `uid`. Labels find candidates; only the
    controller reference makes an object ours: anyone who may create a Job, a pod or a Plan can
    copy labels, nobody can make the API server record our Plan as its controller."""
    return [o for o in objs if controller_uid(o) == uid]


def pods_by_job(pods: list[Obj], jobs: list[Obj]) -> dict[str, Obj]:
    """The (single, backoffLimit 0) pod of each Job, by Job name; the newest if several. A pod
    counts only when the Job is its controller (by UID), whatever its labels say."""
    names = {j["metadata"].get("uid"): j["metadata"]["name"] for j in jobs}
    out: dict[str, Obj] = {}
    for pod in sorted(pods, key=lambda p: p["metadata"].get("creationTimestamp", "")):
        job = names.get(controller_uid(pod))
        if job is not None:
            out[job] = pod
    return out
