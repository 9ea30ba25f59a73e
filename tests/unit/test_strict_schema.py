"""Offline, a Plan's types are held to the CRD's schema as the API server holds them: what
`kubectl apply` refuses (`retries: "3"`, an unknown field), `kubectl-plan validate` refuses, with
the fix in the message. The cases are made from the CRD itself (tests/crd_cases.py); the e2e
twin (tests/e2e/test_strict_schema.py) sends the same ones to the real API server."""

from __future__ import annotations

import json

import pytest

from planops.api import parse_document
from planops.cli import main as cli
from planops.engine import validate
from tests import crd_cases

from .helpers import EXAMPLE_CAPSULE, resolver


def test_the_base_plan_sets_every_typed_field_and_reads():
    parsed, problems = parse_document(crd_cases.BASE)
    assert problems == [] and parsed is not None


@pytest.mark.parametrize(("what", "doc"), crd_cases.cases(), ids=[w for w, _ in crd_cases.cases()])
def test_every_wrong_type_and_unknown_field_the_crd_refuses_is_refused_offline(what, doc):
    parsed, problems = parse_document(doc)
    if not problems:  # typed loosely on purpose: the validator's own code says why
        assert parsed is not None and hasattr(parsed, "spec")
        paths = [e.path for e in validate(parsed.spec, resolver())]
        field = what.split(" ")[0].removeprefix("spec.")
        assert field in paths, (what, paths)
    else:
        assert any(p.path.startswith(what.split(" ")[0].removesuffix(".bogus")) for p in problems)


@pytest.mark.parametrize(
    ("field", "where"),
    [("parallelism", "spec"), ("retries", "step"), ("timeoutSeconds", "step")],
)
def test_numbers_in_quotes_are_refused_with_the_fix(tmp_path, capsys, field, where):
    spec: dict = {"steps": [{"id": "a", "shell": "echo hi"}]}
    target = spec if where == "spec" else spec["steps"][0]
    target[field] = "2"
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"id": "p", **spec}))
    rc = cli.main(["validate", str(f), "--capsule", EXAMPLE_CAPSULE])
    err = capsys.readouterr().err
    assert rc == 2
    assert f'{field}: must be an integer, got the string "2" (write it without quotes)' in err
    assert "without quotes" not in _message_for("many")


def _message_for(value: str) -> str:
    from planops.api.documents import _wrong_type  # noqa: PLC0415

    return _wrong_type("an integer", value)


def test_an_unknown_field_names_the_nearest_valid_one(tmp_path, capsys):
    f = tmp_path / "p.yaml"
    f.write_text(
        "id: p\nsteps:\n  - {id: a, shell: echo hi}\n  - {id: b, shell: echo ho, dependOn: [a]}\n"
    )
    rc = cli.main(["validate", str(f), "--capsule", EXAMPLE_CAPSULE])
    assert rc == 2
    assert "steps[1].dependOn: unknown field: did you mean `dependsOn`?" in capsys.readouterr().err


def test_an_unknown_top_level_field_names_the_nearest_too(tmp_path, capsys):
    f = tmp_path / "p.yaml"
    f.write_text(
        "apiVersion: planops.dev/v1alpha1\nkind: Plan\nmetadata: {name: p}\n"
        "spec: {steps: [{id: a, shell: echo hi}]}\nstatsu: {}\n"
    )
    assert cli.main(["validate", str(f), "--capsule", EXAMPLE_CAPSULE]) == 2
    assert "statsu: unknown field: did you mean `status`?" in capsys.readouterr().err


def test_schema_errors_are_in_the_json_with_line_and_column_next_to_the_validators(
    tmp_path, capsys
):
    f = tmp_path / "p.yaml"
    f.write_text(
        "apiVersion: planops.dev/v1alpha1\n"
        "kind: Plan\n"
        "metadata: {name: typo}\n"
        "spec:\n"
        "  steps:\n"
        "    - id: a\n"
        "      shell: rm -rf /\n"
        "    - id: b\n"
        "      shell: echo hi\n"
        "      dependOn: [a]\n"
        '      retries: "3"\n'
    )
    rc = cli.main(["validate", str(f), "--capsule", EXAMPLE_CAPSULE, "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 2 and out["valid"] is False
    got = {(e["code"], e["path"], e["line"], e["column"]) for e in out["errors"]}
    assert got == {
        ("schema", "spec.steps[1].dependOn", 10, 7),
        ("schema", "spec.steps[1].retries", 11, 7),
        ("shell-not-allowed", "steps[0].shell", 7, 7),  # judged though the schema refused
    }
    assert all(e["file"] == str(f) and e["plan"] == "typo" for e in out["errors"])


def test_an_unreadable_file_is_in_the_json_with_its_line(tmp_path, capsys):
    f = tmp_path / "p.yaml"
    f.write_text("id: p\nsteps: [\n")
    rc = cli.main(["validate", str(f), "--capsule", EXAMPLE_CAPSULE, "-o", "json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 2 and out["valid"] is False
    (error,) = out["errors"]
    assert error["code"] == "unreadable" and error["file"] == str(f) and error["line"] == 3


@pytest.mark.parametrize(
    ("path", "value"),
    [
        (("steps", 0, "retries"), 3.0),
        (("parallelism",), 2.0),
        (("steps", 0, "timeoutSeconds"), 6e1),
    ],
)
def test_a_whole_number_written_with_a_fraction_is_an_integer_as_to_the_api_server(path, value):
    """JSON has one number type: the API server takes 3.0 for an integer field (and stores it),
    so the operator must read such a stored Plan too, not call it Invalid."""
    doc = {"id": "p", "steps": [{"id": "a", "shell": "echo hi"}]}
    parent: dict = doc
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = value
    parsed, problems = parse_document(doc)
    assert problems == [] and parsed is not None
    assert json.dumps(parsed.spec.dump()).count(f"{int(value)}") >= 1
