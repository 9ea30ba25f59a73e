"""Running bodies: the part of the decider that drives `decide`, `map` and `reduce`.

A control step with a body, once its dependencies settled, evaluates its gate or renders `over`,
then runs one nested `Run` of its body plan (engine.bodies) per branch or item. Each nested Run is
a complete decider of its own — retries, onError, `if`, templates, the one-tool-at-a-time rule —
whose lookups fall back to the enclosing run (its `input`, the steps the control step depends on)
after its scope (`item`, `index`, `length`, `accumulator`).

Rules (seed 2, and planops' choices where the seed is silent, see docs/plan-language.md):
- map: at most `concurrency` items in flight (default 1), started in input order; `results` in
  input order. An item whose body fails fails the map (no new item starts; items in flight
  finish) with an error naming the item and the step.
- reduce: items one at a time; `{{accumulator}}` starts at `initial` (default null) and becomes
  each item's result.
- decide: `then` when the gate holds, else `else` (no `else`: nothing runs, result null); an exit
  fired in the branch ends the plan.
- The control step itself does not retry (its body steps do); it counts as one step against the
  plan's `parallelism`.
- A run records at most `bodies.MAX_RECORDS` steps: a map or reduce that would pass it fails
  before starting any item.
- A run's records take at most `budget.RUN_REPORT_BYTES` in its report: once their frames are
  spent, a map or reduce starts no further item and fails (engine.budget, FRAMES_SPENT).
- One decide starts at most `budget.TextBudget.items_per_decide` items (the rest in the next
  decide, which the Decision asks for at once): a map whose bodies settle without a Job never
  holds the executor's event loop for its whole length.

Restoring (what the reconciler does every time): the items and branch are re-derived from the
settled steps (deterministic), and each item's Run is restored from its own facts, in item order,
so a reduce's accumulator is known before the next item's Run is rebuilt.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from planops.api.models import PlanSpec, Step
from planops.engine import bodies, control, templates
from planops.engine import budget as budget_
from planops.engine.facts import (
    AttemptFact,
    BodyHost,
    Dispatch,
    Facts,
    Kind,
    exit_report,
    step_kind,
)
from planops.engine.report import ExitReport, Halt, StepRecord


@dataclass
class _Active:
    index: int
    step: Step
    kind: str
    plan: PlanSpec | None
    keys: list[str]
    items: list[Any]
    concurrency: int
    accumulator: Any = None
    verdict: bool | None = None
    runs: dict[int, BodyHost] = field(default_factory=dict)
    #: the runs not done yet (what each decide advances: never a scan of all the items)
    live: dict[int, BodyHost] = field(default_factory=dict)
    harvested: dict[int, int] = field(default_factory=dict)
    done: dict[int, Any] = field(default_factory=dict)  # position -> result
    next: int = 0
    failure: str | None = None
    #: key -> position (a map's keys are its item numbers, a decide's its branch): no list scan
    positions: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        self.positions = {key: pos for pos, key in enumerate(self.keys)}


class Bodies:
    """The bodies in flight of one Run (owned by it; reads and settles its state)."""

    def __init__(self, run: BodyHost) -> None:
        self.run = run
        self.active: dict[int, _Active] = {}
        self._plans: dict[tuple[int, str], PlanSpec] = {}

    # -- starting -----------------------------------------------------------------------------

    def _plan(self, i: int, key: str, body: Any) -> PlanSpec:
        plan = self._plans.get((i, key))
        if plan is None:  # once per body, not per item
            plan = self._plans[i, key] = bodies.plan(bodies.parse(body), self.run.spec)
        return plan

    def begin(self, i: int) -> None:
        """Evaluate the gate / render `over`; raises GateError or TemplateError."""
        run = self.run
        step = run.spec.steps[i]
        kind = run.kind(i)
        spec = getattr(step, kind)
        lookup = run.template_lookup
        if kind == "decide":
            verdict = control.holds(spec["if"], lookup)
            key = "then" if verdict else "else"
            body = spec.get(key)
            plan = self._plan(i, key, body) if body is not None else None
            self.active[i] = _Active(
                i, step, kind, plan, [key] if plan else [], [None], 1, verdict=verdict
            )
            return
        items = templates.render(spec["over"], lookup)
        if not isinstance(items, list):
            raise control.GateError(
                f"{kind}.over must render to an array; got {type(items).__name__}"
            )
        plan = self._plan(i, "do", spec["do"])
        would = run.record_count() + len(items) * len(plan.steps)  # planned() excludes this one
        if would > bodies.MAX_RECORDS:
            raise control.GateError(
                f"{len(items)} items x {len(plan.steps)} body steps would make {would} step "
                f"records; a run records at most {bodies.MAX_RECORDS} (split the list, or call a "
                "capsule step per chunk)"
            )
        concurrency = int(spec.get("concurrency", 1)) if kind == "map" else 1
        accumulator = templates.render(spec.get("initial"), lookup) if kind == "reduce" else None
        self.active[i] = _Active(
            i,
            step,
            kind,
            plan,
            [str(n) for n in range(len(items))],
            items,
            concurrency,
            accumulator=accumulator,
        )

    def _scope(self, a: _Active, pos: int) -> dict[str, Any]:
        if a.kind == "decide":
            return {}
        scope = {"item": a.items[pos], "index": pos, "length": len(a.items)}
        if a.kind == "reduce":
            scope["accumulator"] = a.accumulator
        return scope

    def _start(self, a: _Active, pos: int, facts: Facts | None = None) -> BodyHost:
        assert a.plan is not None
        sub = self.run.child(
            a.plan,
            facts or Facts(),
            scope=self._scope(a, pos),
            prefix=bodies.qualified(a.step.id, a.keys[pos], ""),
        )
        a.runs[pos] = a.live[pos] = sub
        return sub

    # -- each decide --------------------------------------------------------------------------

    def pump(self, now: float, dispatch: list[Dispatch]) -> bool:
        """Advance every body; True when a control step settled (new steps may be ready)."""
        run = self.run
        changed = False
        for a in list(self.active.values()):
            stopped = run.failed_step is not None or run.exited is not None
            budget = run.budget
            steps = len(a.plan.steps) if a.plan is not None else 1
            fresh = 0  # items started here, their records not counted yet
            while (
                not stopped
                and a.failure is None
                and a.next < len(a.keys)
                and len(a.runs) - len(a.done) < a.concurrency
            ):
                if budget.started >= budget.items_per_decide:  # the rest in the next decide
                    budget.capped = True
                    break
                if budget.frames_spent(fresh * steps):  # the report is full (engine.budget)
                    a.failure = budget_.FRAMES_SPENT.format(
                        kind=a.kind,
                        item=a.next,
                        length=len(a.keys),
                        limit=budget.frame_limit,
                        report=budget_.RUN_REPORT_BYTES,
                    )
                    break
                self._start(a, a.next)
                fresh += 1
                budget.started += 1
                a.next += 1
            for pos, sub in list(a.live.items()):
                if not stopped:
                    ctl, key = a.step.id, a.keys[pos]
                    dispatch += [
                        d._replace(
                            step=d.step.model_copy(
                                update={"id": bodies.qualified(ctl, key, d.step.id)}
                            )
                        )
                        for d in sub.decide(now).dispatch
                    ]
                self._harvest(a, pos)
                # stopped: an item with nothing in flight is over (a retry it owed never starts)
                if sub.finished or (stopped and not sub.in_flight_attempts()):
                    self._done(a, pos)
                    changed = True
            if len(a.done) == len(a.runs) and (
                a.next >= len(a.keys) or a.failure is not None or stopped
            ):
                self._settle(a, now, stopped)
                changed = True
        return changed

    def _harvest(self, a: _Active, pos: int, known: frozenset[str] = frozenset()) -> None:
        """Move a body Run's newly settled records into the enclosing run, qualified."""
        n = a.harvested.get(pos, 0)
        records = a.runs[pos].settled
        for rec in records[n:]:
            qualified = rec._replace(step_id=bodies.qualified(a.step.id, a.keys[pos], rec.step_id))
            self.run.add_record(qualified, announce=rec.step_id not in known)
        a.harvested[pos] = len(records)

    def _done(self, a: _Active, pos: int) -> None:
        sub = a.runs[pos]
        key = a.keys[pos]
        if sub.failed_step is not None and a.failure is None:
            rec = next(r for r in sub.settled if r.step_id == sub.failed_step)
            what = f"branch {key}" if a.kind == "decide" else f"item {key}"
            a.failure = (
                f"{what} failed: step {bodies.qualified(a.step.id, key, rec.step_id)} "
                f"{rec.status}" + (f" ({rec.error})" if rec.error else "")
            )
        last = sub.last_record()
        result = bodies.result_value(last.status, last.output) if last is not None else None
        a.done[pos] = result
        a.live.pop(pos, None)
        if a.kind == "reduce":
            a.accumulator = result
        if sub.exited is not None:
            self.run.record_exit(
                replace(sub.exited, step_id=bodies.qualified(a.step.id, key, sub.exited.step_id))
            )

    def _settle(self, a: _Active, now: float, stopped: bool) -> None:
        del self.active[a.index]
        if a.failure is not None:
            self.run.control_settled(a.index, None, a.failure, now)
            return
        if a.next < len(a.keys) and stopped and self.run.exited is not None:
            # an exit ended the plan: the items in flight finished, no new one started; the
            # exit, not this step, ended the plan, so it is skipped, not blamed as failed
            self.run.control_settled(
                a.index,
                None,
                f"{a.kind} stopped with {len(a.done)} of {len(a.keys)} items done: exit step "
                f"{self.run.exited.step_id!r} ended the plan",
                now,
                skipped=True,
            )
            return
        if a.next < len(a.keys) and stopped:
            self.run.control_settled(
                a.index,
                None,
                f"{a.kind} stopped with {len(a.done)} of {len(a.keys)} items "
                "done: the plan stopped",
                now,
            )
            return
        result: Any
        if a.kind == "map":
            result = {"count": len(a.keys), "results": [a.done[p] for p in range(len(a.keys))]}
        elif a.kind == "reduce":
            result = {"count": len(a.keys), "result": a.accumulator}
        else:
            result = {
                "branch": "then" if a.verdict else "else",
                "verdict": a.verdict,
                "reason": None,
                "result": a.done.get(0),
            }
        self.run.control_settled(a.index, result, None, now)

    def halt(self, i: int, h: Halt, now: float) -> None:
        """A halt stops control step `i`'s bodies: each running item's attempts are stopped
        (recorded failed in its Run), their records move to the enclosing run, and no item
        starts again; the caller settles the control step itself."""
        a = self.active.pop(i)
        for pos, sub in list(a.live.items()):
            sub.halt(h, now)
            self._harvest(a, pos)

    # -- executors' reports and questions -------------------------------------------------------

    def finish(self, f: AttemptFact) -> None:
        """A body step's attempt ended: told to its item's Run (Run.finish_fact)."""
        ctl, _, rest = f.step_id.partition(".")
        key, _, local = rest.partition(".")
        i = self.run.graph.index.get(ctl)
        a = self.active.get(i) if i is not None else None
        pos = a.positions.get(key) if a is not None else None
        if a is None or pos is None:
            return
        sub = a.runs.get(pos)
        if sub is not None:
            sub.finish_fact(replace(f, step_id=local))

    def is_settled(self, step_id: str) -> bool:
        """Whether no further attempt of body step `<control>.<key>.<step>` will start: its
        item's run settled it, or its control step is over, or the run stopped (an item owing a
        retry then never starts it). A KeyError for a step that is no body step of this run."""
        ctl, _, rest = step_id.partition(".")
        key, _, local = rest.partition(".")
        run = self.run
        i = run.graph.index[ctl]
        if run.kind(i) not in bodies.BODY_KINDS or not local:
            raise KeyError(step_id)
        a = self.active.get(i)
        if a is None:  # not begun (nothing of it ran yet), or settled with its bodies
            return run.is_settled(ctl)
        sub = a.runs.get(a.positions[key])
        if sub is None:  # its item has not started
            return False
        if sub.is_settled(local):
            return True
        stopped = run.failed_step is not None or run.exited is not None
        return stopped and all(sid != local for sid, _ in sub.in_flight_attempts())

    def planned(self) -> int:
        """Records the running bodies have yet to add."""
        return sum(
            len(a.keys) * len(a.plan.steps) - sum(a.harvested.values())
            for a in self.active.values()
            if a.plan is not None
        )

    def kind_of(self, step_id: str) -> Kind:
        """The kind of body step `<control>.<key>.<step>` ("shell" when it names none)."""
        ctl, _, rest = step_id.partition(".")
        key, _, local = rest.partition(".")
        i = self.run.graph.index.get(ctl)
        if i is None or self.run.kind(i) not in bodies.BODY_KINDS:
            return "shell"
        kind = self.run.kind(i)
        body_key = key if kind == "decide" else "do"
        body = bodies.bodies(kind, getattr(self.run.spec.steps[i], kind)).get(body_key)
        if body is None:
            return "shell"
        try:
            plan = self._plan(i, body_key, body)
        except bodies.BodyError:
            return "shell"
        step = next((s for s in plan.steps if s.id == local), None)
        return step_kind(step) if step is not None else "shell"

    def wake_at(self) -> float | None:
        """The earliest due time of a retry waiting in a running body."""
        times = [
            t
            for a in self.active.values()
            for sub in a.live.values()
            for t in (sub.wake_at(),)
            if t is not None
        ]
        return min(times, default=None)

    def in_flight(self) -> list[tuple[str, int]]:
        return [
            (bodies.qualified(a.step.id, a.keys[pos], sid), attempt)
            for a in self.active.values()
            for pos, sub in a.live.items()
            for sid, attempt in sub.in_flight_attempts()
        ]

    # -- restoring ----------------------------------------------------------------------------

    def fired_exit(self, i: int, record: StepRecord) -> ExitReport | None:
        """The exit a settled decide's body record fired (restoring a run that an exit in a
        branch ended), or None."""
        _, key, local = record.step_id.split(".", 2)
        body = bodies.bodies("decide", self.run.spec.steps[i].decide).get(key)
        if body is None:
            return None
        step = next((s for s in bodies.parse(body) if s.id == local), None)
        if step is None or step.exit is None:
            return None
        return exit_report(record.step_id, record)

    def restore(self, i: int, records: list[StepRecord], attempts: list[AttemptFact]) -> None:
        """Rebuild control step `i`'s bodies from their facts (ids still qualified)."""
        self.begin(i)
        a = self.active[i]
        by_pos: dict[int, tuple[list[StepRecord], list[AttemptFact]]] = {}
        for rec in records:
            _, key, local = rec.step_id.split(".", 2)
            pos = a.positions.get(key)
            if pos is not None:
                by_pos.setdefault(pos, ([], []))[0].append(rec._replace(step_id=local))
        for f in attempts:
            _, key, local = f.step_id.split(".", 2)
            pos = a.positions.get(key)
            if pos is not None:
                by_pos.setdefault(pos, ([], []))[1].append(replace(f, step_id=local))
        for pos in sorted(by_pos):  # in item order: a reduce's accumulator comes from the last
            recs, atts = by_pos[pos]
            sub = self._start(a, pos, Facts(tuple(recs), tuple(atts)))
            self._harvest(a, pos, known=frozenset(r.step_id for r in recs))
            if sub.finished:
                self._done(a, pos)
            a.next = pos + 1
