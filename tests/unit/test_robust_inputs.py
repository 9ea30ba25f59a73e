"""Hostile plans get a clear refusal, never a traceback: the validator, the admission webhook and
the reconciler (all `parse_document` + `validate`) stay standing whatever a plan holds."""

from __future__ import annotations

import asyncio
import datetime
from typing import Any

import pytest

from planops.api import PlanSpec, parse_document, quantity, values
from planops.engine import Run, control, validate
from planops.reconciler.reconcile import Reconciler

from .fakekube import FakeKube
from .helpers import capsule, resolver

DEEP = 1000  # past Python's recursion limit: any recursive walk of it raises RecursionError


def nested(depth: int, leaf: Any = "x") -> Any:
    """`leaf` inside `depth` objects and arrays, alternating."""
    value = leaf
    for n in range(depth):
        value = {"a": value} if n % 2 else [value]
    return value


def keyword_chain(keyword: str, depth: int) -> dict[str, Any]:
    """A JSON Schema nested through one keyword: {"not": {"not": ... {}}}, `depth` objects."""
    schema: dict[str, Any] = {}
    for _ in range(depth - 1):
        schema = {keyword: schema}
    return schema


def nested_properties(depth: int) -> dict[str, Any]:
    """An object schema of objects ..., `depth` levels deep (each property adds two)."""
    schema: dict[str, Any] = {"type": "string"}
    for _ in range((depth - 1) // 2):
        schema = {"type": "object", "properties": {"a": schema}}
    return schema


def bare(**fields: Any) -> dict[str, Any]:
    return {"id": "p", "steps": [], **fields}


def one_step(**step: Any) -> dict[str, Any]:
    return bare(steps=[{"id": "a", **step}])


#: (where the deep value sits, a document with it there, the path the refusal names)
PLACES = [
    ("step input", lambda v: one_step(tool="notes", input=v), "steps[0].input"),
    ("plan input", lambda v: bare(input={"x": v}), "input"),
    ("plan output", lambda v: bare(output={"x": v}), "output"),
    (
        "map.over",
        lambda v: one_step(map={"over": v, "do": {"shell": "echo {{item}}"}}),
        "steps[0].map",
    ),
    ("filter", lambda v: one_step(filter={"over": v, "where": {}}), "steps[0].filter"),
    (
        "decide",
        lambda v: one_step(decide={"if": {"value": v, "op": "eq", "to": 1}, "then": {}}),
        "steps[0].decide",
    ),
    ("exit output", lambda v: one_step(exit={"status": "success", "output": v}), "steps[0].exit"),
    ("ask default", lambda v: one_step(ask={"prompt": "?", "default": v}), "steps[0].ask"),
    ("onError", lambda v: one_step(shell="true", onError=v), "steps[0].onError"),
    (
        "a map body's input",
        lambda v: one_step(map={"over": [1], "do": [{"id": "b", "tool": "notes", "input": v}]}),
        "steps[0].map",
    ),
]
SCHEMAS = [
    ("properties", nested_properties),
    ("not", lambda d: keyword_chain("not", d)),
    ("items", lambda d: keyword_chain("items", d)),
]


def refusal(doc: dict[str, Any]) -> tuple[str, str, str]:
    """The one problem parse_document finds, as (code, path, message)."""
    parsed, problems = parse_document(doc)
    assert parsed is None
    (p,) = problems
    return p.code, p.path, p.message


@pytest.mark.parametrize(("where", "build", "path"), PLACES, ids=[p[0] for p in PLACES])
def test_a_value_nested_a_thousand_deep_is_refused_with_its_field_path(where, build, path):
    code, where_, message = refusal(build(nested(DEEP)))
    assert (code, where_) == ("limits", path)
    assert "nested deeper than 64 levels" in message


@pytest.mark.parametrize(("kind", "build"), SCHEMAS, ids=[s[0] for s in SCHEMAS])
def test_an_input_schema_nested_a_thousand_deep_is_refused(kind, build):
    assert refusal(bare(inputSchema=build(DEEP)))[:2] == ("limits", "inputSchema")


def test_a_document_nested_deep_outside_any_value_is_refused_too():
    code, path, message = refusal({**bare(), "metadata": nested(DEEP)})
    assert code == "limits" and path.startswith("metadata")
    assert "nested deeper than 80 levels" in message


@pytest.mark.parametrize(("where", "build", "path"), PLACES, ids=[p[0] for p in PLACES])
def test_the_validator_refuses_deep_values_of_a_spec_built_in_python(where, build, path):
    """A PlanSpec that did not come through parse_document (the CLI's --input merges values into
    one) is judged by the same rule, before any recursive check."""
    doc = build(nested(DEEP))
    spec = PlanSpec.model_validate({k: v for k, v in doc.items() if k != "id"})
    errors = validate(spec, resolver())
    assert [(e.code, e.path) for e in errors] == [("limits", path)]
    assert "nested deeper than 64 levels" in errors[0].message


def test_the_validator_refuses_deep_values_only_once_per_field():
    spec = PlanSpec.model_validate(
        {
            "input": {"x": nested(DEEP)},
            "steps": [{"id": "a", "tool": "notes", "input": nested(DEEP)}],
        }
    )
    errors = validate(spec, resolver())
    assert [(e.code, e.step, e.path) for e in errors] == [
        ("limits", None, "input"),
        ("limits", "a", "steps[0].input"),
    ]


def test_the_limit_is_64_levels_per_value():
    at = one_step(tool="notes", input=nested(64))
    past = one_step(tool="notes", input=nested(65))
    assert parse_document(at)[1] == []
    doc, _ = parse_document(past)  # within the document's bound: the validator says it
    assert doc is not None
    errors = validate(doc.spec, resolver())  # type: ignore[union-attr]
    assert [(e.code, e.path) for e in errors] == [("limits", "steps[0].input")]


def _with_stack_used(frames: int, call: Any) -> Any:
    """`call()` with `frames` frames already on the stack, as under the operator's own
    (asyncio, kopf, the webhook server)."""
    if frames:
        return _with_stack_used(frames - 1, call)
    return call()


def test_a_plan_at_the_limit_everywhere_is_judged_and_run_with_stack_to_spare():
    """The bound must leave the deepest walks (jsonschema checking a schema, the template walks,
    the decider rendering an input) within Python's recursion limit, even with 250 frames
    already used."""
    spec = PlanSpec.model_validate(
        {
            "inputSchema": keyword_chain("not", 63),  # the meta-schema check: the deepest walk
            "input": {"x": nested(63)},
            "output": {"x": nested(63, "{{input.x}}")},
            "steps": [
                {"id": "a", "tool": "notes", "input": nested(64, "{{input.x}}")},
                {
                    "id": "b",
                    "filter": {
                        "over": nested(63, "{{input.x}}"),
                        "where": {"value": "{{item}}", "op": "not_empty"},
                    },
                },
                {
                    "id": "c",
                    "map": {
                        "over": [1],
                        "do": {"tool": "notes", "input": nested(61, "{{a.output}}")},
                    },
                    "dependsOn": ["a"],
                },
            ],
        }
    )
    assert all(values.problem(v) is None for v in (spec.input, spec.input_schema, spec.output))
    assert _with_stack_used(250, lambda: validate(spec, resolver())) == []
    spec = spec.model_copy(update={"input": {"x": "s"}})  # a deep input spliced is deeper still
    decision = _with_stack_used(250, lambda: Run("p", spec).decide(0.0))
    first = decision.dispatch[0]
    assert first.step.id == "a" and values.problem(first.input) is None


def test_values_that_json_has_no_meaning_for_are_refused():
    """From a Python caller (the CLI refuses them when it reads YAML, with a line and column)."""
    for value, code, message in [
        (datetime.date(2024, 1, 1), "schema", "a date is no JSON value"),
        ({1: "x"}, "schema", "a key is an int, not a string"),
        (float("nan"), "schema", "nan is no JSON number"),
        ({"big": 10**5000}, "limits", "a number of more than 4,000 digits"),
        ({"s": {"a", "b"}}, "schema", "a set is no JSON value"),
    ]:
        code_, path, message_ = refusal(one_step(tool="notes", input={"v": value}))
        assert (code_, message_) == (code, message)
        assert path.startswith("steps[0].input.v")


def test_a_cyclic_value_is_refused_as_endless_nesting():
    loop: list[Any] = []
    loop.append(loop)
    assert refusal(one_step(tool="notes", input=loop))[:2] == ("limits", "steps[0].input")


def test_the_reconciler_judges_a_deep_plan_object_without_raising():
    """The operator's path (and the admission webhook's): the API object as parsed dicts."""

    kube = FakeKube()
    kube.put("capsule", {"metadata": {"name": "default"}, "spec": capsule().dump()})
    plan = {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": {"name": "deep", "namespace": "ns"},
        "spec": {"steps": [{"id": "a", "tool": "notes", "input": nested(900)}]},
    }
    spec, _, errors = asyncio.run(Reconciler(kube).judge(plan))
    assert spec is None
    assert [(e.code, e.path) for e in errors] == [("limits", "spec.steps[0].input")]
    assert "nested deeper than 64 levels" in errors[0].message


# -- JSON Schemas whose $refs never end ---------------------------------------------------------


@pytest.mark.parametrize(
    ("schema", "why"),
    [
        ({"$ref": "#"}, "recursed too deeply"),
        ({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"}, "recursed too deeply"),
        ({"$ref": "https://example.com/schema.json"}, "never retrieves schemas"),
        ({"$ref": "#/nowhere"}, "resolves only inside the schema"),
    ],
)
def test_an_input_schema_whose_refs_cannot_be_applied_is_refused(schema, why):
    doc, _ = parse_document(bare(inputSchema=schema, input={"a": 1}))
    assert doc is not None
    errors = validate(doc.spec, resolver())  # type: ignore[union-attr]
    assert [(e.code, e.path) for e in errors] == [("input-schema", "inputSchema")]
    assert why in errors[0].message


def test_an_ask_whose_output_schema_loops_is_refused_and_never_judges_answers():
    schema = {"type": "object", "properties": {"ok": {"type": "string"}}, "$ref": "#"}
    ask = {"prompt": "?", "outputSchema": schema, "whenUnanswered": "default", "default": {}}
    errors = validate(PlanSpec.model_validate({"steps": [{"id": "q", "ask": ask}]}), resolver())
    assert [(e.code, e.path) for e in errors] == [("control", "steps[0].ask.outputSchema")]
    assert "recursed too deeply" in errors[0].message
    # a question stored before this check: an answer is refused with the reason, not a crash
    looping = {"type": "object", "properties": {"ok": {"$ref": "#/properties/ok"}}}
    assert "recursed too deeply" in (control.answer_problem(looping, {"ok": "y"}) or "")


def test_an_ask_whose_output_schema_is_no_schema_is_refused():
    schema = {"type": "object", "properties": {"ok": {"type": "string", "pattern": "("}}}
    errors = validate(
        PlanSpec.model_validate(
            {"steps": [{"id": "q", "ask": {"prompt": "?", "outputSchema": schema}}]}
        ),
        resolver(),
    )
    assert [(e.code, e.path) for e in errors] == [
        ("control", "steps[0].ask.outputSchema.properties.ok.pattern")
    ]
    assert "not linear-time regex syntax (RE2)" in errors[0].message


# -- quantities ----------------------------------------------------------------------------------

NOT_QUANTITIES = ["1e999999999", "1e-999999999", "NaN", "Infinity", "9" * 5000, "9" * 5000 + "Ki"]


@pytest.mark.parametrize("text", NOT_QUANTITIES, ids=lambda t: t[:14])
@pytest.mark.parametrize("key", ["cpu", "memory"])
@pytest.mark.parametrize("part", ["requests", "limits"])
def test_a_quantity_beyond_meaning_is_refused_as_limits_with_its_path(text, key, part):
    doc, problems = parse_document(one_step(shell="true", resources={part: {key: text}}))
    assert doc is not None, problems
    errors = validate(doc.spec, resolver())  # type: ignore[union-attr]
    assert [(e.code, e.path) for e in errors] == [("limits", f"steps[0].resources.{part}.{key}")]
    assert "quantit" in errors[0].message


def test_a_quantity_beyond_meaning_does_not_break_the_ceiling_check():
    """The operator's --max-cpu / a Capsule's maxResources compare every step's limits."""
    from planops.engine import Policy  # noqa: PLC0415

    spec = PlanSpec.model_validate(
        {"steps": [{"id": "a", "shell": "true", "resources": {"limits": {"cpu": "1e999999999"}}}]}
    )
    errors = validate(spec, resolver(), Policy(max_cpu="4", max_memory="1Gi"))
    assert [(e.code, e.path) for e in errors] == [("limits", "steps[0].resources.limits.cpu")]


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("1e999999999", "too large"),
        ("1e-999999999", "too small"),
        ("8Ei", "too large"),
        ("0.1n", "too small"),
        ("NaN", "not a non-negative quantity"),
        ("Infinity", "not a non-negative quantity"),
        ("9" * 5000, "5000 characters"),
        ("9" * 30, "too large"),
    ],
    ids=lambda t: str(t)[:14],
)
def test_quantity_parse_raises_value_error_with_a_reason(text, why):
    with pytest.raises(ValueError, match=why):
        quantity.parse(text)


def test_quantity_parse_refuses_a_huge_integer_without_printing_it():
    with pytest.raises(ValueError, match="too large"):
        quantity.parse(10**5000)


@pytest.mark.parametrize(
    ("text", "value"),
    [("64Mi", 64 * 2**20), ("500m", 0.5), ("1.5G", 1.5e9), ("0", 0), ("7Ei", 7 * 2**60), (2, 2)],
)
def test_quantities_that_mean_something_still_parse(text, value):
    assert float(quantity.parse(text)) == value


def test_the_webhook_compares_specs_too_deep_to_compare_as_changed():
    """An UPDATE's old and new spec are compared first (an unchanged spec is admitted): deep
    ones are judged instead, and the validator refuses them, rather than answering 500."""
    from planops.handlers.webhook import unchanged  # noqa: PLC0415

    deep_spec = {"steps": [{"id": "a", "tool": "notes", "input": nested(5000)}]}
    other = {"steps": [{"id": "a", "tool": "notes", "input": nested(5000)}]}
    assert unchanged({"spec": deep_spec}, {"spec": other}) is False
    assert unchanged({"spec": {"steps": []}}, {"spec": {"steps": []}}) is True
    assert unchanged(None, {"spec": {}}) is False


# -- the local runner: a step that cannot start fails, the run goes on ------------------------


def _run_local(spec: PlanSpec, cap: Any) -> Any:
    from planops.runners.local import LocalRunner  # noqa: PLC0415

    return asyncio.run(LocalRunner({"default": cap}).run("p", spec))


def test_a_shell_line_with_a_nul_byte_is_refused():
    errors = validate(
        PlanSpec.model_validate({"steps": [{"id": "a", "shell": "echo a\0b"}]}), resolver()
    )
    assert [(e.code, e.path) for e in errors] == [("shell-syntax", "steps[0].shell")]


def test_a_word_rendered_with_a_nul_byte_fails_its_step_not_the_run():
    spec = PlanSpec.model_validate(
        {
            "input": {"x": "a\0b"},
            "steps": [
                {"id": "a", "shell": "echo {{input.x}}", "onError": "continue"},
                {"id": "b", "shell": "echo after", "dependsOn": ["a"]},
            ],
        }
    )
    assert validate(spec, resolver()) == []
    report = _run_local(spec, capsule())
    a, b = report.steps
    assert (a.status, a.error) == ("failed", "cannot start: a word of the command holds a NUL byte")
    assert b.status == "success"


def test_a_binary_that_cannot_be_executed_fails_its_step(tmp_path):
    script = tmp_path / "not-executable"
    script.write_text("#!/bin/sh\necho hi\n")  # no x bit
    spec = PlanSpec.model_validate({"steps": [{"id": "a", "shell": str(script)}]})
    report = _run_local(spec, capsule(shell={"allow": [str(script)]}))
    (a,) = report.steps
    assert a.status == "failed" and a.error is not None and a.error.startswith("cannot start")


def test_a_capsules_memory_default_beyond_meaning_fails_the_step_with_its_reason():
    spec = PlanSpec.model_validate({"steps": [{"id": "a", "shell": "echo hi"}]})
    cap = capsule(resources={"limits": {"memory": "1e999999999"}})
    (a,) = _run_local(spec, cap).steps
    assert a.status == "failed" and "too large" in (a.error or "")
