"""A kept Run (engine.keeping) is only a shortcut: after every act it equals the Run restored from
the same facts. Hypothesis drives random plans (dependencies, retries with and without backoff,
onError, tool steps, a map or a decide with bodies, finally steps, a reference that is not
settled yet) through random acts: Jobs created, creates refused, attempts settling (success,
failure, never ran), time passing, the operator restarting (the kept run dropped) and a status
write that failed (nothing the reconcile did reached the cluster; the shell drops the kept run
then, but here it is kept: the next facts must show by themselves that it cannot be used).

Each reconcile runs twice, from the same facts: once from the Run the last one kept, once
restored. Their state, decisions and reports must be equal at every step; and the kept path must
actually be taken (a shortcut that always fell back would pass the equality trivially).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planops.engine import AttemptFact, Facts, Run, keeping

from ..hypothesis_profiles import examples
from .helpers import plan

Key = tuple[str, int]


# -- the plans ------------------------------------------------------------------------------------


@st.composite
def plans(draw: st.DrawFn) -> Any:
    n = draw(st.integers(1, 7))
    steps: list[dict[str, Any]] = []
    for i in range(n):
        deps = (
            sorted(draw(st.sets(st.sampled_from([f"s{j}" for j in range(i)]), max_size=2)))
            if i
            else []
        )
        step: dict[str, Any] = {"id": f"s{i}", "dependsOn": deps}
        kind = draw(st.sampled_from(["shell", "shell", "shell", "tool", "map", "decide", "ref"]))
        if kind == "tool":
            step["tool"] = "notes"
        elif kind == "map":
            step["map"] = {
                "over": list(range(draw(st.integers(0, 3)))),
                "concurrency": draw(st.integers(1, 2)),
                "do": {"shell": "echo {{item}}", "retries": draw(st.integers(0, 1))},
            }
        elif kind == "decide":
            step["decide"] = {
                "if": {"value": 1, "op": "eq", "to": draw(st.integers(1, 2))},
                "then": {"shell": "true"},
            }
        elif kind == "ref" and i:  # may name a step it does not wait for: fails at dispatch
            step["shell"] = f"echo {{{{s{draw(st.integers(0, i - 1))}.output}}}}"
        else:
            step["shell"] = "true"
        if kind not in ("map", "decide"):
            if i and draw(st.booleans()):  # may name a step it does not wait for: asked again
                step["if"] = f"$s{draw(st.integers(0, i - 1))}.status != 'skipped'"
            step["retries"] = draw(st.integers(0, 2))
            if draw(st.booleans()):
                step["retryBackoff"] = {"duration": f"{draw(st.integers(1, 3))}s"}
            step["onError"] = draw(st.sampled_from(["fail", "continue", "skip"]))
        steps.append(step)
    spec: dict[str, Any] = {}
    if draw(st.booleans()):
        spec["finally"] = [{"id": "f0", "shell": "true", "retries": draw(st.integers(0, 1))}]
    return plan(*steps, **spec)


# -- the world: what the cluster holds ------------------------------------------------------------


@dataclass
class World:
    """The facts a reconcile reads: the records written, and an attempt per object or refusal
    (a settled step's attempts are not read again)."""

    settled: tuple[Any, ...] = ()
    attempts: dict[Key, AttemptFact] = field(default_factory=dict)

    def facts(self) -> Facts:
        return Facts(self.settled, tuple(self.attempts.values()))


def state(run: Any) -> Any:
    """Everything a Run decides by, normalised: heap entries a pop would drop lazily are not
    state (a kept run carries some that a restored one never had), nor what a settled step held
    besides its record."""

    def live(heap: list[int]) -> list[int]:
        s = run._states
        return sorted({i for i in heap if not (s[i].settled or s[i].in_flight or s[i].delayed)})

    states = [
        (s.settled, s.attempts)  # a settled step is its record (what else it held is spent)
        if s.settled is not None
        else (
            s.attempts,
            s.started_at,
            s.in_flight,
            s.settled,
            s.delayed,
            s.never_ran,
            s.queued and not (s.settled or s.in_flight or s.delayed),
        )
        for s in run._states
    ]
    return (
        states,
        live(run._ready_tools),
        live(run._ready_other),
        sorted(run._delayed),
        dict(run._flying),
        list(run._order),
        run._remaining,
        run._tool_busy,
        run.failed_step,
        run.exited,
        run._settled_count,
        sorted(run._bodies.active),
        (run.budget.held, run.budget.frames, run.budget.framed, run.budget.restored),
        (run.budget.cut, run.budget.cut_bytes),
        run.report(),
        run.in_flight_attempts(),
        run.wake_at(),
        state(run._final) if run._final is not None else None,
    )


def _fact(d: Any, now: float, prefix: str = "") -> AttemptFact:
    # a Job's creationTimestamp has whole seconds: not the moment the run decided to create it
    return AttemptFact(prefix + d.step.id, d.attempt, float(math.floor(now)))


# -- the acts -------------------------------------------------------------------------------------

acts = st.lists(
    st.tuples(
        st.sampled_from(["settle", "settle", "settle", "wait", "restart", "lost write"]),
        st.integers(0, 1_000_000),
        st.sampled_from(["success", "failed", "never ran"]),
        st.booleans(),  # the API server refuses this reconcile's creates
        st.booleans(),  # a reconcile follows (else the next act comes first)
    ),
    min_size=1,
    max_size=40,
)


class Reconciles:
    """The reconciler's use of the engine: restore or advance, decide, create (or be refused),
    write; twice from the same facts, kept and restored, compared after every act."""

    def __init__(self, spec: Any) -> None:
        self.spec = spec
        self.world = World()
        self.kept: keeping.Kept | None = None
        self.now = 1_000.0
        self.used_kept = 0

    def reconcile(self, refuse: bool, lost_write: bool) -> None:
        facts = self.world.facts()
        restored = Run.restore("p", self.spec, facts)
        run = keeping.advance(self.kept, facts) if self.kept is not None else None
        self.kept = None
        if run is None:
            run = Run.restore("p", self.spec, facts)
        else:
            self.used_kept += 1
        # a retry whose backoff is over is released by the decide that comes first (below); the
        # kept run may have had it released by an earlier decide, at this same time or before
        for r in (run, restored):
            r._release_due(self.now)
        assert state(run) == state(restored)
        refused: list[AttemptFact] = []
        created: list[AttemptFact] = []
        for _ in range(20):  # decide -> create -> refused, as reconciler.run.core does
            decisions = [r.decide(self.now) for r in (run, restored)]
            assert decisions[0] == decisions[1]
            assert state(run) == state(restored)
            again = False
            for d in decisions[0].dispatch:
                if refuse:
                    for r in (run, restored):
                        r.finish_attempt(d.step.id, d.attempt, "failed", None, "no", self.now)
                    refused.append(
                        AttemptFact(d.step.id, d.attempt, self.now, "failed", self.now, None, "no")
                    )
                    again = True
                else:
                    created.append(_fact(d, self.now))
            assert state(run) == state(restored)
            if not again:
                break
        if lost_write:
            # nothing reached the cluster. The shell drops the kept run then; kept here, the
            # facts must show it cannot be used (what it did is missing from them)
            self.kept = keeping.keep(run, facts, refused)
            return
        self.world.settled = tuple(run.report().steps)
        ids = {r.step_id for r in self.world.settled}
        for f in (*refused, *created):
            self.world.attempts[(f.step_id, f.attempt)] = f
        self.world.attempts = {k: f for k, f in self.world.attempts.items() if k[0] not in ids}
        self.kept = keeping.keep(run, facts, refused)

    def settle(self, pick: int, outcome: str) -> None:
        flying = [k for k, f in self.world.attempts.items() if f.status is None]
        if not flying:
            return
        key = flying[pick % len(flying)]
        status = "success" if outcome == "success" else "failed"
        self.world.attempts[key] = replace(
            self.world.attempts[key],
            status=status,
            finished_at=self.now,
            output="out" if status == "success" else None,
            error=None if status == "success" else "exit 1",
            never_ran=outcome == "never ran",
        )


@settings(
    max_examples=examples(500),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(plans(), acts)
def test_a_kept_run_equals_the_run_restored_from_the_same_facts_after_every_act(spec, script):
    r = Reconciles(spec)
    r.reconcile(refuse=False, lost_write=False)
    for act, pick, outcome, refuse, follows in script:
        if act == "settle":
            r.settle(pick, outcome)
            r.now += (pick % 7) / 4
        elif act == "wait":
            r.now += pick % 5
        elif act == "restart":
            r.kept = None
        if follows or act == "lost write":
            r.reconcile(refuse=refuse, lost_write=act == "lost write")
    r.reconcile(refuse=False, lost_write=False)


def test_a_step_waiting_for_its_retry_when_another_fails_the_plan_is_settled_as_restored():
    """Found by the property above: a restore settles the records first (the plan failed), so
    the retry a step waited for is settled failed at once. A kept run that saw the events in
    their order would still wait: a run a failure is ending is not kept."""
    spec = plan(
        {"id": "s0", "shell": "true", "retries": 1, "retryBackoff": {"duration": "1s"}},
        {"id": "s1", "shell": "true"},
        {"id": "s2", "shell": "true"},
    )
    r = Reconciles(spec)
    r.reconcile(refuse=False, lost_write=False)
    for _ in range(3):
        r.settle(0, "failed" if _ < 2 else "success")
        r.reconcile(refuse=False, lost_write=False)
    assert r.used_kept >= 1


def test_the_kept_path_is_taken_for_plain_steps_and_skipped_while_bodies_run():
    """The shortcut is used (the equality above is not a fallback's), and not where it cannot
    be: a running map's nested runs are restored."""
    chain = plan(
        *(
            {"id": f"s{i}", "shell": "true", "dependsOn": [f"s{i - 1}"] if i else []}
            for i in range(5)
        )
    )
    r = Reconciles(chain)
    r.reconcile(refuse=False, lost_write=False)
    for _ in range(6):
        r.settle(0, "success")
        r.now += 1
        r.reconcile(refuse=False, lost_write=False)
    assert r.used_kept == 5  # every reconcile after the first, until the run finished
    mapped = plan({"id": "m", "map": {"over": [1, 2], "do": {"shell": "true"}}})
    r = Reconciles(mapped)
    r.reconcile(refuse=False, lost_write=False)
    assert r.kept is None


def test_facts_that_do_not_line_up_are_refused():
    """A record or an attempt the kept run does not know of (another writer, a failed write),
    or one it expects that is missing: restore."""
    chain = plan({"id": "a", "shell": "true"}, {"id": "b", "shell": "true", "dependsOn": ["a"]})
    run = Run.restore("p", chain, Facts())
    run.decide(1.0)
    job = AttemptFact("a", 1, 1.0)
    kept = keeping.keep(run, Facts())
    assert kept is not None and kept.expect == {("a", 1): None}
    assert keeping.advance(kept, Facts()) is None  # the Job of attempt 1 is missing
    for other in (AttemptFact("a", 2, 1.0), AttemptFact("b", 1, 1.0)):
        assert keeping.advance(keeping.keep(run, Facts()), Facts((), (job, other))) is None
    done = replace(job, status="success", finished_at=2.0)
    kept = keeping.keep(run, Facts())
    assert keeping.advance(kept, Facts((), (done,))) is run
    assert [x.step.id for x in run.decide(2.0).dispatch] == ["b"]
    # a record written by someone else
    record = run.report().steps[0]
    kept = keeping.keep(run, Facts((), (done,)))
    assert kept is not None
    other = Facts((record._replace(output="x"),), (AttemptFact("b", 1, 2.0),))
    assert keeping.advance(kept, other) is None
    # an attempt it knows as refused, shown in flight
    run = Run.restore("p", plan({"id": "a", "shell": "true", "retries": 1}), Facts())
    run.decide(1.0)
    run.finish_attempt("a", 1, "failed", None, "refused", 1.0)
    no = AttemptFact("a", 1, 1.0, "failed", 1.0, None, "refused")
    kept = keeping.keep(run, Facts(), [no])
    assert kept is not None and kept.expect == {("a", 1): "failed"}
    assert keeping.advance(kept, Facts((), (AttemptFact("a", 1, 1.0),))) is None


def test_a_restored_run_holds_a_tool_busy_while_another_tools_attempt_has_finished():
    """Found by the property above: tools run one at a time, and a restore that found one
    tool's failed attempt (its retry waiting) beside another tool's running one took the tools
    as free once it had read the failure, so the retry could start beside the running tool."""
    spec = plan(
        {"id": "t1", "tool": "notes", "retries": 1},
        {"id": "t2", "tool": "notes"},
    )
    facts = Facts(
        (),
        (
            AttemptFact("t1", 1, 1000.0, "failed", 1000.0, None, "exit 1"),
            AttemptFact("t2", 1, 1001.0),
        ),
    )
    run = Run.restore("p", spec, facts)
    assert run._tool_busy
    assert run.decide(5000.0).dispatch == ()  # t1's retry waits for t2
    run.finish_attempt("t2", 1, "success", "ok", None, 5001.0)
    assert [d.step.id for d in run.decide(5002.0).dispatch] == ["t1"]
