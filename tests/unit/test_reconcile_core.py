"""The reconciler's decisions as values: reconciler.run.core is given what a reconcile read (a
Situation) and answers with intents (the objects to create or delete, the status, Events and
metrics, the next wake-up). No API, fake or real: each test builds the facts, feeds the API
server's answers by hand and compares what comes back."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from planops.api import CapsuleSpec, PlanSpec, names
from planops.engine import AttemptFact, Facts, Policy, StepRecord
from planops.engine import dispatch as rules
from planops.engine.policy import MAX_DEPTH
from planops.kube import manifests
from planops.reconciler.effects import body_events
from planops.reconciler.effects.intents import Create, CreateAnswer, Event, Intents, Metric, Told
from planops.reconciler.run import core
from planops.reconciler.run.observe import Observed

from .helpers import capsule, plan

NOW = 1_800_000_000.0
RUN = "r1"
REF = manifests.PlanRef("ns", "p", "uid-p", RUN)
NO_FACTS = Facts()


def situation(
    spec: PlanSpec, cap: CapsuleSpec | None = None, *, generation: int = 1, **given: Any
) -> core.Situation:
    """The Situation of the run `RUN` of Plan `p` (generation `generation`): `given` its fields,
    the others a fresh run's."""
    fields: dict[str, Any] = {
        "ref": REF,
        "facts": NO_FACTS,
        "observed": (),
        "previous": {},
        "annotations": {},
        "now": NOW,
        "started_at": NOW,
        "later": False,
        "policy": Policy(),
        "claim": None,
        "status_records": 50,
    }
    fields.update({k: v for k, v in given.items() if v is not None})
    fields["observed"] = list(fields["observed"])
    return core.Situation(
        spec=spec,
        capsule=cap or capsule(image="busybox:1"),
        run_info={"id": RUN, "generation": generation, "startedAt": "2027-01-15T08:00:00Z"},
        **fields,
    )


def created(creates: list[Create]) -> list[CreateAnswer]:
    """The API server creates every object."""
    return [CreateAnswer(c.dispatch, created=f"obj-{c.dispatch.step.id}") for c in creates]


def advance(step: core.PlanStep, answer: Any = created) -> Intents:
    """What the reconciler's actuator does with a step that advances, with `answer` as the
    API server; the report as written is the run's own."""
    creates = step.decide()
    while step.answer(answer(creates)):
        creates = step.decide()
    return step.conclude(step.run.report(), 0)


def events(intents: Intents) -> list[str]:
    return intents.told.reasons()


def denied(intents: Intents) -> str:
    """Why the one attempt refused was (its CallDenied Event's message, past the attempt)."""
    (message,) = [e.message for e in intents.told.events if e.reason == "CallDenied"]
    return message.split(": ", 1)[1]


def test_a_step_creates_its_job_and_the_status_says_it_runs():
    step = core.plan_step(situation(plan({"id": "a", "shell": "true"})))
    creates = step.decide()
    assert [(c.kind, c.dispatch.step.id) for c in creates] == [("job", "a")]
    assert creates[0].body is not None
    assert creates[0].body["metadata"]["labels"][names.LABEL_RUN] == RUN
    assert not step.answer(created(creates))
    intents = step.conclude(step.run.report(), 0)
    assert intents.status["phase"] == "Running"
    assert intents.status["inFlight"] == [
        {"stepId": "a", "attempt": 1, "since": intents.status["inFlight"][0]["since"]}
    ]
    assert intents.running == 1 and not intents.closes and intents.wake is None
    assert events(intents) == ["StepStarted"]


def refused_at_dispatch(spec: PlanSpec, cap: CapsuleSpec) -> tuple[core.PlanStep, Intents]:
    """A one-step plan whose attempt dispatch refuses: nothing is created, the step fails."""
    step = core.plan_step(situation(spec, cap))
    assert step.decide() == []  # nothing to create
    assert step.answer([]) is True  # the attempt failed: decide again
    assert step.decide() == []
    assert step.answer([]) is False
    return step, step.conclude(step.run.report(), 0)


