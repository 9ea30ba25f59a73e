"""Benchmark: one reconcile's core for a big plan, restored from its facts or kept (in-process).

    python bench/kept_run.py [--sizes 5000,20000] [--rounds 20] [--memory]

A plan of N independent shell steps (test_kwok's `large`), N - 64 settled and 64 in flight. Each
round one attempt finishes and the reconciler's functional core runs once (reconciler.run.core:
plan_step, decide, the report, conclude), with the Run restored from all the facts or advanced
from the one the last round kept (engine.keeping). It prints the CPU of one reconcile's core
each way (process time, the mean of the rounds). `--memory` also prints, under tracemalloc,
what each piece a reconcile holds or builds takes at the largest size: the Plan's JSON and its
decoded dict, the parsed spec, the records and their JSON, the restore and the kept advance.
The command and today's figure go in docs/performance.md, a dated round's write-up in
docs/results/.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "operator"))

from planops.api import CapsuleSpec, PlanSpec
from planops.engine import AttemptFact, Facts, Policy, Run, StepRecord
from planops.kube import manifests
from planops.reconciler.run import core

CAPSULE = CapsuleSpec.model_validate({"image": "busybox:1", "shell": {"allow": ["true"]}})
FLYING = 64


def document(n: int) -> dict[str, Any]:
    steps = [{"id": f"s{i:05d}", "shell": "true"} for i in range(n)]
    return {"apiVersion": "planops.dev/v1alpha1", "kind": "Plan", "spec": {"steps": steps}}


def situation(spec: PlanSpec, facts: Facts, now: float) -> core.Situation:
    return core.Situation(
        ref=manifests.PlanRef("ns", "large", "uid", "r1"),
        spec=spec,
        capsule=CAPSULE,
        policy=Policy(max_steps=1_000_000),
        facts=facts,
        observed=[],
        previous={},
        run_info={"id": "r1", "generation": 1, "startedAt": "2026-12-04T00:00:00Z"},
        annotations={},
        claim=None,
        now=now,
        started_at=1.0,
    )


class Bench:
    """A run of `n` steps, all but FLYING settled; each round settles one more."""

    def __init__(self, n: int) -> None:
        self.spec = PlanSpec.model_validate(document(n)["spec"])
        self.ids = [s.id for s in self.spec.steps]
        self.start = n - FLYING
        self.reset()

    def reset(self) -> None:
        self.records = [StepRecord(i, "success", None, None, 1, 1.0, 2.0) for i in self.ids]
        del self.records[self.start :]
        self.flying = {i: AttemptFact(i, 1, 3.0) for i in self.ids[self.start :]}

    def reconcile(self, kept: Any, now: float) -> core.PlanStep:
        facts = Facts(tuple(self.records), tuple(self.flying.values()))
        step = core.plan_step(situation(self.spec, facts, now), kept)
        step.decide()
        step.answer([])
        step.conclude(step.run.report(), 1)
        return step

    def rounds(self, keep: bool, rounds: int) -> float:
        """Mean process time of one reconcile's core."""
        self.reset()
        step = self.reconcile(None, 10.0)  # the first restores (and derives the spec's shape)
        spent = 0.0
        for r in range(rounds):
            sid = self.ids[self.start + r]
            self.flying[sid] = AttemptFact(sid, 1, 3.0, "success", 10.0 + r, None, None)
            kept = step.keep() if keep else None
            t0 = time.process_time()
            step = self.reconcile(kept, 10.0 + r)
            spent += time.process_time() - t0
            assert step.kept == keep
            self.records += step.settled  # written; its attempt is no longer read
            del self.flying[sid]
        return spent / rounds


def traced(label: str, fn: Callable[[], Any]) -> Any:
    tracemalloc.reset_peak()
    before, _ = tracemalloc.get_traced_memory()
    out = fn()
    after, peak = tracemalloc.get_traced_memory()
    print(f"  {label:<52} {(after - before) / 2**20:7.1f} {(peak - before) / 2**20:9.1f}")
    return out


def memory(n: int) -> None:
    print(f"{n} steps, under tracemalloc: {'what':<46} {'held MiB':>8} {'peak MiB':>9}")
    tracemalloc.start()
    text = traced("the Plan as JSON text", lambda: json.dumps(document(n)))
    traced("  ... decoded (a watch event, a patch's answer)", lambda: json.loads(text))
    spec = traced(
        "the parsed spec (PlanSpec)", lambda: PlanSpec.model_validate(document(n)["spec"])
    )
    ids = [s.id for s in spec.steps]
    records = traced(
        f"{n - FLYING} settled records (StepRecord)",
        lambda: tuple(StepRecord(i, "success", None, None, 1, 1.0, 2.0) for i in ids[:-FLYING]),
    )
    dumped = traced(
        "  ... as JSON text (PlanReports)", lambda: json.dumps([r.to_json() for r in records])
    )
    traced("  ... decoded (a list of PlanReports)", lambda: json.loads(dumped))
    facts = Facts(records, tuple(AttemptFact(i, 1, 3.0) for i in ids[-FLYING:]))
    traced("the spec's shape (once per spec)", lambda: Run.restore("p", spec, Facts()))
    step = traced(
        "Run.restore of the facts (the run held)",
        lambda: core.plan_step(situation(spec, facts, 10.0)),
    )
    step.decide()
    step.answer([])
    kept = step.keep()
    done = AttemptFact(ids[-FLYING], 1, 3.0, "success", 11.0)
    later = Facts(records, (done, *facts.attempts[1:]))
    traced(
        "a kept Run advanced by one finished attempt",
        lambda: core.plan_step(situation(spec, later, 11.0), kept),
    )
    tracemalloc.stop()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="5000,20000")
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--memory", action="store_true")
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{'steps':>7} {'restored ms':>12} {'kept ms':>8}")
    for n in sizes:
        b = Bench(n)
        restored, kept = b.rounds(False, args.rounds), b.rounds(True, args.rounds)
        print(f"{n:>7} {restored * 1e3:>12.2f} {kept * 1e3:>8.2f}")
    if args.memory:
        memory(max(sizes))


if __name__ == "__main__":
    main()
