"""The pod of a step with results or artifacts (docs/artifacts.md, "How files move in a step
pod"): pure, on top of the Job kube.manifests.job (and kube.step_pod) made.

    initContainers: [services...], fetch (input artifacts only), step (the user's, unchanged)
    containers:     collect (the collector, planops.collector, from the operator's image)

The step runs as an init container, so the collector starts only once it exited 0; its exit
code, reason and log stay the container `step`'s (reconciler.run.observe reads it by name). The
collector gets presigned URLs for exactly the attempt's keys (minted by the operator:
reconciler.effects.step_files), never a credential. A step without results or artifacts never
comes here: its pod stays today's one container.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from planops.engine import Dispatch, step_files
from planops.kube import step_pod

Obj = dict[str, Any]

#: the collector's containers (the step's is manifests.CONTAINER, "step")
FETCH = "fetch"
COLLECT = "collect"
#: the step's working directory when the run has no workspace: an emptyDir shared with the
#: collector (artifact paths are relative to it)
WORKDIR = "/planops/work"
_WORK_VOLUME = "planops-work"
_RESULTS_VOLUME = "planops-results"
#: what the collector asks of the node: it reads and sends files, once (measured:
#: docs/artifacts.md)
COLLECTOR_RESOURCES = {
    "requests": {"cpu": "50m", "memory": "32Mi"},
    "limits": {"cpu": "1", "memory": "128Mi"},
}
#: the seconds each request of the collector may take (a store that stops fails it, never hangs)
REQUEST_TIMEOUT = 60


@dataclass(frozen=True)
class Urls:
    """The presigned URLs of one attempt: a PUT per output artifact and a GET per input
    artifact, in the order the step declares them."""

    puts: tuple[str, ...] = ()
    gets: tuple[str, ...] = ()


def with_files(job: Obj, d: Dispatch, image: str, urls: Urls, max_bytes: int) -> Obj:
    """`job` with its step container made the init container `step`, a `fetch` init container
    before it when the step has input artifacts, and the `collect` container (`image`: the
    operator's) after it; `max_bytes`: the Capsule's bound of one artifact."""
    pod = job["spec"]["template"]["spec"]
    step = pod.pop("containers")[0]
    mounts: list[Obj] = list(step.get("volumeMounts", []))
    workdir = step.get("workingDir")
    shared = [m for m in mounts if m.get("mountPath") == workdir and "subPath" not in m]
    if workdir is None:
        workdir = step["workingDir"] = WORKDIR
        mount = {"name": _WORK_VOLUME, "mountPath": WORKDIR}
        mounts.append(mount)
        shared = [mount]
        pod["volumes"] = [*pod.get("volumes", []), {"name": _WORK_VOLUME, "emptyDir": {}}]
    results = {"name": _RESULTS_VOLUME, "mountPath": step_files.RESULTS_DIR}
    if d.step.results:
        step["env"] = [
            *step["env"],
            {"name": step_files.RESULTS_ENV, "value": results["mountPath"]},
        ]
        mounts.append(results)
        pod["volumes"] = [*pod.get("volumes", []), {"name": _RESULTS_VOLUME, "emptyDir": {}}]
    step["volumeMounts"] = mounts
    config: Obj = {"workdir": workdir, "timeout": REQUEST_TIMEOUT}
    if d.step.results:
        names = [r.name for r in d.step.results]
        bound = step_files.RESULTS_BOUND
        config["results"] = {"dir": step_files.RESULTS_DIR, "names": names, "bound": bound}
    outputs = d.step.outputs.artifacts if d.step.outputs is not None else []
    config["outputs"] = [
        {"name": a.name, "path": a.path, "url": url, "maxBytes": max_bytes}
        for a, url in zip(outputs, urls.puts, strict=True)
    ]
    init = list(pod.get("initContainers", []))  # the step's services (native sidecars) first
    if d.fetch:
        fetch = {
            "workdir": workdir,
            "timeout": REQUEST_TIMEOUT,
            "inputs": [
                {
                    "name": record.name,
                    "path": path,
                    "url": url,
                    "sha256": record.sha256,
                    "directory": record.directory,
                }
                for (record, path), url in zip(d.fetch, urls.gets, strict=True)
            ],
        }
        init.append(_collector(FETCH, image, fetch, shared))
    collect_mounts = [*shared, results] if d.step.results else shared
    pod["initContainers"] = [*init, step]
    pod["containers"] = [_collector(COLLECT, image, config, collect_mounts)]
    meta = job["spec"]["template"]["metadata"]
    meta["annotations"] = {**meta.get("annotations", {}), step_pod.DEFAULT_CONTAINER: step["name"]}
    return job


def _collector(name: str, image: str, config: Obj, mounts: list[Obj]) -> Obj:
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python3", "-m", "planops.collector", name],
        "env": [{"name": "PLANOPS_COLLECT", "value": json.dumps(config, separators=(",", ":"))}],
        "resources": COLLECTOR_RESOURCES,
        "securityContext": step_pod.container_security(None),
        "volumeMounts": [dict(m) for m in mounts],
    }
