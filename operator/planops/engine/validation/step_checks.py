"""What one step declares, judged on its own: exactly one kind; onError; dependsOn and
`$id.output` references naming declared steps; its `if`; its tool in the Capsule's inventory
(never submit-plan); its shell line splittable and its binary allowed; a capsule step's task
text (and its child plan's inputSchema: input_checks); its image allowed; what it asks of its
Capsule's grants (grant_checks: a script's interpreter, env, volumes); then its limits
(limit_checks), control fields (control_checks) and pod grants (pod_checks: security profile,
services). Body steps are judged by the same function
under their qualified ids."""

from __future__ import annotations

from collections.abc import Iterable

from planops.api.models import STEP_KINDS, Step
from planops.engine import conditions, references, step_files, templates
from planops.engine.allowlists import image_refusal, step_image
from planops.engine.dag import Graph
from planops.engine.facts import step_kind
from planops.engine.validation.checker import Checker
from planops.engine.validation.control_checks import check_control
from planops.engine.validation.file_checks import check_files
from planops.engine.validation.grant_checks import check_grants
from planops.engine.validation.input_checks import (
    check_capsule_input,
    check_tool_input,
    undeclared_input,
)
from planops.engine.validation.limit_checks import check_limits
from planops.engine.validation.pod_checks import check_pod_grants

ON_ERROR = ("fail", "skip", "continue")
SUBMIT_PLAN = "submit-plan"


def check_step(c: Checker, graph: Graph, step: Step, path: str) -> None:
    kinds = kinds_of(step)
    if len(kinds) != 1:
        what = "none" if not kinds else " and ".join(kinds)
        c.add(
            "step-kind",
            step.id,
            path,
            "a step declares exactly one of tool, shell, script, capsule or a control step (exit, "
            f"filter, decide, map, reduce, ask) (found {what})",
        )
    check_control(c, step, path)
    if step.on_error not in ON_ERROR:
        c.add(
            "on-error",
            step.id,
            f"{path}.onError",
            f"onError is {step.on_error!r}; expected one of fail, skip, continue",
        )
    for j, dep in enumerate(step.depends_on):
        if dep in c.later:
            ran_later(c, step.id, f"{path}.dependsOn[{j}]", dep)
        elif dep not in graph.index and dep not in c.outer:  # a main step: settled already
            c.add(
                "unknown-step",
                step.id,
                f"{path}.dependsOn[{j}]",
                f"dependsOn names {dep!r}, which the plan does not declare",
            )
    check_references(c, graph, step, path, references.walk(step.input, f"{path}.input"))
    if step.if_ is not None:
        _check_if(c, graph, step, path, step.if_)
    if step.tool is not None:
        _check_tool(c, step, path)
    if step.shell is not None:
        _check_shell(c, step, path)
    if step.capsule is not None:
        _check_capsule_step(c, step, path)
    _check_image(c, step, path)
    check_grants(c, step, path, single_kind=len(kinds) == 1)
    check_limits(c, step, path)
    check_pod_grants(c, step, path)
    at = graph.index.get(step.id)
    if at is not None and at < len(c.spec.steps) and c.spec.steps[at] is step:
        check_files(c, graph, at, step, path)
    elif step_files.uses_files(step):  # a body step (map, reduce, decide)
        c.add(
            "results" if step.results else "artifacts",
            step.id,
            path,
            "a step inside a decide, map or reduce body passes no results or artifacts "
            "(yet): give them to a step of the plan itself",
        )


def _check_if(c: Checker, graph: Graph, step: Step, path: str, source: str) -> None:
    """An `if` parses; its references name declared steps; its `$input.NAME` declared inputs;
    and it holds no template: an `if` is never rendered, so `'{{input.env}}' == 'prod'` would
    compare that very text and skip the step, silently."""
    template = next((source[a:b] for a, b, _ in templates.scan(source)), None)
    if template is not None:
        c.add(
            "condition",
            step.id,
            f"{path}.if",
            f"{template} in an `if` is never rendered (it would be compared as that very text): "
            "read the plan's input with $input.NAME (`$input.env == 'prod'`), a step's result "
            "with $<id>.output / $<id>.status, or branch on any template with a decide step "
            "(`decide: {if: {value: '{{...}}', op: eq, to: ...}, then: ...}`)",
        )
        return
    try:
        expr = conditions.parse(source)
    except conditions.ConditionSyntaxError as e:
        c.add("condition", step.id, f"{path}.if", f"cannot parse {source!r}: {e}")
        return
    refs = ((f"{path}.if", r) for r in conditions.references(expr))
    check_references(c, graph, step, path, refs)
    for given in conditions.inputs(expr):
        problem = undeclared_input(c.spec, given.name)
        if problem is not None:
            c.add("condition", step.id, f"{path}.if", f"{given}: {problem}")


def kinds_of(step: Step) -> list[str]:
    return [k for k in STEP_KINDS if getattr(step, k) is not None]


def check_references(
    c: Checker,
    graph: Graph,
    step: Step,
    path: str,
    found: Iterable[tuple[str, references.Reference]],
) -> None:
    for where, ref in found:
        if ref.step in c.later:
            ran_later(c, step.id, where, ref.step)
        elif ref.step not in graph.index and ref.step not in c.outer:
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


def ran_later(c: Checker, step_id: str, where: str, final: str) -> None:
    c.add(
        "finally",
        step_id,
        where,
        f"{final!r} is a finally step: it runs after every main step, so no main step can "
        "wait for it or read its result",
    )


def _check_tool(c: Checker, step: Step, path: str) -> None:
    assert step.tool is not None
    if step.tool == SUBMIT_PLAN:
        c.add(
            "plan-in-plan",
            step.id,
            f"{path}.tool",
            "a plan cannot submit a plan; use a capsule step to run another Capsule's plan",
        )
    elif c.capsule is not None:
        tool = c.capsule.tool(step.tool)
        if tool is not None:
            check_tool_input(c, step, path, tool)
            return
        known = ", ".join(t.name for t in c.capsule.tools) or "none"
        c.add(
            "unknown-tool",
            step.id,
            f"{path}.tool",
            f"tool {step.tool!r} is not in Capsule {c.capsule_name!r}'s inventory (tools: {known})",
        )


def _check_shell(c: Checker, step: Step, path: str) -> None:
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


def _check_image(c: Checker, step: Step, path: str) -> None:
    """The image the step runs in, by dispatch's own rule (engine.allowlists.image_refusal):
    what the validator accepts about images, dispatch accepts."""
    kind = step_kind(step)
    if step.image is not None and kind not in ("shell", "script") and len(kinds_of(step)) == 1:
        runs = "its tool's image, else the Capsule's" if kind == "tool" else "no image of its own"
        c.add(
            "step-kind",
            step.id,
            f"{path}.image",
            f"image is a shell or script step's field: a {kind} step runs in {runs}, never in "
            "this one",
        )
        return
    if c.capsule is None:
        return
    refused = image_refusal(kind, step, c.capsule, c.policy, needs_image=c.policy.needs_image)
    if refused is not None:
        _, named_by = step_image(kind, step, c.capsule)
        where = {"step": f"{path}.image", "tool": f"{path}.tool", "capsule": path}[named_by]
        c.add("image-not-allowed", step.id, where, refused)  # dispatch's words, the same


def _check_capsule_step(c: Checker, step: Step, path: str) -> None:
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
        return
    check_capsule_input(c, step, path)
