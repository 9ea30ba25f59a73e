"""The first check, before any other: a plan's values are JSON values nested at most
values.MAX_DEPTH deep. Every other check walks them recursively (references, templates,
jsonschema, messages that quote them), and so does the decider, so none may ever see one nested
without bound; a plan with any of these refusals is judged no further."""

from __future__ import annotations

import operator
from typing import Any

from planops.api import values
from planops.api.models import STEP_KINDS, PlanSpec
from planops.engine.errors import PlanError

#: A step's fields that hold JSON values of any shape (pydantic types them `Any`).
STEP_VALUES = (
    "input",
    *(k for k in STEP_KINDS if k not in ("tool", "shell", "script", "capsule")),
)
_step_values = operator.attrgetter(*STEP_VALUES, "on_error")


def value_problems(spec: PlanSpec) -> list[PlanError]:
    """Refusals of values that are no JSON values or nest deeper than values.MAX_DEPTH.

    Checked without recursion. One walk over all of them (each one level deeper inside it) says
    whether any is wrong; only then is each field walked on its own, to name it.
    """
    fields: list[Any] = [spec.input, spec.output, spec.input_schema]
    for step in (*spec.steps, *spec.finally_):
        fields += _step_values(step)
    todo = [v for v in fields if v is not None and v.__class__ is not str]
    if not todo or values.problem(todo, values.MAX_DEPTH + 1) is None:
        return []
    found: list[tuple[str | None, str, Any]] = [
        (None, "input", spec.input),
        (None, "output", spec.output),
        (None, "inputSchema", spec.input_schema),
    ]
    for where, steps in (("steps", spec.steps), ("finally", spec.finally_)):
        for i, step in enumerate(steps):
            found += [(step.id, f"{where}[{i}].{k}", getattr(step, k)) for k in STEP_VALUES]
            found.append((step.id, f"{where}[{i}].onError", step.on_error))
    errors = []
    for step_id, path, value in found:
        problem = values.problem(value)
        if problem is not None:
            where = path if problem.too_deep else values.dotted(problem.path, path)
            errors.append(PlanError(problem.code, step_id, where, problem.message))
    return errors
