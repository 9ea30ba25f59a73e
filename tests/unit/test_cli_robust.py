"""The CLI never shows a traceback: unreadable input is exit 2 with one line naming the file and
what is wrong (docs/cli.md), whatever the file holds; a closed stdout ends it quietly."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import time
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest

from planops.cli import inputs
from planops.cli.inputs import InputError, load
from planops.cli.main import main

ROOT = Path(__file__).resolve().parents[2]
CAPSULE = str(ROOT / "examples" / "capsule.yaml")


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`kubectl-plan ARGS` in this process (fast; a traceback would fail the test as an
    exception); the pipe tests below run a real process."""
    out, err = io.StringIO(), io.StringIO()
    saved = dict(os.environ)
    if env is not None:
        os.environ.clear()
        os.environ.update(env)
    try:
        with redirect_stdout(out), redirect_stderr(err):
            try:
                code = main(list(args))
            except SystemExit as e:  # argparse
                code = int(e.code or 0)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return subprocess.CompletedProcess(list(args), code, out.getvalue(), err.getvalue())


def write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def refused(r: subprocess.CompletedProcess[str], f: str, *expected: str) -> None:
    """Exit 2, one error line naming the file and saying what, no traceback."""
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"error: {f}"), r.stderr
    for text in expected:
        assert text in lines[0], lines[0]


def both(f: str, *extra: str) -> list[subprocess.CompletedProcess[str]]:
    """`validate` and `run --local` of one file (run is where a bad value used to crash)."""
    return [
        cli("validate", f, "--capsule", CAPSULE, *extra),
        cli("run", "--local", f, "--capsule", CAPSULE, "-q", *extra),
    ]


def plan_with_input(value_yaml: str) -> str:
    return f"id: p\nsteps:\n- id: a\n  tool: echo-input\n  input:\n    v: {value_yaml}\n"


# -- nesting --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["deep.yaml", "deep.json"])
def test_a_file_nested_900_deep_is_refused_with_exit_2(tmp_path, name):
    inner = "[" * 900 + "]" * 900
    text = (
        f'{{"id": "p", "steps": [], "input": {{"x": {inner}}}}}'
        if name.endswith("json")
        else f"id: p\nsteps: []\ninput:\n  x: {inner}\n"
    )
    f = write(tmp_path, name, text)
    for r in both(f):
        refused(r, f, "nested deeper than 80 levels", "line ")


def test_block_yaml_nested_deep_is_refused_too(tmp_path):
    text = "id: p\nsteps: []\ninput:\n" + "".join("  " * (n + 1) + "a:\n" for n in range(300))
    f = write(tmp_path, "deep.yaml", text)
    refused(cli("validate", f, "--capsule", CAPSULE), f, "nested deeper than 80 levels")


def test_a_value_past_64_levels_inside_the_file_bound_is_the_validators_refusal(tmp_path):
    f = write(tmp_path, "p.yaml", plan_with_input("[" * 70 + "]" * 70))
    r = cli("validate", f, "--capsule", CAPSULE, "-o", "json")
    assert r.returncode == 1, r.stderr
    (err,) = json.loads(r.stdout)["errors"]
    assert (err["code"], err["path"]) == ("limits", "steps[0].input")
    r = cli("run", "--local", f, "--capsule", CAPSULE)
    assert r.returncode == 2 and "nested deeper than 64 levels" in r.stderr
    assert "Traceback" not in r.stderr


# -- numbers --------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["p.yaml", "p.json"])
def test_a_5000_digit_integer_in_a_file_is_exit_2(tmp_path, name):
    digits = "9" * 5000
    text = (
        json.dumps({"id": "p", "steps": []})[:-1] + f', "input": {{"n": {digits}}}}}'
        if name.endswith("json")
        else f"id: p\nsteps: []\ninput:\n  n: {digits}\n"
    )
    f = write(tmp_path, name, text)
    for r in both(f):
        refused(r, f, "input.n", "5000 digits")


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("9" * 5000, "more than 4000 digits"),
        ("[" * 900 + "]" * 900, "nested deeper than 64 levels"),
        ("[" * 2000 + "]" * 2000, "nested deeper than 64 levels"),
        ("1e999", "too large"),
    ],
    ids=["digits", "deep", "deeper-than-json-reads", "overflow"],
)
def test_an_input_value_planops_cannot_hold_is_exit_2(tmp_path, value, expected):
    f = write(tmp_path, "ok.yaml", "id: p\nsteps:\n- {id: a, shell: 'echo hi'}\n")
    r = cli("run", "--local", f, "--capsule", CAPSULE, "--input", f"x={value}")
    assert r.returncode == 2, r.stderr
    assert "Traceback" not in r.stderr
    assert r.stderr.startswith("error: --input x") and expected in r.stderr, r.stderr


