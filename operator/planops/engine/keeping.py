"""A Run kept between reconciles, advanced by the facts that are new since, instead of restored.

Restoring a run (decider.Run.restore) replays every settled record: O(records) time and a burst
of allocations on every reconcile, so a 20,000-step plan paid for its whole past to settle each
step. An executor that reconciles the same run again can keep the Run it decided with and bring
it up to date with what happened since: the attempts that finished.

Kept is only ever a shortcut for restoring: a kept Run must be exactly what `Run.restore` would
make of the same facts (tests/unit/test_kept_run.py checks that over random runs). So it is used
only when the facts line up with what the run left behind, and the caller restores otherwise:

- the settled records are those the run had when it was kept (their count, and the last one);
- the attempts are exactly the ones it expects: those it read or started or had refused, minus
  those of steps that settled since; each as it was, or finished now when it was in flight.

What a kept Run cannot know, it refuses to be kept for: a decide, map or reduce running its
bodies (their nested runs are rebuilt from facts), an attempt that failed inside the engine
(no fact records it), a finished run, and a run that a failed step or an exit is ending: a
restore settles its records first, so a retry its steps were waiting for is settled failed at
once, in the order of the records and not of the events (the restored run is the rule).
The caller adds what the engine cannot see (the same Plan, run, generation and spec; nobody
else wrote; the records written as the run holds them).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from planops.engine.decider import Run
from planops.engine.facts import AttemptFact, Facts
from planops.engine.report import StepRecord

Key = tuple[str, int]


@dataclass
class Kept:
    """A run as one reconcile left it, and what the next one's facts must show to use it."""

    run: Run
    #: each attempt the next facts hold, with its status then (None: it was in flight)
    expect: dict[Key, str | None]
    #: the settled records the next facts hold: their count and the last one
    records: int
    last: StepRecord | None


def keep(run: Run, facts: Facts, refused: Iterable[AttemptFact] = ()) -> Kept | None:
    """What a reconcile that started from `facts` and ended with `run` leaves for the next one
    (None: restore then). `refused`: the attempts it failed without an object (the status
    remembers them, so the next facts hold them)."""
    if run.finished or run.ending() or run.bodies_running() or run.unseen_failures():
        return None
    settled = run.settled
    done = {r.step_id for r in settled[len(facts.settled) :]}  # settled since: not read again
    expect: dict[Key, str | None] = {
        (f.step_id, f.attempt): f.status for f in (*facts.attempts, *refused)
    }
    for key in run.in_flight_attempts():
        expect[key] = None
    expect = {k: v for k, v in expect.items() if k[0] not in done}
    return Kept(run, expect, len(settled), settled[-1] if settled else None)


def advance(kept: Kept, facts: Facts) -> Run | None:
    """The kept run brought up to `facts`, as Run.restore would make it of them; None when they
    do not line up with what it was kept with (restore then; the kept run is spent either way)."""
    run = kept.run
    if len(facts.settled) != kept.records or (facts.settled and facts.settled[-1] != kept.last):
        return None
    expect = kept.expect
    if len(facts.attempts) != len(expect):
        return None
    new: list[tuple[float, int, AttemptFact]] = []
    first: dict[str, float] = {}
    for f in facts.attempts:
        key = (f.step_id, f.attempt)
        if key not in expect:
            return None
        was = expect.pop(key)  # each once: a repeated fact is a mismatch
        if was is not None and f.status != was:
            return None
        found = run.step_state(f.step_id)
        if found is None:  # a body step's attempt: its nested run is restored
            return None
        if was is None and f.status is not None:
            new.append((f.finished_at or 0.0, found[1], f))
        first[f.step_id] = min(first.get(f.step_id, f.started_at), f.started_at)
    # as restored: a step's start is its earliest attempt's (a Job's creation, not the moment
    # the run decided to create it)
    for step_id, started in first.items():
        found = run.step_state(step_id)
        assert found is not None
        if found[0].settled is None:
            found[0].started_at = started
    run.budget.restored = len(facts.settled)
    run.follow([f.step_id for f in facts.attempts])
    for _, _, f in sorted(new, key=lambda n: (n[0], n[1])):  # restore's order
        run.finish_fact(f)
    if run.ending():  # a failure just came in: a restore settles the waiting retries at once
        return None
    return run
