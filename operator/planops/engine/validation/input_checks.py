"""Seed 2's plan input: the input schema is a Draft 2020-12 schema and the input satisfies it
(every violation reported, with its path). Evaluated by engine.jsonschemas: patterns on RE2, no
remote references, the validator's budget ticking through the evaluation."""

from __future__ import annotations

from planops.engine.validation.checker import Checker


def check_input(c: Checker) -> None:
    spec = c.spec
    if spec.input_schema is None:
        return
    from planops.engine import jsonschemas  # noqa: PLC0415 - jsonschema: only for input schemas

    problems = jsonschemas.schema_problems(spec.input_schema)
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