def test_an_image_the_capsule_no_longer_allows_is_refused_at_dispatch_without_a_request():
    spec = plan({"id": "a", "shell": "true", "image": "evil.example/x:1"})
    cap = capsule(image="busybox:1", images=["busybox:*"])
    step, intents = refused_at_dispatch(spec, cap)
    assert intents.status["phase"] == "Failed"
    assert [r.error for r in step.run.report().steps] == [denied(intents)]
    assert "evil.example/x:1" in denied(intents)
    assert ("calls_denied", (), 1.0, False) in intents.told.metrics


def test_a_capsule_step_past_the_nesting_depth_is_refused():
    spec = plan({"id": "c", "capsule": "other", "input": "go"})
    cap = capsule(image="busybox:1", spawn={"allow": ["other"]})
    deep = replace(REF, depth=MAX_DEPTH)
    step = core.plan_step(situation(spec, cap, ref=deep))
    assert step.decide() == []
    assert step.answer([]) is True
    shallow = core.plan_step(situation(spec, cap))
    assert [c.kind for c in shallow.decide()] == ["plan"]


def test_a_capsule_step_back_into_a_capsule_above_it_is_refused_as_a_cycle():
    spec = plan({"id": "c", "capsule": "other", "input": "go"})
    cap = capsule(image="busybox:1", spawn={"allow": ["other"]})
    step = core.plan_step(situation(spec, cap, ref=replace(REF, lineage=("other",))))
    assert step.decide() == []
    step.answer([])
    assert "cycle" in denied(step.conclude(step.run.report(), 0))


def test_a_jobs_deadline_is_clamped_to_the_capsules_maximum():
    spec = plan({"id": "a", "shell": "true"})
    step = core.plan_step(situation(spec, capsule(image="busybox:1", maxTimeoutSeconds=5)))
    (create,) = step.decide()
    assert create.body is not None
    assert create.body["spec"]["template"]["spec"]["activeDeadlineSeconds"] == 5


def test_a_refused_create_fails_the_attempt_and_the_next_step_starts_in_the_same_reconcile():
    spec = plan(
        {"id": "a", "shell": "true", "onError": "continue"},
        {"id": "b", "shell": "true", "dependsOn": ["a"]},
    )
    step = core.plan_step(situation(spec))
    first = step.decide()
    assert [c.dispatch.step.id for c in first] == ["a"]
    assert step.answer([CreateAnswer(first[0].dispatch, refusal="denied by policy")]) is True
    second = step.decide()
    assert [c.dispatch.step.id for c in second] == ["b"]
    assert step.answer(created(second)) is False
    intents = step.conclude(step.run.report(), 0)
    assert [(r.step_id, r.status, r.error) for r in step.run.report().steps] == [
        ("a", "failed", "denied by policy")
    ]
    assert intents.told.events[0] == Event(
        "CallDenied",
        "step a attempt 1: denied by policy",
        True,
        True,
        {"step": "a", "attempt": 1},
    )
    assert events(intents) == ["CallDenied", "StepFailed", "StepStarted"]


def test_an_attempt_refused_before_is_remembered_and_its_retry_waits_out_the_backoff():
    spec = plan({"id": "a", "shell": "true", "retries": 1, "retryBackoff": {"duration": "10s"}})
    refused = AttemptFact("a", 1, NOW - 1, "failed", NOW - 1, None, "denied")
    step = core.plan_step(situation(spec, facts=Facts((), (refused,))))
    assert step.decide() == []  # the retry is not due yet
    assert step.answer([]) is False
    intents = step.conclude(step.run.report(), 0)
    assert [r["attempt"] for r in intents.status["refusedAttempts"]] == [1]
    assert intents.wake is not None and 8.9 < intents.wake < 9.2  # due 10 s after it failed


def test_refusals_in_a_row_stop_after_the_rounds_bound_and_look_again_at_once():
    spec = plan({"id": "a", "shell": "true", "retries": 100})
    step = core.plan_step(situation(spec))
    intents = advance(
        step, lambda creates: [CreateAnswer(c.dispatch, refusal="no") for c in creates]
    )
    assert step.rounds == core.MAX_ROUNDS == events(intents).count("CallDenied")
    assert intents.status["phase"] != "Failed"  # not over: the next reconcile goes on
    assert intents.wake == core.WAKE_MARGIN


