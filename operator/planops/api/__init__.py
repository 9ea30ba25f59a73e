"""The plan language as data: typed models and document parsing (no Kubernetes, no I/O)."""

from planops.api.attempt_models import ResourceList, Resources, RetryBackoff
from planops.api.capsule_models import CapsuleSpec, Tool
from planops.api.documents import (
    API_GROUP,
    API_VERSION,
    CapsuleDocument,
    Document,
    PlanDocument,
    Problem,
    parse_document,
)
from planops.api.models import PlanSpec, Step

__all__ = [
    "API_GROUP",
    "API_VERSION",
    "CapsuleDocument",
    "CapsuleSpec",
    "Document",
    "PlanDocument",
    "PlanSpec",
    "Problem",
    "ResourceList",
    "Resources",
    "RetryBackoff",
    "Step",
    "Tool",
    "parse_document",
]
