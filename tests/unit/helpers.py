"""Small builders for tests: plans and capsules from plain dicts, a loopback HTTP server."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from aiohttp import web

from planops.api import CapsuleSpec, PlanSpec
from planops.engine import CapsuleResolver, capsules


def time_bound(seconds: float) -> float:
    """A timed test's bound: `seconds`, times PLANOPS_TEST_TIME_FACTOR when set (a mutation run
    sets it: mutmut's trampolines make every call of the mutated modules slower). The security
    tests compare it with this process's CPU time (`time.process_time`), not the wall clock, so
    a machine busy with other work does not fail them: the bound catches a blow-up (an input
    that costs minutes), not a slowdown."""
    return seconds * float(os.environ.get("PLANOPS_TEST_TIME_FACTOR", "1"))


def plan(*steps: dict[str, Any], **spec: Any) -> PlanSpec:
    return PlanSpec.model_validate({"steps": list(steps), **spec})


def capsule(**spec: Any) -> CapsuleSpec:
    base: dict[str, Any] = {
        "shell": {"allow": ["echo", "sh", "sleep", "true", "false", "cat", "python3"]},
        "tools": [
            {"name": "notes", "command": ["cat"]},
            {"name": "echo-input", "command": ["cat"]},
        ],
    }
    base.update(spec)
    return CapsuleSpec.model_validate(base)


def resolver(**named: CapsuleSpec) -> CapsuleResolver:
    return capsules(named or {"default": capsule()})


EXAMPLE_CAPSULE = str(Path(__file__).resolve().parents[2] / "examples" / "capsule.yaml")


def run_local_cli(plan_file: object, *extra: str) -> subprocess.CompletedProcess[str]:
    """`kubectl-plan run --local FILE --capsule examples/capsule.yaml -o json EXTRA...`."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "planops.cli.main",
            "run",
            "--local",
            str(plan_file),
            "--capsule",
            EXAMPLE_CAPSULE,
            "-o",
            "json",
            *extra,
        ],
        capture_output=True,
        stdin=subprocess.DEVNULL,  # no terminal: an ask takes whenUnanswered
        text=True,
        timeout=60,
    )


def run_pytest(cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """pytest in a process of its own, in `cwd`, with this repository importable (`tests.…`) and
    `env` added to the environment (a value "" removes that variable)."""
    environ = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2]), **env}
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", *args],
        cwd=cwd,
        env={k: v for k, v in environ.items() if v},
        capture_output=True,
        text=True,
        timeout=120,
    )


async def serving(app: web.Application) -> tuple[web.AppRunner, int]:
    """`app` served on a loopback port of its own: the runner (cleanup() stops it) and the port."""
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
