"""The Argo CD health checks shipped with the chart, run in a real Lua 5.4 interpreter (Debian's
lua5.4, installed by .ci/run) against status fixtures."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from planops.engine import Report, StepRecord
from planops.reconciler.run import status as status_

ROOT = Path(__file__).resolve().parents[2]
CHECKS = ROOT / "charts" / "planops" / "argocd"
LUA = shutil.which("lua5.4") or shutil.which("lua")


def lua_literal(value: Any) -> str:
    if value is None:
        return "nil"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # a JSON string is a valid Lua string literal for this text
    if isinstance(value, list):
        return "{" + ", ".join(lua_literal(v) for v in value) + "}"
    return "{" + ", ".join(f"[{json.dumps(k)}] = {lua_literal(v)}" for k, v in value.items()) + "}"


def health(script: str, obj: dict[str, Any]) -> tuple[str, str]:
    if LUA is None:
        pytest.fail("no Lua interpreter: apt-get install lua5.4 (the README's install step)")
    code = (
        f"obj = {lua_literal(obj)}\n"
        f"local hs = (function()\n{(CHECKS / script).read_text()}\nend)()\n"
        "io.write(hs.status, '\\t', hs.message)"
    )
    out = subprocess.run([LUA, "-"], input=code, capture_output=True, text=True, check=True)
    status, message = out.stdout.split("\t", 1)
    return status, message


def plan(phase: str | None, **status: Any) -> dict[str, Any]:
    st = {"phase": phase, "progress": "2/3", "observedGeneration": 1, **status} if phase else None
    return {"metadata": {"generation": 1}, "status": st}


@pytest.mark.parametrize(
    ("phase", "expected"),
    [
        ("Pending", "Progressing"),
        ("Running", "Progressing"),
        ("Succeeded", "Healthy"),
        ("Failed", "Degraded"),
        ("Invalid", "Degraded"),
        ("Weird", "Unknown"),
    ],
)
def test_plan_phases(phase, expected):
    assert health("health-plan.lua", plan(phase))[0] == expected


def test_plan_without_status_waits_for_the_operator():
    assert health("health-plan.lua", plan(None)) == (
        "Progressing",
        "Waiting for the planops operator to pick the plan up",
    )


def test_plan_failure_message_carries_the_condition():
    obj = plan(
        "Failed",
        conditions=[
            {
                "type": "Succeeded",
                "status": "False",
                "message": "step 'build' failed and stopped the plan",
            }
        ],
    )
    assert health("health-plan.lua", obj) == (
        "Degraded",
        "Failed (2/3 steps): step 'build' failed and stopped the plan",
    )


def test_a_new_generation_not_yet_observed_is_progressing_even_if_the_old_run_succeeded():
    obj = plan("Succeeded")
    obj["metadata"]["generation"] = 2
    assert health("health-plan.lua", obj)[0] == "Progressing"


def test_scheduled_plan_health():
    ok = {
        "spec": {},
        "status": {
            "nextScheduleTime": "2026-11-30T09:00:00.000Z",
            "activeCount": 1,
            "conditions": [{"type": "Ready", "status": "True"}],
        },
    }
    assert health("health-scheduledplan.lua", ok) == (
        "Healthy",
        "Next run 2026-11-30T09:00:00.000Z; 1 active",
    )
    bad = {
        "spec": {},
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "False",
                    "message": "schedule '61 * * * *' is not a cron expression",
                }
            ]
        },
    }
    assert health("health-scheduledplan.lua", bad)[0] == "Degraded"
    assert (
        health("health-scheduledplan.lua", {"spec": {"suspend": True}, "status": {}})[0]
        == "Suspended"
    )
    assert health("health-scheduledplan.lua", {"spec": {}})[0] == "Progressing"


def test_the_health_of_a_100000_step_plan_comes_from_its_status_summary_alone():
    """The status the operator writes for a plan whose report is in PlanReports (only a
    summary in .status) carries every field the check reads."""
    records = [StepRecord(f"s{i}", "success", "ok\n", None, 1, 1.0, 2.0) for i in range(99_999)]
    records.append(StepRecord("last", "failed", None, "exit 1", 1, 1.0, 2.0))
    st = status_.running(
        Report("big", False, "last", tuple(records)),
        status_.Progress(
            total=100_000,
            finished=True,
            dispatched_any=True,
            generation=3,
            run={"id": "r", "generation": 3},
            refused=[],
            previous={},
            started_at=0.0,
            now=10.0,
            reports=200,
        ),
    ).to_status()
    assert len(st["report"]["steps"]) < 100  # a summary: not the 100,000 records
    st = {k: v for k, v in st.items() if v is not None}
    state, message = health("health-plan.lua", {"metadata": {"generation": 3}, "status": st})
    assert state == "Degraded"
    assert message == "Failed (100000/100000 steps): step 'last' failed and stopped the plan"
