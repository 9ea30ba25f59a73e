"""`kubectl-plan validate` imports only what validating needs, so it starts fast
(docs/performance.md): not the local runner or asyncio (`run`), not croniter (a ScheduledPlan's
schedule), not jsonschema (control steps, ask steps, input schemas), not the decider, not the
graph drawing, not the Kubernetes client. Each is imported where a verb or a plan needs it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
NOT_NEEDED = (
    "asyncio",
    "croniter",
    "jsonschema",
    "kubernetes",
    "planops.runners.local",
    "planops.engine.decider",
    "planops.engine.jsonschemas",
    "planops.cli.graph",
)


def imported(*argv: str) -> tuple[int, list[str]]:
    code = (
        "import contextlib, io, json, sys; from planops.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    rc = main({list(argv)!r})\n"
        f"print(json.dumps([rc, sorted(m for m in {NOT_NEEDED!r} if m in sys.modules)]))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    rc, found = json.loads(out.stdout.strip().splitlines()[-1])
    return rc, found


def test_validating_a_plan_imports_only_what_validating_needs():
    capsule = str(EXAMPLES / "capsule.yaml")
    assert imported("validate", str(EXAMPLES / "hello.yaml"), "--capsule", capsule) == (0, [])


def test_what_a_plan_needs_is_imported_when_it_needs_it(tmp_path):
    plan = tmp_path / "plan.yaml"
    plan.write_text(
        "apiVersion: planops.dev/v1alpha1\nkind: Plan\nmetadata: {name: p}\n"
        "spec:\n  inputSchema: {type: object}\n"
        "  steps:\n  - {id: a, exit: {status: success}}\n"
    )
    rc, found = imported("validate", str(plan), "--capsule", str(EXAMPLES / "capsule.yaml"))
    assert rc == 0
    assert found == ["jsonschema", "planops.engine.jsonschemas"]
