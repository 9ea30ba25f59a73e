"""The one validator: every refusal of seed 1 ("What is refused before anything runs"), plus
planops' own, all reported together. The CLI, the admission webhook and the reconciler all call
`validate`; whatever needs the cluster (the Capsule) comes through an injected `CapsuleResolver`.

A plan with any error runs nothing at all.
"""

from __future__ import annotations

import operator
import re
import shlex
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, Protocol

from planops.api import quantity, values
from planops.api.models import NEEDS_A_MODEL, STEP_KINDS, CapsuleSpec, PlanSpec, Step
from planops.api.resources import resources as effective_resources
from planops.engine import (
    bodies,
    conditions,
    control,
    images,
    jsonschemas,
    references,
    templates,
    workspace,
)
from planops.engine.dag import Graph
from planops.engine.errors import PlanError

ON_ERROR = ("fail", "skip", "continue")
SUBMIT_PLAN = "submit-plan"
DEFAULT_CAPSULE = "default"


class CapsuleResolver(Protocol):
    """Finds a Capsule by name (in the plan's namespace, for the operator)."""

    def __call__(self, name: str) -> CapsuleSpec | None: ...


def capsules(mapping: Mapping[str, CapsuleSpec]) -> CapsuleResolver:
    """A resolver over a fixed set of capsules (the CLI's `--capsule` files, tests)."""

    def resolve(name: str) -> CapsuleSpec | None:
        return mapping.get(name)

    return resolve


@dataclass(frozen=True)
class Policy:
    """Operator-wide bounds that no Capsule can widen (Helm values in the cluster)."""

    images: tuple[str, ...] = ("*",)
    #: kubectl-plan (validate, run --local) holds no object; the operator passes --max-steps
    max_steps: int = 1_000_000
    max_timeout_seconds: int = 7 * 24 * 3600
    #: ceilings of any step's effective limits (quantities, e.g. "4", "8Gi"); None: no ceiling
    max_cpu: str | None = None
    max_memory: str | None = None


@dataclass(frozen=True)
class Budget:
    """How long one validation may take, by an injected clock (the engine never reads the time
    itself). The validator runs in the operator (the admission webhook, every reconcile): a huge
    plan must cost it a bounded time and come back with one clear refusal."""

    seconds: float
    clock: Callable[[], float]


#: the clock is read once per this many checks (steps, body steps, schema keywords)
BUDGET_EVERY = 256
#: what the operator gives one validation (reconcile, admission): well under the admission
#: webhook's default timeout (10 s), which also covers reading the Capsule. A 10,000-step plan
#: validates in ~0.1 s (docs/performance.md).
OPERATOR_BUDGET_SECONDS = 4.0


class _OverBudgetError(Exception):
    def __init__(self, where: str) -> None:
        super().__init__(where)
        self.where = where


@dataclass
class _Checker:
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

    def add_unless(self, waits: _Unless, code: str, step: str | None, path: str) -> None:
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
        """Past the budget (if any), validation stops here (_OverBudgetError)."""
        if self.budget is not None and self.budget.clock() > self.deadline:
            raise _OverBudgetError(where)

    def tick(self, where: str) -> None:
        """One unit of work done (a body step, a schema keyword) at `where`: the clock is read
        every BUDGET_EVERY. (The loops over the plan's steps check by index: no call per step
        on the hot path, see bench/engine.py.)"""
        self.ticks += 1
        if self.ticks % BUDGET_EVERY == 0:
            self.check(where)


_SHLEX_WHITESPACE = re.compile(r"[ \t\r\n]+")


def shell_words(command: str) -> list[str]:
    """The words of a shell step (shlex, POSIX rules); raises ValueError when it cannot split.

    shlex tokenizes character by character in Python; a line without quotes or backslashes splits
    exactly on shlex's whitespace (space, tab, CR, LF), which is 50x faster for big plans.
    """
    if not any(c in command for c in "'\"\\"):
        return [w for w in _SHLEX_WHITESPACE.split(command) if w]
    return shlex.split(command, comments=False, posix=True)


def image_allowed(image: str, capsule: CapsuleSpec, policy: Policy) -> bool:
    """Allowed by the capsule's patterns (or its default image) *and* the operator's, matched
    component by component (engine.images): a `*` never crosses a `/`. Not an image reference
    at all: allowed by nothing."""
    ref = images.parse(image)
    if ref is None:
        return False
    by_capsule = (capsule.image is not None and images.parse(capsule.image) == ref) or any(
        images.matches(p, ref) for p in capsule.images
    )
    return by_capsule and any(images.matches(p, ref) for p in policy.images)


