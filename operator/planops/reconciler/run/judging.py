"""The one judge of a plan in the cluster: a Plan object, and a ScheduledPlan's run template.

A Plan is parsed, its spec's size held to what its object can share with a status, its Capsule
read (a Capsule that cannot be used refuses the plan, saying why: it is no missing Capsule), and
the one validator asked (engine.validate) with the Capsules its capsule steps may spawn into. A
ScheduledPlan's or ClusterScheduledPlan's template is the plan its runs will be: it is judged
by the same rules (`judge_spec`), so a schedule and its runs agree on what is refused.

The reconcile and the admission webhook (handlers.webhook, through Reconciler.judge) both ask
the same `Judge`, which keeps the verdicts they share (one per Plan generation and Capsule
version: a plan is judged once per change, not on every reconcile). What it judges is read by
effects.reads: the Plan's Capsule and its targets.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from planops.api import CapsuleSpec, PlanSpec, parse_document
from planops.api.documents import problems_of
from planops.engine import (
    OPERATOR_BUDGET_SECONDS,
    Budget,
    PlanError,
    Policy,
    capsule_name,
    validate,
)
from planops.engine.plan_templates import TemplateResolver, expand
from planops.engine.validation import DEFAULT_CAPSULE
from planops.reconciler.run import status as status_
from planops.reconciler.run import templating

#: verdicts kept (one per Plan generation; a few MB for this many plans)
VERDICTS_KEPT = 20_000
#: a judged Plan: its spec (None: unreadable), its Capsule (None: refused), and the refusals
Judgement = tuple[PlanSpec | None, CapsuleSpec | None, list[PlanError]]
Obj = dict[str, Any]


def capsule_named(plan: Obj) -> str:
    """The Capsule a Plan object names (the default Capsule when it names none)."""
    return str((plan.get("spec") or {}).get("capsule") or DEFAULT_CAPSULE)


def too_large(spec: PlanSpec, size: int, templates: int = 0) -> PlanError | None:
    """A spec of `size` bytes, with `templates` bytes of the templates its run snapshots into its
    status (run.templating), that would leave its status no room in one etcd object."""
    if size + templates <= status_.SPEC_BUDGET:
        return None
    what = f"the spec is {size} bytes" + (
        f", {size + templates} with the templates it runs (a run records their specs in its "
        "status, so that an edit never changes it)"
        if templates
        else ""
    )
    what_next = (
        "pass the items by reference to something smaller (an index per item), or split them "
        "across capsule steps, each a plan of its own"
        if any(s.map is not None for s in spec.steps)
        else "run a map over the items instead of one step each, or split the plan into capsule "
        "steps"
    )
    return PlanError(
        "limits",
        None,
        "spec",
        f"{what}; a Plan's spec may be at most {status_.SPEC_BUDGET} bytes "
        f"(its status shares the object, and etcd stores at most 1.5 MiB): {what_next}",
    )


def judge_spec(
    spec: PlanSpec,
    cname: str,
    raw: Obj | None,
    targets: dict[str, Obj | None],
    policy: Policy,
    budget: Budget | None,
    templates: TemplateResolver | None = None,
) -> tuple[CapsuleSpec | None, list[PlanError]]:
    """The plan `spec` under its Capsule `cname` (the object `raw`; None: not found) and the
    Capsules its capsule steps name (`targets`): the Capsule, and the refusals. A Capsule that
    cannot be used refuses the plan saying why (never taken for a missing one)."""
    capsule: CapsuleSpec | None = None
    if raw is not None:
        try:
            capsule = CapsuleSpec.model_validate(raw.get("spec") or {})
        except ValidationError as e:
            why = "; ".join(f"{p.path}: {p.message}" for p in problems_of(e, "spec"))
            error = PlanError(
                "no-capsule", None, "capsule", f"Capsule {cname!r} cannot be used: {why}"
            )
            return None, [error]
    children: dict[str, CapsuleSpec] = {}
    for n, t in targets.items():
        with contextlib.suppress(ValidationError):  # refused when its own plans run
            if t is not None:
                children[n] = CapsuleSpec.model_validate(t.get("spec") or {})
    errors = validate(
        spec, lambda n: capsule if n == cname else children.get(n), policy, budget, templates
    )
    return capsule, errors


@dataclass
class Judge:
    policy: Policy = field(default_factory=Policy)
    #: one validation's time budget (a huge plan is refused, not judged without end)
    budget: Budget | None = field(
        default_factory=lambda: Budget(OPERATOR_BUDGET_SECONDS, time.monotonic)
    )
    #: verdicts of judge(reuse=True) by (uid, generation, Capsule name, Capsule version, and
    #: the capsule steps' target Capsules with their versions)
    _verdicts: dict[tuple[Any, ...], Judgement] = field(default_factory=dict)

    async def judge(
        self,
        plan: Obj,
        raw: Obj | None,
        targets: dict[str, Obj | None],
        *,
        reuse: bool = False,
        templates: dict[tuple[str, str], Obj | None] | None = None,
    ) -> Judgement:
        """The one judgement of a Plan object, its Capsule being `raw` (None: not found) and
        its capsule steps' targets `targets`, the templates it names `templates` (the objects
        read, or a run's snapshot: run.templating). A plan from a template is judged, and
        returned, as what it runs (engine.plan_templates.expand). Parsing and validation run
        in a worker thread (a large plan never holds the event loop, which serves every other
        plan, the webhook and the health probe) under the validator's time budget. With
        `reuse` (the reconciler), a verdict is kept per Plan generation, Capsule version and
        template version."""
        meta = plan["metadata"]
        cname = capsule_named(plan)
        key = (
            str(meta.get("uid")),
            int(meta.get("generation") or 0),
            cname,
            _version(raw),
            tuple((n, _version(t)) for n, t in targets.items()),
            tuple((k, _version(t)) for k, t in sorted((templates or {}).items())),
        )
        if reuse and key in self._verdicts:
            return self._verdicts[key]
        verdict = await asyncio.to_thread(self._judge, plan, cname, raw, targets, templates or {})
        if reuse:
            self._verdicts[key] = verdict
            while len(self._verdicts) > VERDICTS_KEPT:
                del self._verdicts[next(iter(self._verdicts))]  # the oldest
        return verdict

    async def judge_template(
        self,
        spec: PlanSpec,
        raw: Obj | None,
        targets: dict[str, Obj | None],
        templates: dict[tuple[str, str], Obj | None] | None = None,
    ) -> list[PlanError]:
        """A ScheduledPlan's run template under its namespace's Capsule (`raw`): the refusals its
        runs would get (off the event loop, as a Plan's)."""
        return await asyncio.to_thread(self._judge_template, spec, raw, targets, templates or {})

    def _judge(
        self,
        plan: Obj,
        cname: str,
        raw: Obj | None,
        targets: dict[str, Obj | None],
        templates: dict[tuple[str, str], Obj | None],
    ) -> Judgement:
        doc, problems = parse_document(
            {k: plan[k] for k in ("apiVersion", "kind", "metadata", "spec")}
        )
        if problems or doc is None:
            return None, None, [PlanError(p.code, None, p.path, p.message) for p in problems]
        spec = doc.spec
        assert isinstance(spec, PlanSpec)
        size = status_.json_size(plan.get("spec"))
        large = too_large(spec, size, _template_size(templates))
        if large is not None:
            return spec, None, [large]
        resolve, unusable = templating.resolver(templates)
        if unusable:
            return spec, None, unusable
        capsule, errors = judge_spec(spec, cname, raw, targets, self.policy, self.budget, resolve)
        if spec.template_ref is not None and not errors:
            found = resolve(spec.template_ref.kind, spec.template_ref.name)
            assert found is not None  # else the validator refused it
            spec = expand(spec, found)
        return spec, capsule, errors

    def _judge_template(
        self,
        spec: PlanSpec,
        raw: Obj | None,
        targets: dict[str, Obj | None],
        templates: dict[tuple[str, str], Obj | None],
    ) -> list[PlanError]:
        large = too_large(spec, status_.json_size(spec.dump()), _template_size(templates))
        if large is not None:
            return [large]
        resolve, unusable = templating.resolver(templates)
        if unusable:
            return unusable
        return judge_spec(
            spec, capsule_name(spec), raw, targets, self.policy, self.budget, resolve
        )[1]


def _template_size(templates: dict[tuple[str, str], Obj | None]) -> int:
    """The bytes of the templates' specs a run snapshots into its status (run.templating)."""
    return sum(status_.json_size((t or {}).get("spec")) for t in templates.values())


def _version(obj: Obj | None) -> Any:
    return ((obj or {}).get("metadata") or {}).get("resourceVersion")
