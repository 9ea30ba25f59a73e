"""Seed 1 references: whole-string only, any depth of input, resolved at dispatch."""

import pytest

from planops.engine.references import UnsettledReference, parse, resolve_input

SETTLED = {"build": ("success", "built ok"), "skip": ("skipped", None)}


def test_whole_string_references_are_substituted_at_any_depth():
    value = {"log": "$build.output", "deep": [{"s": "$build.status"}, "$skip.output"], "n": 3}
    assert resolve_input(value, SETTLED.get) == {
        "log": "built ok",
        "deep": [{"s": "success"}, None],
        "n": 3,
    }


def test_partial_strings_are_left_alone():
    value = {"a": "log: $build.output", "b": "$build.output!", "c": "$$build.output"}
    assert resolve_input(value, SETTLED.get) == value


def test_a_reference_to_an_unsettled_step_raises():
    with pytest.raises(UnsettledReference, match="'later'"):
        resolve_input({"x": "$later.output"}, SETTLED.get)


def test_parse():
    assert parse("$a-b_c.output").step == "a-b_c"
    assert parse("$4.99") is None
    assert parse("$a.output.x") is None
