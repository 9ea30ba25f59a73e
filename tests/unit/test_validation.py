"""Every refusal of seed 1 ("What is refused before anything runs"), and planops' own."""

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from planops.api import parse_document
from planops.engine import CODES, Policy, capsules, validate

from ..hypothesis_profiles import examples
from .helpers import capsule, plan, resolver


def codes(spec, res=None):
    return [(e.code, e.step) for e in validate(spec, res or resolver())]


def test_a_valid_plan_has_no_errors():
    spec = plan(
        {"id": "list", "tool": "notes", "input": {"glob": "tests/**"}},
        {"id": "check", "shell": "sh -c 'cargo test --quiet'", "dependsOn": ["list"]},
        {
            "id": "note",
            "tool": "notes",
            "if": "$check.status == 'failed'",
            "input": {"body": "$check.output"},
        },
    )
    assert validate(spec, resolver()) == []


def test_an_empty_plan_is_valid():
    """'An empty list is a plan that completes having done nothing.'"""
    assert validate(plan(), resolver()) == []


def test_two_steps_with_the_same_id():
    assert codes(plan({"id": "a", "shell": "true"}, {"id": "a", "shell": "true"})) == [
        ("duplicate-id", "a")
    ]


def test_a_step_declaring_none_of_tool_shell_capsule():
    assert codes(plan({"id": "a"})) == [("step-kind", "a")]


def test_a_step_declaring_more_than_one_kind():
    errs = validate(plan({"id": "a", "shell": "true", "tool": "notes"}), resolver())
    assert [e.code for e in errs] == ["step-kind"]
    assert "tool and shell" in errs[0].message


def test_a_tool_step_naming_a_tool_not_in_the_inventory():
    errs = validate(plan({"id": "a", "tool": "nope"}), resolver())
    assert [(e.code, e.path) for e in errs] == [("unknown-tool", "steps[0].tool")]
    assert "notes" in errs[0].message  # says what exists


def test_a_tool_step_naming_submit_plan():
    """'A plan cannot submit a plan.'"""
    assert codes(plan({"id": "a", "tool": "submit-plan"})) == [("plan-in-plan", "a")]


def test_a_shell_step_whose_binary_is_not_allowed():
    errs = validate(plan({"id": "a", "shell": "rm -rf /"}), resolver())
    assert [(e.code, e.path) for e in errs] == [("shell-not-allowed", "steps[0].shell")]
    assert "'rm'" in errs[0].message


def test_the_binary_is_the_first_word_after_splitting_not_a_shell_parse():
    # `echo` is allowed; the `; rm` is an argument of echo, never a second command
    assert codes(plan({"id": "a", "shell": "echo hi; rm -rf /"})) == []
    assert codes(plan({"id": "a", "shell": "'rm' x"})) == [("shell-not-allowed", "a")]


def test_a_shell_line_that_cannot_be_split():
    assert codes(plan({"id": "a", "shell": "echo 'unterminated"})) == [("shell-syntax", "a")]
    assert codes(plan({"id": "a", "shell": "   "})) == [("shell-syntax", "a")]


def test_a_capsule_step_whose_input_is_neither_a_string_nor_an_objective():
    ok1 = plan({"id": "a", "capsule": "c", "input": "do it"})
    ok2 = plan({"id": "a", "capsule": "c", "input": {"objective": "do it"}})
    assert codes(ok1) == codes(ok2) == []
    for bad in ({"objective": 3}, {"objective": "x", "extra": 1}, ["x"], 5, None):
        assert codes(plan({"id": "a", "capsule": "c", "input": bad})) == [("capsule-input", "a")], (
            bad
        )


def test_a_depends_on_entry_naming_an_undeclared_step():
    errs = validate(plan({"id": "a", "shell": "true", "dependsOn": ["ghost"]}), resolver())
    assert [(e.code, e.path) for e in errs] == [("unknown-step", "steps[0].dependsOn[0]")]


def test_a_reference_naming_an_undeclared_step_in_input_at_any_depth_and_in_if():
    spec = plan(
        {"id": "a", "tool": "notes", "input": {"deep": [{"x": "$ghost.output"}]}},
        {"id": "b", "shell": "true", "if": "$phantom.status == 'success'"},
    )
    errs = validate(spec, resolver())
    assert [(e.code, e.path) for e in errs] == [
        ("unknown-step", "steps[0].input.deep[0].x"),
        ("unknown-step", "steps[1].if"),
    ]


def test_a_reference_field_other_than_output_or_status():
    spec = plan(
        {"id": "a", "shell": "true"}, {"id": "b", "tool": "notes", "input": {"x": "$a.stdout"}}
    )
    assert codes(spec) == [("reference-field", "b")]
    spec = plan({"id": "a", "shell": "true"}, {"id": "b", "shell": "true", "if": "$a.exit == '0'"})
    assert codes(spec) == [("reference-field", "b")]


def test_only_whole_string_references_are_references():
    spec = plan({"id": "a", "tool": "notes", "input": {"x": "cost: $ghost.output", "y": "$HOME"}})
    assert codes(spec) == []


def test_an_on_error_value_other_than_fail_skip_continue():
    assert codes(plan({"id": "a", "shell": "true", "onError": "retry"})) == [("on-error", "a")]
    for ok in ("fail", "skip", "continue"):
        assert codes(plan({"id": "a", "shell": "true", "onError": ok})) == []


