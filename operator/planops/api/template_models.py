"""A plan written once and run by many: the spec of a PlanTemplate (namespaced) and of a
ClusterPlanTemplate (cluster-scoped, the platform team's).

A template is a Plan spec without what belongs to the caller: no Capsule (it runs under the
caller's and grants nothing: engine.plan_templates), no templateRef of its own, and none of a
run's lifecycle (historyLimit, ttlSecondsAfterFinished, podGC: the calling Plan's). Its
`inputSchema` types its input and its `input` holds defaults under the caller's; its `output` is
what a caller reads (a template step's output).
"""

from __future__ import annotations

from typing import Any

from pydantic import ConfigDict, model_validator

from planops.api.crd_hints import crd
from planops.api.models import PlanSpec

#: a Plan's own fields that a template may not declare (the caller's)
CALLERS_ONLY = ("capsule", "templateRef", "historyLimit", "ttlSecondsAfterFinished", "podGC")
_SNAKE = {"template_ref", "history_limit", "ttl_seconds_after_finished", "pod_gc"}


class PlanTemplateSpec(PlanSpec):
    """A Plan spec run by Plans (spec.templateRef) and template steps, under the caller's
    Capsule: steps, finally, inputSchema (typed input), input (defaults), output."""

    model_config = ConfigDict(json_schema_extra=crd(required=["steps"]))

    @model_validator(mode="before")
    @classmethod
    def _callers_own(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        own = [k for k in data if k in CALLERS_ONLY or k in _SNAKE]
        if own:
            raise ValueError(
                f"a template declares no {', '.join(own)}: a template runs under its caller's "
                "Capsule and grants nothing; the calling Plan sets its own lifecycle"
            )
        return data


def crd_spec_fields() -> tuple[str, ...]:
    """The PlanSpec fields a template's CRD schema drops (the caller's)."""
    return CALLERS_ONLY