def capsule_name(spec: PlanSpec) -> str:
    return spec.capsule or DEFAULT_CAPSULE


#: A step's fields that hold JSON values of any shape (pydantic types them `Any`).
STEP_VALUES = ("input", *(k for k in STEP_KINDS if k not in ("tool", "shell", "capsule")))
_step_values = operator.attrgetter(*STEP_VALUES, "on_error")


def _values(spec: PlanSpec) -> list[PlanError]:
    """Refusals of values that are no JSON values or nest deeper than values.MAX_DEPTH.

    Checked first, without recursion, and a plan with any of them is judged no further: every
    other check walks these values recursively (references, templates, jsonschema, messages that
    quote them), and so does the decider, so none may ever see one nested without bound.
    One walk over all of them (each one level deeper inside it) says whether any is wrong; only
    then is each field walked on its own, to name it.
    """
    fields: list[Any] = [spec.input, spec.output, spec.input_schema]
    for step in spec.steps:
        fields += _step_values(step)
    todo = [v for v in fields if v is not None and v.__class__ is not str]
    if not todo or values.problem(todo, values.MAX_DEPTH + 1) is None:
        return []
    found: list[tuple[str | None, str, Any]] = [
        (None, "input", spec.input),
        (None, "output", spec.output),
        (None, "inputSchema", spec.input_schema),
    ]
    for i, step in enumerate(spec.steps):
        found += [(step.id, f"steps[{i}].{k}", getattr(step, k)) for k in STEP_VALUES]
        found.append((step.id, f"steps[{i}].onError", step.on_error))
    errors = []
    for step_id, path, value in found:
        problem = values.problem(value)
        if problem is not None:
            where = path if problem.too_deep else values.dotted(problem.path, path)
            errors.append(PlanError(problem.code, step_id, where, problem.message))
    return errors


def validate(
    spec: PlanSpec,
    resolve_capsule: CapsuleResolver,
    policy: Policy | None = None,
    budget: Budget | None = None,
) -> list[PlanError]:
    """Every refusal of `spec`, sorted by step position; [] when the plan may run.

    With a `budget`, a validation that runs past it stops and returns one error instead (code
    `limits`, path `steps`): the plan was not judged, so it may not run."""
    not_values = _values(spec)
    if not_values:
        return not_values
    name = capsule_name(spec)
    checker = _Checker(spec, name, resolve_capsule(name), policy or Policy(), budget=budget)
    if budget is not None:
        checker.deadline = budget.clock() + budget.seconds
    try:
        return _validate(checker)
    except _OverBudgetError as e:
        assert budget is not None
        return [
            PlanError(
                "limits",
                None,
                "steps",
                f"validation took longer than its budget of {budget.seconds:g}s: stopped at "
                f"{e.where} of a plan of {len(spec.steps)} steps, nothing of it judged; split it "
                "(a capsule step runs another Capsule's plan) or make it smaller",
            )
        ]


def _validate(checker: _Checker) -> list[PlanError]:
    spec, name = checker.spec, checker.capsule_name
    if checker.capsule is None:
        checker.add(
            "no-capsule",
            None,
            "capsule",
            f"Capsule {name!r} not found: a plan runs only under a Capsule that grants what it "
            "uses (create it, or name another in spec.capsule / pass --capsule FILE)",
        )
    if len(spec.steps) > checker.policy.max_steps:
        checker.add(
            "limits",
            None,
            "steps",
            f"{len(spec.steps)} steps exceed the operator's limit of {checker.policy.max_steps}",
        )
    graph = Graph.build([s.id for s in spec.steps], [s.depends_on for s in spec.steps])
    seen: set[str] = set()
    for i, step in enumerate(spec.steps):
        path = f"steps[{i}]"
        if not i % BUDGET_EVERY:
            checker.check(path)
        if step.id in seen:
            checker.add(
                "duplicate-id", step.id, f"{path}.id", f"step id {step.id!r} is declared twice"
            )
        seen.add(step.id)
        _check_step(checker, graph, step, path)
        _check_bodies(checker, graph, i, step, path, seen)
    _check_input(checker)
    if spec.workspace is not None and checker.capsule is not None:
        for where, message in workspace.problems(spec.workspace, checker.capsule, name):
            checker.add("workspace", None, f"workspace.{where}", message)
    _check_templates(checker, graph)
    checker.settle_unless(graph)
    for cycle in graph.cycles():
        first = graph.index[cycle[0]]
        loop = " -> ".join(graph.cycle_path(cycle))
        checker.add(
            "cycle",
            cycle[0],
            f"steps[{first}].dependsOn",
            f"dependency cycle between steps {', '.join(cycle)} ({loop}, each waiting for the "
            "next); nothing could ever run",
        )
    return checker.errors


