"""The state of one validation, shared by the checks: the plan, its Capsule and the operator's
policy, the errors found so far, the time budget, and what is computed once per plan (limits'
ceilings, split shell lines, refusals that wait on one question to the graph)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal

from planops.api.capsule_models import CapsuleSpec
from planops.api.models import PlanSpec, Step
from planops.engine import templates
from planops.engine.allowlists import shell_words
from planops.engine.dag import Graph
from planops.engine.errors import PlanError
from planops.engine.plan_templates import TemplateResolver
from planops.engine.policy import BUDGET_EVERY, Budget, CapsuleResolver, Policy


class OverBudgetError(Exception):
    def __init__(self, where: str) -> None:
        super().__init__(where)
        self.where = where


@dataclass(frozen=True, slots=True)
class Unless:
    """A template's refusal, `message`, unless step `i` waits for step `r` (directly or
    through other steps): answered for every template of the plan at once (Checker.unless)."""

    i: int
    r: int
    message: str


#: how a template's root is judged where it appears: None (fine), a refusal, or one that
#: holds unless a step waits for another
RootCheck = Callable[[templates.Template], str | Unless | None]


@dataclass
class Checker:
    spec: PlanSpec
    capsule_name: str
    capsule: CapsuleSpec | None
    policy: Policy
    errors: list[PlanError] = field(default_factory=list)
    budget: Budget | None = None
    deadline: float = 0.0
    ticks: int = 0
    #: (resource, ceiling, whose) parsed once per plan; None until first needed
    ceilings: list[tuple[str, Decimal, str, str]] | None = None
    #: the verdict for steps without resources of their own (they all get the same limits)
    default_verdict: list[tuple[str, str]] | None = None
    #: each shell line split once per plan (the shell check and the template check both need it)
    words: dict[str, list[str] | None] = field(default_factory=dict)
    #: refusals that hold unless a step waits for another (error slot, step, other), all
    #: answered at once at the end (Graph.waits_for): no walk of the ancestors per template
    unless: list[tuple[int, int, int]] = field(default_factory=list)
    #: why a line could not be split (shlex is slow on long lines: never split one twice)
    split_errors: dict[str, str] = field(default_factory=dict)
    #: finds other Capsules (a capsule step's target, whose plan takes the step's text)
    resolve: CapsuleResolver | None = None
    #: judging finally steps: what has settled before any of them runs (the main steps, and
    #: `plan`, their outcome: None), readable without a dependsOn (validation.finally_checks)
    outer: dict[str, Step | None] = field(default_factory=dict)
    #: judging main steps: the finally steps' ids, which no main step may name
    later: frozenset[str] = frozenset()
    #: finds templates (a template step's); None: none is known
    templates: TemplateResolver | None = None
    #: the templates this plan runs inside, outermost first (`kind/name`: cycles, nesting)
    chain: tuple[str, ...] = ()

    def split(self, command: str) -> list[str] | None:
        """shell_words(command), cached; None when it cannot be split."""
        if command not in self.words:
            try:
                self.words[command] = shell_words(command)
            except ValueError as e:
                self.words[command] = None
                self.split_errors[command] = str(e)
        return self.words[command]

    def add(self, code: str, step: str | None, path: str, message: str) -> None:
        self.errors.append(PlanError(code, step, path, message))

    def add_unless(self, waits: Unless, code: str, step: str | None, path: str) -> None:
        """A refusal that is dropped if step `waits.i` turns out to wait for `waits.r`."""
        self.unless.append((len(self.errors), waits.i, waits.r))
        self.add(code, step, path, waits.message)

    def settle_unless(self, graph: Graph) -> None:
        """Drop the refusals of add_unless whose condition holds (one pass over the graph)."""
        if not self.unless:
            return
        holds = graph.waits_for((i, r) for _, i, r in self.unless)
        drop = {slot for slot, i, r in self.unless if (i, r) in holds}
        self.errors = [e for n, e in enumerate(self.errors) if n not in drop]
        self.unless = []

    def check(self, where: str) -> None:
        """Past the budget (if any), validation stops here (OverBudgetError)."""
        if self.budget is not None and self.budget.clock() > self.deadline:
            raise OverBudgetError(where)

    def tick(self, where: str) -> None:
        """One unit of work done (a body step, a schema keyword) at `where`: the clock is read
        every BUDGET_EVERY. (The loops over the plan's steps check by index: no call per step
        on the hot path, see bench/engine.py.)"""
        self.ticks += 1
        if self.ticks % BUDGET_EVERY == 0:
            self.check(where)
