"""What a Capsule's owner grants the shell and script steps of its plans beyond today's restricted
pod: interpreters for scripts (`scripts`), the Secrets and ConfigMaps a step's env may read keys
of (`env`), and named volumes steps may mount (`volumes`).

A module of its own beside api.capsule_models (which holds these three fields of CapsuleSpec):
each new power is a grant of the Capsule's owner, and a plan's author only chooses among the
grants (the step's fields are in api.models: script, interpreter, env, volumeMounts). Deny by
default: a Capsule that says nothing grants nothing. engine.step_grants holds the rules the
validator and dispatch apply to a step against these grants.
"""

from __future__ import annotations

import re
import typing
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from planops.api import quantity
from planops.api.base import NAME_PATTERN, Model
from planops.api.container_models import distinct
from planops.api.crd_hints import crd

#: The interpreters a script step may run, and how each is handed the script: as one argument
#: after this flag (`sh -c SCRIPT`), so a script step stays one container with nothing written
#: before it starts. A name the Capsule may list (the CRD's enum): an interpreter planops does
#: not know how to hand a script to is refused on the Capsule, not at run time.
INTERPRETERS: dict[str, str] = {
    "sh": "-c",
    "bash": "-c",
    "python3": "-c",
    "python": "-c",
    "node": "-e",
    "perl": "-e",
    "ruby": "-e",
}
Interpreter = Literal["sh", "bash", "python3", "python", "node", "perl", "ruby"]
assert set(typing.get_args(Interpreter)) == set(INTERPRETERS)

#: A volume's name, as a pod's volume names are (a DNS label); planops names it `vol-NAME` in the
#: pod, apart from its own volumes (the workspace, a tool's Secrets)
VOLUME_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]{0,57}[a-z0-9])?$"
#: the volume types a pod has that a Capsule may not declare, named in the refusal: hostPath
#: reaches the node's files, the others are storage a Capsule's owner reaches through a claim
_OTHER_TYPES = (
    "hostPath",
    "nfs",
    "iscsi",
    "csi",
    "ephemeral",
    "projected",
    "downwardAPI",
    "gitRepo",
    "image",
    "local",
)


_ObjectName = Annotated[
    str, Field(pattern=NAME_PATTERN, max_length=253, description="An object's name.")
]


class Scripts(Model):
    """The interpreters script steps may use. Empty: no script step may run."""

    allow: list[Interpreter] = Field(
        default_factory=list,
        max_length=len(INTERPRETERS),
        description="Interpreters script steps may run (sh, bash, python3, python, node, perl, "
        "ruby), each looked up on the step image's PATH; a step names one with interpreter, "
        "default the first. An interpreter runs anything: allow one only where any command "
        "of the image may run.",
    )


class EnvGrants(Model):
    """The Secrets and ConfigMaps of the namespace whose keys a step's env may read
    (valueFrom). Empty: a step's env holds values only."""

    secrets: list[_ObjectName] = Field(
        default_factory=list,
        max_length=64,
        description="Secrets a step's env may read keys of (valueFrom.secretKeyRef); the "
        "kubelet reads them, never the operator.",
    )
    config_maps: list[_ObjectName] = Field(
        default_factory=list,
        max_length=64,
        description="ConfigMaps a step's env may read keys of (valueFrom.configMapKeyRef).",
    )


class ConfigMapVolume(Model):
    """A ConfigMap of the namespace, its keys as files (read-only)."""

    name: str = Field(pattern=NAME_PATTERN, max_length=253, description="The ConfigMap's name.")


class SecretVolume(Model):
    """A Secret of the namespace, its keys as files (read-only, readable by the step's group)."""

    secret_name: str = Field(pattern=NAME_PATTERN, max_length=253, description="The Secret's name.")


class EmptyDirVolume(Model):
    """An empty directory of the step's own pod (on the node's disk), removed with it."""

    size_limit: str | int | None = Field(
        default=None,
        description="The most it may hold (a quantity: 1Gi); past it the pod is evicted.",
    )

    @field_validator("size_limit")
    @classmethod
    def _quantity(cls, value: str | int | None) -> str | int | None:
        if value is not None:
            quantity.parse(value)
        return value


class ClaimVolume(Model):
    """An existing PersistentVolumeClaim of the namespace."""

    claim_name: str = Field(pattern=NAME_PATTERN, max_length=253, description="The claim's name.")


#: a volume's kinds (their field names)
_SOURCES = {
    "configMap": "config_map",
    "secret": "secret",
    "emptyDir": "empty_dir",
    "persistentVolumeClaim": "persistent_volume_claim",
}


class Volume(Model):
    """A volume steps may mount by name: exactly one of configMap, secret, emptyDir or
    persistentVolumeClaim (never hostPath: no step reaches the node's files)."""

    model_config = ConfigDict(
        json_schema_extra=crd(
            rules=[
                (
                    " + ".join(f"(has(self.{k}) ? 1 : 0)" for k in _SOURCES) + " == 1",
                    "a volume is exactly one of configMap, secret, emptyDir, persistentVolumeClaim",
                )
            ]
        )
    )

    name: str = Field(
        max_length=59,
        description="The name steps mount it by (volumeMounts[].name): a DNS label of at most "
        "59 characters.",
        json_schema_extra={"pattern": VOLUME_NAME_PATTERN},
    )
    config_map: ConfigMapVolume | None = None
    secret: SecretVolume | None = None
    empty_dir: EmptyDirVolume | None = None
    persistent_volume_claim: ClaimVolume | None = None
    read_only: bool = Field(
        default=False,
        description="Every mount of it is read-only: a step asking for a writable one is "
        "refused (configMap and secret volumes are read-only anyway).",
    )

    @model_validator(mode="before")
    @classmethod
    def _allowed_type(cls, data: Any) -> Any:
        if isinstance(data, dict):
            other = [k for k in _OTHER_TYPES if k in data]
            if other:
                raise ValueError(
                    f"volume {data.get('name')!r}: {other[0]} volumes are never allowed (a "
                    "Capsule declares configMap, secret, emptyDir or persistentVolumeClaim "
                    "volumes; a hostPath would hand steps the node's files)"
                )
        return data

    @field_validator("name")
    @classmethod
    def _dns_label(cls, value: str) -> str:
        if not re.fullmatch(VOLUME_NAME_PATTERN, value):
            raise ValueError(
                f"volume name {value!r}: a DNS label (lowercase letters, digits and '-', "
                "starting and ending with a letter or digit, at most 59 characters)"
            )
        return value

    @model_validator(mode="after")
    def _one_source(self) -> Volume:
        given = [s for s, field in _SOURCES.items() if getattr(self, field) is not None]
        if len(given) != 1:
            found = " and ".join(given) or "none"
            raise ValueError(
                f"volume {self.name!r}: exactly one of configMap, secret, emptyDir, "
                f"persistentVolumeClaim (found {found})"
            )
        return self

    @property
    def source(self) -> str:
        """Which kind of volume it is (configMap, secret, emptyDir, persistentVolumeClaim)."""
        return next(s for s, field in _SOURCES.items() if getattr(self, field) is not None)

    @property
    def always_read_only(self) -> bool:
        """Every mount of it is read-only: the Capsule says so, or the kubelet mounts it so."""
        return self.read_only or self.source in ("configMap", "secret")


def distinct_volumes(volumes: list[Volume]) -> list[Volume]:
    """`volumes`, refused when two share a name (steps mount them by name)."""
    distinct("volume name", [v.name for v in volumes])
    return volumes
