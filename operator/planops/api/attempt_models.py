"""Typed models of how each attempt of a step runs: its container's requests and limits
(Resources) and the pause before a retry (RetryBackoff).

Why a module of their own: a step declares them (api.models.Step), and a Capsule declares them
too, as the defaults and ceilings its steps get (api.capsule_models); a service's container has
resources (api.service_models) and a step's effective ones are computed in api.resources. They
depend on nothing of a plan, so every one of those builds on them without building on the plan
models.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, field_validator

from planops.api import durations
from planops.api.base import Model


class ResourceList(Model):
    """Kubernetes quantities (`cpu: 500m`, `memory: 64Mi`)."""

    cpu: str | int | None = Field(default=None, description="CPU, in cores or millicores (500m).")
    memory: str | int | None = Field(
        default=None, description="Memory, in bytes or with a suffix (64Mi)."
    )


class Resources(Model):
    """Requests and limits of a step's container (the cgroup limits)."""

    requests: ResourceList | None = Field(
        default=None, description="What the step's container is guaranteed (scheduling)."
    )
    limits: ResourceList | None = Field(
        default=None,
        description="The cgroup limits of the step's container; exceeding memory is OOMKilled.",
    )


class RetryBackoff(Model):
    """The pause before each retry: attempt n+1 starts `duration x factor^(n-1)` after attempt n
    failed, at most `maxDuration` (Argo's retryStrategy.backoff; the Job controller's backoff)."""

    duration: str | int = Field(description="The first pause: 10s, 1m30s, 500ms.")
    factor: float = Field(
        default=2.0,
        ge=1,
        le=100,
        description="Each further pause is the previous one times this. Default 2.",
    )
    max_duration: str | int | None = Field(
        default=None, description="The longest pause. Default: none."
    )

    @field_validator("duration", "max_duration")
    @classmethod
    def _is_duration(cls, value: Any) -> Any:
        if value is not None:
            durations.parse(value)
        return value

    def delay(self, failed_attempt: int) -> float:
        """Seconds to wait after attempt `failed_attempt` (1-based) failed."""
        first = durations.parse(self.duration)
        exponent = min(max(0, failed_attempt - 1), 64)  # bounded: 100 retries cannot overflow
        wait = first * self.factor**exponent
        if self.max_duration is not None:
            wait = min(wait, durations.parse(self.max_duration))
        return min(wait, durations.MAX_SECONDS)
