"""What a step asks beyond today's restricted pod, judged against its Capsule's grants before
anything runs (engine.step_grants: the rules dispatch applies again, with the same words): its
script's interpreter, its env's Secrets and ConfigMaps, its volumes. Also what only a plan's
text can say: a script holds no template (it is never rendered: values reach it through env),
and only a shell or script step (the author's own command) has env, volumeMounts or an
interpreter."""

from __future__ import annotations

from planops.api.models import Step
from planops.engine import step_grants, templates
from planops.engine.facts import step_kind
from planops.engine.validation.checker import Checker

#: the step fields that only a shell or script step has, and what each is for
_OWN_COMMAND_FIELDS = (("env", "env"), ("volume_mounts", "volumeMounts"))


def check_grants(c: Checker, step: Step, path: str, single_kind: bool) -> None:
    """The grants `step` (at `path`) asks for. `single_kind`: the step declares one kind (a
    field misplaced on a step of several kinds is the step-kind refusal already)."""
    if not (step.script or step.env or step.volume_mounts or step.interpreter):
        return  # today's step (most steps): nothing asked, nothing to judge
    kind = step_kind(step)
    if single_kind and not _fields_fit(c, step, path, kind):
        return
    if step.script is not None:
        _no_template(c, step, path, step.script)
    if c.capsule is None:
        return
    for r in step_grants.refusals(step, c.capsule):
        c.add(r.code, step.id, f"{path}.{r.field}", r.message)


def _fields_fit(c: Checker, step: Step, path: str, kind: str) -> bool:
    """env and volumeMounts are a shell or script step's; interpreter a script step's."""
    fits = True
    if kind not in step_grants.OWN_COMMAND:
        for attr, name in _OWN_COMMAND_FIELDS:
            if getattr(step, attr):
                fits = False
                c.add(
                    "step-kind",
                    step.id,
                    f"{path}.{name}",
                    f"{name} is a shell or script step's field: a {kind} step runs "
                    + (
                        "its tool as the Capsule's owner wrote it (a tool's env and files are "
                        "its own, in the Capsule)"
                        if kind == "tool"
                        else "no command of the plan's"
                    ),
                )
    if step.interpreter is not None and kind != "script":
        fits = False
        c.add(
            "step-kind",
            step.id,
            f"{path}.interpreter",
            f"interpreter is a script step's field: a {kind} step has no script",
        )
    return fits


def _no_template(c: Checker, step: Step, path: str, script: str) -> None:
    """A script is never rendered: `{{` in it would reach the interpreter as that very text
    (and a rendered value spliced into code is script injection)."""
    if "{{" not in script:
        return
    found = next((script[a:b] for a, b, _ in templates.scan(script)), "{{")
    c.add(
        "template",
        step.id,
        f"{path}.script",
        f"{found} in a script is never rendered (a value spliced into code could run as code): "
        "pass it as data through env, e.g. env: [{name: ENV, value: '{{input.env}}'}], and "
        'read "$ENV" in the script; a literal {{ is written with its braces apart (in sh: '
        "'{''{')",
    )