def test_cancel_deletes_each_attempt_in_flight_and_fails_the_plan():
    spec = plan({"id": "a", "shell": "sleep 60"}, {"id": "c", "capsule": "x", "input": "go"})
    facts = Facts((), (AttemptFact("a", 1, NOW - 5), AttemptFact("c", 1, NOW - 5)))
    observed = (
        Observed("a", 1, "job-a", "job", NOW - 5, None),
        Observed("c", 1, "plan-c", "plan", NOW - 5, None),
    )
    s = situation(
        spec,
        capsule(image="busybox:1", spawn={"allow": ["x"]}),
        facts=facts,
        observed=observed,
        annotations={names.ANNOTATION_CANCEL: "by alice"},
        previous={"phase": "Running"},
    )
    step = core.plan_step(s)
    assert step.halt is not None and (step.halt.reason, step.halt.why) == ("Cancelled", "by alice")
    intents = advance(step)
    assert [(d.kind, d.name) for d in intents.deletes] == [("job", "job-a"), ("plan", "plan-c")]
    assert intents.status["phase"] == "Failed"
    assert intents.closes and intents.running == 0
    assert events(intents) == [
        "PlanStopped",
        "StepFailed",
        "StepFailed",
        "DelegationFinished",
        "PlanFailed",
    ]
    assert ("plans", ("cancelled",), 1.0, False) in intents.told.metrics
    written = Facts(step.run.report().steps, ())  # what the next reconcile reads back
    told = core.plan_step(replace(s, facts=written, previous=intents.status))
    again = advance(told)  # its end told already
    assert again.status["phase"] == "Failed" and again.deletes == ()
    assert again.told.events == [] and again.told.metrics == []


def test_a_plan_past_its_deadline_stops_and_one_before_it_wakes_at_it():
    spec = plan({"id": "a", "shell": "sleep 60"}, activeDeadlineSeconds=30)
    facts = Facts((), (AttemptFact("a", 1, NOW - 5),))
    late = core.plan_step(situation(spec, facts=facts, started_at=NOW - 31))
    assert late.halt is not None and late.halt.reason == "DeadlineExceeded"
    assert late.halt.at == NOW - 1  # the deadline itself, whenever it is noticed
    early = core.plan_step(situation(spec, facts=facts, started_at=NOW - 10))
    assert early.halt is None
    assert advance(early).wake == 20 + core.WAKE_MARGIN


def test_an_answer_annotation_for_this_run_settles_the_ask():
    ask = {"id": "q", "ask": {"prompt": "go?", "outputSchema": {"type": "object"}}}
    spec = plan(ask)
    waiting = {
        "stepId": "q",
        "attempt": 1,
        "prompt": "go?",
        "outputSchema": {"type": "object"},
        "since": "2027-01-15T08:00:00Z",
        "deadline": "2027-01-15T09:00:00Z",
        "question": "q-1",
    }
    facts = Facts((), (AttemptFact("q", 1, NOW - 5),))

    def answer(**given: Any) -> dict[str, str]:
        return {manifests.answer_annotation("q"): json.dumps({**given, "answer": {"ok": True}})}

    s = situation(
        spec, facts=facts, previous={"asks": [waiting]}, annotations=answer(run=RUN, question="q-1")
    )
    intents = advance(core.plan_step(s))
    assert intents.status["phase"] == "Succeeded"
    # another run's, another question's (an earlier attempt, an earlier run), or one that
    # names no question (written before questions had ids) is no answer to this one
    for other in ({"run": "r0", "question": "q-1"}, {"run": RUN, "question": "q-0"}, {"run": RUN}):
        still = advance(core.plan_step(replace(s, annotations=answer(**other))))
        assert still.status["phase"] != "Succeeded", other
        assert [a["stepId"] for a in still.status["asks"]] == ["q"]


