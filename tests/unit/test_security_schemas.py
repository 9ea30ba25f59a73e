"""Security: JSON Schemas written by plan authors cannot stall the validator or make it fetch.

Every schema a user writes (a plan's inputSchema, with the CLI's --input values; an ask's
outputSchema and its answers) is evaluated by planops.engine.jsonschemas: patterns on RE2, no
remote references, linear uniqueItems / unevaluated* bookkeeping.
"""

from __future__ import annotations

import http.server
import json
import threading
import time

import pytest

from planops.engine import control, validate

from .helpers import plan, resolver, run_local_cli, time_bound

EVIL = "^(a+)+$"
#: Python's re takes ~1 s at 24 characters and doubles with each one: 28 is ~16 s there
SLOW = "a" * 28 + "!"
BOUND_SECONDS = time_bound(2.0)


def judged(schema, value):
    spec = plan({"id": "a", "shell": "true"}, inputSchema=schema, input={"x": value})
    t0 = time.process_time()
    errors = validate(spec, resolver())
    elapsed = time.process_time() - t0
    assert elapsed < BOUND_SECONDS, elapsed
    return [(e.code, e.path, e.message) for e in errors]


NO_MATCH = [("input-schema", "input.x", f"{SLOW!r} does not match {EVIL!r}")]


@pytest.mark.parametrize(
    ("schema", "value", "expected"),
    [
        ({"type": "string", "pattern": EVIL}, SLOW, NO_MATCH),
        ({"patternProperties": {EVIL: False}}, {SLOW: 1}, []),
        (
            {"patternProperties": {EVIL: True}, "additionalProperties": False},
            {SLOW: 1},
            [
                (
                    "input-schema",
                    "input.x",
                    f"{SLOW!r} does not match any of the regexes: {EVIL!r}",
                )
            ],
        ),
        (
            {"patternProperties": {EVIL: True}, "unevaluatedProperties": {}},
            {SLOW: 1},
            [],
        ),
        # a $schema inside a subschema used to switch to the draft-07 validator and its `re`
        (
            {"$schema": "http://json-schema.org/draft-07/schema#", "pattern": EVIL},
            SLOW,
            NO_MATCH,
        ),
    ],
)
def test_an_exponential_pattern_runs_in_linear_time(schema, value, expected):
    assert judged({"properties": {"x": schema}}, value) == expected


def test_pattern_keeps_search_semantics_unanchored():
    schema = {"properties": {"x": {"type": "string", "pattern": "b+"}}}
    assert judged(schema, "abbbc") == []
    assert [c for c, _, _ in judged(schema, "ac")] == ["input-schema"]


@pytest.mark.parametrize(
    ("pattern", "why"),
    [("(a)\\1", "backreference"), ("a(?=b)", "lookahead"), ("(?<=a)b", "lookbehind")],
)
def test_a_pattern_re2_cannot_compile_is_refused_with_its_path(pattern, why):
    got = judged({"properties": {"x": {"type": "string", "pattern": pattern}}}, "ab")
    assert len(got) == 1, why
    code, path, message = got[0]
    assert (code, path) == ("input-schema", "inputSchema.properties.x.pattern")
    assert "linear-time regex syntax (RE2)" in message and repr(pattern) in message


def test_a_pattern_properties_key_re2_cannot_compile_is_refused_with_its_path():
    got = judged({"patternProperties": {"^(?!x)": {}}}, "ab")
    assert [(c, p) for c, p, _ in got] == [("input-schema", "inputSchema.patternProperties.^(?!x)")]
    assert "RE2" in got[0][2]


def test_other_schema_faults_keep_their_message():
    assert judged({"properties": {"x": {"minLength": "a"}}}, "") == [
        (
            "input-schema",
            "inputSchema.properties.x.minLength",
            "not a valid JSON Schema: 'a' is not of type 'integer'",
        )
    ]


