"""What `kubectl-plan validate` prints: files in the order they were given; schema errors (an
unknown field, a wrong type) in `-o json` with code, path, line and column, next to the
semantic errors of whatever can still be judged."""

from __future__ import annotations

import json

import pytest

from planops.cli import main as cli

from .helpers import EXAMPLE_CAPSULE


def validate(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    rc = cli.main(["validate", *argv, "--capsule", EXAMPLE_CAPSULE])
    return rc, capsys.readouterr().out


def test_validate_prints_the_files_in_the_order_they_were_given(
    tmp_path, capsys: pytest.CaptureFixture[str]
):
    names = [f"p{n}" for n in (5, 1, 7, 3, 0, 6, 2, 4)]  # 8! orders: a set's is never this one
    files = []
    for name in names:
        f = tmp_path / f"{name}.yaml"
        f.write_text(json.dumps({"id": name, "steps": [{"id": "a", "shell": "echo hi"}]}))
        files.append(str(f))
    rc, out = validate(capsys, *files)
    assert rc == 0
    assert [line.split(": plan ")[1].split()[0] for line in out.splitlines()] == names