def test_a_dispatched_ask_waits_in_the_status_and_wakes_the_plan_at_its_deadline():
    spec = plan({"id": "q", "ask": {"prompt": "go?"}, "timeoutSeconds": 60})
    step = core.plan_step(situation(spec))
    assert step.decide() == []  # an ask creates nothing
    assert step.answer([]) is False
    intents = step.conclude(step.run.report(), 0)
    assert [a["stepId"] for a in intents.status["asks"]] == ["q"]
    assert intents.wake == 60 + core.WAKE_MARGIN
    assert events(intents) == ["AskWaiting", "StepStarted"]


def test_an_output_not_readable_yet_wakes_the_plan_soon():
    step = core.plan_step(situation(plan({"id": "a", "shell": "true"}), later=True))
    assert advance(step).wake == core.LATER_SECONDS + core.WAKE_MARGIN


def test_a_child_plan_created_is_told_as_a_delegation():
    spec = plan({"id": "c", "capsule": "x", "input": "go"})
    step = core.plan_step(situation(spec, capsule(image="busybox:1", spawn={"allow": ["x"]})))
    intents = advance(step)
    assert events(intents) == ["DelegationStarted", "StepStarted"]
    assert intents.told.events[0] == Event(
        "DelegationStarted",
        "step c delegates to capsule x as plan obj-c",
        False,
        True,
        {"step": "c", "child": "obj-c"},
    )
    adopted = core.plan_step(step.s)  # made before a restart: started already, told then
    assert events(
        advance(adopted, lambda creates: [CreateAnswer(c.dispatch) for c in creates])
    ) == ["StepStarted"]


def test_a_finished_run_closes_and_counts_its_end_once():
    spec = plan({"id": "a", "shell": "true"})
    done = StepRecord("a", "success", "", None, 1, NOW - 2, NOW - 1)
    s = situation(spec, facts=Facts((done,), ()))
    intents = advance(core.plan_step(s))
    assert intents.closes
    assert intents.status["phase"] == "Succeeded"
    assert ("plans", ("succeeded",), 1.0, False) in intents.told.metrics
    assert intents.told.events[-1] == Event("PlanSucceeded", "1/1 steps settled", False, True, {})
    again = advance(core.plan_step(replace(s, previous={"phase": "Succeeded"})))
    assert not [m for m in again.told.metrics if m.name == "plans"]


def test_a_jobs_deadline_and_workspace_follow_the_operators_policy_and_the_runs_claim():
    spec = plan({"id": "a", "shell": "true"})
    s = situation(spec, policy=Policy(max_timeout_seconds=7), claim="ws-claim")
    (create,) = core.plan_step(s).decide()
    assert create.body is not None
    pod = create.body["spec"]["template"]["spec"]
    assert pod["activeDeadlineSeconds"] == 7
    assert {"name": "workspace", "persistentVolumeClaim": {"claimName": "ws-claim"}} in pod[
        "volumes"
    ]


def test_a_running_runs_status_counts_its_steps_report_objects_and_generation():
    spec = plan(
        {"id": "a", "shell": "true"}, {"id": "b", "shell": "true"}, {"id": "c", "shell": "sleep 9"}
    )
    done = [StepRecord(i, "success", "", None, 1, NOW - 2, NOW - 1) for i in ("a", "b")]
    s = situation(spec, facts=Facts(tuple(done), ()), generation=2, status_records=1)
    step = core.plan_step(s)
    intents = advance(step)
    st = intents.status
    assert (st["observedGeneration"], st["phase"], st["progress"]) == (2, "Running", "2/3")
    assert st["run"] == s.run_info
    step = core.plan_step(s)
    step.decide()
    step.answer([])
    report = step.run.report()
    st = step.conclude(report, 4).status
    assert st["report"]["reportObjects"] == 4
    assert len(st["report"]["steps"]) == 1  # the status repeats status_records of them
    assert st["inFlight"] == [{"stepId": "c", "attempt": 1, "since": "2027-01-15T08:00:00.000Z"}]


