"""Results and artifacts (engine.step_files): the validator's refusals (code, step, path, why),
the templates that read them, and the local runner moving them between real processes
(runners.files) under the cluster's bounds."""

from __future__ import annotations

import asyncio
import hashlib
import json
import tarfile
from pathlib import Path

import pytest

from planops import main as main_
from planops.api import parse_document
from planops.engine import Facts, Policy, step_files, templates, validate
from planops.engine.report import ArtifactRecord
from planops.handlers.config import CONFIG
from planops.runners.local import LocalRunner

from .helpers import capsule, plan, resolver, run_local_cli

REPO = Policy(artifact_repository=True)


def errors(spec, policy=REPO, res=None):
    return [(e.code, e.step, e.path) for e in validate(spec, res or resolver(), policy)]


def files_capsule(**kw):
    return capsule(scripts={"allow": ["sh"]}, **kw)


def run(spec, tmp_path: Path, **capsule_kw):
    runner = LocalRunner({"default": files_capsule(**capsule_kw)}, artifacts=tmp_path / "a")
    (tmp_path / "a").mkdir(exist_ok=True)
    report = asyncio.run(runner.run("p", spec))
    return report, {s.step_id: s for s in report.steps}


# -- the validator --------------------------------------------------------------------------


def test_a_result_read_but_not_declared_is_refused_with_a_guess():
    spec = plan(
        {"id": "a", "shell": "true", "results": [{"name": "version"}]},
        {"id": "b", "shell": "echo {{a.results.verison}}", "dependsOn": ["a"]},
    )
    errs = validate(spec, resolver(), REPO)
    assert [(e.code, e.step, e.path) for e in errs] == [("template", "b", "steps[1].shell")]
    assert "declares no result 'verison': did you mean 'version'?" in errs[0].message


def test_a_result_of_a_step_declaring_none_is_refused():
    spec = plan(
        {"id": "a", "shell": "true"},
        {"id": "b", "shell": "echo", "input": {"v": "{{a.results.x}}"}, "dependsOn": ["a"]},
    )
    errs = validate(spec, resolver(), REPO)
    assert [(e.code, e.path) for e in errs] == [("template", "steps[1].input.v")]
    assert "(it declares none)" in errs[0].message


def test_a_result_of_a_step_not_waited_for_is_refused():
    spec = plan(
        {"id": "a", "shell": "true", "results": [{"name": "v"}]},
        {"id": "b", "shell": "echo {{a.results.v}}"},
    )
    assert errors(spec) == [("template", "b", "steps[1].shell")]


def test_a_control_steps_results_field_stays_its_own():
    """`{{each.results}}` of a map is its result field, not files (engine.templates)."""
    spec = plan(
        {"id": "each", "map": {"over": [1, 2], "do": {"shell": "echo {{item}}"}}},
        {"id": "b", "shell": "echo {{each.results}}", "dependsOn": ["each"]},
    )
    assert errors(spec) == []


def test_duplicate_names_are_refused():
    spec = plan(
        {
            "id": "a",
            "shell": "true",
            "results": [{"name": "v"}, {"name": "v"}],
            "outputs": {"artifacts": [{"name": "d", "path": "x"}, {"name": "d", "path": "y"}]},
        }
    )
    assert errors(spec) == [
        ("results", "a", "steps[0].results[1].name"),
        ("artifacts", "a", "steps[0].outputs.artifacts[1].name"),
    ]


def test_bad_names_are_refused_by_the_schema():
    doc = {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": {"name": "p"},
        "spec": {"steps": [{"id": "a", "shell": "true", "results": [{"name": "a.b"}]}]},
    }
    _, problems = parse_document(doc)
    assert [p.path for p in problems] == ["spec.steps[0].results[0].name"]


def test_results_on_a_step_that_runs_no_command_are_refused():
    spec = plan({"id": "x", "exit": {"status": "success"}, "results": [{"name": "v"}]})
    assert ("results", "x", "steps[0].results") in errors(spec)


