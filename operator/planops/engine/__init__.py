"""The pure engine: validation, the DAG, references, conditions, the decider and the report.

No kopf, no kubernetes, no I/O (enforced by tests/unit/test_layering.py); the clock is passed in.
This is the surface most callers need. The executors also import three modules directly, for
what only they hold: engine.report (the RFC 3339 times of statuses and events), engine.facts
(AttemptFact and Dispatch, for ask steps) and engine.policy (DEFAULT_CAPSULE, the resolver
over fixed Capsules; engine.validation re-exports DEFAULT_CAPSULE). Those names are kept
stable like the ones below.
"""

from typing import TYPE_CHECKING, Any

from planops.engine.allowlists import image_allowed, shell_words
from planops.engine.errors import CODES, PlanError
from planops.engine.facts import AttemptFact, Decision, Dispatch, Facts, step_kind
from planops.engine.policy import (
    OPERATOR_BUDGET_SECONDS,
    Budget,
    CapsuleResolver,
    Policy,
    capsule_name,
    capsules,
)
from planops.engine.report import Report, StepRecord
from planops.engine.validation import validate

if TYPE_CHECKING:
    from planops.engine.decider import Run, decide


def __getattr__(name: str) -> Any:
    """Run and decide on first use: `kubectl-plan validate` needs no decider
    (docs/performance.md)."""
    if name in ("Run", "decide"):
        from planops.engine import decider  # noqa: PLC0415

        return getattr(decider, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "CODES",
    "OPERATOR_BUDGET_SECONDS",
    "AttemptFact",
    "Budget",
    "CapsuleResolver",
    "Decision",
    "Dispatch",
    "Facts",
    "PlanError",
    "Policy",
    "Report",
    "Run",
    "StepRecord",
    "capsule_name",
    "capsules",
    "decide",
    "image_allowed",
    "shell_words",
    "step_kind",
    "validate",
]
