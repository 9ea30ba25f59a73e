"""A step's results and artifacts (engine.step_files): only on steps that run a command (shell,
script, tool); names unique; an artifact's path inside the working directory; an input's `from`
exactly one {{<id>.artifacts.NAME}} of a step it waits for that declares it; and a repository
granted (the Capsule's artifactRepository, else the operator's default) before any artifact
moves. Codes `results` and `artifacts`."""

from __future__ import annotations

import difflib

from planops.api.models import Step
from planops.engine import step_files
from planops.engine.dag import Graph
from planops.engine.validation.checker import Checker, Unless

#: the kinds that run a command, the only ones with files to pass on
FILE_KINDS = ("shell", "script", "tool")


def did_you_mean(name: str, names: list[str]) -> str:
    """`: did you mean `x`?` when a declared name is close to `name`, else what is declared."""
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    if close:
        return f": did you mean {close[0]!r}?"
    return f" (it declares {', '.join(map(repr, names))})" if names else " (it declares none)"


def check_files(c: Checker, graph: Graph, i: int | None, step: Step, path: str) -> None:
    """`i`: the step's index in `graph` (None: a step the graph does not hold)."""
    outputs = step.outputs.artifacts if step.outputs is not None else []
    inputs = step.inputs.artifacts if step.inputs is not None else []
    if not (step.results or outputs or inputs):
        return
    if not c.policy.moves_files:
        field = "results" if step.results else "outputs" if outputs else "inputs"
        c.add(
            "results" if step.results else "artifacts",
            step.id,
            f"{path}.{field}",
            "this operator does not pass results or artifacts between step pods yet (run the "
            "plan with kubectl plan run --local, or pass values through outputs and a workspace)",
        )
        return
    if not any(getattr(step, k) is not None for k in FILE_KINDS):
        for field, declared in (
            ("results", step.results),
            ("outputs", outputs),
            ("inputs", inputs),
        ):
            if declared:
                code = "results" if field == "results" else "artifacts"
                c.add(
                    code,
                    step.id,
                    f"{path}.{field}",
                    f"{field} belong to a step that runs a command (shell, script or tool)",
                )
        return
    _names(c, step.id, f"{path}.results", "result", [r.name for r in step.results], "results")
    _names(
        c, step.id, f"{path}.outputs.artifacts", "artifact", [a.name for a in outputs], "artifacts"
    )
    for where, p in [
        (f"{path}.outputs.artifacts[{n}].path", a.path) for n, a in enumerate(outputs)
    ] + [(f"{path}.inputs.artifacts[{n}].path", a.path) for n, a in enumerate(inputs)]:
        if (problem := step_files.path_problem(p)) is not None:
            c.add("artifacts", step.id, where, problem)
    placed: dict[str, int] = {}
    for n, a in enumerate(inputs):
        if a.path in placed:
            c.add(
                "artifacts",
                step.id,
                f"{path}.inputs.artifacts[{n}].path",
                f"{a.path}: inputs.artifacts[{placed[a.path]}] is placed there too",
            )
        placed.setdefault(a.path, n)
        _check_from(c, graph, i, step, f"{path}.inputs.artifacts[{n}].from", a.from_)
    if (outputs or inputs) and c.capsule is not None:
        refused = step_files.repository_refusal(c.capsule, c.policy.artifact_repository)
        if refused is not None:
            field = "outputs" if outputs else "inputs"
            c.add(
                "artifacts",
                step.id,
                f"{path}.{field}",
                f"{refused} (Capsule {c.capsule_name!r}: grant one with spec.artifactRepository)",
            )


def _names(c: Checker, step_id: str, path: str, what: str, names: list[str], field: str) -> None:
    code = "results" if field == "results" else "artifacts"
    seen: set[str] = set()
    for n, name in enumerate(names):
        if name in seen:
            c.add(code, step_id, f"{path}[{n}].name", f"{what} {name!r} is declared twice")
        seen.add(name)


def _check_from(c: Checker, graph: Graph, i: int | None, step: Step, where: str, text: str) -> None:
    found = step_files.source(text)
    if found is None:
        c.add(
            "artifacts",
            step.id,
            where,
            f"{text!r}: an input's from is exactly one {{{{<id>.artifacts.NAME}}}}",
        )
        return
    root, name = found
    if root in c.later:
        c.add(
            "artifacts",
            step.id,
            where,
            f"{text}: {root!r} is a finally step, which runs after every main step",
        )
        return
    r = graph.index.get(root)
    producer = c.spec.steps[r] if r is not None and r < len(c.spec.steps) else c.outer.get(root)
    if producer is None:
        c.add("artifacts", step.id, where, f"{text}: no step {root!r}")
        return
    declared = [a.name for a in producer.outputs.artifacts] if producer.outputs is not None else []
    if name not in declared:
        c.add(
            "artifacts",
            step.id,
            where,
            f"{text}: step {root!r} declares no artifact {name!r}{did_you_mean(name, declared)}",
        )
        return
    if r is None or root in step.depends_on or i is None:
        return  # settled before this step (a finally step reading a main step), or direct
    c.add_unless(
        Unless(
            i,
            r,
            f"{text} uses step {root!r}, which this step does not depend on (add it to "
            "dependsOn, directly or through another step)",
        ),
        "artifacts",
        step.id,
        where,
    )
