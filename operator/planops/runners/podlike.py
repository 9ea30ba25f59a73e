"""What a local attempt gets, as a step pod gets it (kube.manifests.job): the local runner is the
cluster, as far as a laptop can be one, and says so where it cannot (docs/operator.md, "The local
runner is the cluster").

- The environment: planops' PLANOPS_* variables (engine.dispatch.environment, the same function
  as a Job's env), its tool's `env`, and of this machine's environment only HOST_ENV, with HOME
  the attempt's own directory and TZ=UTC. A tool's value from a Secret or ConfigMap cannot be
  read here: the attempt is refused saying so (an optional one is left unset, with a notice), and
  so is a tool's secretMounts; never a silent empty value. A shell or script step's own `env`
  likewise (its values as rendered, never expanded), and its volumes: refused, naming each.
- The kubelet's `$(VAR)` references: in a tool's env values (each by the variables before it)
  and its command (by them all), as the kubelet expands them (`expand`); a shell step's words
  are the plan's, never expanded (kube.manifests escapes them for the kubelet).
- A fresh private directory per attempt, removed after it (a pod's own filesystem): a tool always
  starts there, a shell step too unless the plan declares a workspace.
- The workspace (`spec.workspace`): one directory per run, where shell steps start, named by
  PLANOPS_WORKSPACE (/workspace in a pod); without one the steps share no directory, as pods
  without a volume share none. The Capsule's readOnlyPaths are not read-only here (a notice).
- The pod's grants (api.pod_models): a step's services refuse its attempt (no sidecar starts
  here), its security profile is noted (the process runs as you), never silently dropped.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from planops.api import CapsuleSpec, PlanSpec, Tool
from planops.api.container_models import EnvVar
from planops.engine import Dispatch
from planops.engine import dispatch as dispatch_

#: What a step gets of this machine's environment (nothing else of it: no credentials, no
#: settings of the user's shell). PATH: its first word is looked up there, as in the image's
#: PATH in a pod. Not HOME (a step's HOME is its own directory, so no `~/.npmrc`, `~/.aws` or
#: `~/.gitconfig` of the user is read, as a pod reads none), not the locale (LANG, LC_*: a pod
#: has none unless its image sets one, so sorting, dates and messages read as they will
#: there), not TZ (a pod's clock reads UTC: TZ=UTC is set instead).
HOST_ENV = ("PATH",)


@dataclass(frozen=True)
class Where:
    """Where one plan's attempts run: its name (PLANOPS_PLAN) and its workspace, if it has one."""

    plan: str
    workspace: Path | None


@contextlib.contextmanager
def workspace(
    plan_id: str, spec: PlanSpec, workdir: Path | None, top: bool
) -> Iterator[Path | None]:
    """The plan's workspace (`spec.workspace`): `workdir` for the top plan when given, else a
    fresh temporary directory removed afterwards. None without one: its steps share no directory
    (a sub-plan has a workspace of its own, as a child Plan has its own claim)."""
    if spec.workspace is None:
        if top and workdir is not None:
            raise ValueError(f"plan {plan_id} declares no workspace (spec.workspace)")
        yield None
    elif workdir is not None and top:
        workdir.mkdir(parents=True, exist_ok=True)
        yield workdir
    else:
        with tempfile.TemporaryDirectory(prefix=f"planops-{_safe(plan_id)}-") as tmp:
            yield Path(tmp)


def read_only_notice(capsule: CapsuleSpec) -> str | None:
    """What a run with a workspace is told of the Capsule's readOnlyPaths, or None: none."""
    if not capsule.read_only_paths:
        return None
    paths = ", ".join(capsule.read_only_paths)
    return (
        f"the Capsule's readOnlyPaths ({paths}) are read-only in a pod only: the local "
        "runner's workspace is one writable directory"
    )


def environment(where: Where, d: Dispatch, home: Path) -> dict[str, str]:
    """What a step pod's environment holds, here: HOST_ENV of this machine's, HOME (the
    attempt's own directory), TZ=UTC, then planops' variables (`declared`, the same as a Job's);
    the tool's own `env` goes over them (`tool_env`)."""
    host = {name: os.environ[name] for name in HOST_ENV if name in os.environ}
    host.setdefault("PATH", os.defpath)
    return host | {"HOME": str(home), "TZ": "UTC"} | declared(where, d)


def declared(where: Where, d: Dispatch) -> dict[str, str]:
    """The variables a Job's container declares (planops' own), which a tool's `$(VAR)` may
    name; not the image's or the runtime's (PATH, HOME), which the kubelet does not know."""
    shared = str(where.workspace) if where.workspace is not None else None
    return dispatch_.environment(where.plan, d, shared)


