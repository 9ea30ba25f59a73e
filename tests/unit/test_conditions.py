"""The `if` language of seed 1: operators, literals, precedence, text comparison."""

import pytest

from planops.engine.conditions import ConditionSyntaxError, evaluate, parse
from planops.engine.references import UnsettledReference

SETTLED = {"test": ("failed", "3 failures"), "lint": ("success", None), "n": ("success", "10")}


def ev(text: str) -> bool:
    return evaluate(parse(text), SETTLED.get)


def test_equal_and_not_equal():
    assert ev("$test.status == 'failed'")
    assert ev("$lint.status != 'failed'")
    assert not ev("$lint.status == 'failed'")


def test_greater_and_less_compare_text_not_numbers():
    """'Greater than, comparing text': '10' < '9' as text."""
    assert ev("$n.output < '9'")
    assert ev("'b' > 'a'")


def test_both_and_either():
    assert ev("$test.status == 'failed' || $lint.status == 'failed'")
    assert not ev("$test.status == 'failed' && $lint.status == 'failed'")


def test_and_binds_tighter_than_or():
    # true || (false && false) == true; (true || false) && false would be false
    assert ev("'a' == 'a' || 'a' == 'b' && 'a' == 'c'")
    assert not ev("'a' == 'b' && 'a' == 'a' || 'a' == 'c'")


def test_an_operator_inside_quotes_is_part_of_the_literal():
    assert ev("'a == b || c' == 'a == b || c'")
    assert ev("\"&&\" != '||'")


def test_a_null_output_compares_as_empty_text():
    assert ev("$lint.output == ''")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "$a.status",
        "$a.status = 'x'",
        "'x' == ",
        "'x' == 'y' &&",
        "'unterminated == 'x",
        "x == 'y'",
        "$a == 'x'",
        "('a' == 'a')",
        "'a' == 'a' 'b'",
        "'a' === 'a'",
        "!'a'",
    ],
)
def test_malformed_conditions_are_syntax_errors(text):
    with pytest.raises(ConditionSyntaxError):
        parse(text)


def test_adjacent_literals_are_refused():
    with pytest.raises(ConditionSyntaxError):
        parse("'it''s' != ''")


def test_an_unsettled_reference_raises_even_after_a_deciding_term():
    with pytest.raises(UnsettledReference):
        ev("'a' == 'a' || $ghost.status == 'x'")


def test_single_and_double_quoted_literals():
    assert ev('$test.status == "failed"')
    assert ev("'x' == \"x\"")
