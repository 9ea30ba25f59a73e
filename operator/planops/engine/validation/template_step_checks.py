"""Template steps: `{id, template: NAME | {kind, name}, input: {...}}`. The template is found
(engine.plan_templates), not one the plan already runs inside (a cycle) and within the nesting
bound; the input is an object whose keys the template's inputSchema declares; and what the
template runs is judged as a plan of the caller's, under the caller's Capsule (a template
grants nothing), its input included when it holds no template or reference (else that part is
judged when the child plan is, once rendered). Each refusal is the step's, its message naming
the template and the template's own field."""

from __future__ import annotations

from collections.abc import Callable

from planops.api.models import PlanSpec, Step
from planops.engine import bodies, plan_templates, references, templates
from planops.engine.errors import PlanError
from planops.engine.policy import MAX_DEPTH
from planops.engine.validation.checker import Checker

#: judges a child plan under the caller's Capsule, inside the templates `chain`
Judge = Callable[[PlanSpec, tuple[str, ...]], list[PlanError]]


def check_template_steps(c: Checker, judge: Judge) -> None:
    for where, steps in (("steps", c.spec.steps), ("finally", c.spec.finally_)):
        for i, step in enumerate(steps):
            if step.template is not None:
                check_template_step(c, step, f"{where}[{i}]", judge)
            for b, bpath in body_steps(step, f"{where}[{i}]"):
                if b.template is not None:
                    check_template_step(c, b, bpath, judge)


def body_steps(step: Step, path: str) -> list[tuple[Step, str]]:
    """The steps of a control step's bodies (decide, map, reduce), with their paths, named as
    outside the body (`route.then.call`); a body that cannot be read is body_checks' refusal."""
    found = []
    for kind in bodies.BODY_KINDS:
        for key, body in bodies.bodies(kind, getattr(step, kind)).items():
            try:
                steps = bodies.parse(body)
            except bodies.BodyError:
                continue
            single = isinstance(body, dict)
            for j, b in enumerate(steps):
                where = f"{path}.{kind}.{key}" + ("" if single else f"[{j}]")
                named = b.model_copy(update={"id": bodies.qualified(step.id, key, b.id)})
                found.append((named, where))
    return found


def check_template_step(c: Checker, step: Step, path: str, judge: Judge) -> None:
    where = f"{path}.template"
    ref = plan_templates.template_of(step)
    if isinstance(ref, str):
        c.add("no-template", step.id, where, ref)
        return
    found = (c.templates or plan_templates.none)(ref.kind, ref.name)
    label = ref.label()
    if found is None:
        c.add("no-template", step.id, where, plan_templates.missing(ref))
        return
    if label in c.chain:
        loop = " -> ".join([*c.chain, label])
        c.add("no-template", step.id, where, f"templates call each other (cycle: {loop})")
        return
    if len(c.chain) + 1 >= MAX_DEPTH:
        c.add("no-template", step.id, where, f"plans nest at most {MAX_DEPTH} deep")
        return
    given = {} if step.input is None else step.input
    if not isinstance(given, dict):
        c.add(
            "template-input",
            step.id,
            f"{path}.input",
            "a template step's input is an object of the template's input values",
        )
        return
    for key, message in plan_templates.undeclared_keys(found, given):
        c.add("template-input", step.id, f"{path}.input.{key}", message)
    rendered_later = any(references.walk(given)) or any(templates.find(given))
    child = PlanSpec.model_validate(plan_templates.child_spec(found, c.capsule_name, given))
    for e in judge(child, (*c.chain, label)):
        if rendered_later and e.code == "input-schema" and e.path.startswith("input"):
            continue  # its value is known once rendered: judged when the child plan is
        at = f"{path}.input{e.path[len('input') :]}" if e.path.startswith("input") else where
        inner = "" if e.path.startswith("input") else f"{e.path}: "
        c.add(e.code, step.id, at, f"{label}: {inner}{e.message}")