def tool_env(tool: Tool, given: Mapping[str, str]) -> tuple[dict[str, str], list[str], list[str]]:
    """A tool's `env` as a local process can have it: (its values, each `$(VAR)` in it expanded
    by `given` and the values before it, as the kubelet does; notices of the optional values
    from a Secret or ConfigMap left unset; refusals). A local run reads no Secret or ConfigMap:
    a value that must come from one, or a Secret to mount, refuses the attempt (every reason at
    once), never a silent empty value."""
    values: dict[str, str] = {}
    unset: list[str] = []
    refusals: list[str] = []
    for e in tool.env:
        if e.value is not None:
            values[e.name] = expand(e.value, {**given, **values})
            continue
        _unreadable(
            f"tool {tool.name!r}",
            e,
            "give the tool a value in a Capsule file of your own for local runs",
            unset,
            refusals,
        )
    refusals += [
        f"tool {tool.name!r} mounts Secret {m.secret_name!r} at {m.mount_path}, which a local "
        "run cannot (run the plan in a cluster)"
        for m in tool.secret_mounts
    ]
    return values, unset, refusals


def step_env(d: Dispatch) -> tuple[dict[str, str], list[str], list[str]]:
    """A shell or script step's own `env` as a local process can have it: (its values as the
    engine rendered them, never expanded: the plan's data, as kube.manifests hands them over;
    notices of optional values from a Secret or ConfigMap left unset; refusals of the others,
    which a local run cannot read)."""
    unset: list[str] = []
    refusals: list[str] = []
    for e in d.step.env:
        if e.value_from is not None:
            _unreadable(
                f"step {d.step.id!r}",
                e,
                "give it a value in a plan file for local runs",
                unset,
                refusals,
            )
    return dict(d.env), unset, refusals


def _unreadable(whose: str, e: EnvVar, instead: str, unset: list[str], refusals: list[str]) -> None:
    """A value from a Secret or ConfigMap, which a local run cannot read: an optional one is
    left unset (a notice, in `unset`), any other refuses the attempt (in `refusals`)."""
    assert e.value_from is not None  # exactly one of value and valueFrom (api.models)
    ref = e.value_from.secret_key_ref or e.value_from.config_map_key_ref
    kind = "Secret" if e.value_from.secret_key_ref is not None else "ConfigMap"
    assert ref is not None
    source = f"{kind} {ref.name!r} (key {ref.key!r})"
    if ref.optional:
        unset.append(
            f"{whose}: env {e.name} is left unset: its value is optional, from {source}, and a "
            f"local run reads no {kind}"
        )
    else:
        refusals.append(
            f"{whose}: env {e.name} comes from {source}, which a local run cannot read (run "
            f"the plan in a cluster, or {instead})"
        )


def mount_refusals(d: Dispatch, capsule: CapsuleSpec) -> list[str]:
    """A shell or script step's volumes, which a local run cannot mount: one refusal each,
    naming the volume (a process sees this machine's files at an absolute path; none of them
    is the Capsule's volume, and a directory made for an emptyDir could not appear there)."""
    refusals = []
    for m in d.step.volume_mounts:
        volume = capsule.volume(m.name)
        what = f"{volume.source} volume" if volume is not None else "volume"
        refusals.append(
            f"step {d.step.id!r} mounts {what} {m.name!r} at {m.mount_path}, which a local run "
            "cannot (run the plan in a cluster)"
        )
    return refusals


def pod_grants(d: Dispatch, capsule: CapsuleSpec) -> tuple[list[str], list[str]]:
    """What the step's pod grants give it that a local process cannot have, as (notices,
    refusals): its services refuse the attempt (a laptop starts no sidecar: never a step run
    without the database it lists); its security profile is noted (the process runs as you,
    with your privileges, not as the profile's uid with its capabilities)."""
    refusals = []
    if d.step.services:
        refusals.append(
            f"services {', '.join(d.step.services)} run beside the step in its pod, which a "
            "local run cannot start (run the plan in a cluster)"
        )
    notices = []
    profile = capsule.security_profile(d.step.security_profile or "")
    if profile is not None:
        notices.append(
            f"security profile {profile.name!r} (uid {profile.uid()}"
            f"{', capabilities ' + ', '.join(profile.capabilities) if profile.capabilities else ''}"
            f"{', privileged' if profile.privileged else ''}) applies in a pod only: here the step "
            f"runs as you (uid {os.getuid()}), with your privileges"
        )
    return notices, refusals


def expand(text: str, env: Mapping[str, str]) -> str:
    """`text` as the kubelet hands it to a container (its `expansion` package): `$(NAME)` of a
    defined variable becomes its value, of an undefined one stays as it is; `$$` becomes `$`;
    any other `$` stays."""
    out: list[str] = []
    i = 0
    while i < len(text):
        c = text[i]
        if c != "$" or i + 1 == len(text):
            out.append(c)
            i += 1
        elif text[i + 1] == "$":
            out.append("$")
            i += 2
        elif text[i + 1] == "(" and (end := text.find(")", i + 2)) != -1:
            name = text[i + 2 : end]
            out.append(env.get(name, f"$({name})"))
            i = end + 1
        else:  # `$(` never closed, or `$x`: as written
            out.append(text[i : i + 2])
            i += 2
    return "".join(out)


@contextlib.contextmanager
def private_dir(d: Dispatch) -> Iterator[Path]:
    """A fresh, empty directory of one attempt's own (0700), removed after it: what a pod's own
    filesystem is to its container."""
    path = Path(tempfile.mkdtemp(prefix=f"planops-{_safe(d.step.id)}-{d.attempt}-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _safe(name: str) -> str:
    """A name as part of a directory's name (a plan's name from a file may hold anything)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name)[:40]
