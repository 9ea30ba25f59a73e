"""`kubectl-plan run --local --retry REPORT.json [--from STEP]`: a run that failed on a missing
file is retried once the file is there: the step before it is not run again (its record is the
earlier one, unchanged), the failed step and what it stopped run; and every refusal (another
plan's report, a changed plan, a succeeded run without --from, a summary) says why, exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from .helpers import run_local_cli

PLAN = {
    "apiVersion": "planops.dev/v1alpha1",
    "kind": "Plan",
    "metadata": {"name": "flip"},
    "spec": {
        "capsule": "default",
        "workspace": {"size": "10Mi"},  # check reads what the test writes there
        "steps": [
            {"id": "prepare", "shell": "date +%N"},
            {"id": "check", "shell": "cat flag.txt", "dependsOn": ["prepare"]},
            {"id": "after", "shell": "echo after", "dependsOn": ["check"]},
            {"id": "side", "shell": "echo side"},
        ],
    },
}


def write(path: Path, doc: dict) -> Path:
    path.write_text(yaml.safe_dump(doc))
    return path


@pytest.fixture
def failed_once(tmp_path):
    """The plan file, its workdir, and the report of a first run that failed at `check`."""
    work = tmp_path / "work"
    plan = write(tmp_path / "plan.yaml", PLAN)
    first = run_local_cli(plan, "--workdir", str(work))
    assert first.returncode == 1, first.stderr
    report = json.loads(first.stdout)
    assert report["failedStep"] == "check"
    saved = tmp_path / "report.json"
    saved.write_text(first.stdout)
    return plan, work, saved, report


def by_id(report):
    return {s["stepId"]: s for s in report["steps"]}


def test_a_retry_keeps_what_succeeded_and_runs_the_failed_step_and_what_it_stopped(failed_once):
    plan, work, saved, first = failed_once
    (work / "flag.txt").write_text("flag is up\n")
    again = run_local_cli(plan, "--workdir", str(work), "--retry", str(saved))
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["completed"] is True
    # kept: the very records of the first run (same times, same output: not run again)
    assert by_id(report)["prepare"] == by_id(first)["prepare"]
    assert by_id(report)["side"] == by_id(first)["side"]
    assert by_id(report)["check"]["output"] == "flag is up"
    assert by_id(report)["check"]["attempts"] == 1
    # settle order: the kept records first, in their order, then the new ones
    kept = [s["stepId"] for s in first["steps"] if s["status"] == "success"]
    assert [s["stepId"] for s in report["steps"]] == [*kept, "check", "after"]


def test_from_runs_a_succeeded_step_again_and_every_step_after_it(failed_once):
    plan, work, saved, first = failed_once
    (work / "flag.txt").write_text("up\n")
    again = run_local_cli(plan, "--workdir", str(work), "--retry", str(saved), "--from", "prepare")
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert by_id(report)["prepare"]["startedAt"] != by_id(first)["prepare"]["startedAt"]
    assert by_id(report)["side"] == by_id(first)["side"]
    assert next(s["stepId"] for s in report["steps"]) == "side"


def test_a_plan_objects_report_as_get_prints_it_is_retried_too(failed_once, tmp_path):
    plan, work, _, first = failed_once
    (work / "flag.txt").write_text("up\n")
    obj = write(tmp_path / "got.json", {**PLAN, "status": {"report": first}})
    again = run_local_cli(plan, "--workdir", str(work), "--retry", str(obj))
    assert again.returncode == 0, again.stderr
    assert by_id(json.loads(again.stdout))["prepare"] == by_id(first)["prepare"]


def test_a_report_of_another_plan_is_refused_and_nothing_runs(failed_once, tmp_path):
    plan, work, _saved, first = failed_once
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**first, "planId": "someone-else"}))
    out = run_local_cli(plan, "--workdir", str(work), "--retry", str(other))
    assert out.returncode == 2 and out.stdout == ""
    assert "report of plan 'someone-else', not of plan 'flip'" in out.stderr


def test_a_plan_objects_changed_spec_is_refused_too(failed_once, tmp_path):
    plan, _, _, first = failed_once
    changed = json.loads(json.dumps(PLAN))
    changed["spec"]["steps"][3]["shell"] = "echo other"
    obj = write(tmp_path / "got.json", {**changed, "status": {"report": first}})
    out = run_local_cli(plan, "--retry", str(obj))
    assert out.returncode == 2 and "spec digest differs" in out.stderr


def test_a_report_with_steps_the_plan_lacks_is_refused(failed_once, tmp_path):
    plan, _, _, first = failed_once
    steps = [*first["steps"], {**first["steps"][0], "stepId": "ghost"}]
    doctored = tmp_path / "ghost.json"
    doctored.write_text(json.dumps({**first, "steps": steps}))
    out = run_local_cli(plan, "--retry", str(doctored))
    assert out.returncode == 2 and "ghost" in out.stderr and "not of this plan" in out.stderr


def test_a_succeeded_run_is_retried_only_with_from(failed_once, tmp_path):
    plan, work, _saved, _ = failed_once
    (work / "flag.txt").write_text("up\n")
    ok = run_local_cli(plan, "--workdir", str(work))
    assert ok.returncode == 0
    done = tmp_path / "done.json"
    done.write_text(ok.stdout)
    out = run_local_cli(plan, "--workdir", str(work), "--retry", str(done))
    assert out.returncode == 2 and "succeeded: nothing failed to retry" in out.stderr
    again = run_local_cli(plan, "--workdir", str(work), "--retry", str(done), "--from", "after")
    assert again.returncode == 0
    assert [s["stepId"] for s in json.loads(again.stdout)["steps"]][-1] == "after"


def test_a_summary_with_records_omitted_is_refused(failed_once, tmp_path):
    plan, _, _, first = failed_once
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({**first, "stepsOmitted": 3}))
    out = run_local_cli(plan, "--retry", str(summary))
    assert out.returncode == 2 and "3 records omitted" in out.stderr


def test_from_without_retry_and_an_unreadable_report_are_refused(tmp_path):
    plan = write(tmp_path / "plan.yaml", PLAN)
    out = run_local_cli(plan, "--from", "prepare")
    assert out.returncode == 2 and "--from STEP goes with --retry" in out.stderr
    junk = tmp_path / "junk.json"
    junk.write_text("{not: json")
    out = run_local_cli(plan, "--retry", str(junk))
    assert out.returncode == 2 and "malformed YAML/JSON" in out.stderr


def test_validation_refusals_come_before_the_retry_and_nothing_runs(failed_once, tmp_path):
    _, _work, saved, _ = failed_once
    bad = json.loads(json.dumps(PLAN))
    bad["spec"]["steps"][2]["dependsOn"] = ["nowhere"]
    out = run_local_cli(write(tmp_path / "bad.yaml", bad), "--retry", str(saved))
    assert out.returncode == 2
    assert json.loads(out.stdout)["errors"][0]["code"] == "unknown-step"
