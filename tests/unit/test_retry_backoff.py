"""retryBackoff: attempt n+1 waits duration x factor^(n-1) after attempt n failed, capped at
maxDuration; the wait is computed from recorded times (a restored run waits exactly as the live
one), the Capsule gives a default, and both executors honour it."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest
from pydantic import ValidationError

from planops.api.attempt_models import RetryBackoff
from planops.engine import AttemptFact, Facts, Run
from planops.runners.local import LocalRunner

from .helpers import capsule, plan

BACKOFF = {"duration": "10s", "factor": 2, "maxDuration": "25s"}


def flaky(**extra: object) -> dict[str, object]:
    return {"id": "f", "shell": "false", "retries": 3, **extra}


def test_each_retry_waits_its_backoff_then_starts():
    run = Run("p", plan(flaky(retryBackoff=BACKOFF)))
    (d,) = run.decide(100.0).dispatch
    assert d.attempt == 1
    run.finish_attempt("f", 1, "failed", None, "exit code 1", 101.0)
    decision = run.decide(101.0)
    assert decision.dispatch == () and not decision.finished
    assert decision.wake_at == 111.0  # 10 s after the failure
    assert run.decide(110.9).dispatch == ()
    (d,) = run.decide(111.0).dispatch
    assert d.attempt == 2
    run.finish_attempt("f", 2, "failed", None, "exit code 1", 112.0)
    assert run.decide(112.0).wake_at == 132.0  # 20 s
    (d,) = run.decide(132.0).dispatch
    run.finish_attempt("f", 3, "failed", None, "exit code 1", 140.0)
    assert run.decide(140.0).wake_at == 165.0  # 40 s, capped at 25 s
    (d,) = run.decide(165.0).dispatch
    run.finish_attempt("f", 4, "failed", None, "exit code 1", 170.0)
    decision = run.decide(170.0)
    assert decision.finished and decision.wake_at is None  # no retries left
    assert run.report().steps[0].attempts == 4


def test_a_restored_run_waits_from_the_recorded_failure_time():
    spec = plan(flaky(retryBackoff=BACKOFF))
    facts = Facts(attempts=(AttemptFact("f", 1, 90.0, "failed", 101.0, None, "exit code 1"),))
    early = Run.restore("p", spec, facts)
    decision = early.decide(105.0)  # an operator that restarted 4 s after the failure
    assert decision.dispatch == () and decision.wake_at == 111.0
    late = Run.restore("p", spec, facts)
    (d,) = late.decide(111.5).dispatch
    assert d.attempt == 2


def test_the_capsules_backoff_is_the_default_and_a_steps_own_wins():
    spec = plan(flaky(), flaky(id="g", retryBackoff={"duration": "1s", "factor": 1}))
    run = Run("p", spec, retry_backoff=RetryBackoff.model_validate({"duration": "30s"}))
    run.decide(0.0)
    run.finish_attempt("f", 1, "failed", None, "x", 1.0)
    run.finish_attempt("g", 1, "failed", None, "x", 1.0)
    assert run.decide(1.0).wake_at == 2.0  # g's own 1 s first
    (d,) = run.decide(2.0).dispatch
    assert d.step.id == "g"
    assert run.decide(2.0).wake_at == 31.0  # f waits the Capsule's 30 s


def test_without_a_backoff_a_retry_starts_at_once():
    run = Run("p", plan(flaky()))
    run.decide(0.0)
    run.finish_attempt("f", 1, "failed", None, "x", 1.0)
    (d,) = run.decide(1.0).dispatch
    assert d.attempt == 2


def test_a_waiting_retry_in_a_map_body_wakes_its_plan():
    spec = plan(
        {
            "id": "each",
            "map": {
                "over": [1],
                "do": {"shell": "false", "retries": 1, "retryBackoff": {"duration": "5s"}},
            },
        }
    )
    run = Run("p", spec)
    (d,) = run.decide(0.0).dispatch
    run.finish_attempt(d.step.id, 1, "failed", None, "x", 1.0)
    decision = run.decide(1.0)
    assert decision.dispatch == () and decision.wake_at == 6.0 and not decision.finished
    (d,) = run.decide(6.0).dispatch
    assert d.attempt == 2


@pytest.mark.parametrize(
    "bad",
    [{"duration": "soon"}, {"duration": "10s", "factor": 0.5}, {"duration": "48h"}, {}],
)
def test_a_bad_backoff_is_refused(bad: dict[str, object]):
    with pytest.raises(ValidationError):
        RetryBackoff.model_validate(bad)


def test_the_local_runner_waits_the_backoff_between_attempts():
    attempts: list[dict[str, Any]] = []
    runner = LocalRunner(
        {"default": capsule(retryBackoff={"duration": "300ms", "factor": 1})},
        observer=lambda r: attempts.append(r) if r["event"] == "plan_step_start" else None,
    )
    spec = plan({"id": "f", "shell": "false", "retries": 2, "onError": "continue"})
    report = asyncio.run(runner.run("p", spec))
    assert report.steps[0].attempts == 3
    times = [float(r["time"]) for r in attempts]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert len(gaps) == 2 and all(g >= 0.3 for g in gaps), gaps


def test_an_attempt_that_never_ran_is_started_again_without_using_a_retry():
    run = Run("p", plan({"id": "s", "shell": "true"}))  # retries: 0
    (d,) = run.decide(0.0).dispatch
    run.finish_attempt("s", 1, "failed", None, "the node could not start it", 1.0, never_ran=True)
    (d,) = run.decide(1.0).dispatch
    assert d.attempt == 2  # again, though the step has no retries
    run.finish_attempt("s", 2, "success", "ok", None, 2.0)
    rec = run.report().steps[0]
    assert (rec.status, rec.attempts) == ("success", 2)


def test_attempts_that_never_ran_are_counted_from_the_facts_and_bounded():
    spec = plan({"id": "s", "shell": "true"})
    facts = Facts(
        attempts=tuple(
            AttemptFact("s", n, float(n), "failed", float(n), None, "start error", never_ran=True)
            for n in (1, 2, 3, 4)
        )
    )
    run = Run.restore("p", spec, facts)  # the first and three again (NEVER_RAN_AGAIN): spent
    decision = run.decide(10.0)
    assert decision.dispatch == () and decision.finished
    assert run.report().steps[0].status == "failed"
    three = Run.restore("p", spec, Facts(attempts=facts.attempts[:3]))
    (d,) = three.decide(10.0).dispatch
    assert d.attempt == 4