def test_input_values_are_json_when_they_are_json_else_text():
    input_value = inputs.input_value
    assert input_value("x", "12") == 12
    assert input_value("x", '{"a": [1]}') == {"a": [1]}
    assert input_value("x", "NaN") == "NaN"  # not JSON: the text
    assert input_value("x", "-Infinity") == "-Infinity"
    assert input_value("x", "hello") == "hello"
    with pytest.raises(InputError):
        input_value("x", "9" * 5000)


def test_an_input_file_is_read_by_the_plan_file_rules(tmp_path):
    plan = write(
        tmp_path,
        "p.yaml",
        "id: p\ninput: {}\nsteps:\n- {id: a, tool: echo-input, input: {d: '{{input.d}}'}}\n",
    )
    values = write(tmp_path, "v.yaml", "d: 2024-01-01\n")
    r = cli("run", "--local", plan, "--capsule", CAPSULE, "--input-file", values, "-o", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(json.loads(r.stdout)["steps"][0]["output"]) == {"d": "2024-01-01"}
    for bad, expected in [
        ("n: " + "9" * 5000 + "\n", "5000 digits"),
        ("s: !!set {a}\n", "!!set"),
        ("- 1\n", "must be one object"),
        ("x: " + "[" * 300 + "]" * 300 + "\n", "nested deeper than"),
    ]:
        values = write(tmp_path, "v.yaml", bad)
        r = cli("run", "--local", plan, "--capsule", CAPSULE, "--input-file", values)
        assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
        assert r.stderr.startswith(f"error: {values}") and expected in r.stderr, r.stderr


# -- YAML aliases ---------------------------------------------------------------------------------


BOMB = """id: p
steps: []
input:
  a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
  b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]
  c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]
  d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c]
  e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d]
  f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e]
  g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f]
  h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g]
  i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h]
"""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("id: p\nsteps: []\ninput:\n  x: &a [*a]\n", "a cycle"),
        ("id: p\nsteps: []\ninput:\n  x: &a {k: *a}\n", "a cycle"),
        ("id: p\nsteps: []\ninput:\n  x: &a {<<: *a}\n", "a cycle"),
        (BOMB, "expand to more than 1,000,000 values"),
    ],
    ids=["list-cycle", "map-cycle", "merge-cycle", "billion-laughs"],
)
def test_alias_cycles_and_bombs_are_refused_quickly(tmp_path, text, expected):
    f = write(tmp_path, "a.yaml", text)
    started = time.monotonic()
    for r in both(f):
        refused(r, f, expected)
    assert time.monotonic() - started < 20


def test_alias_chains_count_their_depth(tmp_path):
    """Each alias adds a level without the text nesting at all: the bound holds through them."""
    lines = ["id: p", "steps: []", "input:", "  l0: &l0 [x]"]
    lines += [f"  l{n}: &l{n} [*l{n - 1}]" for n in range(1, 100)]
    f = write(tmp_path, "a.yaml", "\n".join(lines) + "\n")
    refused(cli("validate", f, "--capsule", CAPSULE), f, "nested deeper than 80 levels")


def test_a_harmless_alias_and_a_merge_key_mean_what_kubectl_reads(tmp_path):
    f = write(
        tmp_path,
        "p.yaml",
        "id: p\nsteps:\n"
        "- id: a\n  tool: echo-input\n  input: &common {team: a, tags: [x, y]}\n"
        "- id: b\n  tool: echo-input\n  dependsOn: [a]\n  input: {<<: *common, team: b}\n",
    )
    assert cli("validate", f, "--capsule", CAPSULE).returncode == 0
    r = cli("run", "--local", f, "--capsule", CAPSULE, "-o", "json")
    assert r.returncode == 0, r.stderr
    outputs = [json.loads(s["output"]) for s in json.loads(r.stdout)["steps"]]
    assert outputs == [{"team": "a", "tags": ["x", "y"]}, {"team": "b", "tags": ["x", "y"]}]


# -- what JSON has no meaning for -----------------------------------------------------------------


