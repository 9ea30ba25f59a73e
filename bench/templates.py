"""Benchmark: validating chains of steps whose templates name earlier steps, and running a map.

    python bench/templates.py [--sizes 500,1000,2000,10000] [--repeat 3]

Shapes (each step depends on the one before it):
- `direct`: each step's shell names the step before it, `{{s<i-1>.output}}` (a dependency);
- `first`: each names the first step, `{{s0.output}}` (an ancestor, through all the others);
- `two-back`: each names the step two before it (an ancestor through one other);
- `ref`: each tool step's input names the step before it with seed 1's `$s<i-1>.output`.
`map` runs (decides and finishes) a map over n items, 4 at a time, through the decider.

Prints, per shape and size, the best wall-clock time of --repeat runs and the number of function
calls (cProfile, Python and builtin), which does not depend on the machine's load: where the
machine is shared, compare calls. The command and today's figure go in docs/performance.md, a
dated round's write-up in docs/results/.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))

from planops.api import CapsuleSpec, PlanSpec
from planops.engine import Policy, Run, capsules, validate

CAPSULE = CapsuleSpec.model_validate(
    {"shell": {"allow": ["echo"]}, "tools": [{"name": "t", "command": ["cat"]}]}
)
POLICY = Policy(max_steps=1_000_000)


def chain(n: int, shape: str) -> PlanSpec:
    steps: list[dict[str, Any]] = [{"id": "s0", "shell": "echo hi"}]
    for i in range(1, n):
        step: dict[str, Any] = {"id": f"s{i}", "dependsOn": [f"s{i - 1}"]}
        if shape == "ref":
            step |= {"tool": "t", "input": {"x": f"$s{i - 1}.output"}}
        else:
            named = {"direct": i - 1, "first": 0, "two-back": max(i - 2, 0)}[shape]
            step["shell"] = f"echo {{{{s{named}.output}}}}"
        steps.append(step)
    return PlanSpec.model_validate({"steps": steps})


def run_map(n: int) -> None:
    spec = PlanSpec.model_validate(
        {
            "steps": [
                {
                    "id": "m",
                    "map": {
                        "over": list(range(n)),
                        "concurrency": 4,
                        "do": [{"id": "b", "shell": "echo {{item}}"}],
                    },
                }
            ]
        }
    )
    run, now = Run("bench", spec), 0.0
    while not run.decide(now).finished:
        now += 1
        for step_id, attempt in run.in_flight_attempts():
            run.finish_attempt(step_id, attempt, "success", "x", None, now)
    assert run.report().completed


def measure(work: Callable[[], Any], repeat: int) -> tuple[float, int]:
    best = min(_timed(work) for _ in range(repeat))
    profile = cProfile.Profile()
    profile.enable()
    work()
    profile.disable()
    return best, int(pstats.Stats(profile).total_calls)  # type: ignore[attr-defined]


def _timed(work: Callable[[], Any]) -> float:
    t0 = time.perf_counter()
    work()
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="500,1000,2000,10000")
    ap.add_argument("--map-sizes", default="250,500,1000,1999")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    resolver = capsules({"default": CAPSULE})
    print(f"{'shape':<10} {'n':>7} {'ms':>10} {'calls':>12} {'calls/n':>8}")
    for shape in ("direct", "first", "two-back", "ref"):
        for n in (int(s) for s in args.sizes.split(",")):
            spec = chain(n, shape)
            assert validate(spec, resolver, POLICY) == []
            seconds, calls = measure(
                lambda spec=spec: validate(spec, resolver, POLICY), args.repeat
            )
            print(f"{shape:<10} {n:>7} {seconds * 1e3:>10.1f} {calls:>12} {calls / n:>8.1f}")
    # a run records at most 2,000 steps, the map included
    for n in (int(s) for s in args.map_sizes.split(",")):
        seconds, calls = measure(lambda n=n: run_map(n), args.repeat)
        print(f"{'map':<10} {n:>7} {seconds * 1e3:>10.1f} {calls:>12} {calls / n:>8.1f}")


if __name__ == "__main__":
    main()