def _check_step(c: _Checker, graph: Graph, step: Step, path: str) -> None:
    kinds = [k for k in STEP_KINDS if getattr(step, k) is not None]
    if len(kinds) != 1:
        what = "none" if not kinds else " and ".join(kinds)
        c.add(
            "step-kind",
            step.id,
            path,
            "a step declares exactly one of tool, shell, capsule or a control step (exit, filter, "
            f"decide, map, reduce, ask) (found {what})",
        )
    _check_control(c, step, path)
    if step.on_error not in ON_ERROR:
        c.add(
            "on-error",
            step.id,
            f"{path}.onError",
            f"onError is {step.on_error!r}; expected one of fail, skip, continue",
        )
    for j, dep in enumerate(step.depends_on):
        if dep not in graph.index:
            c.add(
                "unknown-step",
                step.id,
                f"{path}.dependsOn[{j}]",
                f"dependsOn names {dep!r}, which the plan does not declare",
            )
    _check_references(c, graph, step, path, references.walk(step.input, f"{path}.input"))
    if step.if_ is not None:
        try:
            expr = conditions.parse(step.if_)
        except conditions.ConditionSyntaxError as e:
            c.add("condition", step.id, f"{path}.if", f"cannot parse {step.if_!r}: {e}")
        else:
            refs = ((f"{path}.if", r) for r in conditions.references(expr))
            _check_references(c, graph, step, path, refs)
    if step.tool is not None:
        _check_tool(c, step, path)
    if step.shell is not None:
        _check_shell(c, step, path)
    if step.capsule is not None:
        _check_capsule_step(c, step, path)
    if (
        step.image is not None
        and c.capsule is not None
        and not image_allowed(step.image, c.capsule, c.policy)
    ):
        c.add(
            "image-not-allowed",
            step.id,
            f"{path}.image",
            f"image {step.image!r} is not allowed by Capsule {c.capsule_name!r} (spec.images) "
            "and the operator's allowlist"
            if images.parse(step.image) is not None
            else f"{step.image!r} is not an image reference ([host[:port]/]path[:tag][@digest], "
            "the path in lowercase)",
        )
    if step.resources is not None:
        _check_quantities(c, step, path)
    if step.shell is not None or step.tool is not None:  # steps that become a container
        for field_path, message in _over_ceilings(c, step):
            c.add("limits", step.id, f"{path}.{field_path}", message)
    if step.timeout_seconds is not None:
        ceiling = min(
            c.policy.max_timeout_seconds,
            (c.capsule.max_timeout_seconds if c.capsule else None) or c.policy.max_timeout_seconds,
        )
        if step.timeout_seconds > ceiling:
            c.add(
                "limits",
                step.id,
                f"{path}.timeoutSeconds",
                f"{step.timeout_seconds}s exceeds the maximum of {ceiling}s",
            )


def _check_references(
    c: _Checker,
    graph: Graph,
    step: Step,
    path: str,
    found: Iterable[tuple[str, references.Reference]],
) -> None:
    for where, ref in found:
        if ref.step not in graph.index:
            c.add(
                "unknown-step",
                step.id,
                where,
                f"reference {ref} names {ref.step!r}, which the plan does not declare",
            )
        if ref.field not in references.FIELDS:
            c.add(
                "reference-field",
                step.id,
                where,
                f"reference {ref} reads field {ref.field!r}; only output and status exist",
            )


def _check_tool(c: _Checker, step: Step, path: str) -> None:
    assert step.tool is not None
    if step.tool == SUBMIT_PLAN:
        c.add(
            "plan-in-plan",
            step.id,
            f"{path}.tool",
            "a plan cannot submit a plan; use a capsule step to run another Capsule's plan",
        )
    elif c.capsule is not None and c.capsule.tool(step.tool) is None:
        known = ", ".join(t.name for t in c.capsule.tools) or "none"
        c.add(
            "unknown-tool",
            step.id,
            f"{path}.tool",
            f"tool {step.tool!r} is not in Capsule {c.capsule_name!r}'s inventory (tools: {known})",
        )