def test_timestamps_and_sexagesimals_stay_strings_as_kubectl_reads_them(tmp_path):
    f = write(
        tmp_path,
        "p.yaml",
        "id: p\nsteps:\n- id: a\n  tool: echo-input\n  input:\n"
        "    day: 2024-01-01\n    at: 2024-01-01T10:00:00Z\n    time: 12:30\n"
        "    big: 1e5\n    eq: =\n    octal: 0755\n    yes: on\n".replace("yes: on", "flag: on"),
    )
    assert cli("validate", f, "--capsule", CAPSULE).returncode == 0
    r = cli("run", "--local", f, "--capsule", CAPSULE, "-o", "json")
    assert r.returncode == 0, r.stderr
    assert json.loads(json.loads(r.stdout)["steps"][0]["output"]) == {
        "day": "2024-01-01",
        "at": "2024-01-01T10:00:00Z",
        "time": "12:30",
        "big": 100000.0,
        "eq": "=",
        "octal": 493,
        "flag": True,
    }


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("!!set {a, b}", "a YAML set (!!set)"),
        ("!!binary aGVsbG8=", "!!binary"),
        ("!!timestamp 2024-01-01", "quote it to make it a string"),
        ("!!omap [{a: 1}]", "!!omap"),
        ("!!pairs [{a: 1}]", "!!pairs"),
        ("!custom x", "the YAML tag !custom"),
        ("!!python/tuple [1]", "python/tuple"),
        (".nan", "no JSON meaning"),
        ("-.inf", "no JSON meaning"),
        ("1.0e999", "no JSON meaning"),
        ("{1: x}", "the key '1' reads as int, not a string: quote it"),
        ("{on: x}", "reads as bool"),
        ("{null: x}", "reads as null"),
        ("{[a]: x}", "keys are strings"),
        ("{? {a: 1} : x}", "keys are strings"),
    ],
    ids=lambda v: v[:12],
)
def test_values_without_a_json_meaning_are_exit_2_naming_the_field(tmp_path, value, expected):
    f = write(tmp_path, "p.yaml", plan_with_input(value))
    for r in both(f):
        refused(r, f, "line 6", "steps[0].input.v", expected)


# -- files and directories ------------------------------------------------------------------------


def test_a_workdir_for_a_plan_without_a_workspace_is_exit_2_and_nothing_runs(tmp_path):
    f = write(tmp_path, "ok.yaml", "id: p\nsteps:\n- {id: a, shell: 'echo hi'}\n")
    work = tmp_path / "work"
    r = cli("run", "--local", f, "--capsule", CAPSULE, "--workdir", str(work))
    assert r.returncode == 2 and r.stdout == "", r.stderr
    assert r.stderr.startswith(
        f"error: --workdir {work}: plan p declares no workspace (spec.workspace), so its steps "
        "share no directory"
    )
    assert not work.exists()


def test_a_workdir_whose_parent_does_not_exist_is_exit_2(tmp_path):
    f = write(
        tmp_path, "ok.yaml", "id: p\nworkspace: {size: 1Mi}\nsteps:\n- {id: a, shell: 'echo hi'}\n"
    )
    missing = tmp_path / "no" / "such"
    r = cli("run", "--local", f, "--capsule", CAPSULE, "--workdir", str(missing))
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert r.stderr == f"error: --workdir {missing}: its parent directory {missing.parent} " + (
        "does not exist\n"
    )
    assert not missing.parent.exists()  # nothing created
    a_file = Path(write(tmp_path, "file", "x"))
    r = cli("run", "--local", f, "--capsule", CAPSULE, "--workdir", str(a_file))
    assert r.returncode == 2 and "exists and is not a directory" in r.stderr, r.stderr
    r = cli("run", "--local", f, "--capsule", CAPSULE, "--workdir", str(a_file / "sub"))
    assert r.returncode == 2 and f"{a_file} is not a directory" in r.stderr, r.stderr
    fresh = tmp_path / "fresh"
    assert cli("run", "--local", f, "--capsule", CAPSULE, "--workdir", str(fresh)).returncode == 0
    assert fresh.is_dir()


def test_load_raises_only_input_error_for_odd_files(tmp_path):
    for content in [b"\xff\xfe", b"\x00", b"a: [", b"- x\n- y\n", b"!!binary AAAA", b"'x'"]:
        f = tmp_path / "f.yaml"
        f.write_bytes(content)
        with pytest.raises(InputError):
            load([str(f)])
    with pytest.raises(InputError):
        load([str(tmp_path)])  # a directory


# -- a closed stdout ------------------------------------------------------------------------------


def closed_stdout(*args: str) -> subprocess.CompletedProcess[str]:
    """Run the CLI with stdout a pipe whose reader is gone before the first write."""
    read, write_ = os.pipe()
    os.close(read)  # `| head -c 0`: every write to the pipe fails with EPIPE
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "planops.cli.main", *args],
            stdout=write_,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            timeout=60,
        )
    finally:
        os.close(write_)
    return proc