def test_paths_outside_the_working_directory_are_refused():
    spec = plan(
        {
            "id": "a",
            "shell": "true",
            "outputs": {
                "artifacts": [{"name": "d", "path": "/etc"}, {"name": "e", "path": "../x"}]
            },
        }
    )
    errs = validate(spec, resolver(), REPO)
    assert [(e.code, e.path) for e in errs] == [
        ("artifacts", "steps[0].outputs.artifacts[0].path"),
        ("artifacts", "steps[0].outputs.artifacts[1].path"),
    ]
    assert "absolute" in errs[0].message and "`..`" in errs[1].message


def test_an_inputs_from_must_name_a_declared_artifact_of_a_step_waited_for():
    spec = plan(
        {"id": "a", "shell": "true", "outputs": {"artifacts": [{"name": "dist", "path": "d"}]}},
        {
            "id": "b",
            "shell": "true",
            "dependsOn": ["a"],
            "inputs": {
                "artifacts": [
                    {"from": "{{a.artifacts.dsit}}", "path": "x"},
                    {"from": "a.artifacts.dist", "path": "y"},
                ]
            },
        },
        {
            "id": "c",
            "shell": "true",
            "inputs": {"artifacts": [{"from": "{{a.artifacts.dist}}", "path": "x"}]},
        },
    )
    errs = validate(spec, resolver(), REPO)
    assert [(e.code, e.step, e.path) for e in errs] == [
        ("artifacts", "b", "steps[1].inputs.artifacts[0].from"),
        ("artifacts", "b", "steps[1].inputs.artifacts[1].from"),
        ("artifacts", "c", "steps[2].inputs.artifacts[0].from"),
    ]
    assert "did you mean 'dist'?" in errs[0].message
    assert "does not depend on" in errs[2].message


def test_an_artifact_is_no_value():
    spec = plan(
        {"id": "a", "shell": "true", "outputs": {"artifacts": [{"name": "d", "path": "d"}]}},
        {"id": "b", "shell": "echo {{a.artifacts.d}}", "dependsOn": ["a"]},
    )
    errs = validate(spec, resolver(), REPO)
    assert [(e.code, e.path) for e in errs] == [("template", "steps[1].shell")]
    assert "inputs.artifacts[].from" in errs[0].message


def test_artifacts_without_a_repository_are_refused_naming_the_grant():
    spec = plan(
        {"id": "a", "shell": "true", "outputs": {"artifacts": [{"name": "d", "path": "d"}]}}
    )
    errs = validate(spec, resolver(), Policy())
    assert [(e.code, e.step, e.path) for e in errs] == [("artifacts", "a", "steps[0].outputs")]
    assert "artifactRepository" in errs[0].message
    assert errors(spec) == []  # the operator's default repository grants it
    # results need no repository
    assert (
        validate(plan({"id": "r", "shell": "true", "results": [{"name": "v"}]}), resolver()) == []
    )


def test_a_body_step_passes_no_files():
    spec = plan(
        {"id": "m", "map": {"over": [1], "do": {"shell": "true", "results": [{"name": "v"}]}}}
    )
    assert [c for c, *_ in errors(spec)] == ["results"]


# -- the rules --------------------------------------------------------------------------------


def test_result_values_drop_one_line_end_and_are_bounded():
    step = plan({"id": "a", "shell": "true", "results": [{"name": "a"}, {"name": "b"}]}).steps[0]
    assert step_files.result_values(step, {"a": b"x\n\n", "b": b"y\r\n"}, True) == (
        {"a": "x\n", "b": "y"},
        None,
    )
    big = b"z" * step_files.RESULTS_BOUND
    values, error = step_files.result_values(step, {"a": b"ok", "b": big}, True)
    assert values == {"a": "ok"} and error is not None
    assert "'b'" in error and str(step_files.RESULTS_BOUND) in error
    _, missing = step_files.result_values(step, {"a": b"ok", "b": None}, True)
    assert missing is not None and "$PLANOPS_RESULTS/b" in missing
    assert step_files.result_values(step, {"a": b"ok", "b": None}, False) == ({"a": "ok"}, None)


# -- the local runner, real processes -------------------------------------------------------


