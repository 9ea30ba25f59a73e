"""Typed models of scheduled plans: a ScheduledPlan stamps Plans from a template on a cron
schedule (CronJob's semantics), a ClusterScheduledPlan does so in every namespace its selector
matches. Apart from the plan models (planops.api.models) because they only wrap a PlanSpec: the
scheduler and the CRD read them, the engine never does.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from planops.api.base import Model
from planops.api.crd_hints import crd
from planops.api.models import PlanSpec


class TemplateMeta(Model):
    """Labels and annotations of each run."""

    labels: dict[str, str] = Field(default_factory=dict, description="Labels of each run.")
    annotations: dict[str, str] = Field(
        default_factory=dict, description="Annotations of each run."
    )


class PlanTemplate(Model):
    """The Plan each run creates."""

    metadata: TemplateMeta = Field(default_factory=TemplateMeta)
    spec: PlanSpec = Field(description="The spec of each run.")


#: the defaults a ScheduledPlan's spec stores (as a CronJob's does): `kubectl get` shows them
_STORED = crd(store_default=True)


class ScheduledPlanSpec(Model):
    """A ScheduledPlan: runs a Plan on a schedule."""

    # CronJob semantics for plans (planops.engine.schedule has the rules)
    schedule: str = Field(
        min_length=1,
        description="When to run, in cron syntax (minute hour day-of-month month day-of-week) "
        "or a macro: @yearly @monthly @weekly @daily @hourly.",
    )
    time_zone: str | None = Field(
        default=None,
        description="IANA time zone of the schedule (Europe/Berlin). Default: UTC. When clocks "
        "go back, a schedule naming its hours runs once; see docs/schedules.md.",
    )
    concurrency_policy: Literal["Allow", "Forbid", "Replace"] = Field(
        default="Allow",
        description="What to do when a run is due while another is active: Allow (start it), "
        "Forbid (wait until the active run ends), Replace (stop the active run, start the new "
        "one).",
        json_schema_extra=_STORED,
    )
    starting_deadline_seconds: int | None = Field(
        default=None,
        ge=0,
        description="A due time older than this is missed, not started late.",
    )
    suspend: bool = Field(
        default=False,
        description="Start no new runs (due times pass and are reported missed).",
        json_schema_extra=_STORED,
    )
    successful_runs_history_limit: int = Field(
        default=3, ge=0, le=100, description="Succeeded runs kept.", json_schema_extra=_STORED
    )
    failed_runs_history_limit: int = Field(
        default=1, ge=0, le=100, description="Failed runs kept.", json_schema_extra=_STORED
    )
    plan_template: PlanTemplate


class LabelSelectorRequirement(Model):
    """A label selector requirement."""

    key: str = Field(description="The label key.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"] = Field(
        description="In, NotIn, Exists or DoesNotExist."
    )
    values: list[str] = Field(default_factory=list, description="Values for In and NotIn.")


class LabelSelector(Model):
    """Namespaces to stamp a run into at each scheduled time (each run uses the Capsule of its
    own namespace)."""

    match_labels: dict[str, str] = Field(
        default_factory=dict, description="Labels a namespace must have."
    )
    match_expressions: list[LabelSelectorRequirement] = Field(
        default_factory=list, description="Requirements a namespace must meet."
    )

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
    """A ClusterScheduledPlan: runs a Plan on a schedule in every matching namespace."""

    # a scheduled plan stamped into every namespace matching `namespaceSelector`

    namespace_selector: LabelSelector