class _Recorder(http.server.BaseHTTPRequestHandler):
    hits: list[str] = []  # noqa: RUF012

    def do_GET(self):  # the http.server API
        _Recorder.hits.append(self.path)
        body = json.dumps({"type": "string", "const": "from-the-network"}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def test_a_remote_ref_is_never_fetched():
    server = http.server.HTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/schema.json"
        got = judged({"properties": {"x": {"$ref": url}}}, "v")
    finally:
        server.shutdown()
        server.server_close()
    assert _Recorder.hits == []
    assert [(c, p) for c, p, _ in got] == [("input-schema", "inputSchema")]
    assert "never retrieves" in got[0][2]


def test_a_ref_cycle_is_an_error_not_a_crash():
    got = judged({"allOf": [{"$ref": "#"}]}, "v")
    assert [(c, p) for c, p, _ in got] == [("input-schema", "inputSchema")]


def test_unique_items_is_linear_and_keeps_json_equality():
    schema = {"properties": {"x": {"uniqueItems": True}}}
    assert judged(schema, [{"k": i} for i in range(30_000)]) == []
    assert judged(schema, [[i, {"k": str(i)}] for i in range(30_000)]) == []
    for dupes in ([1, 1.0], [{"a": 1, "b": [2]}, {"b": [2], "a": 1}], [[True], [True]]):
        assert [c for c, _, _ in judged(schema, dupes)] == ["input-schema"], dupes
    for distinct in ([1, True], [0, False], [[1], [True]], [{"a": 1}, {"a": True}], ["1", 1]):
        assert judged(schema, distinct) == [], distinct


def test_unevaluated_items_and_properties_are_linear():
    items = {"properties": {"x": {"prefixItems": [{}], "items": {}, "unevaluatedItems": False}}}
    assert judged(items, list(range(100_000))) == []
    props = {"properties": {"x": {"properties": {"a": {}}, "unevaluatedProperties": {}}}}
    assert judged(props, {f"k{i}": i for i in range(100_000)}) == []


ASK_SCHEMA = {"type": "object", "properties": {"ok": {"type": "string", "pattern": EVIL}}}


def test_an_ask_answer_is_checked_on_re2():
    t0 = time.process_time()
    problem = control.answer_problem(ASK_SCHEMA, {"ok": SLOW})
    assert time.process_time() - t0 < BOUND_SECONDS
    assert problem == f"ok: {SLOW!r} does not match {EVIL!r}"
    assert control.answer_problem(ASK_SCHEMA, {"ok": "aaa"}) is None


def test_an_ask_output_schema_re2_cannot_compile_is_refused():
    schema = {"type": "object", "properties": {"ok": {"type": "string", "pattern": "(a)\\1"}}}
    spec = plan({"id": "q", "ask": {"prompt": "sure?", "outputSchema": schema}})
    got = [(e.code, e.path) for e in validate(spec, resolver())]
    assert got == [("control", "steps[0].ask.outputSchema.properties.ok.pattern")]
    assert "RE2" in control.answer_problem(schema, {"ok": "aa"})


def test_an_ask_output_schema_that_is_not_a_schema_is_refused_not_a_crash():
    schema = {"type": "object", "properties": {"ok": {"type": "string", "minLength": "a"}}}
    spec = plan(
        {"id": "q", "ask": {"prompt": "sure?", "outputSchema": schema, "default": {"ok": "x"}}}
    )
    got = [(e.code, e.path) for e in validate(spec, resolver())]
    assert got == [("control", "steps[0].ask.outputSchema.properties.ok.minLength")]


def test_the_clis_input_values_are_checked_on_re2(tmp_path):
    plan_file = tmp_path / "p.json"
    plan_file.write_text(
        json.dumps(
            {
                "id": "p",
                "inputSchema": {"properties": {"x": {"type": "string", "pattern": EVIL}}},
                "steps": [{"id": "a", "shell": "true"}],
            }
        )
    )
    slower = "a" * 32 + "!"  # minutes on re: the CLI helper's 60 s timeout fails it there
    t0 = time.perf_counter()
    done = run_local_cli(plan_file, "--input", f"x={slower}")
    assert time.perf_counter() - t0 < 30  # the interpreter's start included
    assert done.returncode == 2
    assert json.loads(done.stdout)["errors"][0]["path"] == "input.x"
