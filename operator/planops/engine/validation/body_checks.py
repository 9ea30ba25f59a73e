"""Seed 2 bodies (a decide's then/else, a map's or reduce's do): what may nest in them, ids
unique across the plan, and what a body's templates see (its own earlier steps, the scope of
its kind, input, and the steps its control step waits for). Each body step is also judged like
a top-level step (step_checks), under its qualified id."""

from __future__ import annotations

from planops.api.models import Step
from planops.engine import bodies, templates
from planops.engine.dag import Graph
from planops.engine.validation.checker import Checker, Unless
from planops.engine.validation.step_checks import check_step
from planops.engine.validation.template_checks import (
    check_step_templates,
    field_problem,
    reserved_id,
)


def check_bodies(c: Checker, graph: Graph, i: int, step: Step, path: str, seen: set[str]) -> None:
    """Seed 2 body rules: what may nest, ids unique across the plan, what a body's templates
    see (earlier body steps, the scope of its kind, input, and the steps its control step
    depends on); each body step is checked like a top-level step."""
    if step.decide is None and step.map is None and step.reduce is None:
        return
    for kind in bodies.BODY_KINDS:
        for key, body in bodies.bodies(kind, getattr(step, kind)).items():
            where = f"{path}.{kind}.{key}"
            try:
                steps = bodies.parse(body)
            except bodies.BodyError as e:
                c.add("control", step.id, f"{where}{e.path}", str(e))
                continue
            single = isinstance(body, dict)
            body_graph = Graph.build([s.id for s in steps], [s.depends_on for s in steps])
            scope = {"input"}
            if kind != "decide":
                scope |= {"item", "index", "length"}
            if kind == "reduce":
                scope.add("accumulator")
            earlier: dict[str, Step] = {}  # the body's steps before this one (grown, not rebuilt)
            for j, b in enumerate(steps):
                bpath = where if single else f"{where}[{j}]"
                c.tick(bpath)
                name = bodies.qualified(step.id, key, b.id)
                nested = [k for k in bodies.BODY_KINDS if getattr(b, k) is not None]
                if nested:
                    c.add(
                        "control",
                        name,
                        f"{bpath}.{nested[0]}",
                        f"a body may not contain {nested[0]} (seed 2 body rules): run nested "
                        "control flow as a capsule step's plan",
                    )
                if b.exit is not None and kind != "decide":
                    c.add(
                        "control",
                        name,
                        f"{bpath}.exit",
                        "exit is allowed in decide branches only, not in map or reduce bodies",
                    )
                if not single:
                    if b.id in seen:
                        c.add(
                            "duplicate-id",
                            name,
                            f"{bpath}.id",
                            f"step id {b.id!r} is declared twice (ids are unique across the "
                            "plan, bodies included)",
                        )
                    seen.add(b.id)
                    if b.id in templates.RESERVED:
                        reserved_id(c, name, bpath)
                named = b.model_copy(update={"id": name})
                check_step(c, body_graph, named, bpath)

                def root_problem(
                    t: templates.Template,
                    earlier: dict[str, Step] = earlier,
                    kind: str = kind,
                    scope: set[str] = scope,
                ) -> str | Unless | None:
                    return _body_root_problem(c, graph, i, kind, scope, earlier, t)

                check_step_templates(c, named, bpath, root_problem)
                earlier[b.id] = b


def _body_root_problem(
    c: Checker,
    graph: Graph,
    i: int,
    kind: str,
    scope: set[str],
    earlier: dict[str, Step],
    t: templates.Template,
) -> str | Unless | None:
    if t.root in templates.RESERVED:
        if t.root in scope:
            return None
        if t.root == "accumulator":
            return f"{t.text}: {{{{accumulator}}}} exists only in reduce bodies"
        return f"{t.text}: {{{{{t.root}}}}} exists only inside map and reduce bodies"
    if t.root in earlier:
        return field_problem(t, earlier[t.root])
    if t.root in graph.index:
        problem = field_problem(t, c.spec.steps[graph.index[t.root]])
        if problem is None:
            return Unless(
                i,
                graph.index[t.root],
                f"{t.text} uses step {t.root!r}, which the {kind} step {c.spec.steps[i].id!r} "
                "does not depend on (add it to its dependsOn)",
            )
        return problem
    if t.root in c.outer:  # a finally step's body: the main steps have settled
        return field_problem(t, c.outer[t.root])
    return (
        f"{t.text}: no step {t.root!r} here (a body sees input, its own earlier steps and the "
        "steps its control step depends on)"
    )
