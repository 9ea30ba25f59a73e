"""Seed 2's plan input: the input schema is a Draft 2020-12 schema and the input satisfies it
(every violation reported, with its path); a capsule step's task text, which its child plan
takes as `input.objective`, against that plan's inputSchema; and a tool step's input against its
tool's inputSchema (engine.tool_inputs: what can be judged before the input is rendered).
Evaluated by engine.jsonschemas: patterns on RE2, no remote references, the validator's budget
ticking through the evaluation."""

from __future__ import annotations

from planops.api.capsule_models import Tool
from planops.api.models import PlanSpec, Step
from planops.engine import delegation, references, templates, tool_inputs
from planops.engine.validation.checker import Checker


def undeclared_input(spec: PlanSpec, name: str) -> str | None:
    """Why the plan's input `name` (read by `{{input.name}}` or `$input.name` in an `if`) is
    not declared, or None: it is in the inputSchema's properties, or given in `input` (`run
    --local --input name=...` gives it). Otherwise it could only fail at run time, after the
    steps before it ran."""
    if name in (spec.input or {}):
        return None
    schema = spec.input_schema
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if isinstance(properties, dict) and name in properties:
        return None
    if schema is None:
        fix = f"declare it in an inputSchema (properties: {{{name}: ...}}) or give it in input"
    else:
        fix = f"the inputSchema has no property {name!r}: add it there, or give it in input"
    return f"the plan declares no input {name!r}: {fix}"


def check_input(c: Checker) -> None:
    spec = c.spec
    if spec.input_schema is None:
        return
    from planops.engine import jsonschemas  # noqa: PLC0415 - jsonschema: only for input schemas

    problems = jsonschemas.schema_problems(spec.input_schema, lambda: c.tick("inputSchema"))
    for path, message in problems:
        where = ".".join(str(p) for p in path)
        c.add("input-schema", None, "inputSchema" + (f".{where}" if where else ""), message)
    if problems:
        return
    try:
        errors = jsonschemas.evaluate(
            spec.input_schema, spec.input or {}, tick=lambda: c.tick("inputSchema")
        )
    except jsonschemas.UnusableSchemaError as e:
        c.add("input-schema", None, "inputSchema", f"cannot be evaluated: {e}")
        return
    for err in sorted(errors, key=lambda e: list(map(str, e.path))):
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
        c.add("input-schema", None, f"input{where}", err.message)


def check_capsule_input(c: Checker, step: Step, path: str) -> None:
    """A capsule step's task text reaches its child plan as `input.objective` (engine.delegation):
    when the target Capsule (found through the resolver, and in spawn.allow: any other target is
    refused at dispatch) has a plan with an inputSchema, that input must satisfy it. A text known
    only at dispatch (a reference or a template) is held to the schema's type of `objective` here
    and judged in full when the child is validated."""
    target = step.capsule
    if target is None or c.resolve is None or c.capsule is None:
        return
    if target not in c.capsule.spawn.allow:
        return
    child = c.resolve(target)
    if child is None or child.plan is None or child.plan.input_schema is None:
        return
    from planops.engine import jsonschemas  # noqa: PLC0415 - jsonschema: only for input schemas

    schema = child.plan.input_schema
    where = f"{path}.input"
    if jsonschemas.schema_problems(schema, lambda: c.tick(where)):
        c.add(
            "capsule-plan-input",
            step.id,
            where,
            f"Capsule {target!r}'s plan has an inputSchema that is not a JSON Schema: it can "
            "take no input",
        )
        return
    text = delegation.objective(step.input)
    known = not any(references.walk(step.input)) and not any(templates.find(step.input))
    candidate = delegation.child_input(child.plan.input, text if known else "")
    try:
        errors = jsonschemas.evaluate(schema, candidate, tick=lambda: c.tick(where))
    except jsonschemas.UnusableSchemaError as e:
        c.add("capsule-plan-input", step.id, where, f"Capsule {target!r}'s inputSchema: {e}")
        return
    for err in sorted(errors, key=lambda e: list(map(str, e.path))):
        field = list(err.absolute_path)
        if not known and field[:1] == [delegation.OBJECTIVE] and err.validator != "type":
            continue  # depends on the text itself: judged when the child is validated
        at = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in field)
        c.add(
            "capsule-plan-input",
            step.id,
            where,
            f"Capsule {target!r}'s plan cannot take this step's task text as input.objective "
            f"(with the input its plan declares): input{at}: {err.message}",
        )


def check_tool_input(c: Checker, step: Step, path: str, tool: Tool) -> None:
    """A tool step's input against its tool's inputSchema: every violation of a literal input,
    with its path; of an input with templates or references, what no rendered value can change
    (engine.tool_inputs), and an input longer than a tool can be given, or costlier to check
    than dispatch will. Dispatch checks the rendered input again."""
    bad = tool_inputs.unusable(tool)
    where = f"{path}.input"
    if bad is not None:
        c.add(
            "tool-input",
            step.id,
            f"{path}.tool",
            f"{bad}: it can take no input (Capsule {c.capsule_name!r}'s owner must fix it)",
        )
        return
    from planops.engine import jsonschemas  # noqa: PLC0415 - jsonschema: only for input schemas

    try:
        found = list(tool_inputs.static_violations(tool, step.input, lambda: c.tick(where)))
    except jsonschemas.UnusableSchemaError as e:
        c.add("tool-input", step.id, f"{path}.tool", f"tool {tool.name!r}'s inputSchema: {e}")
        return
    for at, message in found:
        c.add(
            "tool-input",
            step.id,
            where + tool_inputs.where(at),
            f"{message} (tool {tool.name!r} takes only input its inputSchema allows)",
        )
