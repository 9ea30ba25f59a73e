"""Ask steps in the cluster: a question waits in the Plan's status until somebody answers.

No Job runs for an ask. When the decider dispatches one, the reconciler records it in
`status.asks` (the rendered prompt, the answer's schema, when it started and its deadline, and
the question's id) and announces it with an `AskWaiting` event that says how to answer. The
answer arrives as an annotation on the Plan, written by `kubectl plan answer PLAN STEP --set k=v`
(or `--decline`):

    answer.planops.dev/<step>: {"run": "<run id>", "question": "<id>", "answer": {...}}
                           or {"run": "<run id>", "question": "<id>", "declined": true}

The annotation carries the id of the one question it answers (`status.asks[].question`,
written by the operator when it asks: a digest of the Plan, the run, the step, the attempt and
the time it asked), so an answer approves that ask of that run and nothing else: not the next
run (a re-run, a retry, a re-run value used again), not a later attempt of the same step, not
the same ask of a child Plan asked again. An annotation without it (written for an operator
that did not ask for one) is not taken. The reconciler checks the answer against the schema
(the CLI did too; a hand-written annotation might not conform: it is rejected with an event and
the question keeps waiting). Past the deadline (the step's timeout, bounded like a Job's),
`whenUnanswered` applies: the default answer, or the step fails. Restart-safe: `status.asks` is
the fact that the ask is in flight.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from typing import Any, Literal

from planops.api import values
from planops.engine import control, references
from planops.engine.decider import Run
from planops.engine.facts import AttemptFact, Dispatch
from planops.engine.report import parse_rfc3339, rfc3339
from planops.kube.manifests import PlanRef, answer_annotation
from planops.reconciler.effects.intents import Tell


@dataclass(frozen=True)
class Waiting:
    """One question in flight."""

    step_id: str
    attempt: int
    spec: dict[str, Any]  # the rendered ask: prompt, outputSchema, whenUnanswered, default
    since: float
    deadline: float
    rejected: str | None = None  # the last annotation value rejected (announced once)
    #: the question's id, which its answer must carry (None: recorded by an operator that did
    #: not write one; `settle` gives it one)
    question: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "stepId": self.step_id,
            "attempt": self.attempt,
            "question": self.question,
            "prompt": self.spec.get("prompt"),
            "outputSchema": self.spec.get("outputSchema"),
            "whenUnanswered": self.spec.get("whenUnanswered", "fail"),
            **({"default": self.spec["default"]} if "default" in self.spec else {}),
            "since": rfc3339(self.since),
            "deadline": rfc3339(self.deadline),
            "rejected": self.rejected,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Waiting:
        spec: dict[str, Any] = {
            k: data[k] for k in ("prompt", "outputSchema", "whenUnanswered", "default") if k in data
        }
        return cls(
            data["stepId"],
            int(data.get("attempt") or 1),
            spec,
            parse_rfc3339(data.get("since")) or 0.0,
            parse_rfc3339(data.get("deadline")) or 0.0,
            data.get("rejected"),
            data["question"] if isinstance(data.get("question"), str) else None,
        )

    def fact(self) -> AttemptFact:
        return AttemptFact(self.step_id, self.attempt, self.since)


def waiting(status: dict[str, Any]) -> list[Waiting]:
    return [Waiting.from_json(a) for a in status.get("asks") or []]


def question(uid: str, run_id: str, step_id: str, attempt: int, since: float) -> str:
    """The id of the question an ask step's attempt asks in a run of a Plan: what its answer
    carries. Run ids are never used twice within a Plan (manifests.run_id), the attempt tells
    the same step's questions apart, and the time it was asked makes it unknown before."""
    text = json.dumps(["ask", uid, run_id, step_id, attempt, rfc3339(since)])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def start(d: Dispatch, now: float, timeout_seconds: int, uid: str, run_id: str) -> Waiting:
    q = question(uid, run_id, d.step.id, d.attempt, now)
    return Waiting(d.step.id, d.attempt, dict(d.input), now, now + timeout_seconds, question=q)


@dataclass(frozen=True)
class Outcome:
    status: Literal["success", "failed"]
    output: str | None
    error: str | None


def judge(w: Waiting, annotations: dict[str, str], run_id: str, now: float) -> Outcome | str | None:
    """The ask's outcome now: an Outcome; a rejection (why the annotation is refused: the
    question keeps waiting); or None (still waiting)."""
    raw = annotations.get(answer_annotation(w.step_id))
    if raw is not None and raw != w.rejected:
        try:
            given = references.loads(raw)
        except ValueError:  # not JSON, or nested too deeply (json.loads: RecursionError)
            return "the answer annotation is not JSON (use kubectl plan answer)"
        if (unusable := values.problem(given)) is not None:  # recorded as the step's JSON
            return f"the answer annotation cannot be used: {unusable.message}"
        if (
            isinstance(given, dict)
            and given.get("run") == run_id
            and given.get("question") == w.question
        ):
            if given.get("declined"):
                return _unanswered(w, "declined")
            answer = given.get("answer")
            problem = control.answer_problem(w.spec.get("outputSchema") or {}, answer)
            if problem or not isinstance(answer, dict):
                return f"the answer does not conform to the question's schema: {problem}"
            return Outcome("success", json.dumps(control.answered(answer)), None)
    if now >= w.deadline:
        return _unanswered(w, "unavailable")
    return None


def _unanswered(w: Waiting, reason: str) -> Outcome:
    result, error = control.unanswered(w.spec, reason)
    if result is None:
        return Outcome("failed", None, error)
    return Outcome("success", json.dumps(result), None)


def settle(
    run: Run,
    previous: dict[str, Any],
    annotations: dict[str, str],
    uid: str,
    run_id: str,
    events: Tell,
    now: float,
) -> list[Waiting]:
    """Settle the questions of `run` that got an answer (or passed their deadline); the rest
    wait (returned). A rejected answer is told once, with an AnswerRejected Event. A question
    recorded without an id (by an earlier operator) gets one now: no answer written before
    could carry it."""
    flying = set(run.in_flight_attempts())
    still: list[Waiting] = []
    for w in waiting(previous):
        if (w.step_id, w.attempt) not in flying:
            continue
        if w.question is None:
            w = replace(w, question=question(uid, run_id, w.step_id, w.attempt, w.since))
        outcome = judge(w, annotations, run_id, now)
        if isinstance(outcome, Outcome):
            run.finish_attempt(
                w.step_id, w.attempt, outcome.status, outcome.output, outcome.error, now
            )
            continue
        if isinstance(outcome, str):
            events("AnswerRejected", f"step {w.step_id}: {outcome}", warning=True, step=w.step_id)
            w = replace(w, rejected=annotations.get(answer_annotation(w.step_id)))
        still.append(w)
    return still


def announce(d: Dispatch, timeout_seconds: int, ref: PlanRef, events: Tell, now: float) -> Waiting:
    """A dispatched ask starts waiting: an AskWaiting Event says how to answer, and until when."""
    plan = ref.name
    w = start(d, now, timeout_seconds, ref.uid, ref.run)
    fields = ", ".join((w.spec.get("outputSchema") or {}).get("properties") or {})
    events(
        "AskWaiting",
        f"step {d.step.id} asks: {w.spec.get('prompt')!s:.300} -- answer with: kubectl plan "
        f"answer {plan} {d.step.id} --set KEY=VALUE (fields: {fields}) or --decline; "
        f"unanswered until {rfc3339(w.deadline)}, then whenUnanswered "
        f"({w.spec.get('whenUnanswered', 'fail')}) applies",
        step=d.step.id,
    )
    return w
