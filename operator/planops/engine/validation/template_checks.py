"""Seed 2 templates (`{{...}}`), wherever a step may hold one: known roots; step results only
from steps the step waits for (a question answered for the whole plan at once, Checker.unless);
a result field the step has; never a shell step's first word (the allowlist is checked before
anything runs); a step's env values as its input (a script holds none: grant_checks); and no
step id shadowing a reserved root."""

from __future__ import annotations

from planops.api.models import PlanSpec, Step
from planops.engine import templates
from planops.engine.dag import Graph
from planops.engine.policy import BUDGET_EVERY
from planops.engine.validation.checker import Checker, RootCheck, Unless
from planops.engine.validation.input_checks import undeclared_input

#: steps whose result fields are readable directly ({{scan.results}}, {{pick.items}})
RESULT_KINDS = ("exit", "filter", "decide", "map", "reduce", "ask")


def field_problem(t: templates.Template, step: Step | None) -> str | None:
    if t.step_field in templates.STEP_FIELDS:
        return None
    if step is not None and any(getattr(step, k) is not None for k in RESULT_KINDS) and t.path:
        return None  # a control step's result field, e.g. {{scan.results}}
    return f"{t.text}: a step result has output, status, json or stderr"


def check_templates(c: Checker, graph: Graph) -> None:
    """Seed 2 templates: known roots, step results only from dependencies, never a shell step's
    first word; step ids may not shadow the reserved roots."""
    steps = c.spec.steps
    for i, step in enumerate(steps):
        path = f"steps[{i}]"
        if not i % BUDGET_EVERY:
            c.check(path)
        if step.id in templates.RESERVED:
            reserved_id(c, step.id, path)
        direct: set[str] | None = None

        def root_problem(
            t: templates.Template, i: int = i, step: Step = step
        ) -> str | Unless | None:
            nonlocal direct
            if t.root in c.outer and t.root not in graph.index:  # settled before finally steps
                return field_problem(t, c.outer[t.root])
            problem = _template_root_problem(c, graph, t)
            if problem is None and t.root not in templates.RESERVED:
                problem = field_problem(t, steps[graph.index[t.root]])
                if problem is None:
                    direct = set(step.depends_on) if direct is None else direct
                    if t.root in direct:
                        return None  # a direct dependency: nothing to ask the graph
                    return Unless(
                        i,
                        graph.index[t.root],
                        f"{t.text} uses step {t.root!r}, which this step does not depend on "
                        "(add it to dependsOn, directly or through another step)",
                    )
            return problem

        check_step_templates(c, step, path, root_problem)
    for where, t in templates.find(c.spec.output):
        if isinstance(t, templates.TemplateError):
            problem: str | None = str(t)
        else:
            problem = _template_root_problem(c, graph, t) or input_problem(c.spec, t)
            if problem is None and t.root in graph.index:
                problem = field_problem(t, steps[graph.index[t.root]])
        if problem:
            c.add("template", None, f"output{where}", problem)


def reserved_id(c: Checker, step_id: str, path: str) -> None:
    c.add(
        "template",
        step_id,
        f"{path}.id",
        f"step id {step_id!r} shadows a reserved template root ({', '.join(templates.RESERVED)})"
        + (": `$input.NAME` in an `if` reads the plan's input" if step_id == "input" else ""),
    )


def check_step_templates(c: Checker, step: Step, path: str, root_problem: RootCheck) -> None:
    """The templates of one step (not of its bodies), each root judged by `root_problem`."""
    found = [(f"{path}.input{w}", t) for w, t in templates.find(step.input)]
    if step.shell is not None:
        words = c.split(step.shell) or [] if "{{" in step.shell else []
        if words and "{{" in words[0]:
            c.add(
                "template",
                step.id,
                f"{path}.shell",
                "a template may not be the binary (the "
                "first word): the allowlist is checked before anything runs",
            )
        found += [(f"{path}.shell", t) for w in words[1:] for _, t in templates.find(w)]
    if step.env:
        found += [
            (f"{path}.env[{n}].value", t)
            for n, e in enumerate(step.env)
            if e.value is not None
            for _, t in templates.find(e.value)
        ]
    scoped: set[str] = set()  # fields where {{item}} / {{index}} exist
    job_step = (
        step.shell is not None
        or step.tool is not None
        or step.capsule is not None
        or step.template is not None
        or step.script is not None
    )
    for kind, fields in (
        ()
        if job_step
        else (  # a job step has no control grammar
            ("filter", ("over", "where")),
            ("exit", ("when", "message", "output")),
            ("ask", ("prompt", "default")),
            ("decide", ("if",)),
            ("map", ("over",)),
            ("reduce", ("over", "initial")),
        )
    ):
        spec = getattr(step, kind)
        if not isinstance(spec, dict):
            continue
        for f in fields:
            here = [(f"{path}.{kind}.{f}{w}", t) for w, t in templates.find(spec.get(f))]
            if kind == "filter" and f == "where":
                scoped = {w for w, _ in here}
            found += here
    for where, t in found:
        if isinstance(t, templates.TemplateError):
            c.add("template", step.id, where, str(t))
            continue
        if where in scoped and t.root in ("item", "index"):
            continue
        problem = root_problem(t) or input_problem(c.spec, t)
        if isinstance(problem, Unless):
            c.add_unless(problem, "template", step.id, where)
        elif problem:
            c.add("template", step.id, where, problem)


def input_problem(spec: PlanSpec, t: templates.Template) -> str | None:
    """`{{input.name}}` needs `name` declared (input_checks.undeclared_input)."""
    if t.root != "input" or not t.path:
        return None
    problem = undeclared_input(spec, t.path[0])
    return None if problem is None else f"{t.text}: {problem}"


def _template_root_problem(c: Checker, graph: Graph, t: templates.Template) -> str | None:
    if t.root == "input":
        return None
    if t.root in c.later:
        return f"{t.text}: {t.root!r} is a finally step, which runs after every main step"
    if t.root in templates.RESERVED:
        return f"{t.text}: {{{{{t.root}}}}} exists only inside map and reduce bodies"
    if t.root not in graph.index:
        return f"{t.text}: no step {t.root!r} and not a template root (input, or a step id)"
    return None
