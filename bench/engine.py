"""Benchmark: validate and fully simulate the scheduling of large plans.

    python bench/engine.py [--sizes 1000,10000,100000] [--repeat 3]

For each shape and size it prints the best of `--repeat` runs of: parsing the plan document
(pydantic), validation (every refusal check, cycle detection), and a complete simulated run
(the decider dispatching every step; the simulated executor finishes every in-flight step before
asking again). `restore ms` is one reconcile's share: restoring a run half done from its facts,
deciding and reporting (not counted in the total). The command and today's figure go in
docs/performance.md, a dated round's write-up in docs/results/.
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))

from planops.api import CapsuleSpec, PlanSpec
from planops.engine import Policy, Run, capsules, validate
from planops.engine.facts import Facts
from planops.engine.report import StepRecord

CAPSULE = CapsuleSpec.model_validate(
    {"shell": {"allow": ["true"]}, "tools": [{"name": "t", "command": ["true"]}]}
)


POLICY = Policy(max_steps=1_000_000)


def random_dag(n: int, rng: random.Random) -> list[dict[str, Any]]:
    """Each step depends on up to 3 random earlier steps; 1 in 10 is a tool step."""
    steps = []
    for i in range(n):
        deps = sorted({f"s{rng.randrange(i)}" for _ in range(rng.randint(0, 3))}) if i else []
        step: dict[str, Any] = {"id": f"s{i}", "dependsOn": deps}
        if i % 10 == 0:
            step |= {"tool": "t", "input": {"from": f"$s{deps[0][1:]}.output"} if deps else {}}
        else:
            step["shell"] = "true"
        steps.append(step)
    return steps


def fan_out(n: int, _rng: random.Random) -> list[dict[str, Any]]:
    """One root, n-2 parallel steps depending on it, one sink depending on all of them."""
    mid = [{"id": f"m{i}", "shell": "true", "dependsOn": ["root"]} for i in range(n - 2)]
    sink = {"id": "sink", "shell": "true", "dependsOn": [m["id"] for m in mid]}
    return [{"id": "root", "shell": "true"}, *mid, sink]


def simulate(spec: PlanSpec) -> int:
    # a copy: a new spec object, whose shape (engine.shape) is derived again, as a new plan's is
    run = Run("bench", spec.model_copy())
    now, rounds = 0.0, 0
    while True:
        d = run.decide(now)
        if d.finished:
            break
        rounds += 1
        now += 1.0
        for sid in run.in_flight_attempts():
            run.finish_attempt(sid[0], sid[1], "success", "ok", None, now)
    assert run.report().completed
    return rounds


def half_settled(spec: PlanSpec) -> Facts:
    """The facts of a run half done: the first half of the steps (in declaration order, which
    both shapes keep topological) settled, and nothing in flight."""
    half = spec.steps[: len(spec.steps) // 2]
    return Facts(tuple(StepRecord(s.id, "success", "ok", None, 1, 1.0, 2.0) for s in half), ())


def restore(spec: PlanSpec, facts: Facts) -> int:
    """What one reconcile of a running plan asks of the engine: restore the run from its facts,
    decide, report. A second restore of the same spec object reuses its shape (engine.shape)."""
    run = Run.restore("bench", spec, facts)
    decision = run.decide(3.0)
    run.report()
    return len(decision.dispatch)


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - t0)
    return min(times), result


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    rng = random.Random(42)
    resolver = capsules({"default": CAPSULE})
    print(
        f"{'shape':<10} {'steps':>7} {'edges':>7} {'parse ms':>9} {'validate ms':>12} "
        f"{'schedule ms':>12} {'total ms':>9} {'µs/(step+edge)':>15} {'rounds':>7} "
        f"{'restore ms':>11}"
    )
    for shape in (random_dag, fan_out):
        for n in (int(s) for s in args.sizes.split(",")):
            raw = {"steps": shape(n, rng)}
            edges = sum(len(s.get("dependsOn", [])) for s in raw["steps"])
            t_parse, spec = best(lambda raw=raw: PlanSpec.model_validate(raw), args.repeat)
            t_val, errors = best(lambda spec=spec: validate(spec, resolver, POLICY), args.repeat)
            assert errors == [], errors[:3]
            t_sched, rounds = best(lambda spec=spec: simulate(spec), args.repeat)
            total = t_parse + t_val + t_sched
            facts = half_settled(spec)
            t_restore, _ = best(lambda spec=spec, facts=facts: restore(spec, facts), args.repeat)
            print(
                f"{shape.__name__:<10} {n:>7} {edges:>7} {t_parse * 1e3:>9.1f} "
                f"{t_val * 1e3:>12.1f} "
                f"{t_sched * 1e3:>12.1f} {total * 1e3:>9.1f} {total * 1e6 / (n + edges):>15.2f} "
                f"{rounds:>7} {t_restore * 1e3:>11.1f}"
            )


if __name__ == "__main__":
    main()
