"""What a Capsule's owner grants its step pods beyond today's restricted pod, and how they are
placed and labelled: named security profiles (a step picks one: `securityProfile`), named
services (sidecars a step lists: `services`), and the pods' priority class, pull secrets,
affinity, labels and annotations (`podMetadata`, `propagateLabels`).

A module of its own beside api.capsule_models (which holds these fields of CapsuleSpec): each is
a grant of the Capsule's owner, and a plan's author only chooses among them. Deny by default: a
Capsule that declares none grants none, and a step that picks none keeps today's pod (one
container, uid 65534, every capability dropped). The operator caps what a profile may ask for
(engine.policy.ProfileCaps, the chart's `policy.securityProfiles`); engine.pod_grants holds the
rules the validator and dispatch apply to a step against these grants.

**Pod Security** (`SecurityProfile.level`): a profile's pod needs the namespace's
`pod-security.kubernetes.io/enforce` level to admit it: `restricted` for today's pod (a non-root
uid, no privilege escalation, at most NET_BIND_SERVICE added), `baseline` for root, privilege
escalation or capabilities of BASELINE_CAPABILITIES, `privileged` for the rest (privileged, host
namespaces, host paths, other capabilities).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from planops.api.base import NAME_PATTERN, Model
from planops.api.container_models import RESERVED_MOUNTS, distinct
from planops.api.crd_hints import crd
from planops.api.labels import (
    DNS_LABEL_PATTERN,
    LABEL_KEY_PATTERN,
    MAX_KEY,
    LabelValue,
    label_key,
    label_value,
    reserved_key,
    reserved_key_rule,
)
from planops.api.service_models import Service

#: the uid (and gid) a step runs as unless its profile says otherwise: `nobody`
NOBODY = 65534
#: the capabilities Pod Security's baseline level lets a container add (the container runtime's
#: defaults); the operator's default cap (policy.securityProfiles.allowedCapabilities)
BASELINE_CAPABILITIES = (
    "AUDIT_WRITE",
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "MKNOD",
    "NET_BIND_SERVICE",
    "SETFCAP",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
)
#: what Pod Security's restricted level lets a container add
RESTRICTED_CAPABILITIES = ("NET_BIND_SERVICE",)
PodSecurityLevel = Literal["restricted", "baseline", "privileged"]
_Capability = Annotated[
    str,
    Field(
        pattern=r"^[A-Z][A-Z0-9_]{0,63}$",
        description="A Linux capability, as Kubernetes names it (NET_ADMIN, no CAP_ prefix).",
    ),
]


def _absolute(value: str, what: str) -> list[str]:
    parts = value.split("/")[1:]
    if not value.startswith("/") or "" in parts or "." in parts or ".." in parts:
        raise ValueError(
            f"{what} {value!r}: an absolute path without empty parts, '.' or '..' (/var/cache)"
        )
    return parts


class HostPath(Model):
    """A directory or file of the node, mounted into the step's container. Allowed only under
    the operator's policy.securityProfiles.allowedHostPaths (none by default)."""

    path: str = Field(max_length=1024, description="The path on the node (absolute).")
    mount_path: str = Field(
        max_length=1024,
        description="Where the step's container sees it (absolute; not /workspace, /planops, "
        "/proc, /sys or /dev).",
    )
    read_only: bool = Field(default=True, description="Mounted read-only. Default true.")

    @field_validator("path")
    @classmethod
    def _node_path(cls, value: str) -> str:
        _absolute(value, "hostPaths path")
        return value

    @field_validator("mount_path")
    @classmethod
    def _container_path(cls, value: str) -> str:
        parts = _absolute(value, "hostPaths mountPath")
        if not parts or parts[0] in RESERVED_MOUNTS:
            raise ValueError(
                f"hostPaths mountPath {value!r}: not / nor under /workspace, /planops (planops' "
                "own), /proc, /sys or /dev"
            )
        return value