def test_an_asks_event_says_how_to_answer_it():
    spec = plan({"id": "q", "ask": {"prompt": "go?"}, "timeoutSeconds": 60})
    intents = advance(core.plan_step(situation(spec)))
    (message,) = [e.message for e in intents.told.events if e.reason == "AskWaiting"]
    assert "kubectl plan answer p q --set KEY=VALUE" in message


def test_a_stopped_runs_status_says_who_stopped_it_and_what_it_holds():
    spec = plan({"id": "a", "shell": "sleep 60"}, {"id": "b", "shell": "sleep 60"})
    facts = Facts((), (AttemptFact("a", 1, NOW - 5), AttemptFact("b", 1, NOW - 5)))
    s = situation(
        spec,
        facts=facts,
        annotations={names.ANNOTATION_CANCEL: "by alice"},
        previous={"phase": "Running"},
        generation=2,
        status_records=1,
    )
    step = core.plan_step(s)
    assert [r.finished_at for r in step.run.report().steps] == [NOW, NOW]
    step.decide()
    intents = step.conclude(step.run.report(), 3)
    st = intents.status
    assert (st["observedGeneration"], st["phase"], st["progress"]) == (2, "Failed", "2/2")
    assert st["run"] == s.run_info and st["finishedAt"] == "2027-01-15T08:00:00.000Z"
    (cond,) = st["conditions"]
    assert (cond["reason"], cond["message"]) == ("Cancelled", "cancelled: by alice")
    assert st["report"]["reportObjects"] == 3 and len(st["report"]["steps"]) == 1
    assert intents.told.events[-1] == Event(
        "PlanFailed",
        "cancelled (by alice); 2 running step(s) stopped; 2/2 steps settled",
        True,
        True,
        {},
    )
    timed = plan(*spec.model_dump(by_alias=True)["steps"], activeDeadlineSeconds=5)
    late = core.plan_step(replace(s, spec=timed, annotations={}, started_at=NOW - 100))
    ended = advance(late)
    assert ended.status["conditions"][0]["reason"] == "DeadlineExceeded"
    assert Metric("plans", ("failed",), 1.0, False) in ended.told.metrics
    assert Metric("plans", ("cancelled",), 1.0, False) not in ended.told.metrics


def test_told_events_are_no_warnings_and_posted_unless_said():
    told = Told()
    told("StepStarted", "step a attempt 1 (shell)", step="a")
    told("StepFailed", "step a failed", warning=True, post=False)
    assert told.events == [
        Event("StepStarted", "step a attempt 1 (shell)", False, True, {"step": "a"}),
        Event("StepFailed", "step a failed", True, False, {}),
    ]


def test_what_settled_and_what_started_is_told_in_order_with_its_metrics():
    spec = plan(
        {"id": "a", "shell": "true"},
        {"id": "b", "shell": "true", "dependsOn": ["a"]},
        {"id": "c", "shell": "false", "retries": 1},
        {"id": "d", "capsule": "x", "input": "go"},
    )
    facts = Facts(
        (),
        (
            AttemptFact("a", 1, NOW - 5, "success", NOW - 0.5, "out"),
            AttemptFact("c", 1, NOW - 5, "failed", NOW - 2, None, "exit 1"),
            AttemptFact("d", 1, NOW - 5, "success", NOW - 3, '{"x":1}'),
        ),
    )
    cap = capsule(image="busybox:1", spawn={"allow": ["x"]})
    told = advance(core.plan_step(situation(spec, cap, facts=facts, started_at=NOW - 10))).told
    settled = {"status": "success", "attempts": 1}
    assert told.events == [
        Event("StepSucceeded", "step d success", False, True, {"step": "d", **settled}),
        Event("DelegationFinished", "step d: child plan success", False, True, {"step": "d"}),
        Event("StepSucceeded", "step a success", False, True, {"step": "a", **settled}),
        Event("StepStarted", "step b attempt 1 (shell)", False, True, {"step": "b", "attempt": 1}),
        Event("StepStarted", "step c attempt 2 (shell)", False, True, {"step": "c", "attempt": 2}),
    ]
    assert told.metrics == [
        Metric("steps", ("capsule", "success"), 1.0, False),
        Metric("step_duration", ("capsule",), 2.0, True),
        Metric("steps", ("shell", "success"), 1.0, False),
        Metric("step_duration", ("shell",), 4.5, True),
        Metric("dispatch_latency", (), 0.5, True),  # b was ready when a ended
        Metric("retries", (), 1.0, False),
        Metric("dispatch_latency", (), 10.0, True),  # c's retry: ready since the run started
    ]


