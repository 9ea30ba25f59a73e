"""Parameterised runs on every verb: `--input`/`--input-file` merged into the plan's
`spec.input` and judged by the validator (validate, graph, submit), a key the inputSchema does
not name refused as a typo, generateName and the file's labels and annotations kept for
`submit`, and `answer`'s values judged against the ask's outputSchema before anything is written.
No cluster: the refusals all come before the client is used."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from planops.api import CapsuleDocument, PlanDocument, parse_document
from planops.cli import main
from planops.cli.inputs import given_inputs, unknown_inputs, with_inputs
from planops.cli.steer import checked_answer, request_token
from planops.cli.submit import input_refusals, plan_body

ROOT = Path(__file__).resolve().parents[2]
CAPSULE = str(ROOT / "examples" / "capsule.yaml")
SCHEMA = {
    "type": "object",
    "required": ["env"],
    "properties": {"env": {"enum": ["dev", "prod"]}, "replicas": {"type": "integer"}},
}


def manifest(**meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": meta or {"name": "deploy"},
        "spec": {
            "capsule": "default",
            "steps": [{"id": "say", "shell": "echo {{input.env}}"}],
            "inputSchema": SCHEMA,
        },
    }


def plan_file(tmp_path: Path, doc: dict[str, Any] | None = None) -> str:
    f = tmp_path / "deploy.yaml"
    f.write_text(yaml.safe_dump(doc or manifest()))
    return str(f)


def parsed(doc: dict[str, Any]) -> PlanDocument:
    got, problems = parse_document(doc)
    assert problems == [] and isinstance(got, PlanDocument)
    return got


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    rc = main.main(list(argv))
    out = capsys.readouterr()
    return rc, out.out, out.err


# -- validate and graph -------------------------------------------------------------------------


def test_validate_judges_the_given_input_against_the_input_schema(tmp_path, capsys):
    f = plan_file(tmp_path)
    rc, out, _ = run(capsys, "validate", f, "--capsule", CAPSULE, "--input", "env=prod")
    assert rc == 0 and "plan deploy is valid" in out
    rc, out, _ = run(capsys, "validate", f, "--capsule", CAPSULE, "-o", "json")
    assert rc == 1 and json.loads(out)["errors"][0]["code"] == "input-schema"  # env required
    rc, out, _ = run(capsys, "validate", f, "--capsule", CAPSULE, "--input", "env=qa")
    assert rc == 1 and "[input-schema] input.env" in out


def test_validate_refuses_an_input_the_schema_does_not_name(tmp_path, capsys):
    f = plan_file(tmp_path)
    rc, out, err = run(
        capsys, "validate", f, "--capsule", CAPSULE, "--input", "env=prod", "--input", "evn=dev"
    )
    assert rc == 2 and out == ""
    assert "--input evn: the plan's inputSchema has no such input (inputs: env, replicas)" in err


def test_a_mistyped_input_value_is_refused_by_the_validator(tmp_path, capsys):
    f = plan_file(tmp_path)
    rc, out, _ = run(
        capsys, "validate", f, "--capsule", CAPSULE, "--input", "env=dev", "--input", "replicas=x"
    )
    assert rc == 1 and "input.replicas" in out and "integer" in out


def test_input_file_is_merged_and_each_input_flag_overrides_it(tmp_path, capsys):
    values = tmp_path / "values.json"
    values.write_text(json.dumps({"env": "qa", "replicas": 3}))
    f = plan_file(tmp_path)
    rc, out, _ = run(capsys, "validate", f, "--capsule", CAPSULE, "--input-file", str(values))
    assert rc == 1 and "input.env" in out  # the file's qa reached the validator
    rc, out, _ = run(
        capsys,
        "validate",
        f,
        "--capsule",
        CAPSULE,
        "--input-file",
        str(values),
        "--input",
        "env=prod",
    )
    assert rc == 0, out
    assert given_inputs(str(values), ["env=prod"]) == {"env": "prod", "replicas": 3}


def test_graph_takes_inputs_and_refuses_a_wrong_one(tmp_path, capsys):
    f = plan_file(tmp_path)
    rc, out, _ = run(capsys, "graph", f, "--capsule", CAPSULE, "--input", "env=dev")
    assert rc == 0 and "say" in out
    rc, _, err = run(capsys, "graph", f, "--capsule", CAPSULE, "--input", "env=qa")
    assert rc == 1 and "input.env" in err
    rc, _, err = run(capsys, "graph", f, "--capsule", CAPSULE, "--input", "nev=dev")
    assert rc == 2 and "--input nev" in err


def test_merge_keeps_the_files_other_inputs():
    doc = manifest()
    doc["spec"]["input"] = {"env": "dev", "replicas": 2}
    merged = with_inputs(parsed(doc), {"env": "prod"})
    assert merged.spec.input == {"env": "prod", "replicas": 2}


def test_a_schema_that_names_no_keys_or_accepts_others_has_no_unknown_inputs():
    open_schema = manifest()
    open_schema["spec"]["inputSchema"] = {"type": "object"}
    assert unknown_inputs(parsed(open_schema), {"anything": 1}) == []
    extra = manifest()
    extra["spec"]["inputSchema"] = {**SCHEMA, "additionalProperties": {"type": "string"}}
    assert unknown_inputs(parsed(extra), {"anything": "x"}) == []
    closed = manifest()
    closed["spec"]["inputSchema"] = {**SCHEMA, "additionalProperties": False}
    assert len(unknown_inputs(parsed(closed), {"anything": "x"})) == 1


def test_an_input_the_plan_reads_is_not_unknown_though_the_schema_omits_it():
    doc = manifest()
    doc["spec"]["steps"][0]["shell"] = "echo {{input.env}} {{input.who}}"
    assert unknown_inputs(parsed(doc), {"who": "me"}) == []
    assert len(unknown_inputs(parsed(doc), {"whom": "me"})) == 1


# -- submit: refusals before anything is created, and the manifest as given ----------------------


def test_submit_refuses_unknown_and_mistyped_inputs_before_creating():
    doc = parsed(manifest())
    assert input_refusals([doc], {}, {}) == []  # no inputs given: the operator judges the plan
    assert input_refusals([doc], {"env": "prod"}, {}) == []
    typo, missing = input_refusals([doc], {"evn": "prod"}, {})
    assert "--input evn" in typo and "'env' is a required property" in missing
    assert any("input.env" in line for line in input_refusals([doc], {"env": "qa"}, {}))


def test_submit_keeps_labels_and_annotations():
    doc = parsed(manifest(name="deploy", labels={"team": "web"}, annotations={"owner": "ana"}))
    meta = plan_body(doc, "ns1")["metadata"]
    assert meta == {
        "name": "deploy",
        "namespace": "ns1",
        "labels": {"team": "web"},
        "annotations": {"owner": "ana"},
    }


def test_generate_name_from_the_file_or_the_flag():
    generated = parsed(manifest(generateName="deploy-"))
    assert generated.generate_name and generated.plan_id == "deploy-"
    assert plan_body(generated, "ns1")["metadata"] == {
        "generateName": "deploy-",
        "namespace": "ns1",
    }
    named = parsed(manifest(name="deploy"))
    assert plan_body(named, "ns1", generate_name=True)["metadata"]["generateName"] == "deploy-"
    assert "name" not in plan_body(named, "ns1", generate_name=True)["metadata"]


def test_metadata_refusals():
    doc = manifest(generateName="")
    _, problems = parse_document(doc)
    assert [p.path for p in problems] == ["metadata.generateName"]
    capsule = yaml.safe_load(Path(CAPSULE).read_text())
    capsule["metadata"] = {"generateName": "c-"}
    got, problems = parse_document(capsule)
    assert got is None and [p.path for p in problems] == ["metadata.name"]  # Plans only
    _, problems = parse_document(manifest(name="deploy", labels={"n": 1}))
    assert [(p.path, p.message) for p in problems] == [
        ("metadata.labels", "must be a map of strings")
    ]
    ok, _ = parse_document(yaml.safe_load(Path(CAPSULE).read_text()))
    assert isinstance(ok, CapsuleDocument)


# -- answer ---------------------------------------------------------------------------------------

ASK = {
    "stepId": "confirm",
    "outputSchema": {
        "type": "object",
        "required": ["ok"],
        "properties": {"ok": {"type": "boolean"}, "replicas": {"type": "integer", "maximum": 5}},
    },
}


def test_answer_refuses_an_unknown_field_at_once():
    with pytest.raises(ValueError, match="no field 'okk'"):
        checked_answer(ASK, ["okk=true"])


def test_answer_refuses_a_value_of_the_wrong_type_at_once():
    with pytest.raises(ValueError, match="expected true or false"):
        checked_answer(ASK, ["ok=maybe"])
    with pytest.raises(ValueError, match="expected an integer"):
        checked_answer(ASK, ["ok=true", "replicas=many"])


def test_answer_is_judged_against_the_schema_by_the_engine():
    with pytest.raises(ValueError, match="does not fit the question: replicas"):
        checked_answer(ASK, ["ok=true", "replicas=9"])
    with pytest.raises(ValueError, match="'ok' is a required property"):
        checked_answer(ASK, ["replicas=1"])
    assert checked_answer(ASK, ["ok=yes", "replicas=2"]) == {"ok": True, "replicas": 2}


# -- the documented example ----------------------------------------------------------------------

DEPLOY = str(ROOT / "examples" / "deploy.yaml")
VALUES = str(ROOT / "examples" / "deploy-values.yaml")


def test_the_documented_deploy_example_runs_with_its_inputs(capsys):
    rc, out, _ = run(capsys, "validate", DEPLOY, "--capsule", CAPSULE, "--input", "env=prod")
    assert rc == 0 and "is valid" in out
    rc, out, _ = run(capsys, "graph", DEPLOY, "--capsule", CAPSULE, "--input-file", VALUES)
    assert rc == 0 and "deploy" in out
    rc, out, _ = run(
        capsys, "run", "--local", DEPLOY, "--capsule", CAPSULE, "--input", "env=dev", "-o", "json"
    )
    report = json.loads(out)
    assert rc == 0 and report["steps"][0]["output"] == "deploying to dev"
    rc, _, err = run(capsys, "validate", DEPLOY, "--capsule", CAPSULE, "--input", "evn=prod")
    assert rc == 2
    assert "--input evn: the plan's inputSchema has no such input (inputs: env, replicas)" in err
    assert given_inputs(VALUES, []) == {"env": "prod", "replicas": 3}
    assert input_refusals([parsed(yaml.safe_load(Path(DEPLOY).read_text()))], {"env": "x"}, {})


def test_two_requests_in_one_second_are_two_tokens():
    """The operator acts once per re-run token: two `rerun`s in one second must differ (a CI run
    lost its second re-run to a token made of the time alone)."""
    tokens = {request_token() for _ in range(50)}
    assert len(tokens) > 45  # a 16-bit suffix: a clash among 50 is possible, not many
    assert all(t[:8].isdigit() and t[8] == "T" for t in tokens)