class SecurityProfile(Model):
    """How a step's container runs, beyond today's restricted pod (uid 65534, no privilege
    escalation, every capability dropped, seccomp RuntimeDefault). Capped by the operator
    (policy.securityProfiles); the namespace's Pod Security level must admit it too."""

    name: str = Field(
        pattern=DNS_LABEL_PATTERN,
        max_length=63,
        description="The name a step picks it by (securityProfile).",
    )
    run_as_user: int | None = Field(
        default=None,
        ge=0,
        le=2**31 - 1,
        description="The uid the container runs as; 0 is root (Pod Security baseline). "
        "Default 65534 (nobody).",
    )
    run_as_group: int | None = Field(
        default=None,
        ge=0,
        le=2**31 - 1,
        description="The gid the container runs as (and owns its volumes' files by). Default: "
        "runAsUser's value, else 65534.",
    )
    allow_privilege_escalation: bool = Field(
        default=False,
        description="Let a process gain more privileges than its parent (setuid binaries: "
        "sudo, ping). Pod Security baseline. Default false.",
    )
    read_only_root_filesystem: bool = Field(
        default=False,
        description="Mount the image's filesystem read-only (writes go to volumes only). "
        "Default false: writable, as today's steps.",
    )
    capabilities: list[_Capability] = Field(
        default_factory=list,
        max_length=64,
        description="Capabilities added to the container (every other one is dropped), each "
        "in the operator's policy.securityProfiles.allowedCapabilities (by default Pod "
        "Security baseline's: CHOWN, DAC_OVERRIDE, FOWNER, SETUID, SETGID, ...).",
    )
    privileged: bool = Field(
        default=False,
        description="Run privileged (every device and capability of the node). Only where the "
        "operator's policy.securityProfiles.allowPrivileged is true. Pod Security privileged.",
    )
    host_network: bool = Field(
        default=False,
        description="Use the node's network. Only where the operator's "
        "policy.securityProfiles.allowHostNamespaces is true. Pod Security privileged.",
    )
    host_pid: bool = Field(
        default=False,
        alias="hostPID",
        description="See the node's processes. As hostNetwork.",
    )
    host_ipc: bool = Field(
        default=False,
        alias="hostIPC",
        description="Share the node's IPC namespace. As hostNetwork.",
    )
    host_paths: list[HostPath] = Field(
        default_factory=list,
        max_length=16,
        description="Paths of the node mounted into the container, each under the operator's "
        "policy.securityProfiles.allowedHostPaths (none by default). Pod Security privileged.",
    )

    @field_validator("capabilities")
    @classmethod
    def _named_once(cls, value: list[str]) -> list[str]:
        if any(c.startswith("CAP_") for c in value):
            raise ValueError("capabilities are named without their CAP_ prefix (NET_ADMIN)")
        distinct("capability", value)
        return value

    @field_validator("host_paths")
    @classmethod
    def _mounted_once(cls, value: list[HostPath]) -> list[HostPath]:
        distinct("hostPaths mountPath", [h.mount_path for h in value])
        return value

    def uid(self) -> int:
        return NOBODY if self.run_as_user is None else self.run_as_user

    def gid(self) -> int:
        if self.run_as_group is not None:
            return self.run_as_group
        return NOBODY if self.run_as_user is None else self.run_as_user

    def host_namespaces(self) -> list[str]:
        """The node's namespaces it shares (hostNetwork, hostPID, hostIPC), by field name."""
        asked = (
            ("hostNetwork", self.host_network),
            ("hostPID", self.host_pid),
            ("hostIPC", self.host_ipc),
        )
        return [name for name, on in asked if on]

    def level(self) -> PodSecurityLevel:
        """The Pod Security level (pod-security.kubernetes.io/enforce) that admits its pod."""
        if (
            self.privileged
            or self.host_namespaces()
            or self.host_paths
            or not set(self.capabilities) <= set(BASELINE_CAPABILITIES)
        ):
            return "privileged"
        if (
            self.uid() == 0
            or self.allow_privilege_escalation
            or not set(self.capabilities) <= set(RESTRICTED_CAPABILITIES)
        ):
            return "baseline"
        return "restricted"


