"""What a step's pod gets of its Capsule's pod grants, on top of the Job kube.manifests.job makes
(pure functions, no API calls):

- its security profile (api.pod_models.SecurityProfile, the one the step picks): the step
  container's securityContext (uid, gid, capabilities added to none, privilege escalation, a
  read-only root filesystem, privileged), the pod's host namespaces, the node's paths mounted;
- its services (api.service_models.Service, the ones the step lists) as native sidecars: init
  containers with `restartPolicy: Always` (Kubernetes 1.29+), started in the order listed, each
  ready by its probe (the sidecar's startupProbe: the kubelet starts the step's container only
  once every sidecar's startup probe passed) and stopped by the kubelet once the step's
  container ended; the Job completes when the step's container exits. Sidecars are init
  containers, so the pod's `containerStatuses` still hold the step's container alone (what
  reconciler.run.observe reads) and its log is still the step's container's (`step`). The step
  reaches a service on localhost, or by its name (hostAliases: 127.0.0.1);
- the Capsule's placement (priorityClassName, imagePullSecrets, affinity) and metadata
  (podMetadata's labels and annotations on the pod; the Plan's labels the Capsule lists in
  propagateLabels on the Job and the pod, planops' own labels over any of them).

A step and Capsule that use none of these get nothing added: today's one-container pod.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from planops.api.capsule_models import CapsuleSpec
from planops.api.labels import LABEL_VALUE
from planops.api.pod_models import SecurityProfile
from planops.api.resources import resources
from planops.api.service_models import Service
from planops.engine import Dispatch

Obj = dict[str, Any]

#: `kubectl logs POD` (no -c) of a pod with sidecars shows this container's log: the step's
DEFAULT_CONTAINER = "kubectl.kubernetes.io/default-container"
#: the pod's volumes of a profile's host paths: named apart from every other volume
HOST_PATH_VOLUME = "hostpath-"


def container_security(profile: SecurityProfile | None) -> Obj:
    """A container's securityContext: today's restricted one (no privilege escalation, every
    capability dropped, a non-root user: the pod's uid 65534) without a profile; the profile's
    otherwise (its uid and gid, its capabilities added to none, ...)."""
    if profile is None:
        return {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": True,
        }
    capabilities: Obj = {"drop": ["ALL"]}
    if profile.capabilities:
        capabilities["add"] = list(profile.capabilities)
    out: Obj = {
        # Kubernetes refuses a privileged container that may not escalate
        "allowPrivilegeEscalation": profile.allow_privilege_escalation or profile.privileged,
        "capabilities": capabilities,
        "runAsUser": profile.uid(),
        "runAsGroup": profile.gid(),
        "runAsNonRoot": profile.uid() != 0,
    }
    if profile.privileged:
        out["privileged"] = True
    if profile.read_only_root_filesystem:
        out["readOnlyRootFilesystem"] = True
    return out


def dress(
    job: Obj, d: Dispatch, capsule: CapsuleSpec, plan_labels: Iterable[tuple[str, str]]
) -> Obj:
    """`job` (kube.manifests.job's, of attempt `d`) with what its step and Capsule grant the
    pod; `plan_labels`: the Plan's labels (propagateLabels picks among them)."""
    step = d.step
    if not (step.security_profile or step.services or _capsule_wide(capsule)):
        return job  # today's pod: nothing to add (most steps; a Job per attempt)
    template = job["spec"]["template"]
    pod = template["spec"]
    volumes: list[Obj] = []
    if step.security_profile is not None:
        profile = capsule.security_profile(step.security_profile)
        assert profile is not None  # admitted (engine.pod_grants)
        _secure(pod, pod["containers"][0], profile, volumes)
    if step.services:
        _sidecars(pod, template, [_service(capsule, n) for n in step.services], capsule, volumes)
    if volumes:
        pod["volumes"] = [*pod.get("volumes", []), *volumes]
    _place(pod, capsule)
    _label(job, template, capsule, dict(plan_labels))
    return job


def _capsule_wide(capsule: CapsuleSpec) -> bool:
    """The Capsule places or labels every step pod."""
    return bool(
        capsule.priority_class_name
        or capsule.image_pull_secrets
        or capsule.affinity
        or capsule.pod_metadata
        or capsule.propagate_labels
    )


def _service(capsule: CapsuleSpec, name: str) -> Service:
    service = capsule.service(name)
    assert service is not None  # admitted (engine.pod_grants)
    return service


def _secure(pod: Obj, container: Obj, profile: SecurityProfile, volumes: list[Obj]) -> None:
    """The step's profile: its container's securityContext and host paths, the pod's host
    namespaces (the pod's own securityContext stays: the container's overrides it)."""
    container["securityContext"] = container_security(profile)
    if profile.host_network:
        pod["hostNetwork"] = True
        pod["dnsPolicy"] = "ClusterFirstWithHostNet"  # the cluster's DNS, as without it
    if profile.host_pid:
        pod["hostPID"] = True
    if profile.host_ipc:
        pod["hostIPC"] = True
    _host_paths(container, profile, volumes)


def _host_paths(container: Obj, profile: SecurityProfile, volumes: list[Obj]) -> None:
    for h in profile.host_paths:
        name = f"{HOST_PATH_VOLUME}{len(volumes)}"
        volumes.append({"name": name, "hostPath": {"path": h.path}})
        mount = {"name": name, "mountPath": h.mount_path, "readOnly": h.read_only}
        container["volumeMounts"] = [*container.get("volumeMounts", []), mount]


def _sidecars(
    pod: Obj, template: Obj, services: list[Service], capsule: CapsuleSpec, volumes: list[Obj]
) -> None:
    containers = []
    for s in services:
        profile = capsule.security_profile(s.security_profile) if s.security_profile else None
        c: Obj = {
            "name": s.name,
            "image": s.image,
            "imagePullPolicy": "IfNotPresent",
            "restartPolicy": "Always",  # a native sidecar: it runs beside the step's container
        }
        if s.command:
            c["command"] = list(s.command)
        if s.args:
            c["args"] = list(s.args)
        if s.env:
            c["env"] = [{"name": e.name, "value": e.value} for e in s.env]
        if s.ports:
            c["ports"] = [p.model_dump(by_alias=True, exclude_none=True) for p in s.ports]
        if s.readiness_probe is not None:  # what holds the step's container back until ready
            c["startupProbe"] = s.readiness_probe.model_dump(by_alias=True, exclude_none=True)
        c["resources"] = resources(s.resources, None)
        c["securityContext"] = container_security(profile)
        if profile is not None:
            _host_paths(c, profile, volumes)
        containers.append(c)
    pod["initContainers"] = containers
    pod["hostAliases"] = [{"ip": "127.0.0.1", "hostnames": [s.name for s in services]}]
    meta = template["metadata"]
    meta["annotations"] = {**meta.get("annotations", {}), DEFAULT_CONTAINER: "step"}


def _place(pod: Obj, capsule: CapsuleSpec) -> None:
    if capsule.priority_class_name:
        pod["priorityClassName"] = capsule.priority_class_name
    if capsule.image_pull_secrets:
        pod["imagePullSecrets"] = [{"name": s.name} for s in capsule.image_pull_secrets]
    if capsule.affinity is not None:
        pod["affinity"] = capsule.affinity.model_dump(
            by_alias=True, exclude_none=True, exclude_defaults=True
        )


def propagated(capsule: CapsuleSpec, plan_labels: Mapping[str, str]) -> dict[str, str]:
    """The Plan's labels the Capsule lists in propagateLabels, those the Plan has, and only
    label values (the API server checked a Plan's labels; one read from elsewhere that is not
    one is left out, never shortened)."""
    out = {}
    for key in capsule.propagate_labels:
        value = plan_labels.get(key)
        if isinstance(value, str) and LABEL_VALUE.fullmatch(value):
            out[key] = value
    return out


def _label(job: Obj, template: Obj, capsule: CapsuleSpec, plan_labels: Mapping[str, str]) -> None:
    """The Plan's propagated labels on the Job and the pod, the Capsule's podMetadata on the
    pod; planops' own labels and annotations over them (a Capsule cannot set one: reserved)."""
    plans = propagated(capsule, plan_labels) if capsule.propagate_labels else {}
    meta = capsule.pod_metadata
    if plans:
        job["metadata"]["labels"] = {**plans, **job["metadata"]["labels"]}
    if plans or (meta is not None and meta.labels):
        own = dict(meta.labels) if meta is not None else {}
        template["metadata"]["labels"] = {**own, **plans, **template["metadata"]["labels"]}
    if meta is not None and meta.annotations:
        ours = template["metadata"].get("annotations", {})
        template["metadata"]["annotations"] = {**meta.annotations, **ours}
