"""What a shell or script step reaches beyond today's restricted pod, only as its Capsule grants
it: an interpreter for a script (`scripts.allow`), Secrets and ConfigMaps for its env
(`env.secrets`, `env.configMaps`), named volumes (`volumes`, read-only where the Capsule says).

One rule for every executor: the validator refuses a step on these before anything runs
(validation.grant_checks: each refusal with its code and field), and dispatch asks again right
before an attempt starts (engine.dispatch.admit: the Capsule may have changed since), with the
same words. A step that uses none of them costs nothing here and keeps today's pod.

How a script reaches its interpreter (`script_argv`): as one argument after the interpreter's
flag (`sh -c SCRIPT`, `node -e SCRIPT`), in the cluster as on a laptop. So a script step is one
container, as a shell step is, with nothing written before it starts (no init container, no
file); the price is a bound on its size (api.models.MAX_SCRIPT: what Linux takes in one
argument). The script is never rendered: values reach it through env, as data (`render_env`).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from planops.api.capsule_models import CapsuleSpec
from planops.api.grant_models import INTERPRETERS
from planops.api.models import Step
from planops.engine import templates

#: the kinds of step that run a plan author's own command, the only ones these grants reach (a
#: tool is its Capsule owner's program, with its credentials: no author sets its env or mounts)
OWN_COMMAND = ("shell", "script")


@dataclass(frozen=True)
class Refusal:
    """Why a step may not have what it asks: the validator's `code`, the step's `field` it is
    about (relative: `interpreter`, `env[1].valueFrom`, `volumeMounts[0].readOnly`), why."""

    code: str
    field: str
    message: str


def interpreter(step: Step, capsule: CapsuleSpec) -> str | None:
    """The interpreter a script step runs: its own, else the first its Capsule allows; None
    when it names none and the Capsule allows none."""
    allowed = capsule.scripts.allow
    return step.interpreter or (allowed[0] if allowed else None)


def script_argv(step: Step, capsule: CapsuleSpec) -> list[str]:
    """The command of a script step: its interpreter, that interpreter's flag, the script
    (called for an admitted step: its interpreter is allowed)."""
    name = interpreter(step, capsule) or ""
    return [name, INTERPRETERS.get(name, "-c"), step.script or ""]


def refusals(step: Step, capsule: CapsuleSpec) -> list[Refusal]:
    """Every grant the step asks for that its Capsule does not give ([]: none)."""
    if step.script is None and not step.env and not step.volume_mounts:
        return []  # today's step: nothing to judge
    return [*_script(step, capsule), *_env(step, capsule), *_mounts(step, capsule)]


def _script(step: Step, capsule: CapsuleSpec) -> Iterator[Refusal]:
    if step.script is None:
        return
    allowed = capsule.scripts.allow
    if step.interpreter is None and not allowed:
        yield Refusal(
            "script-not-allowed",
            "script",
            "the Capsule allows no interpreter (its scripts.allow is empty): no script step "
            "may run under it",
        )
    elif step.interpreter is not None and step.interpreter not in allowed:
        known = "" if step.interpreter in INTERPRETERS else ", nor one planops knows"
        yield Refusal(
            "script-not-allowed",
            "interpreter",
            f"interpreter {step.interpreter!r} is not in the Capsule's scripts.allow{known} "
            f"(allowed: {', '.join(allowed) or 'nothing'})",
        )


def _env(step: Step, capsule: CapsuleSpec) -> Iterator[Refusal]:
    for n, e in enumerate(step.env):
        source = e.value_from
        if source is None:
            continue
        if source.secret_key_ref is not None:
            kind, name, granted = "Secret", source.secret_key_ref.name, capsule.env.secrets
            where = "secretKeyRef"
        else:
            assert source.config_map_key_ref is not None  # exactly one (api.models)
            kind, name, granted = (
                "ConfigMap",
                source.config_map_key_ref.name,
                capsule.env.config_maps,
            )
            where = "configMapKeyRef"
        if name not in granted:
            listed = "env.secrets" if kind == "Secret" else "env.configMaps"
            yield Refusal(
                "env-not-allowed",
                f"env[{n}].valueFrom.{where}.name",
                f"env {e.name} reads {kind} {name!r}, which the Capsule does not list in "
                f"{listed} (listed: {', '.join(granted) or 'none'})",
            )


def _mounts(step: Step, capsule: CapsuleSpec) -> Iterator[Refusal]:
    for n, m in enumerate(step.volume_mounts):
        volume = capsule.volume(m.name)
        if volume is None:
            known = ", ".join(v.name for v in capsule.volumes) or "none"
            yield Refusal(
                "volume-not-allowed",
                f"volumeMounts[{n}].name",
                f"volume {m.name!r} is not one of the Capsule's volumes (volumes: {known})",
            )
        elif m.read_only is False and volume.always_read_only:
            why = (
                "the Capsule marks it readOnly"
                if volume.read_only
                else f"a {volume.source} volume: the kubelet mounts it read-only"
            )
            yield Refusal(
                "volume-not-allowed",
                f"volumeMounts[{n}].readOnly",
                f"volume {m.name!r} may only be mounted read-only ({why}): drop readOnly: false",
            )


def read_only(step_says: bool | None, volume_read_only: bool) -> bool:
    """Whether a mount is read-only: the step's word, else the volume's (a writable mount of a
    read-only volume is refused before: `refusals`)."""
    return volume_read_only if step_says is None else step_says or volume_read_only


#: the most one variable (`NAME=value`, in UTF-8, with its NUL) may hold: what Linux passes in
#: one string of a new process's environment (MAX_ARG_STRLEN); past it the process cannot start
MAX_ENV_BYTES = 128 * 1024


def render_env(step: Step, lookup: templates.Lookup) -> tuple[tuple[str, str], ...]:
    """The step's env values (not its valueFrom entries: the kubelet's), rendered in one pass
    (one bound on what it substitutes, templates.MAX_RENDERED) and each taken as text: a value
    that is one template becomes that value as text (a string as it is, anything else as
    JSON), and the result is never rendered again nor split. Raises TemplateError, also for a
    value no process could be started with (MAX_ENV_BYTES, a NUL byte)."""
    given = [e for e in step.env if e.value is not None]
    rendered = templates.render([e.value for e in given], lookup)
    out = tuple((e.name, templates.as_text(v)) for e, v in zip(given, rendered, strict=True))
    for name, value in out:
        size = len(name) + len(value.encode("utf-8", "surrogatepass")) + 2
        if size > MAX_ENV_BYTES or "\x00" in value:
            why = "holds a NUL byte" if "\x00" in value else f"renders to {size} bytes"
            raise templates.TemplateError(
                f"env {name} {why}: a variable holds at most {MAX_ENV_BYTES} bytes of text "
                "without NUL (what a process can be started with); pass a big value through "
                "the workspace"
            )
    return out
