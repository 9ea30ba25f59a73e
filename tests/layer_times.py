"""How long each layer of the suite took, for .ci/run's closing table (docs/test-cluster.md).

When PLANOPS_LAYER_TIMES names a file, the pytest process that reports (the only one, or the
controller of `pytest -n N`: workers send it their reports) appends one JSON line per layer at
the end: the phase (PLANOPS_LAYER_PHASE, e.g. "parallel"), the layer, its tests, their summed
time (setup, call and teardown: what the layer would take alone, one test at a time) and its
span (first start to last end: what it took beside the others). Unset, nothing is recorded.

    python -m tests.layer_times FILE     # the table of a run's lines
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest

#: the layers, by where their tests live (kwok: tests/e2e/test_kwok.py, simulated nodes)
KWOK = "tests/e2e/test_kwok.py"


def layer_of(nodeid: str) -> str:
    path = nodeid.split("::", 1)[0]
    if path == KWOK:
        return "kwok"
    parts = path.split("/")
    return parts[1] if len(parts) > 2 and parts[0] == "tests" else "other"


@dataclass
class Layer:
    tests: set[str] = field(default_factory=set)
    busy: float = 0.0
    start: float = float("inf")
    stop: float = 0.0


_layers: dict[str, Layer] = {}


def _recording() -> bool:
    return bool(os.environ.get("PLANOPS_LAYER_TIMES")) and "PYTEST_XDIST_WORKER" not in os.environ


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if not _recording():
        return
    layer = _layers.setdefault(layer_of(report.nodeid), Layer())
    layer.tests.add(report.nodeid)
    layer.busy += report.duration
    layer.start = min(layer.start, report.start)
    layer.stop = max(layer.stop, report.stop)


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not _recording() or not _layers:
        return
    phase = os.environ.get("PLANOPS_LAYER_PHASE", "")
    with Path(os.environ["PLANOPS_LAYER_TIMES"]).open("a") as out:
        for name, layer in sorted(_layers.items(), key=lambda kv: kv[1].start):
            row = {
                "phase": phase,
                "layer": name,
                "tests": len(layer.tests),
                "busy_s": round(layer.busy, 1),
                "span_s": round(layer.stop - layer.start, 1),
            }
            out.write(json.dumps(row) + "\n")
    _layers.clear()


def minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


def table(lines: list[str]) -> str:
    rows = [json.loads(line) for line in lines if line.strip()]
    out = [
        f"{'phase':<10} {'layer':<8} {'tests':>5} {'span':>7} {'one at a time':>13}",
    ]
    for r in rows:
        out.append(
            f"{r['phase']:<10} {r['layer']:<8} {r['tests']:>5} {minutes(r['span_s']):>7} "
            f"{minutes(r['busy_s']):>13}"
        )
    return "\n".join(out)


if __name__ == "__main__":
    print(table(Path(sys.argv[1]).read_text().splitlines()))
