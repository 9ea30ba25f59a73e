"""`finally` steps (engine.finally_steps), judged as a plan of their own that runs after the main
steps: every check a main step passes (step_checks, body_checks, template_checks, cycles among
them), with the main steps and `plan` (their outcome) readable without a dependsOn, since all of
them have settled. Their own rules: ids unique across the whole plan; no `exit` (the main steps'
end is what started them); `plan` is no step id in a plan that has them; the plan's step count
includes them. (Main steps naming a finally step are refused in step_checks and template_checks,
through Checker.later.)"""

from __future__ import annotations

from dataclasses import replace

from planops.engine import finally_steps
from planops.engine.dag import Graph
from planops.engine.errors import PlanError
from planops.engine.policy import BUDGET_EVERY
from planops.engine.validation.body_checks import check_bodies
from planops.engine.validation.checker import Checker
from planops.engine.validation.step_checks import check_step
from planops.engine.validation.template_checks import check_templates


def check_finally(c: Checker, seen: set[str]) -> None:
    """`seen`: every id the main steps and their bodies declared."""
    spec = c.spec
    if not spec.finally_:
        return
    total = len(spec.steps) + len(spec.finally_)
    if len(spec.steps) <= c.policy.max_steps < total:
        c.add(
            "limits",
            None,
            "finally",
            f"{total} steps (finally steps included) exceed the operator's limit of "
            f"{c.policy.max_steps}",
        )
    for i, step in enumerate(spec.steps):
        if step.id == finally_steps.PLAN:
            _plan_is_reserved(c, f"steps[{i}].id")
    final = finally_steps.finally_spec(spec)
    sub = Checker(
        final,
        c.capsule_name,
        c.capsule,
        c.policy,
        budget=c.budget,
        deadline=c.deadline,
        resolve=c.resolve,
        outer={**{s.id: s for s in spec.steps}, finally_steps.PLAN: None},
    )
    graph = Graph.build([s.id for s in final.steps], [s.depends_on for s in final.steps])
    for i, step in enumerate(final.steps):
        path = f"finally[{i}]"
        if not i % BUDGET_EVERY:
            sub.check(path)
        if step.id in seen:
            sub.add(
                "duplicate-id",
                step.id,
                f"{path}.id",
                f"step id {step.id!r} is declared twice (ids are unique across steps and finally)",
            )
        seen.add(step.id)
        if step.id == finally_steps.PLAN:
            _plan_is_reserved(sub, f"{path}.id")
        if step.exit is not None:
            sub.add(
                "finally",
                step.id,
                f"{path}.exit",
                "a finally step cannot end the plan: finally steps run because the main steps "
                "ended (an exit belongs among them)",
            )
        check_step(sub, graph, step, path)
        check_bodies(sub, graph, i, step, path, seen)
    check_templates(sub, graph)
    sub.settle_unless(graph)
    for cycle in graph.cycles():
        sub.add(
            "cycle",
            cycle[0],
            f"finally[{graph.index[cycle[0]]}].dependsOn",
            f"dependency cycle between finally steps {', '.join(cycle)} "
            f"({' -> '.join(graph.cycle_path(cycle))}); nothing could ever run",
        )
    c.errors += [_under_finally(e) for e in sub.errors]


def _plan_is_reserved(c: Checker, where: str) -> None:
    c.add(
        "finally",
        finally_steps.PLAN,
        where,
        "in a plan with finally steps, 'plan' names the main steps' outcome ($plan.status): "
        "give this step another id",
    )


def _under_finally(e: PlanError) -> PlanError:
    """template_checks names a step by its place in the list it judged (`steps[i]`)."""
    if e.path.startswith("steps["):
        return replace(e, path="finally" + e.path[len("steps") :])
    return e
