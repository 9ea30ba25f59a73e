"""`finally` steps: what runs once a plan's main steps have settled, whatever their outcome.

The decider runs them as a second plan after the first (a nested Run whose lookups fall back to
the main steps, as a body's do), so every rule of the main steps holds among them unchanged:
dependsOn (naming other finally steps only), `if`, retries, onError. What they add:

- They start when the main steps are over: all settled, or stopped by a failure (onError: fail)
  or a fired `exit` once the steps in flight have settled. Cancel and activeDeadlineSeconds do
  not run them: both are a stop that must hold (docs/plan-language.md says why).
- They read every main step's `$id.status` / `$id.output` (and `{{id.*}}`): all have settled,
  so no dependsOn is needed. The main steps' outcome is `plan`: `$plan.status` is `success` when
  the main steps completed, else `failed`; `$plan.output` is `{"completed", "failedStep"}` as
  JSON (`{{plan.json.failedStep}}`).
- Their records follow the main steps' in the report. The plan completed when its main steps
  completed and no finally step failed with onError: fail (the first such step is the report's
  failedStep when the main steps named none).

A plan without `finally` is untouched: none of this runs, and its report is the seeds'.
"""

from __future__ import annotations

import json
import weakref

from planops.api.models import PlanSpec
from planops.engine.facts import AttemptFact, Facts
from planops.engine.report import StepRecord
from planops.engine.templates import StepResult

#: the name finally steps read the main steps' outcome by ($plan.status, {{plan.json.failedStep}})
PLAN = "plan"

_specs: dict[int, PlanSpec] = {}


def finally_spec(spec: PlanSpec) -> PlanSpec:
    """The finally steps as a plan of their own (the plan's Capsule, input and parallelism),
    made once per spec object, so its Shape (engine.shape) is derived once too."""
    key = id(spec)
    found = _specs.get(key)
    if found is None:
        found = _specs[key] = PlanSpec.model_construct(
            capsule=spec.capsule,
            parallelism=spec.parallelism,
            input=spec.input,
            steps=list(spec.finally_),
            finally_=[],
        )
        weakref.finalize(spec, _specs.pop, key, None)
    return found


def ids(spec: PlanSpec) -> frozenset[str]:
    return frozenset(s.id for s in spec.finally_)


def split(spec: PlanSpec, facts: Facts) -> tuple[Facts, Facts]:
    """(the main steps' facts, the finally steps' facts): by the step's top-level id (a body
    step's record is `<control>.<key>.<step>`). One pass over each list."""
    mine = ids(spec)
    if not mine:
        return facts, Facts()
    main_records: list[StepRecord] = []
    final_records: list[StepRecord] = []
    for r in facts.settled:
        (final_records if r.step_id.partition(".")[0] in mine else main_records).append(r)
    main_attempts: list[AttemptFact] = []
    final_attempts: list[AttemptFact] = []
    for a in facts.attempts:
        (final_attempts if a.step_id.partition(".")[0] in mine else main_attempts).append(a)
    return (
        Facts(tuple(main_records), tuple(main_attempts)),
        Facts(tuple(final_records), tuple(final_attempts)),
    )


def outcome(completed: bool, failed_step: str | None) -> StepResult:
    """The main steps' outcome as finally steps read it under the name `plan`."""
    text = json.dumps({"completed": completed, "failedStep": failed_step})
    return StepResult("success" if completed else "failed", text)


def step_count(spec: PlanSpec) -> int:
    """The plan's steps, finally steps included (a status's progress, the report's room)."""
    return len(spec.steps) + len(spec.finally_)
