"""The status a Plan's reconcile writes, typed: what `kubectl get plan -o yaml`, the printer
columns, Argo CD's health check and a parent's capsule step read.

The reconciler builds a status as this model (reconciler.run.status, the Capsule queue's, an
author's refusal) instead of a dict assembled key by key, so a field is spelled, typed and
documented once. The model holds what is written; it is built by the operator (`model_construct`:
its own values, not validated again on every reconcile) and read back as a dict (`to_status`).
What the status summarises of the run's report (`report`) and the earlier runs (`history`)
stay dicts: their shapes are engine.report's and reconciler.history's, written as they are.
Only the model: no I/O, nothing of the engine.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

Obj = dict[str, Any]


class _Status(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, extra="allow")

    def to_status(self) -> Obj:
        """The fields as the status holds them, camelCase, unset ones left out and None kept
        (a None is no field once written: the status writer drops it)."""
        fields, given = type(self).model_fields, self.model_fields_set
        out: Obj = {
            fields[name].alias or name: _plain(value)
            for name, value in self.__dict__.items()
            if name in given
        }
        out.update(self.model_extra or {})
        return out


def _plain(value: Any) -> Any:
    if isinstance(value, _Status):
        return value.to_status()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


class Condition(_Status):
    """The `Succeeded` condition (True / False / Unknown), as Tekton and Argo CD read it."""

    type: str = "Succeeded"
    status: str
    reason: str
    message: str
    observed_generation: int | None = None
    last_transition_time: str | None = None


class RunRecord(_Status):
    """Which run the status is about: its id, the generation and re-run value it started for,
    when it started and under which Capsule (the retry fields are run.retrying's: extra)."""

    id: str
    generation: int
    rerun: str | None = None
    started_at: str | None = None
    capsule: str | None = None


class RefusedAttempt(_Status):
    """An attempt that failed without an object: the cluster or the dispatch rules refused it."""

    step_id: str
    attempt: int
    error: str | None
    started_at: str | None
    finished_at: str | None


class InFlight(_Status):
    """An attempt in flight with an object (a Job, a child Plan), and since when."""

    step_id: str
    attempt: int
    since: str | None


class Queue(_Status):
    """Where a run waits for a slot of its Capsule (concurrency.maxRunningPlans)."""

    capsule: str
    queued_at: str
    max_running_plans: int
    position: int
    running: list[str]
    ahead: list[str]
    message: str


class PlanStatus(_Status):
    """A Plan's `.status` (what reconciler.run.status bounds: docs/architecture.md, "Reports")."""

    observed_generation: int | None = None
    run: RunRecord | Obj | None = None
    phase: str | None = None
    progress: str | None = None
    errors: list[Obj] | None = None
    error_count: int | None = None
    conditions: list[Condition] | None = None
    report: Obj | None = None
    counts: dict[str, int] | None = None
    failed_step: str | None = None
    refused_attempts: list[RefusedAttempt] | None = None
    started_at: str | None = None
    finished_at: str | None = None
    duration: str | None = None
    asks: list[Obj] | None = None
    in_flight: list[InFlight] | None = None
    queue: Queue | None = None
    history: list[Obj] | None = None