def _check_shell(c: _Checker, step: Step, path: str) -> None:
    assert step.shell is not None
    if "\x00" in step.shell:  # no process can be given it (a C string ends there)
        c.add("shell-syntax", step.id, f"{path}.shell", "the command line holds a NUL byte")
        return
    words = c.split(step.shell)
    if words is None:
        why = c.split_errors[step.shell]
        c.add("shell-syntax", step.id, f"{path}.shell", f"cannot split the command line: {why}")
        return
    if not words:
        c.add("shell-syntax", step.id, f"{path}.shell", "the command line is empty")
        return
    if c.capsule is not None and words[0] not in c.capsule.shell.allow:
        allowed = ", ".join(c.capsule.shell.allow) or "nothing"
        c.add(
            "shell-not-allowed",
            step.id,
            f"{path}.shell",
            f"binary {words[0]!r} is not in Capsule {c.capsule_name!r} shell.allow "
            f"(allowed: {allowed}); add it there or use a tool",
        )


def _check_capsule_step(c: _Checker, step: Step, path: str) -> None:
    value = step.input
    ok = isinstance(value, str) or (
        isinstance(value, dict)
        and set(value) == {"objective"}
        and isinstance(value["objective"], str)
    )
    if not ok:
        c.add(
            "capsule-input",
            step.id,
            f"{path}.input",
            'a capsule step\'s input is its task text: a string or {"objective": "<text>"}',
        )


def _check_input(c: _Checker) -> None:
    """Seed 2: the input schema is a Draft 2020-12 schema and the input satisfies it (every
    violation reported, with its path). Evaluated by engine.jsonschemas: patterns on RE2, no
    remote references."""
    spec = c.spec
    if spec.input_schema is None:
        return
    problems = jsonschemas.schema_problems(spec.input_schema)
    for path, message in problems:
        where = ".".join(str(p) for p in path)
        c.add("input-schema", None, "inputSchema" + (f".{where}" if where else ""), message)
    if problems:
        return
    try:
        errors = jsonschemas.evaluate(
            spec.input_schema, spec.input or {}, tick=lambda: c.tick("inputSchema")
        )
    except jsonschemas.UnusableSchemaError as e:
        c.add("input-schema", None, "inputSchema", f"cannot be evaluated: {e}")
        return
    for err in sorted(errors, key=lambda e: list(map(str, e.path))):
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err.absolute_path)
        c.add("input-schema", None, f"input{where}", err.message)


@dataclass(frozen=True, slots=True)
class _Unless:
    """A template's refusal, `message`, unless step `i` waits for step `r` (directly or
    through other steps): answered for every template of the plan at once (_Checker.unless)."""

    i: int
    r: int
    message: str


#: steps whose result fields are readable directly ({{scan.results}}, {{pick.items}})
RESULT_KINDS = ("exit", "filter", "decide", "map", "reduce", "ask")
RootCheck = Callable[[templates.Template], str | _Unless | None]


def _field_problem(t: templates.Template, step: Step | None) -> str | None:
    if t.step_field in templates.STEP_FIELDS:
        return None
    if step is not None and any(getattr(step, k) is not None for k in RESULT_KINDS) and t.path:
        return None  # a control step's result field, e.g. {{scan.results}}
    return f"{t.text}: a step result has output, status or json"


def _check_templates(c: _Checker, graph: Graph) -> None:
    """Seed 2 templates: known roots, step results only from dependencies, never a shell step's
    first word; step ids may not shadow the reserved roots."""
    steps = c.spec.steps
    for i, step in enumerate(steps):
        path = f"steps[{i}]"
        if not i % BUDGET_EVERY:
            c.check(path)
        if step.id in templates.RESERVED:
            _reserved_id(c, step.id, path)
        direct: set[str] | None = None

        def root_problem(
            t: templates.Template, i: int = i, step: Step = step
        ) -> str | _Unless | None:
            nonlocal direct
            problem = _template_root_problem(graph, t)
            if problem is None and t.root not in templates.RESERVED:
                problem = _field_problem(t, steps[graph.index[t.root]])
                if problem is None:
                    direct = set(step.depends_on) if direct is None else direct
                    if t.root in direct:
                        return None  # a direct dependency: nothing to ask the graph
                    return _Unless(
                        i,
                        graph.index[t.root],
                        f"{t.text} uses step {t.root!r}, which this step does not depend on "
                        "(add it to dependsOn, directly or through another step)",
                    )
            return problem

        _check_step_templates(c, step, path, root_problem)
    for where, t in templates.find(c.spec.output):
        if isinstance(t, templates.TemplateError):
            problem: str | None = str(t)
        else:
            problem = _template_root_problem(graph, t)
            if problem is None and t.root in graph.index:
                problem = _field_problem(t, steps[graph.index[t.root]])
        if problem:
            c.add("template", None, f"output{where}", problem)


