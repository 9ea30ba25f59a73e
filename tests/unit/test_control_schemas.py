"""The control steps' field rules (decide, map, reduce, exit, filter), which are JSON Schemas
evaluated by the project's RE2-safe evaluator: each refusal keeps the code, step, field path and
message the hand-written checks gave (the table was recorded from them), in the same order."""

from __future__ import annotations

import pytest

from planops.engine import validate
from planops.engine.validation import control_checks as control

from .helpers import plan, resolver

T = {"tool": "notes"}

CASES = [
    ({"decide": "x"}, [("control", "s", "steps[0].decide", "expected an object")]),
    ({"decide": []}, [("control", "s", "steps[0].decide", "expected an object")]),
    (
        {"decide": {}},
        [
            ("control", "s", "steps[0].decide.if", "required field is missing"),
            ("control", "s", "steps[0].decide.then", "required field is missing"),
        ],
    ),
    (
        {"decide": {"if": {"value": 1, "op": "eq", "to": 1}}},
        [("control", "s", "steps[0].decide.then", "required field is missing")],
    ),
    (
        {"decide": {"then": {"tool": "notes"}}},
        [("control", "s", "steps[0].decide.if", "required field is missing")],
    ),
    (
        {
            "decide": {
                "if": {"value": 1, "op": "eq", "to": 1},
                "then": {"tool": "notes"},
                "zeta": 1,
                "alpha": 2,
            }
        },
        [
            ("control", "s", "steps[0].decide.alpha", "unknown field (allowed: if, then, else)"),
            ("control", "s", "steps[0].decide.zeta", "unknown field (allowed: if, then, else)"),
        ],
    ),
    ({"map": 3}, [("control", "s", "steps[0].map", "expected an object")]),
    (
        {"map": {}},
        [
            ("control", "s", "steps[0].map.over", "required field is missing"),
            ("control", "s", "steps[0].map.do", "required field is missing"),
        ],
    ),
    (
        {"map": {"over": 5, "do": {"tool": "notes"}}},
        [("control", "s", "steps[0].map.over", "a template (or a list) of the items")],
    ),
    (
        {"map": {"over": {"a": 1}, "do": {"tool": "notes"}, "concurrency": 5}},
        [("control", "s", "steps[0].map.over", "a template (or a list) of the items")],
    ),
    (
        {"map": {"over": [1], "do": {"tool": "notes"}, "concurrency": 0}},
        [("control", "s", "steps[0].map.concurrency", "an integer from 1 to 1000")],
    ),
    (
        {"map": {"over": [1], "do": {"tool": "notes"}, "concurrency": 1001}},
        [("control", "s", "steps[0].map.concurrency", "an integer from 1 to 1000")],
    ),
    (
        {"map": {"over": [1], "do": {"tool": "notes"}, "concurrency": True}},
        [("control", "s", "steps[0].map.concurrency", "an integer from 1 to 1000")],
    ),
    (
        {"map": {"over": [1], "do": {"tool": "notes"}, "concurrency": 2.0}},
        [("control", "s", "steps[0].map.concurrency", "an integer from 1 to 1000")],
    ),
    (
        {"map": {"over": [1], "do": {"tool": "notes"}, "concurrency": "3"}},
        [("control", "s", "steps[0].map.concurrency", "an integer from 1 to 1000")],
    ),
    (
        {"map": {"over": [1], "do": {"tool": "notes"}, "concurrency": None}},
        [("control", "s", "steps[0].map.concurrency", "an integer from 1 to 1000")],
    ),
    ({"map": {"over": [1], "do": {"tool": "notes"}, "concurrency": 1000}}, []),
    (
        {"map": {"over": [1], "do": {"tool": "notes"}, "initial": 1}},
        [
            (
                "control",
                "s",
                "steps[0].map.initial",
                "unknown field (allowed: over, do, concurrency)",
            )
        ],
    ),
    (
        {"reduce": {"over": [1], "do": {"tool": "notes"}, "initial": 0, "concurrency": 2}},
        [
            (
                "control",
                "s",
                "steps[0].reduce.concurrency",
                "unknown field (allowed: over, do, initial)",
            )
        ],
    ),
    (
        {"reduce": {"over": None, "do": {"tool": "notes"}}},
        [("control", "s", "steps[0].reduce.over", "a template (or a list) of the items")],
    ),
    ({"reduce": []}, [("control", "s", "steps[0].reduce", "expected an object")]),
    ({"exit": "stop"}, [("control", "s", "steps[0].exit", "expected an object")]),
    ({"exit": {}}, [("control", "s", "steps[0].exit.status", "required field is missing")]),
    (
        {"exit": {"status": "maybe"}},
        [("control", "s", "steps[0].exit.status", "status is 'maybe'; expected success or error")],
    ),
    # status null was let through (the exit then reported status None): refused now
    (
        {"exit": {"status": None}},
        [("control", "s", "steps[0].exit.status", "status is None; expected success or error")],
    ),
    (
        {"exit": {"status": 1, "extra": 2}},
        [
            (
                "control",
                "s",
                "steps[0].exit.extra",
                "unknown field (allowed: when, status, message, output)",
            ),
            ("control", "s", "steps[0].exit.status", "status is 1; expected success or error"),
        ],
    ),
    (
        {
            "exit": {
                "status": "success",
                "message": "m",
                "output": 1,
                "when": {"value": 1, "op": "empty"},
            }
        },
        [],
    ),
    ({"filter": 1}, [("control", "s", "steps[0].filter", "expected an object")]),
    (
        {"filter": {}},
        [
            ("control", "s", "steps[0].filter.over", "required field is missing"),
            ("control", "s", "steps[0].filter.where", "required field is missing"),
        ],
    ),
    (
        {"filter": {"over": [1], "where": {"value": 1, "op": "empty"}, "b": 1, "a": 2}},
        [
            ("control", "s", "steps[0].filter.a", "unknown field (allowed: over, where)"),
            ("control", "s", "steps[0].filter.b", "unknown field (allowed: over, where)"),
        ],
    ),
    # missing before unknown before a field's value, as the hand-written checks ordered them
    (
        {"map": {"zz": 1, "concurrency": 0, "aa": 2}},
        [
            ("control", "s", "steps[0].map.over", "required field is missing"),
            ("control", "s", "steps[0].map.do", "required field is missing"),
            ("control", "s", "steps[0].map.aa", "unknown field (allowed: over, do, concurrency)"),
            ("control", "s", "steps[0].map.zz", "unknown field (allowed: over, do, concurrency)"),
            ("control", "s", "steps[0].map.concurrency", "an integer from 1 to 1000"),
        ],
    ),
    # a filter's over was not checked before the schema (it failed at run time)
    (
        {"filter": {"over": 7, "where": {"value": 1, "op": "empty"}}},
        [("control", "s", "steps[0].filter.over", "a template (or a list) of the items")],
    ),
]


@pytest.mark.parametrize(("step", "expected"), CASES)
def test_control_field_refusals(step, expected):
    errors = validate(plan({"id": "s", **step}), resolver())
    assert [(e.code, e.step, e.path, e.message) for e in errors] == expected


def test_the_rules_are_json_schemas():
    """Each kind's fields are declared once, as a Draft 2020-12 schema (the unknown-field
    message lists the schema's properties in order)."""
    assert set(control.SCHEMAS) == {"decide", "map", "reduce", "exit", "filter"}
    assert list(control.SCHEMAS["exit"]["properties"]) == ["when", "status", "message", "output"]
    assert control.SCHEMAS["map"]["required"] == ["over", "do"]
    for schema in control.SCHEMAS.values():
        assert schema["additionalProperties"] is False


def test_a_body_steps_fields_are_judged_under_its_qualified_path():
    errors = validate(
        plan({"id": "m", "map": {"over": [1], "do": [{"id": "x", "exit": {"status": "no"}}]}}),
        resolver(),
    )
    got = [(e.code, e.path) for e in errors]
    assert ("control", "steps[0].map.do[0].exit.status") in got
