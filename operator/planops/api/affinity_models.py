"""Kubernetes' pod affinity, as a Capsule's owner sets it for its step pods (`affinity`).

Kubernetes' own shape (`kubectl explain pod.spec.affinity`) and rules, so that a Capsule with a
term Kubernetes would refuse is refused when it is read (its plans are refused saying why), not
when a step's Job is created: an operator without values (In, NotIn), values where none belong
(Exists), a Gt or Lt that is not one integer, a label key that is not one. Typed field by field
(an unknown field is refused: the API server would prune it and the term would silently mean
something else). matchLabelKeys and mismatchLabelKeys are left out: Kubernetes serves them from
1.31 only, and the chart supports 1.29.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from planops.api.base import Model
from planops.api.labels import DNS_LABEL_PATTERN, LabelValue, label_key, label_value

DnsLabel = Annotated[str, Field(pattern=DNS_LABEL_PATTERN, description="A namespace's name.")]

_WEIGHT = Field(ge=1, le=100, description="1 to 100, added to a node's score when it matches.")


def _requirement(key: str, operator: str, values: list[str], where: str) -> None:
    """Kubernetes' rules of a requirement: In/NotIn take values, Exists/DoesNotExist none, Gt/Lt
    one integer."""
    if operator in ("In", "NotIn") and not values:
        raise ValueError(f"{where} {key!r}: operator {operator} needs values")
    if operator in ("Exists", "DoesNotExist") and values:
        raise ValueError(f"{where} {key!r}: operator {operator} takes no values")
    if operator in ("Gt", "Lt") and (len(values) != 1 or not values[0].lstrip("-").isdigit()):
        raise ValueError(f"{where} {key!r}: operator {operator} takes one integer value")


class NodeSelectorRequirement(Model):
    """A requirement on a node's label (matchExpressions) or field (matchFields)."""

    key: str = Field(
        max_length=317, description="The node label's key (metadata.name in matchFields)."
    )
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"] = Field(
        description="In, NotIn, Exists, DoesNotExist, Gt or Lt."
    )
    values: list[str] = Field(
        default_factory=list,
        max_length=64,
        description="Values for In and NotIn; one integer for Gt and Lt; none otherwise.",
    )

    @model_validator(mode="after")
    def _kubernetes_rules(self) -> NodeSelectorRequirement:
        label_key(self.key, "node selector key")
        _requirement(self.key, self.operator, self.values, "node selector")
        return self


class NodeSelectorTerm(Model):
    """Requirements a node must all meet."""

    match_expressions: list[NodeSelectorRequirement] = Field(
        default_factory=list, max_length=64, description="Requirements on the node's labels."
    )
    match_fields: list[NodeSelectorRequirement] = Field(
        default_factory=list, max_length=8, description="Requirements on the node's fields."
    )


class NodeSelector(Model):
    """Terms of which a node must meet at least one."""

    node_selector_terms: list[NodeSelectorTerm] = Field(
        min_length=1, max_length=32, description="The terms (ORed)."
    )


class PreferredSchedulingTerm(Model):
    """A node term that raises a node's score."""

    weight: int = _WEIGHT
    preference: NodeSelectorTerm = Field(description="The term.")


class NodeAffinity(Model):
    """Which nodes step pods may run on, or prefer."""

    required_during_scheduling_ignored_during_execution: NodeSelector | None = Field(
        default=None, description="Nodes a step pod may only run on."
    )
    preferred_during_scheduling_ignored_during_execution: list[PreferredSchedulingTerm] = Field(
        default_factory=list, max_length=32, description="Nodes a step pod prefers."
    )


class LabelSelectorRequirement(Model):
    """A requirement on a pod's label."""

    key: str = Field(max_length=317, description="The label's key.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"] = Field(
        description="In, NotIn, Exists or DoesNotExist."
    )
    values: list[str] = Field(
        default_factory=list, max_length=64, description="Values for In and NotIn."
    )

    @model_validator(mode="after")
    def _kubernetes_rules(self) -> LabelSelectorRequirement:
        label_key(self.key, "label selector key")
        _requirement(self.key, self.operator, self.values, "label selector")
        for v in self.values:
            label_value(v, f"label selector {self.key}")
        return self


class PodLabelSelector(Model):
    """Pods by their labels (all of matchLabels and matchExpressions)."""

    match_labels: dict[str, LabelValue] = Field(
        default_factory=dict, max_length=64, description="Labels a pod must have."
    )
    match_expressions: list[LabelSelectorRequirement] = Field(
        default_factory=list, max_length=64, description="Requirements a pod must meet."
    )

    @field_validator("match_labels")
    @classmethod
    def _labels(cls, value: dict[str, str]) -> dict[str, str]:
        for k, v in value.items():
            label_value(v, f"matchLabels {label_key(k, 'matchLabels key')}")
        return value


class PodAffinityTerm(Model):
    """Pods (by labels, in namespaces) a step pod must run near: in the same topology domain
    (a node, a zone: topologyKey)."""

    label_selector: PodLabelSelector | None = Field(
        default=None, description="The pods, by label. Omitted: none."
    )
    namespaces: list[DnsLabel] = Field(
        default_factory=list,
        max_length=64,
        description="Their namespaces. Empty (and no namespaceSelector): the step pod's own.",
    )
    namespace_selector: PodLabelSelector | None = Field(
        default=None, description="Their namespaces, by label ({}: every namespace)."
    )
    topology_key: str = Field(
        max_length=317,
        description="The node label whose value is the domain (kubernetes.io/hostname: a "
        "node; topology.kubernetes.io/zone: a zone).",
    )

    @field_validator("topology_key")
    @classmethod
    def _key(cls, value: str) -> str:
        return label_key(value, "topologyKey")


class WeightedPodAffinityTerm(Model):
    """A pod term that raises a node's score."""

    weight: int = _WEIGHT
    pod_affinity_term: PodAffinityTerm = Field(description="The term.")


class PodAffinity(Model):
    """Pods that step pods must, or prefer to, run near (podAffinity) or away from
    (podAntiAffinity)."""

    required_during_scheduling_ignored_during_execution: list[PodAffinityTerm] = Field(
        default_factory=list, max_length=32, description="Terms a step pod's node must meet."
    )
    preferred_during_scheduling_ignored_during_execution: list[WeightedPodAffinityTerm] = Field(
        default_factory=list, max_length=32, description="Terms a step pod prefers."
    )


class Affinity(Model):
    """Where step pods run, beyond nodeSelector (Kubernetes' pod affinity)."""

    node_affinity: NodeAffinity | None = Field(
        default=None, description="Which nodes step pods may run on, or prefer."
    )
    pod_affinity: PodAffinity | None = Field(
        default=None, description="Pods that step pods run near."
    )
    pod_anti_affinity: PodAffinity | None = Field(
        default=None, description="Pods that step pods run away from."
    )