def test_a_file_passes_between_two_steps(tmp_path):
    spec = plan(
        {
            "id": "a",
            "script": "echo hello > out.txt",
            "outputs": {"artifacts": [{"name": "f", "path": "out.txt"}]},
        },
        {
            "id": "b",
            "script": "cat got/in.txt",
            "dependsOn": ["a"],
            "inputs": {"artifacts": [{"from": "{{a.artifacts.f}}", "path": "got/in.txt"}]},
        },
    )
    report, s = run(spec, tmp_path)
    assert report.completed and s["b"].output == "hello"
    (art,) = s["a"].artifacts
    stored = tmp_path / "a" / art.key
    assert stored.read_bytes() == b"hello\n"
    assert art.sha256 == hashlib.sha256(b"hello\n").hexdigest() and art.size == 6
    assert s["a"].to_json()["artifacts"][0]["sha256"] == art.sha256


def test_a_directory_artifact_is_archived_and_placed(tmp_path):
    spec = plan(
        {
            "id": "a",
            "script": "mkdir -p d/sub && echo 1 > d/one && echo 2 > d/sub/two",
            "outputs": {"artifacts": [{"name": "d", "path": "d"}]},
        },
        {
            "id": "b",
            "script": "cat x/one x/sub/two",
            "dependsOn": ["a"],
            "inputs": {"artifacts": [{"from": "{{a.artifacts.d}}", "path": "x"}]},
        },
    )
    report, s = run(spec, tmp_path)
    assert report.completed and s["b"].output == "1\n2"
    (art,) = s["a"].artifacts
    assert art.directory and art.key.endswith("d.tar")
    with tarfile.open(tmp_path / "a" / art.key) as tar:
        assert {"./one", "./sub/two"} <= set(tar.getnames())


def test_results_are_read_by_a_later_step(tmp_path):
    spec = plan(
        {
            "id": "a",
            "script": 'printf "v1.2.3\\n" > "$PLANOPS_RESULTS/version"',
            "results": [{"name": "version"}],
        },
        {
            "id": "b",
            "script": 'echo "got $V"',
            "env": [{"name": "V", "value": "{{a.results.version}}"}],
            "dependsOn": ["a"],
        },
    )
    report, s = run(spec, tmp_path)
    assert report.completed
    assert s["a"].results == {"version": "v1.2.3"} and s["b"].output == "got v1.2.3"
    assert (tmp_path / "a" / "p" / "a" / "1" / "results" / "version").read_text() == "v1.2.3\n"


def test_a_result_over_the_bound_fails_its_step_naming_it(tmp_path):
    spec = plan(
        {
            "id": "a",
            "script": 'head -c 5000 /dev/zero | tr "\\0" x > "$PLANOPS_RESULTS/big"',
            "results": [{"name": "big"}],
        }
    )
    report, s = run(spec, tmp_path)
    assert not report.completed and s["a"].status == "failed"
    assert "result 'big'" in s["a"].error and f"bound of {step_files.RESULTS_BOUND}" in s["a"].error


def test_an_artifact_over_the_capsules_bound_fails_its_step_and_is_not_kept(tmp_path):
    spec = plan(
        {
            "id": "a",
            "script": "head -c 2000 /dev/zero > f",
            "outputs": {"artifacts": [{"name": "f", "path": "f"}]},
        }
    )
    _, s = run(spec, tmp_path, artifacts={"maxBytes": 1000})
    assert s["a"].status == "failed" and "artifacts.maxBytes (1000 bytes)" in s["a"].error
    assert [p.name for p in (tmp_path / "a").rglob("*") if p.is_file()] == []


def test_a_stored_artifact_changed_since_is_not_placed(tmp_path):
    """The sha256 recorded is checked again before a later step reads it: a run that keeps
    step a's record (a retry) finds its stored file changed, and b fails without reading it."""
    spec = plan(
        {
            "id": "a",
            "script": "echo data > f",
            "outputs": {"artifacts": [{"name": "f", "path": "f"}]},
        },
        {
            "id": "b",
            "script": "cat in",
            "dependsOn": ["a"],
            "inputs": {"artifacts": [{"from": "{{a.artifacts.f}}", "path": "in"}]},
        },
    )
    first, s = run(spec, tmp_path)
    assert first.completed and s["b"].output == "data"
    (tmp_path / "a" / s["a"].artifacts[0].key).write_text("forged\n")
    kept = Facts(settled=(s["a"],))
    runner = LocalRunner({"default": files_capsule()}, artifacts=tmp_path / "a")
    again = asyncio.run(runner.run("p", spec, seed=kept))
    b = {r.step_id: r for r in again.steps}["b"]
    assert b.status == "failed" and "sha256" in b.error and "not placed" in b.error


