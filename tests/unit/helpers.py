"""Small builders for tests: plans and capsules from plain dicts."""

from __future__ import annotations

from typing import Any

from planops.api import CapsuleSpec, PlanSpec
from planops.engine import CapsuleResolver, capsules


def plan(*steps: dict[str, Any], **spec: Any) -> PlanSpec:
    return PlanSpec.model_validate({"steps": list(steps), **spec})


def capsule(**spec: Any) -> CapsuleSpec:
    base: dict[str, Any] = {
        "shell": {"allow": ["echo", "sh", "sleep", "true", "false", "cat", "python3"]},
        "tools": [
            {"name": "notes", "command": ["cat"]},
            {"name": "echo-input", "command": ["cat"]},
        ],
    }
    base.update(spec)
    return CapsuleSpec.model_validate(base)


def resolver(**named: CapsuleSpec) -> CapsuleResolver:
    return capsules(named or {"default": capsule()})
