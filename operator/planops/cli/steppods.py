"""A step's pods as `kubectl plan logs` and the UI's log endpoint show them: the operator's own
rule, not labels alone.

Anyone who may create pods (a namespace admin, another controller) can copy a step's labels onto
a pod that prints something else; the newest attempt by label would then be the forged pod, and
its log would be shown as the step's. So labels only find candidates: a pod is the step's when
its controller is one of the step's Jobs and that Job's controller is the Plan, both matched by
UID (`reconciler.run.observe`), which nobody but the API server writes. Reading the Jobs needs
`get`/`list` on `jobs` (the chart's plan-author role has it; Kubernetes' `view` too).
"""

from __future__ import annotations

from typing import Any

from planops.api.names import LABEL_ATTEMPT
from planops.kube.api import CliApi
from planops.kube.manifests import step_selector
from planops.reconciler import controller_uid, owned

Obj = dict[str, Any]


def newest_attempt(pod: Obj) -> tuple[int, str]:
    """Sort key: the attempt (a label edited into a non-number counts as 0), then the age."""
    meta = pod.get("metadata") or {}
    attempt = str((meta.get("labels") or {}).get(LABEL_ATTEMPT, ""))
    number = int(attempt) if attempt.isascii() and attempt.isdigit() else 0
    return number, str(meta.get("creationTimestamp") or "")


def owned_pods(plan: Obj, jobs: list[Obj], pods: list[Obj]) -> list[Obj]:
    """The pods whose controller is a Job whose controller is `plan`, by UID; oldest attempt
    first, newest last."""
    uid = (plan.get("metadata") or {}).get("uid")
    if not isinstance(uid, str) or not uid:
        return []
    job_uids = {(j.get("metadata") or {}).get("uid") for j in owned(jobs, uid)} - {None, ""}
    return sorted((p for p in pods if controller_uid(p, "Job") in job_uids), key=newest_attempt)


async def step_pods(
    kube: CliApi, namespace: str, plan: str, step: str, attempt: int | None = None
) -> list[Obj]:
    """The pods of one step (of one attempt when given) of the Plan named `plan`, any run,
    newest last; none when the Plan does not exist."""
    found = await kube.get_plan(namespace, plan)
    if found is None:
        return []
    selector = step_selector(plan, step, attempt)
    jobs = await kube.list_jobs(namespace, selector)
    return owned_pods(found, jobs, await kube.list_pods(namespace, selector))