def _reserved_id(c: _Checker, step_id: str, path: str) -> None:
    c.add(
        "template",
        step_id,
        f"{path}.id",
        f"step id {step_id!r} shadows a reserved template root ({', '.join(templates.RESERVED)})",
    )


def _check_step_templates(c: _Checker, step: Step, path: str, root_problem: RootCheck) -> None:
    """The templates of one step (not of its bodies), each root judged by `root_problem`."""
    found = [(f"{path}.input{w}", t) for w, t in templates.find(step.input)]
    if step.shell is not None:
        words = c.split(step.shell) or [] if "{{" in step.shell else []
        if words and "{{" in words[0]:
            c.add(
                "template",
                step.id,
                f"{path}.shell",
                "a template may not be the binary (the "
                "first word): the allowlist is checked before anything runs",
            )
        found += [(f"{path}.shell", t) for w in words[1:] for _, t in templates.find(w)]
    scoped: set[str] = set()  # fields where {{item}} / {{index}} exist
    job_step = step.shell is not None or step.tool is not None or step.capsule is not None
    for kind, fields in (
        ()
        if job_step
        else (  # a job step has no control grammar
            ("filter", ("over", "where")),
            ("exit", ("when", "message", "output")),
            ("ask", ("prompt", "default")),
            ("decide", ("if",)),
            ("map", ("over",)),
            ("reduce", ("over", "initial")),
        )
    ):
        spec = getattr(step, kind)
        if not isinstance(spec, dict):
            continue
        for f in fields:
            here = [(f"{path}.{kind}.{f}{w}", t) for w, t in templates.find(spec.get(f))]
            if kind == "filter" and f == "where":
                scoped = {w for w, _ in here}
            found += here
    for where, t in found:
        if isinstance(t, templates.TemplateError):
            c.add("template", step.id, where, str(t))
            continue
        if where in scoped and t.root in ("item", "index"):
            continue
        problem = root_problem(t)
        if isinstance(problem, _Unless):
            c.add_unless(problem, "template", step.id, where)
        elif problem:
            c.add("template", step.id, where, problem)


def _check_bodies(c: _Checker, graph: Graph, i: int, step: Step, path: str, seen: set[str]) -> None:
    """Seed 2 body rules: what may nest, ids unique across the plan, what a body's templates
    see (earlier body steps, the scope of its kind, input, and the steps its control step
    depends on); each body step is checked like a top-level step."""
    if step.decide is None and step.map is None and step.reduce is None:
        return
    for kind in bodies.BODY_KINDS:
        for key, body in bodies.bodies(kind, getattr(step, kind)).items():
            where = f"{path}.{kind}.{key}"
            try:
                steps = bodies.parse(body)
            except bodies.BodyError as e:
                c.add("control", step.id, f"{where}{e.path}", str(e))
                continue
            single = isinstance(body, dict)
            body_graph = Graph.build([s.id for s in steps], [s.depends_on for s in steps])
            scope = {"input"}
            if kind != "decide":
                scope |= {"item", "index", "length"}
            if kind == "reduce":
                scope.add("accumulator")
            earlier: dict[str, Step] = {}  # the body's steps before this one (grown, not rebuilt)
            for j, b in enumerate(steps):
                bpath = where if single else f"{where}[{j}]"
                c.tick(bpath)
                name = bodies.qualified(step.id, key, b.id)
                nested = [k for k in bodies.BODY_KINDS if getattr(b, k) is not None]
                if nested:
                    c.add(
                        "control",
                        name,
                        f"{bpath}.{nested[0]}",
                        f"a body may not contain {nested[0]} (seed 2 body rules): run nested "
                        "control flow as a capsule step's plan",
                    )
                if b.exit is not None and kind != "decide":
                    c.add(
                        "control",
                        name,
                        f"{bpath}.exit",
                        "exit is allowed in decide branches only, not in map or reduce bodies",
                    )
                if not single:
                    if b.id in seen:
                        c.add(
                            "duplicate-id",
                            name,
                            f"{bpath}.id",
                            f"step id {b.id!r} is declared twice (ids are unique across the "
                            "plan, bodies included)",
                        )
                    seen.add(b.id)
                    if b.id in templates.RESERVED:
                        _reserved_id(c, name, bpath)
                named = b.model_copy(update={"id": name})
                _check_step(c, body_graph, named, bpath)

                def root_problem(
                    t: templates.Template,
                    earlier: dict[str, Step] = earlier,
                    kind: str = kind,
                    scope: set[str] = scope,
                ) -> str | _Unless | None:
                    return _body_root_problem(c, graph, i, kind, scope, earlier, t)

                _check_step_templates(c, named, bpath, root_problem)
                earlier[b.id] = b


