"""`kubectl-plan validate -o json` names each of issue 41's refusals as scripts read them (code,
step, path, message): a tool input outside its inputSchema, an image the Capsule does not allow
(and a tool's own image, which it does), a template in an `if`."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from planops.cli import main as cli

CAPSULE = {
    "apiVersion": "planops.dev/v1alpha1",
    "kind": "Capsule",
    "metadata": {"name": "default"},
    "spec": {
        "image": "busybox:1.36",
        "images": ["busybox:*"],
        "shell": {"allow": ["echo"]},
        "tools": [
            {
                "name": "deploy",
                "image": "registry.example/deploy:2",  # not in images: the Capsule names it
                "command": ["deploy"],
                "inputSchema": {
                    "type": "object",
                    "required": ["env"],
                    "additionalProperties": False,
                    "properties": {"env": {"enum": ["dev", "prod"]}},
                },
            }
        ],
    },
}


def validate(tmp_path, capsys, *steps: dict[str, Any], **spec: Any) -> tuple[int, Any]:
    f = tmp_path / "plan.yaml"
    doc = {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": {"name": "p"},
        "spec": {"steps": list(steps), **spec},
    }
    f.write_text(yaml.safe_dump_all([CAPSULE, doc]))
    rc = cli.main(["validate", str(f), "-o", "json"])
    return rc, json.loads(capsys.readouterr().out)


def errors(out: Any) -> list[tuple[str, str, str]]:
    return [(e["code"], e["step"], e["path"]) for e in out["errors"]]


def test_a_tool_input_outside_its_schema(tmp_path, capsys: pytest.CaptureFixture[str]):
    rc, out = validate(
        tmp_path, capsys, {"id": "d", "tool": "deploy", "input": {"env": "qa", "x": 1}}
    )
    assert (rc, out["valid"]) == (1, False)
    assert errors(out) == [
        ("tool-input", "d", "steps[0].input"),
        ("tool-input", "d", "steps[0].input.env"),
    ]
    assert "'x' was unexpected" in out["errors"][0]["message"]
    assert "'qa' is not one of ['dev', 'prod']" in out["errors"][1]["message"]


def test_a_tool_in_its_own_image_is_valid_and_a_borrowed_image_is_not(
    tmp_path, capsys: pytest.CaptureFixture[str]
):
    rc, out = validate(tmp_path, capsys, {"id": "d", "tool": "deploy", "input": {"env": "dev"}})
    assert (rc, out["errors"]) == (0, [])
    rc, out = validate(
        tmp_path, capsys, {"id": "s", "shell": "echo", "image": "registry.example/deploy:2"}
    )
    assert rc == 1
    assert errors(out) == [("image-not-allowed", "s", "steps[0].image")]
    assert out["errors"][0]["message"] == (
        "image 'registry.example/deploy:2' is not allowed by the Capsule (its images, or its image)"
    )


def test_a_template_in_an_if(tmp_path, capsys: pytest.CaptureFixture[str]):
    rc, out = validate(
        tmp_path,
        capsys,
        {"id": "s", "shell": "echo", "if": "'{{input.env}}' == 'prod'"},
        input={"env": "prod"},
    )
    assert rc == 1
    assert errors(out) == [("condition", "s", "steps[0].if")]
    assert "$input.NAME" in out["errors"][0]["message"]
    rc, out = validate(
        tmp_path,
        capsys,
        {"id": "s", "shell": "echo", "if": "$input.env == 'prod'"},
        input={"env": "prod"},
    )
    assert (rc, out["errors"]) == (0, [])
