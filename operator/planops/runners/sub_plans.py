"""The local runner's child plans: a capsule step's (the target Capsule's `plan`) and a
template step's (the template's plan under the caller's Capsule), each validated and run to its
end in-process as a sub-plan, its output taken back as the step's (engine.delegation).

Apart from runners/local.py, which runs one plan's attempts, because a child plan is a whole
plan of its own: what it is made of, its validation, the trace records of the delegation, and
the slots of Capsules with `concurrency.maxRunningPlans` that this run's sub-plans take (counted
among this run's sub-plans only; a sub-plan under a limited Capsule rides that slot, so waiting
never closes a cycle). The run itself is the runner's (`run`, given in).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from planops.api import CapsuleSpec, PlanSpec
from planops.api.template_models import PlanTemplateSpec
from planops.engine import Dispatch, Policy, Report, delegation, plan_templates, validate
from planops.engine import dispatch as dispatch_
from planops.engine.plan_templates import template_of
from planops.engine.policy import capsules as capsule_resolver
from planops.runners.processes import Result

#: tells the run's observer of a trace record (runners.local's emitter)
Emit = Callable[[dict[str, Any]], None]
#: runs a validated plan to its end: (plan id, spec, the capsules above it) -> its report
RunPlan = Callable[[str, PlanSpec, tuple[str, ...]], Awaitable[Report]]


@dataclass
class SubPlans:
    """The sub-plans of one local run (its capsule and template steps)."""

    capsules: Mapping[str, CapsuleSpec]
    templates: Mapping[tuple[str, str], PlanTemplateSpec]
    policy: Policy
    run: RunPlan
    #: the slots of the Capsules with maxRunningPlans that this run's sub-plans take
    _slots: dict[str, asyncio.Semaphore] = field(default_factory=dict, init=False)

    async def capsule_step(
        self,
        d: Dispatch,
        lineage: tuple[str, ...],
        emit: Emit,
    ) -> Result:
        """A capsule step: the target Capsule's plan given the step's task text as
        input.objective (engine.delegation); it takes a slot of the target, if limited."""
        target = d.step.capsule or ""
        child = self.capsules.get(target)
        if child is None or child.plan is None:
            return Result("failed", None, dispatch_.no_plan(target))
        text = delegation.objective(d.input)
        child_spec = child.plan.model_copy(
            update={"capsule": target, "input": delegation.child_input(child.plan.input, text)}
        )
        started = {"capsule": target, "objective": text}
        slot = self._slot(target, child, lineage)
        return await self._sub_plan(d, lineage, emit, child_spec, started, slot)

    async def template_step(
        self,
        d: Dispatch,
        lineage: tuple[str, ...],
        emit: Emit,
    ) -> Result:
        """A template step: the template's plan under this plan's Capsule (the last of
        `lineage`), given the step's rendered input (engine.plan_templates); it rides this
        plan's slot, if any."""
        ref = template_of(d.step)
        found = None if isinstance(ref, str) else self.templates.get((ref.kind, ref.name))
        if found is None or isinstance(ref, str):
            why = ref if isinstance(ref, str) else plan_templates.missing(ref)
            return Result("failed", None, why)
        given = d.input if d.input is not None else {}
        child_spec = PlanSpec.model_validate(plan_templates.child_spec(found, lineage[-1], given))
        started = {"template": ref.label(), "capsule": lineage[-1]}
        return await self._sub_plan(d, lineage, emit, child_spec, started, None)

    async def _sub_plan(
        self,
        d: Dispatch,
        lineage: tuple[str, ...],
        emit: Emit,
        child_spec: PlanSpec,
        started: dict[str, Any],
        slot: asyncio.Semaphore | None,
    ) -> Result:
        """A child plan's step (capsule, template): validated, run to its end as a sub-plan,
        its output the step's (engine.delegation)."""
        errors = validate(
            child_spec,
            capsule_resolver(self.capsules),
            self.policy,
            templates=plan_templates.templates(self.templates),
        )
        target = str(started.get("template") or started["capsule"]).replace("/", "-")
        child_id = f"{d.step.id}-{target}"
        delegated = {"stepId": d.step.id, **started, "childPlanId": child_id}
        emit({"event": "delegation_start", **delegated})
        if errors:
            emit({"event": "delegation", **delegated, "completed": False})
            what = started.get("template") or f"capsule {started['capsule']!r}'s plan"
            return Result(
                "failed", None, f"{what} is invalid: " + "; ".join(str(e) for e in errors)
            )
        if slot is not None and slot.locked():
            emit(
                {
                    "event": "notice",
                    "message": f"sub-plan {child_id} waits for a slot of Capsule "
                    f"{started['capsule']} (maxRunningPlans, counted among this run's sub-plans)",
                }
            )
        async with slot if slot is not None else contextlib.nullcontext():
            report = await self.run(child_id, child_spec, lineage)
        emit({"event": "delegation", **delegated, "completed": report.completed})
        output = delegation.delegated_output(report.to_json())
        if report.completed:
            return Result("success", output, None)
        failed = next((r for r in report.steps if r.step_id == report.failed_step), None)
        why = f": step {failed.step_id} failed: {failed.error}" if failed else ""
        return Result("failed", output, f"sub-plan {child_id} did not complete{why}")

    def _slot(
        self, target: str, capsule: CapsuleSpec, lineage: tuple[str, ...]
    ) -> asyncio.Semaphore | None:
        """The slots of Capsule `target` a sub-plan under `lineage` (the capsules above it)
        takes: none when `target` has no limit, or when a capsule above it has one (it rides
        that slot)."""
        if capsule.concurrency is None or any(
            (above := self.capsules.get(c)) is not None and above.concurrency for c in lineage
        ):
            return None
        limit = capsule.concurrency.max_running_plans
        return self._slots.setdefault(target, asyncio.Semaphore(limit))
