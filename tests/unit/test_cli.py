"""The CLI contract (docs/cli.md): exit codes, `-o json` shapes, one-line errors naming file and
field."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
CAPSULE = str(EXAMPLES / "capsule.yaml")


def cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "planops.cli.main", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=60,
    )


def write(tmp_path: Path, name: str, text: str) -> str:
    p = tmp_path / name
    p.write_text(text)
    return str(p)


@pytest.mark.parametrize("example", ["hello", "fan-out-fan-in", "retries"])
def test_examples_are_valid_and_run_to_completion(example):
    f = str(EXAMPLES / f"{example}.yaml")
    assert cli("validate", f, "--capsule", CAPSULE).returncode == 0
    r = cli("run", "--local", f, "--capsule", CAPSULE, "-o", "json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["completed"] is True and report["failedStep"] is None
    assert set(report) == {"planId", "completed", "failedStep", "steps"}
    assert set(report["steps"][0]) >= {
        "stepId",
        "status",
        "output",
        "error",
        "attempts",
        "startedAt",
        "finishedAt",
    }


def test_validate_json_shape_and_exit_1_for_an_invalid_plan(tmp_path):
    f = write(
        tmp_path,
        "p.json",
        json.dumps(
            {
                "id": "x",
                "steps": [
                    {"id": "a", "shell": "rm -rf /"},
                    {"id": "a", "tool": "submit-plan", "on_error": "nope"},
                ],
            }
        ),
    )
    r = cli("validate", f, "--capsule", CAPSULE, "-o", "json")
    assert r.returncode == 1
    out = json.loads(r.stdout)
    assert out["valid"] is False
    assert {e["code"] for e in out["errors"]} == {
        "shell-not-allowed",
        "duplicate-id",
        "plan-in-plan",
        "on-error",
    }
    assert all({"code", "step", "path", "message"} <= set(e) for e in out["errors"])


def test_validate_text_lists_every_error(tmp_path):
    f = write(
        tmp_path,
        "p.yaml",
        "id: x\nsteps:\n- {id: a, shell: 'rm x'}\n- {id: b, tool: nope, depends_on: [zz]}\n",
    )
    r = cli("validate", f, "--capsule", CAPSULE)
    assert r.returncode == 1
    assert "3 errors" in r.stdout and "[unknown-step]" in r.stdout and "[unknown-tool]" in r.stdout


def test_snake_case_seed_plans_are_normalized(tmp_path):
    f = write(
        tmp_path,
        "p.json",
        json.dumps(
            {
                "id": "seed",
                "steps": [
                    {"id": "a", "shell": "echo one"},
                    {"id": "b", "shell": "false", "depends_on": ["a"], "on_error": "continue"},
                    {
                        "id": "c",
                        "tool": "echo-input",
                        "depends_on": ["b"],
                        "if": "$b.status == 'failed'",
                        "input": {"snake_key": "$a.output"},
                    },
                ],
            }
        ),
    )
    r = cli("run", "--local", f, "--capsule", CAPSULE, "-o", "json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["planId"] == "seed"
    assert report["steps"][-1]["output"] == '{"snake_key": "one"}'  # input keys untouched


def test_multi_document_yaml_with_plan_and_capsule(tmp_path):
    text = Path(CAPSULE).read_text() + "\n---\n" + (EXAMPLES / "hello.yaml").read_text()
    f = write(tmp_path, "both.yaml", text)
    assert cli("validate", f).returncode == 0
    assert cli("run", "--local", f, "-q").returncode == 0


def test_run_exit_1_when_the_plan_stopped_on_a_failure(tmp_path):
    f = write(
        tmp_path,
        "p.yaml",
        "id: x\nsteps:\n- {id: a, shell: 'false'}\n- {id: b, shell: 'true', dependsOn: [a]}\n",
    )
    r = cli("run", "--local", f, "--capsule", CAPSULE, "-o", "json")
    assert r.returncode == 1
    report = json.loads(r.stdout)
    assert report["failedStep"] == "a" and [s["stepId"] for s in report["steps"]] == ["a"]


def test_run_exit_2_when_refused_by_validation_and_nothing_runs(tmp_path):
    marker = tmp_path / "ran"
    f = write(
        tmp_path,
        "p.yaml",
        f"id: x\nsteps:\n- {{id: a, shell: 'sh -c \"touch {marker}\"'}}\n- {{id: b, tool: nope}}\n",
    )
    r = cli("run", "--local", f, "--capsule", CAPSULE)
    assert r.returncode == 2
    assert "[unknown-tool]" in r.stderr and "nothing ran" in r.stderr
    assert not marker.exists()


def test_run_human_output_shows_progress_and_a_summary_table():
    r = cli("run", "--local", str(EXAMPLES / "hello.yaml"), "--capsule", CAPSULE)
    assert r.returncode == 0
    assert "▸ greet started" in r.stderr and "✔ greet success" in r.stderr
    assert r.stdout.splitlines()[0].split() == ["STEP", "STATUS", "ATTEMPTS", "DURATION", "DETAIL"]
    assert "plan hello: completed" in r.stdout


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("steps: [\n", "line 2, column 1: malformed YAML/JSON"),
        ("just a string\n", "(document): expected an object, got str"),
        (
            "kind: Deployment\n",
            "kind: expected kind Plan, Capsule, ScheduledPlan, ClusterScheduledPlan",
        ),
        (
            "id: x\nsteps:\n- {id: a, shell: 'true', colour: red}\n",
            "steps[0].colour: unknown field",
        ),
        (
            "id: x\nsteps:\n- {id: a, shell: 'true', retries: many}\n",
            'steps[0].retries: must be an integer, got the string "many"',
        ),
        ("id: x\nsteps:\n- {shell: 'true'}\n", "steps[0].id: required field is missing"),
        ("id: x\nsteps: {}\n", "steps: must be an array, got an object"),
        (
            "apiVersion: planops.dev/v1alpha1\nkind: Plan\nmetadata: {name: p}\n"
            "spec: {steps: [], bogus: 1}\n",
            "spec.bogus: unknown field",
        ),
        ("", "the file holds no document"),
    ],
)
def test_bad_input_is_one_line_naming_the_file_and_field_with_exit_2(tmp_path, content, expected):
    f = write(tmp_path, "bad.yaml", content)
    for args in (
        ("validate", f, "--capsule", CAPSULE),
        ("run", "--local", f, "--capsule", CAPSULE),
    ):
        r = cli(*args)
        assert r.returncode == 2, (args, r.stdout, r.stderr)
        assert f"error: {f}" in r.stderr and expected in r.stderr, r.stderr


def test_a_missing_file_exits_2_and_a_missing_capsule_exits_5_with_how_to_give_it(tmp_path):
    r = cli("validate", str(tmp_path / "nope.yaml"))
    assert r.returncode == 2 and "nope.yaml: cannot read: No such file or directory" in r.stderr
    r = cli("validate", str(EXAMPLES / "hello.yaml"), "-o", "json")
    assert r.returncode == 5
    assert [e["code"] for e in json.loads(r.stdout)["errors"]] == ["no-capsule"]
    r = cli("run", "--local", str(EXAMPLES / "hello.yaml"))
    assert r.returncode == 5 and "pass --capsule FILE" in r.stderr


def test_a_plan_naming_no_capsule_uses_the_only_capsule_given(tmp_path):
    text = Path(CAPSULE).read_text().replace("name: default", "name: team")
    c = write(tmp_path, "c.yaml", text)
    f = write(tmp_path, "p.yaml", "id: x\nsteps:\n- {id: a, shell: 'echo hi'}\n")
    assert cli("run", "--local", f, "--capsule", c, "-q").returncode == 0


def test_ctrl_c_stops_every_step_process(tmp_path):
    pidfile = tmp_path / "pids"
    f = write(
        tmp_path,
        "p.yaml",
        "id: x\nsteps:\n"
        + "".join(
            f"- {{id: s{i}, shell: \"sh -c 'echo $$ >> {pidfile}; sleep 60'\"}}\n" for i in range(3)
        ),
    )
    c = write(  # a test Capsule: the steps script themselves with sh (the example allows no sh)
        tmp_path,
        "c.yaml",
        "apiVersion: planops.dev/v1alpha1\nkind: Capsule\nmetadata: {name: default}\n"
        "spec: {shell: {allow: [sh]}}\n",
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "planops.cli.main", "run", "--local", f, "--capsule", c],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # as a terminal's foreground job: a test run started in the background by a
        # non-interactive shell (CI scripts do) inherits SIGINT ignored, and Python keeps an
        # ignored SIGINT ignored, so Ctrl-C would never reach the CLI
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
    )
    for _ in range(600):  # a loaded machine may take a while to start three processes
        time.sleep(0.05)
        if pidfile.exists() and len(pidfile.read_text().split()) == 3:
            break
    assert len(pidfile.read_text().split()) == 3, "the three steps did not start in 30 s"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 130, err
    assert "interrupted" in err
    time.sleep(0.1)
    for pid in map(int, pidfile.read_text().split()):
        stat = Path(f"/proc/{pid}/stat")
        assert not stat.exists() or stat.read_text().split()[2] == "Z", (
            f"step process {pid} survived"
        )


def test_validate_judges_a_scheduled_plans_schedule_and_template(tmp_path):
    f = write(
        tmp_path,
        "s.yaml",
        "apiVersion: planops.dev/v1alpha1\nkind: ScheduledPlan\n"
        "metadata: {name: s}\nspec:\n  schedule: '61 * * * *'\n  timeZone: Mars/Base\n"
        "  planTemplate: {spec: {steps: [{id: a, shell: 'rm x'}]}}\n",
    )
    r = cli("validate", f, "--capsule", CAPSULE, "-o", "json")
    assert r.returncode == 1
    got = [(e["code"], e["path"]) for e in json.loads(r.stdout)["errors"]]
    assert got == [
        ("schedule", "spec.schedule"),
        ("schedule", "spec.timeZone"),
        ("shell-not-allowed", "steps[0].shell"),
    ]
    assert cli("validate", str(EXAMPLES / "scheduled.yaml"), "--capsule", CAPSULE).returncode == 0


# -- which plan, under which Capsules (issue 41) ---------------------------------------------------

PLAN_ON = (
    "apiVersion: planops.dev/v1alpha1\nkind: Plan\nmetadata: {{name: {name}}}\n"
    "spec:\n  capsule: {capsule}\n  steps:\n  - {{id: s, shell: '{shell}'}}\n"
)
CAPSULE_ALLOWING = (
    "apiVersion: planops.dev/v1alpha1\nkind: Capsule\nmetadata: {{name: {name}}}\n"
    "spec: {{shell: {{allow: [{binary}]}}}}\n"
)


def test_run_picks_one_plan_of_a_file_holding_several_with_plan():
    f = str(EXAMPLES / "scheduled.yaml")
    r = cli("run", "--local", f, "--capsule", CAPSULE, "-o", "json")
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr == (
        f"error: {f} holds 2 plans (refresh, tenant-audit): pick one with --plan NAME\n"
    )
    r = cli("run", "--local", f, "--capsule", CAPSULE, "--plan", "nope")
    assert r.returncode == 2
    assert r.stderr == f"error: {f} holds no plan 'nope' (it holds refresh, tenant-audit)\n"
    r = cli("run", "--local", f, "--capsule", CAPSULE, "--plan", "refresh", "-o", "json")
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["planId"] == "refresh"
    assert [s["stepId"] for s in report["steps"]] == ["fetch", "report"]


def test_run_plan_judges_only_the_plan_it_runs(tmp_path):
    f = write(
        tmp_path,
        "two.yaml",
        PLAN_ON.format(name="good", capsule="default", shell="echo hi")
        + "---\n"
        + PLAN_ON.format(name="bad", capsule="default", shell="rm -rf x"),
    )
    assert cli("run", "--local", f, "--capsule", CAPSULE, "--plan", "good").returncode == 0
    r = cli("run", "--local", f, "--capsule", CAPSULE, "--plan", "bad")
    assert r.returncode == 2 and "1 error (nothing ran)" in r.stderr and "'rm'" in r.stderr


def test_two_capsule_files_are_both_loaded(tmp_path):
    caps = [
        write(tmp_path, f"{n}.yaml", CAPSULE_ALLOWING.format(name=n, binary=b))
        for n, b in (("a", "echo"), ("b", "'true'"))
    ]
    given = [arg for c in caps for arg in ("--capsule", c)]
    for name, shell in (("a", "echo hi"), ("b", "true")):
        f = write(tmp_path, f"on-{name}.yaml", PLAN_ON.format(name="p", capsule=name, shell=shell))
        assert cli("validate", f, *given).returncode == 0
        r = cli("run", "--local", f, *given, "-o", "json")
        assert r.returncode == 0, r.stderr
        assert json.loads(r.stdout)["completed"] is True


def test_a_capsule_given_twice_is_refused_naming_both_places(tmp_path):
    first = write(tmp_path, "a.yaml", CAPSULE_ALLOWING.format(name="a", binary="echo"))
    second = write(tmp_path, "a2.yaml", CAPSULE_ALLOWING.format(name="a", binary="'true'"))
    f = write(tmp_path, "p.yaml", PLAN_ON.format(name="p", capsule="a", shell="true"))
    expected = f"error: {second}: metadata.name: Capsule 'a' is defined twice (also in {first})\n"
    for verb in (["run", "--local"], ["validate"]):
        r = cli(*verb, f, "--capsule", first, "--capsule", second)
        assert r.returncode == 2 and expected in r.stderr, r.stderr
        assert "success" not in r.stdout  # nothing ran under either
