"""`finally` steps: what runs once a plan's main steps have settled, whatever their outcome.

The decider runs them as a second plan after the first (a nested Run whose lookups fall back to
the main steps, as a body's do), so every rule of the main steps holds among them unchanged:
dependsOn (naming other finally steps only), `if`, retries, onError. What they add:

- They start when the main steps are over: all settled, or stopped by a failure (onError: fail)
  or a fired `exit` once the steps in flight have settled, or stopped from outside (a `Halt`):
  past the plan's activeDeadlineSeconds, or cancelled with the finally steps asked for
  (`kubectl plan cancel --run-finally`). A plain cancel runs none, and stops those running.
- They run within a budget of their own, `finallyTimeoutSeconds` (default
  FINALLY_TIMEOUT_SECONDS), counted from the moment the main steps were over (or stopped):
  each attempt's deadline is the budget's end (Dispatch.deadline: a Job's activeDeadlineSeconds,
  a process's timeout), and once it has passed the attempts in flight are stopped (recorded
  failed, Decision.stop) and nothing more starts. So a run ends within activeDeadlineSeconds +
  finallyTimeoutSeconds, whatever its finally steps do.
- They read every main step's `$id.status` / `$id.output` (and `{{id.*}}`): all have settled,
  so no dependsOn is needed. The main steps' outcome is `plan`: `$plan.status` is `success` when
  the main steps completed, else `failed`; `$plan.output` is `{"completed", "failedStep"}` as
  JSON (`{{plan.json.failedStep}}`), with `"stopped": "DeadlineExceeded"` (or `Cancelled`)
  when a Halt stopped the main steps.
- Their records follow the main steps' in the report. The plan completed when its main steps
  completed, nothing stopped it and no finally step failed with onError: fail (the first such
  step is the report's failedStep when the main steps named none).

A plan without `finally` is untouched: none of this runs, and its report is the seeds'.
"""

from __future__ import annotations

import json
import weakref

from planops.api.models import PlanSpec
from planops.engine.facts import AttemptFact, Facts
from planops.engine.report import Halt, StepRecord
from planops.engine.templates import StepResult

#: the name finally steps read the main steps' outcome by ($plan.status, {{plan.json.failedStep}})
PLAN = "plan"
#: the finally steps' budget when the plan sets no finallyTimeoutSeconds: cleanup and a
#: notification take minutes, and a plan stopped at its deadline must still end soon after it
FINALLY_TIMEOUT_SECONDS = 600


def deadline(spec: PlanSpec, started_at: float) -> float | None:
    """When the main steps must be over (activeDeadlineSeconds after the run started), or None."""
    seconds = spec.active_deadline_seconds
    return started_at + seconds if seconds else None


def past_deadline(spec: PlanSpec, started_at: float, now: float) -> Halt | None:
    """The plan's deadline as a Halt once it has passed (taking effect at the deadline itself,
    so the finally steps' budget counts from there whenever the executor noticed), else None.
    It stops only main steps: a run whose main steps are over ignores it (Run.halt)."""
    ends = deadline(spec, started_at)
    if ends is None or now < ends:
        return None
    why = f"the plan ran longer than its activeDeadlineSeconds ({spec.active_deadline_seconds}s)"
    return Halt("DeadlineExceeded", why, ends, run_finally=True)


#: the most of a cancel's text (an annotation's value: up to 256 KiB) a halt keeps
WHY_LIMIT = 256


def cancelled(why: str, now: float, *, run_finally: bool) -> Halt:
    """A cancel: it stops the main steps, and runs the finally steps only when asked to."""
    if len(why) > WHY_LIMIT:
        why = why[: WHY_LIMIT - 1] + "…"
    return Halt("Cancelled", why, now, run_finally=run_finally)


def budget_seconds(spec: PlanSpec) -> int:
    """The finally steps' budget: the plan's finallyTimeoutSeconds, else the default."""
    return spec.finally_timeout_seconds or FINALLY_TIMEOUT_SECONDS


def out_of_budget(spec: PlanSpec, ends: float) -> Halt:
    """The finally steps' budget ran out (at `ends`): those in flight stop, none starts."""
    why = f"the finally steps ran longer than their finallyTimeoutSeconds ({budget_seconds(spec)}s)"
    return Halt("DeadlineExceeded", why, ends, run_finally=False, steps="finally")


_specs: dict[int, PlanSpec] = {}


def finally_spec(spec: PlanSpec) -> PlanSpec:
    """The finally steps as a plan of their own (the plan's Capsule, inputSchema, input and
    parallelism), made once per spec object, so its Shape (engine.shape) is derived once too."""
    key = id(spec)
    found = _specs.get(key)
    if found is None:
        found = _specs[key] = PlanSpec.model_construct(
            capsule=spec.capsule,
            parallelism=spec.parallelism,
            input_schema=spec.input_schema,
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


def outcome(completed: bool, failed_step: str | None, halted: Halt | None = None) -> StepResult:
    """The main steps' outcome as finally steps read it under the name `plan`."""
    value: dict[str, object] = {"completed": completed, "failedStep": failed_step}
    if halted is not None:
        value["stopped"] = halted.reason
    return StepResult("success" if completed else "failed", json.dumps(value))


def step_count(spec: PlanSpec) -> int:
    """The plan's steps, finally steps included (a status's progress, the report's room)."""
    return len(spec.steps) + len(spec.finally_)