def test_a_kept_step_keeps_its_artifacts(tmp_path):
    """A retried run's kept step is not run again: a later step reads what it stored then."""
    spec = plan(
        {
            "id": "a",
            "script": "echo once > f",
            "outputs": {"artifacts": [{"name": "f", "path": "f"}]},
        },
        {
            "id": "b",
            "script": "cat in",
            "dependsOn": ["a"],
            "inputs": {"artifacts": [{"from": "{{a.artifacts.f}}", "path": "in"}]},
        },
    )
    _, s = run(spec, tmp_path)
    runner = LocalRunner({"default": files_capsule()}, artifacts=tmp_path / "a")
    again = asyncio.run(runner.run("p", spec, seed=Facts(settled=(s["a"],))))
    steps = {r.step_id: r for r in again.steps}
    assert steps["a"] == s["a"] and steps["b"].output == "once"


def test_run_local_artifacts_dir_keeps_them(tmp_path):
    example = Path(__file__).resolve().parents[2] / "examples" / "artifacts.yaml"
    out = run_local_cli(example, "--artifacts", str(tmp_path / "keep"), "-o", "json")
    assert out.returncode == 0, out.stderr
    build = json.loads(out.stdout)["steps"][0]
    assert build["results"] == {"version": "v1.2.3"}
    assert (tmp_path / "keep" / build["artifacts"][0]["key"]).is_file()


@pytest.mark.parametrize("path", ["link/x", "link"])
def test_a_link_out_of_the_working_directory_is_refused(tmp_path, path):
    spec = plan(
        {
            "id": "a",
            "script": f"ln -s {tmp_path} link",
            "outputs": {"artifacts": [{"name": "f", "path": path}]},
        }
    )
    _, s = run(spec, tmp_path)
    assert s["a"].status == "failed" and "leads out of the step's working directory" in s["a"].error


def test_an_executor_that_moves_no_files_refuses_them_before_anything_runs():
    """The operator's step pods do not move them yet: refused, never run without them."""
    spec = plan({"id": "a", "shell": "true", "results": [{"name": "v"}]})
    errs = validate(spec, resolver(), Policy(moves_files=False))
    assert [(e.code, e.step, e.path) for e in errs] == [("results", "a", "steps[0].results")]
    assert "run --local" in errs[0].message


def test_templates_read_results_and_artifacts_of_a_record():
    """`{{a.results.NAME}}` is the text (typed splice: a string); `{{a.artifacts.NAME}}` the
    record an input fetches; a control step's `results` field stays its own."""
    art = ArtifactRecord("d", "k/d.tar", "ab" * 32, 10, True)
    a = templates.StepResult("success", "out", None, {"v": "1.2"}, (art,))
    each = templates.StepResult("success", '{"count": 1, "results": ["x"]}')
    looks = {"a": a, "each": each}.get
    assert templates.render("{{a.results.v}}", looks) == "1.2"
    assert templates.render("v={{a.results.v}}", looks) == "v=1.2"
    assert templates.render("{{a.artifacts.d}}", looks) == art.to_json()
    assert templates.render("{{each.results}}", looks) == ["x"]
    with pytest.raises(templates.TemplateError, match="no 'w'"):
        templates.render("{{a.results.w}}", looks)


def test_the_operators_default_repository_is_the_grant_its_validation_reads(monkeypatch):
    repository = {
        "endpoint": "https://s3.example.com",
        "bucket": "arts",
        "credentialsSecret": {"name": "c"},
    }
    for argv, granted in (([], False), (["--artifact-repository", json.dumps(repository)], True)):
        monkeypatch.setattr(CONFIG, "policy", None)
        main_.main([*argv, "--artifact-secrets-namespace", "ops"], run=lambda *a, **k: None)
        assert CONFIG.policy.artifact_repository is granted
        assert CONFIG.policy.moves_files is True  # the step pods' collector moves them
        assert CONFIG.collector_image == "ghcr.io/planops/operator:0.1.0"