def test_validate_into_a_closed_pipe_ends_quietly(tmp_path):
    f = write(tmp_path, "ok.yaml", "id: p\nsteps:\n- {id: a, shell: 'echo hi'}\n")
    r = closed_stdout("validate", *[f] * 50, "--capsule", CAPSULE)
    assert r.stderr == "" and r.returncode == 141


def test_run_json_into_a_closed_pipe_ends_quietly(tmp_path):
    f = write(tmp_path, "ok.yaml", "id: p\nsteps:\n- {id: a, shell: 'echo hi'}\n")
    r = closed_stdout("run", "--local", f, "--capsule", CAPSULE, "-o", "json")
    assert r.stderr == "" and r.returncode == 141


def test_a_reader_that_stops_early_like_head_sees_no_traceback(tmp_path):
    """More output than a pipe holds (64 KiB), and the reader leaves after 10 bytes."""
    files = [
        write(tmp_path, f"plan-{n:04}.yaml", f"id: p{n}\nsteps:\n- {{id: a, shell: 'true'}}\n")
        for n in range(1000)
    ]
    proc = subprocess.Popen(
        [sys.executable, "-m", "planops.cli.main", "validate", *files, "--capsule", CAPSULE],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.read(10)  # `| head -c 10`
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=60) == 141
    assert err == "", err


# -- the cluster verbs ----------------------------------------------------------------------------


def test_a_missing_kubeconfig_is_said_plainly_with_exit_3(tmp_path):
    missing = tmp_path / "nope"
    env = {k: v for k, v in os.environ.items() if k != "KUBERNETES_SERVICE_HOST"}
    r = cli("get", "--kubeconfig", str(missing), env=env)
    assert r.returncode == 3, r.stderr
    assert r.stderr == f"error: --kubeconfig {missing}: the file does not exist\n"
    r = cli("get", env={**env, "KUBECONFIG": str(missing)})
    assert r.returncode == 3 and "no such file" in r.stderr, r.stderr
    r = cli("get", "--kubeconfig", str(tmp_path), env=env)
    assert r.returncode == 3 and "is not a file" in r.stderr, r.stderr


def test_the_namespace_of_a_kubeconfig_that_is_no_mapping_is_default(tmp_path):
    from argparse import Namespace  # noqa: PLC0415

    from planops.cli.cluster import namespace_of  # noqa: PLC0415

    for text in ["- a\n- b\n", "just text\n", "contexts: [1, null]\ncurrent-context: x\n"]:
        f = write(tmp_path, "config", text)
        assert namespace_of(Namespace(namespace=None, kubeconfig=f, context=None)) == "default"
    f = tmp_path / "binary"
    f.write_bytes(b"\xff\xfe\x00")
    assert namespace_of(Namespace(namespace=None, kubeconfig=str(f), context=None)) == "default"


def test_logs_picks_the_newest_attempt_whatever_the_attempt_labels_say():
    import asyncio  # noqa: PLC0415
    from argparse import Namespace  # noqa: PLC0415

    from planops.cli.show import cmd_logs  # noqa: PLC0415

    def owner(uid: str) -> list[dict[str, object]]:
        return [{"apiVersion": "batch/v1", "kind": "Job", "uid": uid, "controller": True}]

    from planops.cli.steppods import step_selector  # noqa: PLC0415

    from .fakekube import FakeKube  # noqa: PLC0415

    # what the API server answers for the step's selector: its labels, the attempt's anything
    step = dict(term.split("=") for term in step_selector("n" * 100, "s.0.t", None).split(","))
    plan_owner = [
        {"apiVersion": "planops.dev/v1", "kind": "Plan", "uid": "plan", "controller": True}
    ]
    kube = FakeKube()
    kube.put("plan", {"metadata": {"name": "n" * 100, "uid": "plan"}})
    for j in ("j1", "j2", "jx"):
        kube.put(
            "job",
            {"metadata": {"name": j, "uid": j, "labels": step, "ownerReferences": plan_owner}},
        )
    for name, attempt, job in (("p2", "2", "j2"), ("px", "one", "jx"), ("p1", None, "j1")):
        labels = {**step, **({"planops.dev/attempt": attempt} if attempt else {})}
        meta = {"name": name, "labels": labels, "ownerReferences": owner(job)}
        kube.put("pod", {"metadata": meta})
        kube.logs[name] = f"log of {name}\n"

    out = io.StringIO()
    args = Namespace(name="n" * 100, step="s.0.t", attempt=None)
    with redirect_stdout(out):
        assert asyncio.run(cmd_logs(kube, args, "ns")) == 0
    assert out.getvalue() == "log of p2\n"
    assert kube.selectors and not any("n" * 100 in s for s in kube.selectors)  # shortened
