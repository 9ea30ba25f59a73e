"""How a plan names a template (PlanTemplate, ClusterPlanTemplate: api.template_models): a
Plan's spec.templateRef and a template step's `template`, and what a Plan from a template may
not declare itself (its steps, finally, output and inputSchema are the template's)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from planops.api.base import NAME_PATTERN, Model
from planops.api.crd_hints import crd

#: the kinds of a template: namespaced, and cluster-scoped
TEMPLATE_KINDS = ("PlanTemplate", "ClusterPlanTemplate")
#: what a Plan from a template takes from the template only (never writes itself)
FROM_TEMPLATE_ONLY = ("steps", "finally", "output", "inputSchema")


class TemplateRef(Model):
    """A PlanTemplate (in the plan's namespace) or a ClusterPlanTemplate, by name."""

    kind: Literal["PlanTemplate", "ClusterPlanTemplate"] = Field(
        default="PlanTemplate",
        description="PlanTemplate (in the plan's namespace) or ClusterPlanTemplate. Default: "
        "PlanTemplate.",
    )
    name: str = Field(pattern=NAME_PATTERN, max_length=253, description="The template's name.")

    def label(self) -> str:
        """`plantemplate/NAME` or `clusterplantemplate/NAME` (messages, lineage)."""
        return f"{self.kind.lower()}/{self.name}"


def as_ref(value: Any) -> Any:
    """A template step's `template`: a name (a PlanTemplate) or {kind, name}."""
    if isinstance(value, str):
        return {"kind": "PlanTemplate", "name": value}
    return value


#: a PlanSpec's CRD: steps, or a templateRef and none of what the template holds
PLAN_SPEC_HINTS = crd(
    required=[],
    rules=[
        (
            "has(self.steps) || has(self.templateRef)",
            "a plan declares steps, or a templateRef to run a template's",
        ),
        (
            "!has(self.templateRef) || !(has(self.steps) || has(self.finally) || "
            "has(self.output) || has(self.inputSchema))",
            "a Plan from a template (templateRef) takes steps, finally, output and "
            "inputSchema from the template only",
        ),
    ],
)


def from_template(data: Any) -> Any:
    """A PlanSpec's input before it is read: a plan from a template declares no steps (they are
    the template's), so `steps` is [] then and the validator runs the template's
    (engine.plan_templates); any of FROM_TEMPLATE_ONLY given beside templateRef is refused."""
    if not isinstance(data, dict):
        return data
    ref = data.get("templateRef", data.get("template_ref"))
    if ref is None:
        return data
    own = [k for k in (*FROM_TEMPLATE_ONLY, "input_schema") if k in data]
    if own:
        raise ValueError(
            f"a Plan from a template (templateRef) takes {', '.join(FROM_TEMPLATE_ONLY)} "
            f"from the template only: remove {', '.join(own)}"
        )
    return {**data, "steps": []}
