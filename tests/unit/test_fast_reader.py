"""kubectl-plan's fast readers (cli/fast_readers.py): JSON by `json`, YAML by libyaml's parser under
the same composer and checks. Each must read a file exactly as the pure-Python reference reader
does - the same values, and for anything refused the reference reader's own error (text, line,
column) - only faster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from planops.cli import fast_readers, yaml_reader, yamljson
from planops.cli.inputs import InputError

from ..hypothesis_profiles import examples

ROOT = Path(__file__).resolve().parents[2]


def reference(text: str) -> list[Any]:
    return yaml_reader.compose(yaml_reader.Loader(text))


def outcome(read: Any, text: str) -> tuple[str, Any]:
    try:
        return "read", read(text)
    except InputError as e:
        return "refused", e.lines
    except Exception as e:  # the reference reader's own exceptions, by kind
        return "refused", type(e).__name__


def test_libyaml_is_there():
    """PyYAML's wheels carry libyaml: without it the reader is only as slow as it was."""
    assert yaml_reader.CLoader is not None


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(10**30), 10**30)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=25,
)


@settings(max_examples=examples(150), deadline=None)
@given(
    value=st.dictionaries(st.text(max_size=8), json_values, max_size=5),
    indent=st.sampled_from([None, 1, 2]),
)
def test_json_is_read_as_the_yaml_reader_reads_it(value: dict[str, Any], indent: int | None):
    text = json.dumps(value, indent=indent, ensure_ascii=False)
    fast = fast_readers.json_documents(text)
    try:
        slow = reference(text)
    except yaml.YAMLError:
        assert fast is None  # what the reference refuses is left to it
        return
    if fast is not None:
        assert fast == slow
        assert json.dumps(fast) == json.dumps(slow)  # the same types (1 vs 1.0, True vs 1)


@settings(max_examples=examples(150), deadline=None)
@given(value=st.dictionaries(st.text(max_size=8), json_values, max_size=5), flow=st.booleans())
def test_yaml_is_read_by_libyaml_as_by_the_reference_reader(value: dict[str, Any], flow: bool):
    text = yaml.safe_dump(value, default_flow_style=flow, allow_unicode=True)
    fast = outcome(lambda t: yaml_reader.compose(yaml_reader.CLoader(t)), text)
    assert fast == outcome(reference, text)


@settings(max_examples=examples(150), deadline=None)
@given(value=st.dictionaries(st.text(max_size=8), json_values, max_size=5), flow=st.booleans())
def test_yaml_is_read_from_libyamls_events_as_by_the_reference_reader(
    value: dict[str, Any], flow: bool
):
    text = yaml.safe_dump(value, default_flow_style=flow, allow_unicode=True)
    fast = fast_readers.event_documents(text)
    if "\t" in text:
        return  # never given to it (see _documents)
    kind, expected = outcome(reference, text)
    if kind == "refused":  # e.g. a key 0E0, which reads as a number to kubectl
        assert fast is None  # left to the composer, whose error is the one given
        return
    assert fast is not None, text  # a plain document: read by it, not left to the composer
    assert fast == expected
    assert json.dumps(fast) == json.dumps(expected)  # the same types


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_reads_the_same_through_libyaml(path: Path):
    text = path.read_text()
    assert yaml_reader.compose(yaml_reader.CLoader(text)) == reference(text)
    assert fast_readers.event_documents(text) == reference(text)
    assert yamljson.documents(text) == reference(text)


