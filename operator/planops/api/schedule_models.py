"""Typed models of scheduled plans: a ScheduledPlan stamps Plans from a template on a cron
schedule (CronJob's semantics), a ClusterScheduledPlan does so in every namespace its selector
matches. Apart from the plan models (planops.api.models) because they only wrap a PlanSpec: the
scheduler and the CRD read them, the engine never does.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from planops.api.models import Model, PlanSpec


class TemplateMeta(Model):
    """Labels and annotations given to every run."""

    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class PlanTemplate(Model):
    metadata: TemplateMeta = Field(default_factory=TemplateMeta)
    spec: PlanSpec


class ScheduledPlanSpec(Model):
    """CronJob semantics for plans (planops.engine.schedule has the rules)."""

    schedule: str = Field(min_length=1)
    time_zone: str | None = None
    concurrency_policy: Literal["Allow", "Forbid", "Replace"] = "Allow"
    starting_deadline_seconds: int | None = Field(default=None, ge=0)
    suspend: bool = False
    successful_runs_history_limit: int = Field(default=3, ge=0, le=100)
    failed_runs_history_limit: int = Field(default=1, ge=0, le=100)
    plan_template: PlanTemplate


class LabelSelectorRequirement(Model):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: list[str] = Field(default_factory=list)


class LabelSelector(Model):
    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: list[LabelSelectorRequirement] = Field(default_factory=list)

    def to_selector(self) -> str:
        """The selector in the API's string form (`a=b,c in (d,e),!f`)."""
        parts = [f"{k}={v}" for k, v in sorted(self.match_labels.items())]
        for r in self.match_expressions:
            if r.operator == "In":
                parts.append(f"{r.key} in ({','.join(r.values)})")
            elif r.operator == "NotIn":
                parts.append(f"{r.key} notin ({','.join(r.values)})")
            elif r.operator == "Exists":
                parts.append(r.key)
            else:
                parts.append(f"!{r.key}")
        return ",".join(parts)


class ClusterScheduledPlanSpec(ScheduledPlanSpec):
    """A scheduled plan stamped into every namespace matching `namespaceSelector`."""

    namespace_selector: LabelSelector