def _body_root_problem(
    c: _Checker,
    graph: Graph,
    i: int,
    kind: str,
    scope: set[str],
    earlier: dict[str, Step],
    t: templates.Template,
) -> str | _Unless | None:
    if t.root in templates.RESERVED:
        if t.root in scope:
            return None
        if t.root == "accumulator":
            return f"{t.text}: {{{{accumulator}}}} exists only in reduce bodies"
        return f"{t.text}: {{{{{t.root}}}}} exists only inside map and reduce bodies"
    if t.root in earlier:
        return _field_problem(t, earlier[t.root])
    if t.root in graph.index:
        problem = _field_problem(t, c.spec.steps[graph.index[t.root]])
        if problem is None:
            return _Unless(
                i,
                graph.index[t.root],
                f"{t.text} uses step {t.root!r}, which the {kind} step {c.spec.steps[i].id!r} "
                "does not depend on (add it to its dependsOn)",
            )
        return problem
    return (
        f"{t.text}: no step {t.root!r} here (a body sees input, its own earlier steps and the "
        "steps its control step depends on)"
    )


def _template_root_problem(graph: Graph, t: templates.Template) -> str | None:
    if t.root == "input":
        return None
    if t.root in templates.RESERVED:
        return f"{t.text}: {{{{{t.root}}}}} exists only inside map and reduce bodies"
    if t.root not in graph.index:
        return f"{t.text}: no step {t.root!r} and not a template root (input, or a step id)"
    return None


def _ceilings(c: _Checker) -> list[tuple[str, Decimal, str, str]]:
    if c.ceilings is None:
        found = []
        maxima = c.capsule.max_resources if c.capsule is not None else None
        for key in ("cpu", "memory"):
            for value, whose in (
                (
                    getattr(maxima, key) if maxima is not None else None,
                    f"Capsule {c.capsule_name!r}",
                ),
                (getattr(c.policy, f"max_{key}"), "the operator"),
            ):
                if value is None:
                    continue
                try:
                    found.append((key, quantity.parse(value), str(value), whose))
                except ValueError:
                    continue  # a Capsule's bad quantity is refused by the API server's schema
        c.ceilings = found
    return c.ceilings


def _over_ceilings(c: _Checker, step: Step) -> list[tuple[str, str]]:
    """A step's effective limits (its own, else the Capsule's defaults, else planops') above the
    Capsule's maxResources or the operator's --max-cpu / --max-memory."""
    ceilings = _ceilings(c)
    if not ceilings:
        return []
    if step.resources is None and c.default_verdict is not None:
        return c.default_verdict
    limits = effective_resources(step.resources, c.capsule.resources if c.capsule else None)[
        "limits"
    ]
    own = step.resources.limits if step.resources is not None else None
    out = []
    for key, ceiling, text, whose in ceilings:
        value = limits.get(key)
        try:
            over = value is not None and quantity.parse(value) > ceiling
        except ValueError:
            continue  # reported by _check_quantities
        if over:
            source = (
                ""
                if own is not None and getattr(own, key) is not None
                else (" (a default: set the step's resources.limits)")
            )
            out.append(
                (
                    f"resources.limits.{key}",
                    f"the {key} limit {value}{source} exceeds {whose}'s maximum of {text}",
                )
            )
    if step.resources is None:
        c.default_verdict = out
    return out