def test_a_dependency_cycle_names_its_steps():
    spec = plan(
        {"id": "a", "shell": "true", "dependsOn": ["c"]},
        {"id": "b", "shell": "true", "dependsOn": ["a"]},
        {"id": "c", "shell": "true", "dependsOn": ["b"]},
        {"id": "d", "shell": "true", "dependsOn": ["d"]},
        {"id": "e", "shell": "true", "dependsOn": ["a"]},
    )
    errs = validate(spec, resolver())
    assert [(e.code, e.step) for e in errs] == [("cycle", "a"), ("cycle", "d")]
    assert "steps a, b, c (a -> c -> b -> a," in errs[0].message
    assert "d -> d" in errs[1].message


def test_a_malformed_if_is_refused():
    errs = validate(plan({"id": "a", "shell": "true", "if": "$a.status = 'x'"}), resolver())
    assert [e.code for e in errs] == ["condition"]


def test_a_missing_capsule_is_refused_and_other_errors_still_reported():
    errs = validate(
        plan({"id": "a", "shell": "rm x", "onError": "bad"}, capsule="nope"), capsules({})
    )
    assert [e.code for e in errs] == ["no-capsule", "on-error"]
    assert "Capsule 'nope' not found" in errs[0].message


def test_step_image_must_be_allowed_by_capsule_and_operator():
    res = resolver(default=capsule(images=["local/*"]))
    assert codes(plan({"id": "a", "shell": "true", "image": "local/busybox:1"}), res) == []
    assert codes(plan({"id": "a", "shell": "true", "image": "evil/miner:1"}), res) == [
        ("image-not-allowed", "a")
    ]


def test_every_refusal_is_reported_together():
    spec = plan(
        {"id": "a", "shell": "rm x"},
        {"id": "a", "tool": "submit-plan"},
        {"id": "b", "tool": "nope", "dependsOn": ["zz"], "onError": "x"},
        {"id": "c", "capsule": "k", "input": 3, "if": "$b.foo == 'x'"},
    )
    got = sorted({e.code for e in validate(spec, resolver())})
    assert got == sorted(
        [
            "shell-not-allowed",
            "duplicate-id",
            "plan-in-plan",
            "unknown-tool",
            "unknown-step",
            "on-error",
            "capsule-input",
            "reference-field",
        ]
    )


def test_every_code_is_documented():
    doc = (
        __import__("pathlib").Path(__file__).parents[2] / "docs" / "plan-language.md"
    ).read_text()
    missing = [c for c in CODES if f"`{c}`" not in doc]
    assert missing == []


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
step_like = st.fixed_dictionaries(
    {},
    optional={
        "id": st.sampled_from(["a", "b", "c", "1x", ""]) | st.text(max_size=4),
        "tool": st.sampled_from(["notes", "submit-plan", "x"]) | json_values,
        "shell": st.sampled_from(["echo hi", "rm", "'", "sh -c 'x'"]) | json_values,
        "capsule": st.text(max_size=3),
        "input": json_values | st.sampled_from(["$a.output", "$b.status", "$zz.x"]),
        "dependsOn": st.lists(st.sampled_from(["a", "b", "c", "q"]), max_size=3) | json_values,
        "if": st.sampled_from(["$a.status == 'x'", "$b.output > \"1\" || '' < ''", "&&", "'"])
        | st.text(max_size=10),
        "onError": st.sampled_from(["fail", "skip", "continue", "bad"]) | json_values,
        "retries": st.integers(-2, 5) | json_values,
    },
)


@settings(max_examples=examples(300), deadline=None)
@given(
    doc=st.one_of(
        json_values,
        st.fixed_dictionaries(
            {"id": st.text(max_size=3), "steps": st.lists(step_like, max_size=5) | json_values}
        ),
    )
)
def test_the_validator_never_raises_on_arbitrary_input(doc: Any):
    parsed, problems = parse_document(doc)
    if parsed is None:
        assert problems  # structural problems are reported, not raised
        return
    errs = validate(parsed.spec, resolver())  # type: ignore[union-attr]
    assert all(e.code in CODES for e in errs)


def test_resources_must_be_quantities_and_requests_not_above_limits():
    ok = {"requests": {"cpu": "100m", "memory": "32Mi"}, "limits": {"cpu": 1, "memory": "64Mi"}}
    assert codes(plan({"id": "a", "shell": "true", "resources": ok})) == []
    bad = {"requests": {"memory": "128Mi"}, "limits": {"cpu": "lots", "memory": "64Mi"}}
    errs = validate(plan({"id": "a", "shell": "true", "resources": bad}), resolver())
    assert [(e.code, e.path) for e in errs] == [
        ("limits", "steps[0].resources.limits.cpu"),
        ("limits", "steps[0].resources.requests.memory"),
    ]


def test_effective_limits_above_the_capsule_or_operator_ceiling_are_refused():
    cap = capsule(maxResources={"memory": "512Mi"}, resources={"limits": {"cpu": "3"}})
    spec = plan(
        {"id": "ok", "shell": "true"},
        {"id": "big", "shell": "true", "resources": {"limits": {"memory": "1Gi"}}},
    )
    errs = validate(spec, resolver(default=cap), Policy(max_cpu="2"))
    got = [(e.code, e.step, e.path, e.message) for e in errs]
    assert [g[:3] for g in got] == [
        ("limits", "ok", "steps[0].resources.limits.cpu"),
        ("limits", "big", "steps[1].resources.limits.cpu"),
        ("limits", "big", "steps[1].resources.limits.memory"),
    ]
    assert "a default" in got[0][3] and "the operator's maximum of 2" in got[0][3]
    assert "Capsule 'default''s maximum of 512Mi" in got[2][3]
    assert validate(plan({"id": "ok", "shell": "true"}), resolver(), Policy(max_memory="1Gi")) == []
