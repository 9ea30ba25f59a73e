"""Seed 2 control steps planops evaluates itself: exit and filter, and the gate grammar."""

from __future__ import annotations

import asyncio
import json

import pytest

from planops.engine import Facts, Run, validate
from planops.engine.control import GateError, holds
from planops.runners.local import LocalRunner

from .helpers import capsule, plan, resolver, run_local_cli


def lk(root):
    return {"input": {"n": 3, "s": "abc", "xs": [1, 2], "none": None, "obj": {}}}.get(root)


@pytest.mark.parametrize(
    ("gate", "expected"),
    [
        ({"value": "{{input.n}}", "op": "eq", "to": 3}, True),
        ({"value": "{{input.n}}", "op": "eq", "to": "3"}, False),  # typed: 3 is not "3"
        ({"value": "{{input.n}}", "op": "ne", "to": 4}, True),
        ({"value": "{{input.n}}", "op": "gt", "to": 2}, True),
        ({"value": "{{input.n}}", "op": "lt", "to": 2}, False),
        ({"value": "{{input.n}}", "op": "gte", "to": 3}, True),
        ({"value": "{{input.n}}", "op": "lte", "to": 2.5}, False),
        ({"value": "{{input.none}}", "op": "empty"}, True),
        ({"value": "{{input.obj}}", "op": "empty"}, True),
        ({"value": "{{input.xs}}", "op": "not_empty"}, True),
        ({"value": "{{input.s}}", "op": "contains", "to": "bc"}, True),
        ({"value": "{{input.xs}}", "op": "contains", "to": 2}, True),
        ({"value": "{{input.xs}}", "op": "contains", "to": 5}, False),
    ],
)
def test_gate_operators(gate, expected):
    assert holds(gate, lk) is expected


def test_numeric_ops_refuse_non_numbers():
    with pytest.raises(GateError):
        holds({"value": "{{input.s}}", "op": "gt", "to": 1}, lk)


def codes(spec):
    return [(e.code, e.path) for e in validate(spec, resolver())]


def test_control_refusals():
    got = codes(
        plan(
            {"id": "a", "exit": {"status": "maybe", "when": {"value": 1, "op": "bigger", "to": 2}}},
            {"id": "b", "filter": {"over": [1], "where": {"value": 1, "op": "empty", "to": 2}}},
            {"id": "c", "filter": {"where": {"op": "eq", "to": 1}}},
            {"id": "d", "agent": {"prompt": "x"}},
            {"id": "e", "map": {"over": [], "do": {"tool": "notes"}}},
            {"id": "f", "tool": "notes", "input": {"x": "{{item}}"}},
        )
    )
    assert got == [
        ("control", "steps[0].exit.status"),
        ("gate", "steps[0].exit.when.op"),
        ("gate", "steps[1].filter.where.to"),
        ("control", "steps[2].filter.over"),
        ("gate", "steps[2].filter.where.value"),
        ("unsupported", "steps[3].agent"),
        ("template", "steps[5].input.x"),
    ]
    assert (
        "capsule step"
        in validate(plan({"id": "d", "agent": {"prompt": "x"}}), resolver())[0].message
    )


def run_local(spec):
    return asyncio.run(LocalRunner({"default": capsule()}).run("p", spec))


def test_filter_partitions_in_input_order_with_item_and_index():
    spec = plan(
        {
            "id": "big",
            "filter": {
                "over": "{{input.sizes}}",
                "where": {"value": "{{item}}", "op": "gt", "to": 2},
            },
        },
        {
            "id": "odd",
            "filter": {
                "over": "{{input.sizes}}",
                "where": {"value": "{{index}}", "op": "eq", "to": 1},
            },
        },
        {
            "id": "use",
            "tool": "echo-input",
            "dependsOn": ["big"],
            "input": {"big": "{{big.json.items}}"},
        },
        input={"sizes": [1, 5, 2, 7]},
    )
    assert validate(spec, resolver()) == []
    rep = run_local(spec).to_json()
    steps = {s["stepId"]: s for s in rep["steps"]}
    assert json.loads(steps["big"]["output"]) == {
        "count": 2,
        "items": [5, 7],
        "dropped": [1, 2],
        "dropped_count": 2,
    }
    assert json.loads(steps["odd"]["output"])["items"] == [5]
    assert json.loads(steps["use"]["output"]) == {"big": [5, 7]}
    assert steps["big"]["attempts"] == 1


def test_an_exit_that_does_not_fire_passes():
    spec = plan(
        {
            "id": "stop",
            "exit": {
                "when": {"value": "{{input.dry}}", "op": "eq", "to": True},
                "status": "success",
            },
        },
        {"id": "work", "shell": "echo work", "dependsOn": ["stop"]},
        input={"dry": False},
    )
    rep = run_local(spec).to_json()
    assert [s["stepId"] for s in rep["steps"]] == ["stop", "work"] and rep["completed"]
    assert json.loads(rep["steps"][0]["output"]) == {"passed": True} and "exit" not in rep


def test_an_exit_that_fires_ends_the_plan_with_its_status_message_and_output():
    spec = plan(
        {
            "id": "stop",
            "exit": {
                "when": {"value": "{{input.dry}}", "op": "eq", "to": True},
                "status": "success",
                "message": "dry run for {{input.env}}",
                "output": {"dry": "{{input.dry}}"},
            },
        },
        {"id": "work", "shell": "echo work", "dependsOn": ["stop"]},
        input={"dry": True, "env": "prod"},
        output={"ignored": "x"},
    )
    rep = run_local(spec).to_json()
    assert [s["stepId"] for s in rep["steps"]] == ["stop"]  # never dispatched: absent
    assert rep["completed"] is True and rep["failedStep"] is None
    assert rep["exit"] == {"stepId": "stop", "status": "success", "message": "dry run for prod"}
    assert rep["output"] == {"dry": True}


def test_a_fired_exit_is_restored_from_facts_like_the_reconciler_does():
    spec = plan(
        {"id": "stop", "exit": {"status": "error", "message": "no"}},
        {"id": "work", "shell": "echo", "dependsOn": ["stop"]},
    )
    live = Run("p", spec)
    assert live.decide(0).finished
    restored = Run.restore("p", spec, Facts(settled=tuple(live.settled)))
    d = restored.decide(1)
    assert d.dispatch == () and d.finished
    assert restored.report().to_json()["exit"]["status"] == "error"


def test_kubectl_plan_run_exits_4_for_an_exit_with_status_error(tmp_path):
    f = tmp_path / "p.json"
    f.write_text(
        json.dumps(
            {
                "id": "x",
                "steps": [
                    {
                        "id": "guard",
                        "exit": {"status": "error", "message": "refusing to run on prod"},
                    },
                    {"id": "deploy", "shell": "echo deploy", "depends_on": ["guard"]},
                ],
            }
        )
    )
    r = run_local_cli(f)
    assert r.returncode == 4, r.stderr
    assert json.loads(r.stdout)["exit"]["message"] == "refusing to run on prod"
