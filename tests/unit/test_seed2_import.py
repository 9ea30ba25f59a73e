"""The seed-2 file importer: `{identifier, steps: [{id, tool_name, input}]}` to a planops plan."""

from __future__ import annotations

import json
from pathlib import Path

from planops.api import parse_document
from planops.api.seed2 import convert

from .helpers import run_local_cli

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "seed2-triage.yaml"


def test_steps_are_chained_and_tool_names_become_kinds():
    plan, problems = convert(
        {
            "identifier": "p",
            "name": "P",
            "description": "catalog text",
            "exemplars": ["do it"],
            "steps": [
                {"id": "a", "tool_name": "notes", "input": {"x": 1}, "reasoning": "why"},
                {"id": "b", "tool_name": "plan__build_it", "input": "compile"},
                {
                    "id": "c",
                    "tool_name": "decide",
                    "input": {
                        "if": {"value": 1, "op": "eq", "to": 1},
                        "then": {"tool_name": "notes", "input": {}},
                        "else": [{"id": "e1", "tool_name": "exit", "input": {"status": "error"}}],
                    },
                },
                {
                    "id": "d",
                    "tool_name": "ask",
                    "input": {"prompt": "q", "output_schema": {}, "when_unanswered": "fail"},
                },
            ],
        }
    )
    assert problems == []
    assert plan == {
        "id": "p",
        "steps": [
            {"id": "a", "tool": "notes", "input": {"x": 1}},
            {"id": "b", "capsule": "build-it", "input": "compile", "dependsOn": ["a"]},
            {
                "id": "c",
                "decide": {
                    "if": {"value": 1, "op": "eq", "to": 1},
                    "then": {"tool": "notes", "input": {}},
                    "else": [{"id": "e1", "exit": {"status": "error"}}],
                },
                "dependsOn": ["b"],
            },
            {
                "id": "d",
                "ask": {"prompt": "q", "outputSchema": {}, "whenUnanswered": "fail"},
                "dependsOn": ["c"],
            },
        ],
    }


def test_a_solver_is_refused_pointing_at_output():
    doc, problems = parse_document(
        {"identifier": "p", "steps": [], "solver": {"query_to_answer": "x", "data": {}}}
    )
    assert doc is None
    assert [p.path for p in problems] == ["solver"]
    assert "output" in problems[0].message


def test_the_example_seed2_file_runs_locally():
    done = run_local_cli(EXAMPLE)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["output"] == {
        "probed": [{"host": "alpha", "n": 0}, {"host": "gamma", "n": 1}],
        "ok": True,
    }
    assert [s["stepId"] for s in report["steps"]] == [
        "live",
        "probe.0.call",
        "probe.1.call",
        "probe",
        "confirm",
    ]