class LocalObjectReference(Model):
    """An object of the namespace, by name."""

    name: str = Field(pattern=NAME_PATTERN, max_length=253, description="Its name.")


class PodMetadata(Model):
    """Labels and annotations of every step pod (cost and inventory tools read them). Never a
    key of planops' own domain or of Kubernetes' (kubernetes.io, k8s.io) but app.kubernetes.io/
    (and, for annotations, cluster-autoscaler.kubernetes.io/)."""

    labels: dict[str, LabelValue] = Field(
        default_factory=dict,
        max_length=64,
        description="Labels of every step pod (e.g. team: payments, cost-center: cc-42).",
        json_schema_extra=crd(
            rules=[
                (
                    f"self.all(k, size(k) <= {MAX_KEY} && k.matches(r'{LABEL_KEY_PATTERN}'))",
                    "every key is a label key: [prefix/]name (example.com/team)",
                ),
                reserved_key_rule("label"),
            ]
        ),
    )
    annotations: dict[str, str] = Field(
        default_factory=dict,
        max_length=64,
        description="Annotations of every step pod.",
        json_schema_extra=crd(
            rules=[
                (
                    f"self.all(k, size(k) <= {MAX_KEY} && k.matches(r'{LABEL_KEY_PATTERN}'))",
                    "every key is an annotation key: [prefix/]name (example.com/owner)",
                ),
                reserved_key_rule("annotation"),
            ]
        ),
    )

    @field_validator("labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        for k, v in value.items():
            _not_reserved(label_key(k, "podMetadata label"), "label")
            label_value(v, f"podMetadata label {k}")
        return value

    @field_validator("annotations")
    @classmethod
    def _annotations(cls, value: dict[str, str]) -> dict[str, str]:
        for k, v in value.items():
            _not_reserved(label_key(k, "podMetadata annotation"), "annotation")
            if len(v) > 4096:
                raise ValueError(f"podMetadata annotation {k}: at most 4096 characters")
        return value


def _not_reserved(key: str, kind: Literal["label", "annotation"]) -> str:
    why = reserved_key(key, kind)
    if why is not None:
        raise ValueError(why)
    return key


def propagated(value: list[str]) -> list[str]:
    """A Capsule's propagateLabels: label keys, none reserved, each once."""
    for key in value:
        _not_reserved(label_key(key, "propagateLabels key"), "label")
    distinct("propagateLabels key", value)
    return value


def check_grants(
    profiles: list[SecurityProfile],
    services: list[Service],
    metadata: PodMetadata | None,
    propagate: list[str],
) -> None:
    """What holds between a Capsule's pod grants (each is checked on its own by its model):
    names declared once, a service's profile declared and not the pod's (host namespaces), a
    label either the Capsule's (podMetadata) or the Plan's (propagateLabels), not both."""
    distinct("securityProfiles name", [p.name for p in profiles])
    distinct("services name", [s.name for s in services])
    by_name = {p.name: p for p in profiles}
    for s in services:
        if s.security_profile is None:
            continue
        profile = by_name.get(s.security_profile)
        if profile is None:
            known = ", ".join(by_name) or "none"
            raise ValueError(
                f"service {s.name!r}: securityProfile {s.security_profile!r} is not one of the "
                f"Capsule's securityProfiles ({known})"
            )
        if profile.host_namespaces():
            raise ValueError(
                f"service {s.name!r}: securityProfile {s.security_profile!r} shares the node's "
                f"namespaces ({', '.join(profile.host_namespaces())}), which are the whole "
                "pod's: only the step's own profile may"
            )
    both = sorted(set(metadata.labels if metadata else {}) & set(propagate))
    if both:
        raise ValueError(
            f"label {', '.join(both)}: in podMetadata.labels and in propagateLabels (the "
            "Capsule's value or the Plan's: pick one)"
        )
