"""Validation errors: one record per refusal, with a stable code (see docs/plan-language.md).

Codes are part of the CLI contract (`kubectl-plan validate -o json`): scripts match on them.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

#: Every code the validator can return, with the seed rule it stands for.
CODES: dict[str, str] = {
    "schema": "the document's structure: unknown field, wrong type, missing field, a value JSON "
    "has no meaning for",
    "duplicate-id": "two steps with the same id",
    "step-kind": "a step declaring none of tool, shell, script, capsule, or more than one; an "
    "image, env or volumeMounts on a step that is not a shell or script step; an interpreter on "
    "a step that is not a script step",
    "unknown-tool": "a tool step naming a tool that is not in the capsule's inventory",
    "plan-in-plan": "a tool step naming submit-plan: a plan cannot submit a plan",
    "shell-not-allowed": "a shell step whose binary is absent from the capsule's shell.allow",
    "shell-syntax": "a shell command line that cannot be split into words",
    "script-not-allowed": "a script step under a Capsule that allows no interpreter, or naming "
    "an interpreter outside the Capsule's scripts.allow",
    "env-not-allowed": "a step's env reading a key of a Secret or ConfigMap that the Capsule "
    "does not list in env.secrets / env.configMaps",
    "volume-not-allowed": "a step mounting a volume the Capsule does not declare, or asking a "
    "writable mount of a volume that is read-only (the Capsule's readOnly, a configMap or "
    "secret volume)",
    "capsule-input": 'a capsule step whose input is neither a string nor {"objective": "<text>"}',
    "capsule-plan-input": "a capsule step whose target Capsule's plan declares an inputSchema "
    'that {"objective": <the step\'s text>} (over the input the plan declares) cannot satisfy',
    "unknown-step": "a dependsOn entry or a $<id> reference naming an undeclared step",
    "reference-field": "a reference field other than output or status",
    "on-error": "an onError value other than fail, skip or continue",
    "cycle": "a dependency cycle",
    "finally": "a finally step breaking the finally rules (an exit among them, the id `plan`), or "
    "a main step naming a finally step (dependsOn, a reference, a template)",
    "condition": "an `if` expression that does not parse, holds a {{...}} template (never "
    "rendered: $input.NAME or a decide step), or reads an undeclared $input.NAME",
    "no-capsule": "the plan's Capsule does not exist",
    "image-not-allowed": "the image a step runs in (its own, its tool's, the capsule's) outside "
    "the capsule's or the operator's allowlist, or not an image reference; in the cluster, a tool "
    "or shell step with no image anywhere",
    "limits": "a plan or step beyond the operator's or the capsule's limits, a quantity beyond "
    "what Kubernetes holds, or a value nested deeper than 64 levels",
    "security-profile": "a step's securityProfile that is not one of its capsule's "
    "securityProfiles, or one that asks for more than the operator allows any capsule "
    "(policy.securityProfiles: privileged, host namespaces or paths, root, capabilities)",
    "service": "a step's services naming one its capsule does not declare (or twice), one whose "
    "image the operator's allowlist refuses or whose security profile is beyond the operator's "
    "cap, or two listening on one port",
    "workspace": "a workspace the capsule does not allow: an existing claim it does not list, a "
    "storage class it does not list, or a size above its workspace.maxSize",
    "schedule": "a ScheduledPlan's schedule or time zone that cannot be used",
    "gate": "a gate {value, op, to} with an unknown op, or a missing or extra `to`",
    "control": "a control step (exit, filter, decide, map, reduce, ask) with a missing or "
    "malformed field, or a body breaking the body rules (no decide/map/reduce inside a body, exit "
    "only in decide branches)",
    "unsupported": "agent / infer (they need a language model: use a capsule step)",
    "input-schema": "an inputSchema that is not a JSON Schema (or whose $ref loops or cannot be "
    "resolved), or input that does not satisfy it",
    "tool-input": "a tool step's input outside its tool's inputSchema (every violation, with "
    "its path; an input with templates or references: what no rendered value can change), or a "
    "tool whose inputSchema is not a JSON Schema",
    "no-template": "a templateRef or a template step naming a PlanTemplate or ClusterPlanTemplate "
    "that does not exist, a template step whose templates call each other (a cycle) or nest "
    "deeper than plans may",
    "template-input": "input given to a template (a Plan's spec.input with templateRef, a "
    "template step's input) naming a key its inputSchema does not declare",
    "template": "a {{...}} template that is malformed, names an unknown root, uses a step result "
    "the step does not depend on, or sits in a shell step's first word; a {{ in a script (never "
    "rendered: values reach a script through env)",
}


@dataclass(frozen=True, order=True)
class PlanError:
    """One refusal: `code` (see CODES), the step it concerns (or None), the field path, why."""

    code: str
    step: str | None
    path: str
    message: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        where = f"step {self.step!r}: " if self.step else ""
        return f"[{self.code}] {where}{self.path}: {self.message}"