# What the reference reader refuses, or reads otherwise than `json` would, the fast readers leave
# to it: each of these gives exactly the reference reader's message (or value).
CASES = [
    '{\t"a": 1}',  # a tab between tokens: refused by the reference reader
    '{"k": "\\ud83d\\ude00"}',  # surrogate escapes: YAML decodes the halves one by one
    '{"' + "k" * 1100 + '": 1}',  # no YAML simple key
    '{"a"\n: 1}',  # the colon on another line
    '{"a": "\x7f"}',  # a character YAML does not allow
    '{"a": "x\x85y"}',  # NEL: a line break to YAML
    '{"a": "x\u2028y"}',
    '{"a": NaN}',
    '{"a": 1e999}',
    '{"a": ' + "9" * 4001 + "}",
    "[" * 100 + "]" * 100,  # deeper than MAX_DOCUMENT_DEPTH
    '{"a": 1} {"b": 2}',
    '{"a": 1, "a": 2}',  # the last one, as the reference reader keeps it
    "a: [1, 2\nb: 3",  # malformed YAML
    "a: !!set {x}\n",
    "a: &x [*x]\n",
    "a: 2024-01-01\nb: 1e5\nc: 12:30\nd: =\n",
    "a: |\n\tindented with a tab\n",
    # YAML the event reader reads, or leaves to the composer, as the reference reader does
    "a: 0777\nb: 0x1F\nc: 1_000\nd: 0b101\ne: -0o7\nf: +12\n",
    "a: yes\nb: Off\nc: ~\nd:\ne: ''\nf: null\ng: 1.5e3\nh: .5\ni: -.inf\n",
    "on: 1\n",  # a key that reads as a boolean
    "1: a\n",
    "? [a]\n: 1\n",  # a key that is an array
    "<<: {a: 1}\nb: 2\n",  # a merge key
    "a: <<\n",
    "a: !!str 1\nb: !!int '2'\n",
    "a: &x 1\nb: *x\n",
    "a: &x {b: 1}\n",  # an anchor without an alias
    "a: 1\na: 2\n",
    "--- \n...\n--- a\n--- {b: [1, 2]}\n",
    "",
    "# only a comment\n",
    "a: 'x'\nb: \"y\\u00e9\"\nc: >\n  folded\n  text\nd: |-\n  kept\n",
    "a: " + "9" * 4001 + "\n",
    "- " * 80 + "x\n",  # as deep as MAX_DOCUMENT_DEPTH (80), in block style
    "- " * 81 + "x\n",  # one deeper
    "{a: [b, {c: d}], e: f}\n",
    "a: [1, 2\n",
]


@pytest.mark.parametrize("text", CASES, ids=range(len(CASES)))
def test_the_fast_readers_give_the_reference_readers_answer(text: str):
    def parsed(read: Any) -> tuple[str, Any]:
        try:
            return "read", read(text)
        except Exception as e:
            return "refused", str(e)

    expected = parsed(reference)
    assert parsed(yamljson.documents) == expected
    try:
        yamljson.parse("f.yaml", text)
    except InputError as e:
        assert expected[0] == "refused" or e.lines  # the message names the file and line
        assert e.lines[0].startswith("f.yaml: ")


def test_a_refusal_keeps_its_line_and_column_and_field():
    text = "kind: Plan\nspec:\n  steps:\n    - id: a\n      input: {x: .nan}\n"
    with pytest.raises(InputError) as caught:
        yamljson.parse("p.yaml", text)
    assert caught.value.lines == [
        "p.yaml: line 5, column 18: spec.steps[0].input.x: "
        ".nan has no JSON meaning (quote it for the text)"
    ]
    as_json = json.dumps(
        {"spec": {"steps": [{"id": "a", "input": {"x": "y", "n": 10**4001}}]}}, indent=1
    )
    with pytest.raises(InputError) as caught:
        yamljson.parse("p.json", as_json)
    assert caught.value.lines[0].startswith(
        "p.json: line 8, column 11: spec.steps[0].input.n: a number of 4002 digits"
    )


def test_a_large_json_plan_is_read_by_json(monkeypatch: pytest.MonkeyPatch):
    steps = [
        {"id": f"s{i}", "shell": "echo hi", "dependsOn": [f"s{i - 1}"] if i else []}
        for i in range(2000)
    ]
    text = json.dumps(
        {"apiVersion": "planops.dev/v1alpha1", "kind": "Plan", "spec": {"steps": steps}}
    )

    def slow(*_: Any) -> Any:
        raise AssertionError("read by the YAML reader")

    monkeypatch.setattr(yaml_reader, "compose", slow)
    (doc,) = yamljson.documents(text)
    assert doc["spec"]["steps"][-1]["dependsOn"] == ["s1998"]


def test_a_large_yaml_plan_is_parsed_by_libyaml(monkeypatch: pytest.MonkeyPatch):
    text = yaml.safe_dump(
        {"spec": {"steps": [{"id": f"s{i}", "shell": "true"} for i in range(500)]}}
    )
    made: list[str] = []
    real = yaml_reader.compose
    monkeypatch.setattr(
        yaml_reader, "compose", lambda loader: made.append(type(loader).__name__) or real(loader)
    )
    assert len(yamljson.documents(text)[0]["spec"]["steps"]) == 500
    assert made == []  # read from libyaml's events: nothing composed
    aliased = "a: &x {b: 1}\nc: *x\n"  # aliases: composed over libyaml's parser
    assert yamljson.documents(aliased) == [{"a": {"b": 1}, "c": {"b": 1}}]
    assert made == ["_CLoaderImpl"]
