"""A step's effective requests and limits: the step's own, else its Capsule's defaults, else
planops' defaults. One function, used by the Job manifest (kube.manifests) and by the validator's
ceiling check (a step may not exceed the Capsule's maxResources or the operator's --max-cpu /
--max-memory), so what is checked is exactly what the pod gets.
"""

from __future__ import annotations

from planops.api.attempt_models import ResourceList, Resources
from planops.api.quantity import parse

#: every step container gets requests and limits (the cgroup limits), these unless set
DEFAULT_RESOURCES = Resources(
    requests=ResourceList(cpu="10m", memory="32Mi"), limits=ResourceList(cpu="1", memory="256Mi")
)


def _merged(step: Resources | None, capsule: Resources | None) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    for part in ("requests", "limits"):
        merged: dict[str, str] = {}
        for source in (DEFAULT_RESOURCES, capsule, step):  # later wins
            rl: ResourceList | None = getattr(source, part) if source is not None else None
            if rl is not None:
                merged.update({k: str(v) for k, v in rl.model_dump().items() if v is not None})
        out[part] = merged
    return out


def resources(step: Resources | None, capsule: Resources | None) -> dict[str, dict[str, str]]:
    """Requests and limits, both always set: step -> capsule -> planops defaults; a request never
    exceeds its limit (a step that lowers a limit lowers the default request with it)."""
    res = _merged(step, capsule)
    for key, limit in res["limits"].items():
        request = res["requests"].get(key)
        try:
            lower = request is not None and parse(request) > parse(limit)
        except ValueError:  # not a quantity (from a Capsule): the API server refuses the Job,
            continue  # and the step fails with its message
        if lower:
            res["requests"][key] = limit
    return res
