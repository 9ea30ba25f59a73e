"""Where a bug costs most, each behaviour pinned by a test that fails when it is deleted (issue 16's
mutations, each applied by hand and watched to fail; docs/quality.md):

- restoring a run (what the reconciler does on every reconcile) keeps each step's *latest*
  attempt: an attempt that already succeeded is never dispatched again;
- a step in flight when the plan stops is reported when it ends, even with retries left (it is
  not retried, and not dropped);
- a decide / map / reduce whose body fails follows its onError (skip settles it skipped);
- the operator-wide image allowlist (`Policy(images=...)`) is honoured by the validator and by
  the operator's judge;
- a step's own limits win over its Capsule's defaults, which win over planops' (Job and
  validator alike).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from planops.api.resources import DEFAULT_RESOURCES, resources
from planops.engine import Facts, Policy, Run, decide, image_allowed, validate
from planops.engine.facts import AttemptFact
from planops.reconciler.reconcile import Reconciler

from .fakekube import FakeKube
from .helpers import capsule, plan, resolver


def ids(decision: Any) -> list[str]:
    return [d.step.id for d in decision.dispatch]


def steps_of(run: Run) -> dict[str, Any]:
    return {r.step_id: r for r in run.report().steps}


# -- restoring keeps the latest attempt ----------------------------------------------------------

RETRIED = plan({"id": "a", "shell": "true", "retries": 3}, {"id": "b", "shell": "true"})


@pytest.mark.parametrize("order", [1, -1], ids=["oldest-first", "newest-first"])
def test_a_restored_step_whose_retry_succeeded_is_settled_not_dispatched_again(order: int):
    attempts = (
        AttemptFact("a", 1, 1.0, "failed", 2.0, None, "exit code 1"),
        AttemptFact("a", 2, 3.0, "failed", 4.0, None, "exit code 1"),
        AttemptFact("a", 3, 5.0, "success", 6.0, "done"),
    )[::order]
    _, decision = decide("p", RETRIED, Facts(attempts=attempts), 7.0)
    assert ids(decision) == ["b"]  # b was never started; a is done
    (a,) = decision.settled
    assert (a.step_id, a.status, a.attempts, a.output) == ("a", "success", 3, "done")
    assert a.started_at == 1.0  # the step started with its first attempt


@pytest.mark.parametrize("order", [1, -1], ids=["oldest-first", "newest-first"])
def test_a_restored_step_whose_retry_is_in_flight_waits_for_it(order: int):
    attempts = (
        AttemptFact("a", 1, 1.0, "failed", 2.0, None, "exit code 1"),
        AttemptFact("a", 2, 3.0),  # in flight
    )[::order]
    run, decision = decide("p", RETRIED, Facts(attempts=attempts), 7.0)
    assert ids(decision) == ["b"] and decision.settled == ()
    assert ("a", 2) in run.in_flight_attempts()
    run.finish_attempt("a", 2, "success", "ok", None, 8.0)
    assert steps_of(run)["a"].attempts == 2


def test_a_restored_failed_latest_attempt_is_retried_with_the_next_number():
    attempts = (
        AttemptFact("a", 2, 3.0, "failed", 4.0, None, "second"),
        AttemptFact("a", 1, 1.0, "failed", 2.0, None, "first"),
    )
    _, decision = decide("p", RETRIED, Facts(attempts=attempts), 5.0)
    assert [(d.step.id, d.attempt) for d in decision.dispatch] == [("a", 3), ("b", 1)]


# -- a stop does not drop what is in flight ------------------------------------------------------

STOPPING = plan(
    {"id": "bad", "shell": "false"},  # onError: fail (the default) stops the plan
    {"id": "slow", "shell": "true", "retries": 2},
    {"id": "later", "shell": "true", "dependsOn": ["bad"]},
)


def test_a_step_in_flight_with_retries_left_is_reported_when_it_fails_after_the_stop():
    run = Run("p", STOPPING)
    assert ids(run.decide(0)) == ["bad", "slow"]
    run.finish_attempt("bad", 1, "failed", None, "exit code 1", 1)
    assert ids(run.decide(1)) == [] and not run.decide(1).finished  # slow still runs
    run.finish_attempt("slow", 1, "failed", None, "exit code 1", 2)
    decision = run.decide(2)
    assert ids(decision) == [] and decision.finished  # no retry after the stop
    report = run.report()
    assert not report.completed and report.failed_step == "bad"
    slow = steps_of(run)["slow"]
    assert (slow.status, slow.attempts, slow.error) == ("failed", 1, "exit code 1")
    assert "later" not in steps_of(run)  # never dispatched: absent


def test_the_same_holds_for_a_restored_run():
    facts = Facts(
        attempts=(
            AttemptFact("bad", 1, 0.0, "failed", 1.0, None, "exit code 1"),
            AttemptFact("slow", 1, 0.0, "failed", 2.0, None, "exit code 1"),
        )
    )
    run, decision = decide("p", STOPPING, facts, 3.0)
    assert ids(decision) == [] and decision.finished
    assert {s: r.status for s, r in steps_of(run).items()} == {"bad": "failed", "slow": "failed"}


def test_a_step_in_flight_that_succeeds_after_the_stop_is_reported_as_success():
    run = Run("p", STOPPING)
    run.decide(0)
    run.finish_attempt("bad", 1, "failed", None, "exit code 1", 1)
    run.finish_attempt("slow", 1, "success", "fine", None, 2)
    assert run.decide(2).finished
    assert steps_of(run)["slow"].status == "success"


# -- bodies follow onError -----------------------------------------------------------------------


def body_plan(kind: str, on_error: str) -> Any:
    failing = [{"id": "probe", "shell": "false"}]
    body: dict[str, Any] = (
        {"if": {"value": "{{input.go}}", "op": "eq", "to": True}, "then": failing}
        if kind == "decide"
        else {"over": [1, 2], "do": failing}
    )
    return plan(
        {"id": "ctl", kind: body, "onError": on_error},
        {"id": "after", "shell": "true", "dependsOn": ["ctl"]},
        input={"go": True},
    )


def run_failing_bodies(spec: Any) -> Run:
    run = Run("p", spec)
    now = 0.0
    while not (decision := run.decide(now)).finished:
        now += 1
        for step_id, attempt in run.in_flight_attempts():
            if step_id == "after":
                run.finish_attempt(step_id, attempt, "success", None, None, now)
            else:
                run.finish_attempt(step_id, attempt, "failed", None, "exit code 1", now)
        assert now < 20
    assert decision.finished
    return run


@pytest.mark.parametrize("kind", ["map", "reduce", "decide"])
def test_a_body_failure_with_on_error_skip_settles_the_control_step_skipped(kind: str):
    run = run_failing_bodies(body_plan(kind, "skip"))
    ctl = steps_of(run)["ctl"]
    assert ctl.status == "skipped"
    assert "failed: step ctl." in (ctl.error or "")  # why it was skipped
    assert steps_of(run)["after"].status == "success"
    assert run.report().completed and run.report().failed_step is None


@pytest.mark.parametrize("kind", ["map", "reduce", "decide"])
def test_a_body_failure_with_on_error_continue_settles_failed_and_goes_on(kind: str):
    run = run_failing_bodies(body_plan(kind, "continue"))
    assert steps_of(run)["ctl"].status == "failed"
    assert steps_of(run)["after"].status == "success"
    assert run.report().failed_step is None


@pytest.mark.parametrize("kind", ["map", "reduce", "decide"])
def test_a_body_failure_with_on_error_fail_stops_the_plan(kind: str):
    run = run_failing_bodies(body_plan(kind, "fail"))
    assert steps_of(run)["ctl"].status == "failed"
    assert "after" not in steps_of(run)
    assert run.report().failed_step == "ctl"


def test_a_map_that_cannot_start_follows_on_error_skip_too():
    spec = plan(
        {
            "id": "ctl",
            "map": {"over": "{{input.n}}", "do": [{"id": "x", "shell": "true"}]},
            "onError": "skip",
        },
        input={"n": 3},  # not a list
    )
    run = Run("p", spec)
    decision = run.decide(0)
    assert decision.finished and run.report().completed
    (ctl,) = decision.settled
    assert ctl.status == "skipped" and "must render to an array" in (ctl.error or "")


# -- the operator's image allowlist --------------------------------------------------------------

OPEN = capsule(images=["**"])  # the Capsule allows every image: only the operator bounds it
POLICY = Policy(images=("registry.example.com/**",))


def image_plan(image: str) -> Any:
    return plan({"id": "a", "shell": "true", "image": image})


def test_the_validator_refuses_an_image_the_operators_allowlist_does_not_match():
    assert image_allowed("docker.io/library/busybox:1", OPEN, Policy())
    assert not image_allowed("docker.io/library/busybox:1", OPEN, POLICY)
    errors = validate(image_plan("busybox:1"), resolver(default=OPEN), POLICY)
    assert [(e.code, e.path) for e in errors] == [("image-not-allowed", "steps[0].image")]
    assert "operator's allowlist" in errors[0].message
    assert (
        validate(image_plan("registry.example.com/team/app:1"), resolver(default=OPEN), POLICY)
        == []
    )
    assert validate(image_plan("busybox:1"), resolver(default=OPEN)) == []  # no policy: "*"


def _kube() -> FakeKube:
    kube = FakeKube()
    spec = {"images": ["**"], "shell": {"allow": ["true"]}}
    kube.put("capsule", {"metadata": {"name": "default", "namespace": "ns"}, "spec": spec})
    return kube


def test_the_operator_judges_plans_with_its_allowlist():
    def judged(image: str) -> list[str]:
        obj = {
            "apiVersion": "planops.dev/v1alpha1",
            "kind": "Plan",
            "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
            "spec": {"steps": [{"id": "a", "shell": "true", "image": image}]},
        }
        reconciler = Reconciler(_kube(), policy=POLICY)
        return [e.code for e in asyncio.run(reconciler.judge(obj))[2]]

    assert judged("busybox:1") == ["image-not-allowed"]
    assert judged("registry.example.com/team/app:1") == []


# -- limits: the step's, else the Capsule's, else planops' ---------------------------------------

STEP_RES = {"limits": {"memory": "512Mi"}, "requests": {"cpu": "100m"}}
CAPSULE_RES = {"limits": {"memory": "2Gi", "cpu": "2"}, "requests": {"cpu": "1", "memory": "1Gi"}}


def test_the_steps_own_limits_win_over_the_capsules_which_win_over_planops():
    step = plan({"id": "a", "shell": "true", "resources": STEP_RES}).steps[0].resources
    cap = capsule(resources=CAPSULE_RES).resources
    got = resources(step, cap)
    assert got["limits"] == {"memory": "512Mi", "cpu": "2"}
    # the Capsule's memory request (1Gi) would exceed the step's limit: lowered to it
    assert got["requests"] == {"cpu": "100m", "memory": "512Mi"}
    assert resources(None, cap)["limits"] == {"memory": "2Gi", "cpu": "2"}
    defaults = DEFAULT_RESOURCES.model_dump()
    assert resources(None, None)["limits"] == defaults["limits"]
    assert resources(step, None)["limits"] == {"cpu": "1", "memory": "512Mi"}


def test_a_step_under_the_ceiling_is_not_refused_for_its_capsules_default():
    """The Capsule's default limit (2Gi) exceeds its maxResources (1Gi); a step that sets its
    own 512Mi is fine, a step that sets none is refused naming the default."""
    cap = capsule(resources=CAPSULE_RES, maxResources={"memory": "1Gi"})
    own = plan({"id": "a", "shell": "true", "resources": STEP_RES})
    assert validate(own, resolver(default=cap)) == []
    (error,) = validate(plan({"id": "b", "shell": "true"}), resolver(default=cap))
    assert error.path == "steps[0].resources.limits.memory" and "a default" in error.message