def test_a_failed_plan_is_told_with_the_step_that_stopped_it():
    facts = Facts((), (AttemptFact("a", 1, NOW - 5, "failed", NOW - 1, None, "exit 1"),))
    s = situation(plan({"id": "a", "shell": "false"}), facts=facts, started_at=NOW - 10)
    told = advance(core.plan_step(s)).told
    assert told.events == [
        Event(
            "StepFailed",
            "step a failed: exit 1",
            True,
            True,
            {"step": "a", "status": "failed", "attempts": 1},
        ),
        Event("PlanFailed", "1/1 steps settled; step a stopped the plan", True, True, {}),
    ]
    assert told.metrics == [
        Metric("steps", ("shell", "failed"), 1.0, False),
        Metric("step_duration", ("shell",), 4.0, True),
        Metric("plans", ("failed",), 1.0, False),
        Metric("plan_duration", (), 10.0, True),
    ]


def test_a_skipped_step_is_told_as_skipped():
    spec = plan({"id": "a", "shell": "true", "if": "'x' == 'y'"})
    first = advance(core.plan_step(situation(spec))).told.events[0]
    assert (first.reason, first.message) == ("StepSkipped", "step a skipped")


def test_a_big_bodys_steps_are_logged_not_posted_and_summed_up(monkeypatch):
    monkeypatch.setattr(body_events, "BODY_EVENTS", 1)  # the first body step of each: posted
    monkeypatch.setattr(body_events, "SUMMARY_EVERY", 2)  # a summary every 2 body steps
    spec = plan({"id": "m", "map": {"over": [1, 2, 3], "concurrency": 3, "do": {"shell": "true"}}})
    facts = Facts(
        (),
        tuple(
            AttemptFact(f"m.{n}.call", 1, NOW - 3, status, NOW - 1, "o", error)
            for n, status, error in ((0, "success", None), (1, "success", None), (2, "failed", "x"))
        ),
    )
    told = advance(core.plan_step(situation(spec, facts=facts, started_at=NOW - 0.5))).told
    assert [(e.reason, e.post) for e in told.events] == [
        ("StepSucceeded", True),
        ("StepSucceeded", False),
        ("StepFailed", False),
        ("StepFailed", True),  # the map itself
        ("BodyStepsSettled", True),
        ("PlanFailed", True),
    ]
    summary = told.events[4]
    assert summary.warning and summary.fields == {"step": "m"}
    assert summary.message.startswith("step m: 3 body steps settled (2 success, 1 failed")
    assert told.metrics[-1] == Metric("plan_duration", (), 0.5, True)


def test_a_new_refusal_with_retries_left_is_recorded_with_its_reason_and_times():
    spec = plan({"id": "a", "shell": "true", "retries": 2, "retryBackoff": {"duration": "1m"}})
    no = lambda creates: [CreateAnswer(c.dispatch, refusal="quota exceeded") for c in creates]  # noqa: E731
    intents = advance(core.plan_step(situation(spec)), no)
    assert intents.status["refusedAttempts"] == [
        {
            "stepId": "a",
            "attempt": 1,
            "error": "quota exceeded",
            "startedAt": "2027-01-15T08:00:00.000Z",
            "finishedAt": "2027-01-15T08:00:00.000Z",
        }
    ]
    assert intents.status["report"]["planId"] == "p"


def test_a_failed_attempt_with_an_object_is_no_refusal():
    spec = plan({"id": "a", "shell": "true", "retries": 1, "retryBackoff": {"duration": "1m"}})
    failed = AttemptFact("a", 1, NOW - 5, "failed", NOW - 1, None, "exit 1")
    observed = (Observed("a", 1, "job-a", "job", NOW - 5, "failed", "exit 1", NOW - 1),)
    s = situation(spec, facts=Facts((), (failed,)), observed=observed)
    assert advance(core.plan_step(s)).status["refusedAttempts"] is None


