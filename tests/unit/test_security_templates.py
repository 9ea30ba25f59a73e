"""Security: scanning templates in author-controlled text takes linear time.

The scanner used to be the regex below, which backtracks: `{{` and n spaces without `}}` cost
O(n^3) (3 kB: minutes). The regex stays here as the oracle of the language the scanner accepts.
"""

from __future__ import annotations

import re
import time

from hypothesis import given, settings
from hypothesis import strategies as st

from planops.api import structural
from planops.api.models import Step
from planops.engine import templates, validate

from ..hypothesis_profiles import examples
from .helpers import plan, resolver, time_bound

OLD_TEMPLATE = re.compile(r"\{\{\s*([^{}]*?)\s*\}\}")
#: generous: the old scanner needs minutes on these; the new one milliseconds
BOUND_SECONDS = time_bound(2.0)


def timed(fn, *args):
    t0 = time.process_time()
    result = fn(*args)
    return time.process_time() - t0, result


ADVERSARIAL = [
    "{{" + " " * 200_000,
    "{{ " * 70_000,
    "{{" + " " * 100_000 + "x" + " " * 100_000,
    "x{{ a" + " " * 200_000 + "}",
    "{" * 200_000,
]


SHELL_MAX = structural.schema(Step)["properties"]["shell"]["maxLength"]


def test_a_200_kb_adversarial_field_validates_in_well_under_two_seconds():
    for text in ADVERSARIAL:
        spec = plan(
            {"id": "a", "tool": "notes", "input": {"x": text}},
            # a shell line is bounded (the model's and the CRD's maxLength): the longest one
            {"id": "b", "shell": f"echo {text}"[:SHELL_MAX]},
            output={"o": text},
        )
        elapsed, errors = timed(validate, spec, resolver())
        assert elapsed < BOUND_SECONDS, (text[:10], elapsed)
        assert {e.code for e in errors} <= {"template", "tool-input"}
        # a tool takes at most 131,057 bytes of input (its PLANOPS_INPUT), whatever the text
        assert all("bytes as JSON" in e.message for e in errors if e.code == "tool-input")


def test_rendering_an_adversarial_string_is_linear_too():
    for text in ADVERSARIAL:
        elapsed, _ = timed(templates.render, text, lambda root: None)
        assert elapsed < BOUND_SECONDS


ALPHABET = st.sampled_from(
    ["{", "}", "{{", "}}", " ", "\t", "\n", "\u00a0", "a", ".", "x.y", "-", "input", "input.x.y.0"]
)


def old_find(text):
    return [(m.start(), m.end(), m.group(1)) for m in OLD_TEMPLATE.finditer(text)]


@settings(max_examples=examples(3000), deadline=None)
@given(st.lists(ALPHABET, max_size=24).map("".join))
def test_the_scanner_finds_exactly_what_the_old_regex_found(text):
    assert list(templates.scan(text)) == old_find(text)
    whole = OLD_TEMPLATE.fullmatch(text)
    assert templates._whole(text) == (whole.group(1) if whole else None)


@settings(max_examples=examples(1000), deadline=None)
@given(st.lists(ALPHABET, max_size=16).map("".join))
def test_find_and_render_behave_as_with_the_old_regex(text):
    steps = {"a": {"status": "success", "output": "A"}, "x": {"status": "ok", "output": '{"y": 1}'}}

    def lookup(root):
        return {"a": "A", "x": {"y": [1]}} if root == "input" else steps.get(root)

    def old_render(value):
        whole = OLD_TEMPLATE.fullmatch(value)
        if whole is not None:
            return templates._resolve(templates.parse(whole.group(1), value), lookup)
        if "{{" not in value:
            return value
        return OLD_TEMPLATE.sub(
            lambda m: templates.as_text(
                templates._resolve(templates.parse(m.group(1), m.group(0)), lookup)
            ),
            value,
        )

    def outcome(fn):
        try:
            return ("ok", fn(text))
        except templates.TemplateError as e:
            return ("error", str(e))

    assert outcome(lambda t: templates.render(t, lookup)) == outcome(old_render)
    found = [(w, str(t) if isinstance(t, Exception) else t) for w, t in templates.find(text)]
    old = []
    for m in OLD_TEMPLATE.finditer(text):
        try:
            old.append(("", templates.parse(m.group(1), m.group(0))))
        except templates.TemplateError as e:
            old.append(("", str(e)))
    if text.count("{{") != len(OLD_TEMPLATE.findall(text)):
        old.append(("", f"{text!r}: an unclosed or nested '{{{{'"))
    assert found == old
