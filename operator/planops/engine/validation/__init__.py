"""The one validator: every refusal of seed 1 ("What is refused before anything runs"), plus
planops' own, all reported together. The CLI, the admission webhook and the reconciler all call
`validate`; whatever needs the cluster (the Capsule) comes through an injected `CapsuleResolver`.
A plan with any error runs nothing at all.

This module runs the checks in order; each module beside it checks one thing: value_checks
(JSON values, bounded depth: first, and alone), step_checks (one step's own declarations),
limit_checks (resources and timeouts), control_checks (control steps' fields, as JSON Schemas),
template_checks (`{{...}}`), body_checks (decide/map/reduce bodies), input_checks (the input
schema), finally_checks (the finally steps, last: judged like main steps, after them); checker
holds one validation's state and its time budget.
"""

from __future__ import annotations

from dataclasses import replace

from planops.api.models import PlanSpec
from planops.engine import plan_templates, workspace
from planops.engine.dag import Graph
from planops.engine.errors import PlanError
from planops.engine.policy import (
    BUDGET_EVERY,
    DEFAULT_CAPSULE,
    Budget,
    CapsuleResolver,
    Policy,
    capsule_name,
)
from planops.engine.validation.body_checks import check_bodies
from planops.engine.validation.checker import Checker, OverBudgetError
from planops.engine.validation.finally_checks import check_finally
from planops.engine.validation.input_checks import check_input
from planops.engine.validation.step_checks import check_step
from planops.engine.validation.template_checks import check_templates
from planops.engine.validation.template_step_checks import check_template_steps
from planops.engine.validation.value_checks import value_problems

#: DEFAULT_CAPSULE is engine.policy's, kept importable from here for the executors
__all__ = ["DEFAULT_CAPSULE", "validate"]


def validate(
    spec: PlanSpec,
    resolve_capsule: CapsuleResolver,
    policy: Policy | None = None,
    budget: Budget | None = None,
    templates: plan_templates.TemplateResolver | None = None,
    *,
    chain: tuple[str, ...] = (),
) -> list[PlanError]:
    """Every refusal of `spec`, in the order the checks find them (the Capsule and the plan's
    size, then each step in its position, then inputs, workspace, templates and cycles); [] when
    the plan may run. A plan from a template (templateRef) is judged as what it runs
    (engine.plan_templates.expand): the template found through `templates`, under the plan's
    Capsule.

    With a `budget`, a validation that runs past it stops and returns one error instead (code
    `limits`, path `steps`): the plan was not judged, so it may not run."""
    not_values = value_problems(spec)
    if not_values:
        return not_values
    resolve_template = templates or plan_templates.none
    if spec.template_ref is not None:
        return _from_template(spec, resolve_capsule, policy, budget, resolve_template)

    def judge(child: PlanSpec, below: tuple[str, ...]) -> list[PlanError]:
        return validate(child, resolve_capsule, policy, budget, resolve_template, chain=below)

    name = capsule_name(spec)
    capsule, resolve = resolve_capsule(name), resolve_capsule
    checker = Checker(
        spec,
        name,
        capsule,
        policy or Policy(),
        budget=budget,
        resolve=resolve,
        later=frozenset(s.id for s in spec.finally_),
        templates=resolve_template,
        chain=chain,
    )
    if budget is not None:
        checker.deadline = budget.clock() + budget.seconds
    try:
        errors = _validate(checker)
        check_template_steps(checker, judge)
        return errors
    except OverBudgetError as e:
        assert budget is not None
        return [
            PlanError(
                "limits",
                None,
                "steps",
                f"validation took longer than its budget of {budget.seconds:g}s: stopped at "
                f"{e.where} of a plan of {len(spec.steps)} steps, nothing of it judged; split it "
                "(a capsule step runs another Capsule's plan) or make it smaller",
            )
        ]


def _from_template(
    spec: PlanSpec,
    resolve_capsule: CapsuleResolver,
    policy: Policy | None,
    budget: Budget | None,
    resolve: plan_templates.TemplateResolver,
) -> list[PlanError]:
    """A Plan from a template: the template found, the input's keys declared by its
    inputSchema, and what it runs judged as a plan of the Plan's own (each refusal of the
    template's steps says whose they are)."""
    ref = spec.template_ref
    assert ref is not None
    template = resolve(ref.kind, ref.name)
    if template is None:
        return [PlanError("no-template", None, "templateRef.name", plan_templates.missing(ref))]
    errors = [
        PlanError("template-input", None, f"input.{key}", message)
        for key, message in plan_templates.undeclared_keys(template, spec.input)
    ]
    expanded = plan_templates.expand(spec, template)
    inner = validate(expanded, resolve_capsule, policy, budget, resolve)
    label = ref.label()
    for e in inner:
        theirs = e.path.startswith(("steps", "finally", "output", "inputSchema"))
        errors.append(replace(e, message=f"{label}: {e.message}") if theirs else e)
    return errors


def _validate(checker: Checker) -> list[PlanError]:
    spec, name = checker.spec, checker.capsule_name
    if checker.capsule is None:
        checker.add(
            "no-capsule",
            None,
            "capsule",
            f"Capsule {name!r} not found: a plan runs only under a Capsule that grants what it "
            "uses (create it, or name another in spec.capsule / pass --capsule FILE)",
        )
    if len(spec.steps) > checker.policy.max_steps:
        checker.add(
            "limits",
            None,
            "steps",
            f"{len(spec.steps)} steps exceed the operator's limit of {checker.policy.max_steps}",
        )
    graph = Graph.build([s.id for s in spec.steps], [s.depends_on for s in spec.steps])
    seen: set[str] = set()
    for i, step in enumerate(spec.steps):
        path = f"steps[{i}]"
        if not i % BUDGET_EVERY:
            checker.check(path)
        if step.id in seen:
            checker.add(
                "duplicate-id", step.id, f"{path}.id", f"step id {step.id!r} is declared twice"
            )
        seen.add(step.id)
        check_step(checker, graph, step, path)
        check_bodies(checker, graph, i, step, path, seen)
    check_input(checker)
    if spec.workspace is not None and checker.capsule is not None:
        for where, message in workspace.problems(spec.workspace, checker.capsule, name):
            checker.add("workspace", None, f"workspace.{where}", message)
    check_templates(checker, graph)
    checker.settle_unless(graph)
    for cycle in graph.cycles():
        first = graph.index[cycle[0]]
        loop = " -> ".join(graph.cycle_path(cycle))
        checker.add(
            "cycle",
            cycle[0],
            f"steps[{first}].dependsOn",
            f"dependency cycle between steps {', '.join(cycle)} ({loop}, each waiting for the "
            "next); nothing could ever run",
        )
    check_finally(checker, seen)
    return checker.errors