def _check_quantities(c: _Checker, step: Step, path: str) -> None:
    """Requests and limits must be Kubernetes quantities, and a request not above its limit."""
    res = step.resources
    assert res is not None
    parsed: dict[tuple[str, str], Decimal] = {}
    for part in ("requests", "limits"):
        rl = getattr(res, part)
        for key in ("cpu", "memory"):
            value = getattr(rl, key) if rl is not None else None
            if value is None:
                continue
            try:
                parsed[part, key] = quantity.parse(value)
            except ValueError as e:
                c.add("limits", step.id, f"{path}.resources.{part}.{key}", str(e))
    for key in ("cpu", "memory"):
        req, lim = parsed.get(("requests", key)), parsed.get(("limits", key))
        if req is not None and lim is not None and req > lim:
            c.add(
                "limits",
                step.id,
                f"{path}.resources.requests.{key}",
                f"the request ({getattr(res.requests, key)}) exceeds the limit "
                f"({getattr(res.limits, key)})",
            )


def _check_control(c: _Checker, step: Step, path: str) -> None:
    """Seed 2 control steps: exit and filter are run by planops; the rest are refused clearly."""
    for kind in NEEDS_A_MODEL:
        if getattr(step, kind) is not None:
            c.add(
                "unsupported",
                step.id,
                f"{path}.{kind}",
                f"{kind} needs a language model, which "
                "planops does not run: delegate open-ended work to a capsule step (a Capsule's "
                "plan can run any agent image)",
            )
    if step.ask is not None:
        for suffix, message in control.ask_problems(step.ask, tick=lambda: c.tick(path)):
            c.add("control", step.id, f"{path}.ask{suffix}", message)
    if step.decide is not None:
        _check_fields(
            c,
            step,
            f"{path}.decide",
            step.decide,
            required=("if", "then"),
            allowed=("if", "then", "else"),
        )
        if isinstance(step.decide, dict) and "if" in step.decide:
            _check_gate(c, step, f"{path}.decide.if", step.decide["if"])
    for kind, extra in (("map", "concurrency"), ("reduce", "initial")):
        spec = getattr(step, kind)
        if spec is None:
            continue
        _check_fields(
            c, step, f"{path}.{kind}", spec, required=("over", "do"), allowed=("over", "do", extra)
        )
        if isinstance(spec, dict) and "over" in spec and not isinstance(spec["over"], str | list):
            c.add("control", step.id, f"{path}.{kind}.over", "a template (or a list) of the items")
        conc = spec.get("concurrency", 1) if kind == "map" and isinstance(spec, dict) else 1
        if isinstance(conc, bool) or not isinstance(conc, int) or not 1 <= conc <= 1000:
            c.add("control", step.id, f"{path}.map.concurrency", "an integer from 1 to 1000")
    if step.exit is not None:
        _check_fields(
            c,
            step,
            f"{path}.exit",
            step.exit,
            required=("status",),
            allowed=("when", "status", "message", "output"),
        )
        if isinstance(step.exit, dict):
            if step.exit.get("status") not in (None, "success", "error"):
                c.add(
                    "control",
                    step.id,
                    f"{path}.exit.status",
                    f"status is {step.exit.get('status')!r}; expected success or error",
                )
            if "when" in step.exit:
                _check_gate(c, step, f"{path}.exit.when", step.exit["when"])
    if step.filter is not None:
        _check_fields(
            c,
            step,
            f"{path}.filter",
            step.filter,
            required=("over", "where"),
            allowed=("over", "where"),
        )
        if isinstance(step.filter, dict) and "where" in step.filter:
            _check_gate(c, step, f"{path}.filter.where", step.filter["where"])


def _check_fields(
    c: _Checker,
    step: Step,
    path: str,
    value: Any,
    *,
    required: tuple[str, ...],
    allowed: tuple[str, ...],
) -> None:
    if not isinstance(value, dict):
        c.add("control", step.id, path, "expected an object")
        return
    for key in required:
        if key not in value:
            c.add("control", step.id, f"{path}.{key}", "required field is missing")
    for key in sorted(set(value) - set(allowed)):
        c.add("control", step.id, f"{path}.{key}", f"unknown field (allowed: {', '.join(allowed)})")


def _check_gate(c: _Checker, step: Step, path: str, gate: Any) -> None:
    for suffix, message in control.gate_problems(gate):
        c.add("gate", step.id, f"{path}{suffix}", message)
