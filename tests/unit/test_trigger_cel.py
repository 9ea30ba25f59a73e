"""PlanTriggers' CEL (planops.triggers.cel): filters and mappings evaluate as CEL says, and every
expression's cost is bounded (steps and bytes, shared by one delivery's expressions), measured."""

import time

import pytest

from planops.triggers import cel

PUSH = {
    "ref": "refs/heads/main",
    "after": "0" * 40,
    "repository": {"full_name": "o/r", "clone_url": "https://example.test/o/r.git"},
    "commits": [{"message": "fix", "id": str(i)} for i in range(2000)],
    "big": "a" * 500_000,
}


def act(body=PUSH, headers=None):
    return {"body": cel.to_cel(body), "headers": cel.to_cel(headers or {"x-github-event": "push"})}


def test_a_filter_and_a_mapping_read_the_body_and_headers():
    a = act()
    assert cel.evaluate("body.ref == 'refs/heads/main' && headers['x-github-event'] == 'push'", a)
    assert cel.evaluate("body.repository.clone_url", a) == "https://example.test/o/r.git"
    assert cel.evaluate("body.ref.startsWith('refs/tags/')", a) is False
    assert cel.evaluate("{'n': body.commits.size(), 'l': [1, 'x']}", a) == {
        "n": 2000,
        "l": [1, "x"],
    }


def test_a_missing_field_or_a_type_error_is_a_cel_error_not_a_crash():
    with pytest.raises(cel.CelError, match="no_such"):
        cel.evaluate("body.no_such", act())
    with pytest.raises(cel.CelError):
        cel.evaluate("body.ref + 1", act())
    with pytest.raises(cel.CelError, match="not a CEL expression"):
        cel.evaluate("body.ref ==", act())


def test_expressions_too_long_or_too_deep_are_refused_before_parsing():
    with pytest.raises(cel.CelError, match="longer than"):
        cel.compile_expression("1 + " * 1000 + "1")
    with pytest.raises(cel.CelError, match="nested deeper"):
        cel.compile_expression("(" * 30 + "1" + ")" * 30)
    # brackets inside a string literal do not count
    assert cel.evaluate("'" + "(" * 40 + "'", act()) == "(" * 40


@pytest.mark.parametrize(
    "bomb",
    [
        # quadratic comprehension: 2000 x 2000 iterations
        "body.commits.map(c, body.commits.map(d, c.message + d.message))",
        "body.commits.exists(c, body.commits.exists(d, d.id == 'x'))",
        # memory: each iteration doubles a 500 KB string
        "body.commits.map(c, body.big + body.big)",
        "body.commits.all(c, c.message.size() < 100) && body.commits.all(c, c.id != '')"
        " && body.commits.all(c, c.id != 'z')",
        # a catastrophic-backtracking pattern: RE2 is linear, and the text is charged first
        "body.commits.all(c, body.big.matches('^(a|aa)*b$'))",
    ],
)
def test_a_cost_bomb_stops_at_the_limit_in_bounded_time(bomb):
    t = time.process_time()
    with pytest.raises(cel.CostExceeded, match="cost limit"):
        cel.evaluate(bomb, act())
    # STEPS_MAX was chosen for about 0.4 s of CPU on the development machine; the bound here
    # leaves room for a slower CI
    assert time.process_time() - t < 5.0


def test_one_meter_is_shared_by_a_deliverys_expressions():
    meter = cel.Meter()
    a = act()
    expr = "body.commits.all(c, c.message.size() < 100)"
    cel.evaluate(expr, a, meter)
    with pytest.raises(cel.CostExceeded):
        for _ in range(10):
            cel.evaluate(expr, a, meter)


def test_or_true_does_not_hide_the_cost_limit():
    # CEL's || drops an error on one side when the other is true: the limit is no CEL error
    with pytest.raises(cel.CostExceeded):
        cel.evaluate("body.commits.exists(c, body.commits.exists(d, d.id == 'x')) || true", act())


@pytest.mark.parametrize(
    "bomb",
    [
        # deep equality of a payload referenced through a 2-entry map: its nodes were charged 2
        "body.commits.all(c, body == body)",
        "body.commits.all(c, body != {})",
        "body.commits.all(c, [body.wide] == [body.wide])",
        "body.commits.all(c, body.wide in [body.wide])",
        "body.commits.all(c, {'w': body.wide}.contains('x'))",
        "body.commits.all(c, string({'w': body.wide}) != '')",
    ],
)
def test_deep_comparisons_are_charged_the_whole_of_their_operands(bomb):
    # an author's own trigger and a signed delivery of theirs: before, `body == body` over a
    # 30,000-entry list nested one level down cost 2 bytes and 16 steps an iteration, and ran
    # 2,000 iterations of a deep comparison (minutes of the receiver's CPU for one delivery)
    body = {"wide": [0] * 30_000, "commits": [{"id": str(i)} for i in range(2000)]}
    t = time.process_time()
    with pytest.raises(cel.CostExceeded, match="bytes"):
        cel.evaluate(bomb, act(body))
    assert time.process_time() - t < 5.0


@pytest.mark.parametrize(
    "expr", ["double('1e400')", "1e308 * 10.0", "double('nan')", "-1e308 * 10.0"]
)
def test_a_number_json_cannot_hold_is_a_cel_error_not_infinity_in_the_plan(expr):
    # before, inf reached the Plan's input (as the text 'inf', or as Infinity, which the API
    # server cannot parse: a PlanInvalid with its parser's words)
    with pytest.raises(cel.CelError, match="not a JSON number"):
        cel.evaluate(expr, act())