def test_a_retry_waits_the_capsules_backoff_when_the_step_sets_none():
    spec = plan({"id": "a", "shell": "true", "retries": 1})
    failed = AttemptFact("a", 1, NOW - 5, "failed", NOW - 1, None, "exit 1")
    cap = capsule(image="busybox:1", retryBackoff={"duration": "30s"})
    step = core.plan_step(situation(spec, cap, facts=Facts((), (failed,))))
    assert step.decide() == []  # not yet: 29 s to go
    assert step.wake_at == NOW + 29


def test_a_run_that_finished_is_not_stopped_by_its_deadline_afterwards():
    spec = plan({"id": "a", "shell": "true"}, {"id": "b", "shell": "true"}, activeDeadlineSeconds=5)
    done = StepRecord("a", "failed", None, "exit 1", 1, NOW - 9, NOW - 8)  # it stopped the plan
    step = core.plan_step(situation(spec, facts=Facts((done,), ()), started_at=NOW - 10))
    assert step.halt is not None and step.run.stops() == ()  # the deadline stops nothing
    assert advance(step).status["conditions"][0]["reason"] == "Failed"


def test_an_answer_that_does_not_fit_the_question_is_told_and_the_question_waits():
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]}
    spec = plan({"id": "q", "ask": {"prompt": "go?", "outputSchema": schema}})
    waiting = {
        "stepId": "q",
        "attempt": 1,
        "prompt": "go?",
        "outputSchema": schema,
        "since": "2027-01-15T08:00:00Z",
        "deadline": "2027-01-15T09:00:00Z",
        "question": "q-1",
    }
    wrong = {
        manifests.answer_annotation("q"): json.dumps(
            {"run": RUN, "question": "q-1", "answer": {"ok": "yes"}}
        )
    }
    s = situation(
        spec,
        facts=Facts((), (AttemptFact("q", 1, NOW - 5),)),
        previous={"asks": [waiting]},
        annotations=wrong,
    )
    intents = advance(core.plan_step(s))
    assert events(intents)[0] == "AnswerRejected"
    assert [a["stepId"] for a in intents.status["asks"]] == ["q"]


def test_what_settled_before_a_refusal_is_told_with_what_settled_after_it():
    spec = plan({"id": "z", "shell": "true"}, {"id": "a", "shell": "true", "onError": "continue"})
    done = AttemptFact("z", 1, NOW - 5, "success", NOW - 1, "out")
    step = core.plan_step(situation(spec, facts=Facts((), (done,))))
    no = lambda creates: [CreateAnswer(c.dispatch, refusal="denied") for c in creates]  # noqa: E731
    intents = advance(step, no)
    assert [r.step_id for r in step.settled] == ["z", "a"]
    assert events(intents) == ["CallDenied", "StepSucceeded", "StepFailed", "PlanSucceeded"]


def test_only_a_step_that_moves_files_asks_for_the_collectors_pod():
    """A step without results or artifacts: its Job as manifests.job makes it (today's one
    container, byte for byte); one with results: marked for the actuator (effects.files)."""
    spec = plan(
        {"id": "a", "shell": "true"}, {"id": "b", "shell": "true", "results": [{"name": "v"}]}
    )
    cap = capsule(image="busybox:1")
    step = core.plan_step(situation(spec, cap))
    plain, files = step.decide()
    assert plain.files is None and files.files == cap
    s = situation(spec, cap)
    d = plain.dispatch
    timeout = rules.attempt_timeout(d, cap, s.policy, NOW)
    today = manifests.job(REF, d, cap, "busybox:1", timeout_seconds=timeout)
    assert json.dumps(plain.body, sort_keys=True) == json.dumps(today, sort_keys=True)
    assert [c["name"] for c in plain.body["spec"]["template"]["spec"]["containers"]] == ["step"]
    assert "initContainers" not in plain.body["spec"]["template"]["spec"]
