"""The services a Capsule's owner declares (`services`): containers a step lists by name that
run beside its command in its pod, as native sidecars (init containers with restartPolicy
Always, Kubernetes 1.29+): each started, and ready by its probe, before the step's command
starts, and stopped once it ends (kube.step_pod makes them; engine.pod_grants judges a step's
list). The step reaches a service on localhost, or by its name (an /etc/hosts entry of the pod).

A service's container is the Capsule owner's, like a tool's: its image (bounded by the
operator's allowedImages), its env (literal values: no Secret reaches a service through a
plan), its resources and security profile. Nothing of it is a plan author's but the choice to
list it.
"""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from planops.api import quantity
from planops.api.attempt_models import Resources
from planops.api.base import Model
from planops.api.container_models import ENV_NAME_PATTERN, distinct
from planops.api.crd_hints import crd
from planops.api.labels import DNS_LABEL_PATTERN

#: the container of the step's own command (kube.manifests.CONTAINER): no service is named so
STEP_CONTAINER = "step"
#: the containers of a step pod that moves files (kube.files_pod): no service is named so either
MOVER_CONTAINERS = ("fetch", "collect")


class ServicePort(Model):
    """A port the service listens on (the step reaches it on localhost, or by the service's
    name)."""

    container_port: int = Field(ge=1, le=65535, description="The port number.")
    name: str | None = Field(
        default=None,
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        max_length=15,
        description="A name for it (an IANA service name: at most 15 characters); a probe may "
        "name it.",
    )
    protocol: Literal["TCP", "UDP", "SCTP"] = Field(
        default="TCP", description="TCP, UDP or SCTP. Default TCP."
    )


class ExecAction(Model):
    """A command run in the service's container: ready when it exits 0."""

    command: list[str] = Field(min_length=1, description="The command and its arguments.")


class TcpSocketAction(Model):
    """Ready when the port accepts a connection."""

    port: int | str = Field(description="The port's number or name.")


class HttpGetAction(Model):
    """Ready when an HTTP GET answers 200 to 399."""

    path: str = Field(default="/", description="The path. Default /.")
    port: int | str = Field(description="The port's number or name.")
    scheme: Literal["HTTP", "HTTPS"] = Field(default="HTTP", description="HTTP or HTTPS.")


class Probe(Model):
    """When a service is ready: exactly one of exec, tcpSocket or httpGet, tried every
    periodSeconds until it succeeds (the container's startupProbe: the step's command starts
    only then)."""

    model_config = ConfigDict(
        json_schema_extra=crd(
            rules=[
                (
                    "(has(self.exec) ? 1 : 0) + (has(self.tcpSocket) ? 1 : 0) + "
                    "(has(self.httpGet) ? 1 : 0) == 1",
                    "a probe is exactly one of exec, tcpSocket, httpGet",
                )
            ]
        )
    )

    exec_: ExecAction | None = Field(default=None, alias="exec", description="Run a command.")
    tcp_socket: TcpSocketAction | None = Field(default=None, description="Open a connection.")
    http_get: HttpGetAction | None = Field(default=None, description="Send an HTTP GET.")
    initial_delay_seconds: int = Field(
        default=0, ge=0, le=3600, description="Seconds before the first try. Default 0."
    )
    period_seconds: int = Field(
        default=1, ge=1, le=3600, description="Seconds between tries. Default 1."
    )
    timeout_seconds: int = Field(
        default=1, ge=1, le=3600, description="Seconds a try may take. Default 1."
    )
    failure_threshold: int = Field(
        default=120,
        ge=1,
        le=100_000,
        description="Failed tries before the service is restarted (and probed again). "
        "Default 120 (two minutes at the default period). The step's timeout bounds the wait.",
    )

    @model_validator(mode="after")
    def _one_action(self) -> Probe:
        if sum(a is not None for a in (self.exec_, self.tcp_socket, self.http_get)) != 1:
            raise ValueError("a probe is exactly one of exec, tcpSocket, httpGet")
        return self


class ServiceEnvVar(Model):
    """One variable of a service's container: a literal value."""

    name: str = Field(pattern=ENV_NAME_PATTERN, max_length=256, description="The variable's name.")
    value: str = Field(description="The value (literal).")


class Service(Model):
    """A container started beside the steps that list it (a native sidecar: Kubernetes
    1.29+), ready before the step's command starts and stopped when it ends. The step reaches
    it on localhost, or by its name (an /etc/hosts entry of the pod)."""

    name: str = Field(
        pattern=DNS_LABEL_PATTERN,
        max_length=63,
        description="The name steps list it by (services); its container's name, and a host "
        "name of the step's pod (127.0.0.1). Not `step`, `fetch` or `collect`.",
    )
    image: str = Field(
        max_length=512,
        description="Its image: the Capsule names it, and the operator's allowedImages must "
        "allow it.",
    )
    command: list[str] = Field(
        default_factory=list,
        max_length=256,
        description="The container's command. Default: the image's entrypoint.",
    )
    args: list[str] = Field(
        default_factory=list,
        max_length=256,
        description="Its arguments. Default: the image's.",
    )
    env: list[ServiceEnvVar] = Field(
        default_factory=list,
        max_length=64,
        description="Environment variables (literal values; names starting with PLANOPS_ are "
        "planops').",
    )
    ports: list[ServicePort] = Field(
        default_factory=list, max_length=16, description="The ports it listens on."
    )
    readiness_probe: Probe | None = Field(
        default=None,
        description="When it is ready; the step's command starts once every service it lists "
        "is. Omitted: as soon as its container has started (declare one for a server).",
    )
    resources: Resources | None = Field(
        default=None,
        description="Its requests and limits (default planops': 10m/32Mi requested, 1 CPU/"
        "256Mi limit), within the Capsule's maxResources and the operator's ceilings.",
    )
    security_profile: str | None = Field(
        default=None,
        pattern=DNS_LABEL_PATTERN,
        max_length=63,
        description="One of the Capsule's securityProfiles for its container (not one that "
        "shares the node's namespaces: those are the pod's, the step's profile's). Default: "
        "today's restricted container.",
    )

    @field_validator("name")
    @classmethod
    def _not_the_step(cls, value: str) -> str:
        if value == STEP_CONTAINER:
            raise ValueError(f"a service is not named {STEP_CONTAINER!r} (the step's container)")
        if value in MOVER_CONTAINERS:
            raise ValueError(
                f"a service is not named {value!r} (a container of the step pods that move files)"
            )
        return value

    @field_validator("resources")
    @classmethod
    def _quantities(cls, value: Resources | None) -> Resources | None:
        for part in (value.requests, value.limits) if value is not None else ():
            for amount in (part.cpu, part.memory) if part is not None else ():
                if amount is not None:
                    quantity.parse(amount)
        return value

    @model_validator(mode="after")
    def _distinct(self) -> Service:
        for e in self.env:
            if e.name.startswith("PLANOPS_"):
                raise ValueError(f"{e.name}: names starting with PLANOPS_ are set by planops")
        distinct("env name", [e.name for e in self.env])
        distinct("port", [f"{p.container_port}/{p.protocol}" for p in self.ports])
        return self
