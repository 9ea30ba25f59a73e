"""The rules applied right before an attempt starts, one set for every executor.

The validator judged the plan against its Capsule when it was submitted; a Capsule may change
while the plan runs, and what a step gets (its deadline, its memory) must be the same whether
the cluster runs it as a Job or `kubectl-plan run --local` runs it as a process. So both
executors (reconciler.run.attempt_objects and runners.local) ask this module, and neither keeps a
rule of its own:

- `admit`: whether the attempt may start at all (seed 1's "call denied"): the tool still in the
  Capsule's inventory and its input, as rendered, inside the tool's inputSchema
  (engine.tool_inputs), the binary still in `shell.allow`, the image allowed by the Capsule and
  the operator, the target capsule in `spawn.allow`, not already running above the step (a
  cycle), and plans nested at most MAX_DEPTH deep; a shell or script step's grants (its
  script's interpreter, its env's Secrets and ConfigMaps, its volumes: engine.step_grants).
- `timeout_seconds`: the step's timeout (else the Capsule's default, else an hour), bounded by
  the Capsule's and the operator's maximum; a Job's run time and an ask's wait alike.
  `attempt_timeout` bounds it by what the attempt's deadline leaves (a finally step's budget).
- `resources` / `memory_limit_bytes`: requests and limits as api.resources merges them (step,
  then Capsule, then planops' defaults), so a local process gets the memory limit a pod would.
- `environment`: the PLANOPS_* variables of a tool or shell step's attempt (a Job's container
  env, a local process's environment alike).
"""

from __future__ import annotations

import json
import math

from planops.api.capsule_models import CapsuleSpec
from planops.api.models import Step
from planops.api.quantity import parse
from planops.api.resources import resources as merged_resources
from planops.engine import pod_grants, step_grants, tool_inputs
from planops.engine.allowlists import image_refusal, shell_words, step_image
from planops.engine.facts import Dispatch
from planops.engine.policy import MAX_DEPTH, Policy

#: a step's timeout when neither the step nor its Capsule sets one
DEFAULT_TIMEOUT_SECONDS = 3600
#: every refusal of `admit` starts so (seed 1's record name: call_denied)
DENIED = "call denied: "


def image_of(d: Dispatch, capsule: CapsuleSpec) -> str | None:
    """The image the attempt runs in (engine.allowlists.step_image): a tool's own (else the
    Capsule's); a shell step's own (else the Capsule's). None: none is named."""
    return step_image(d.kind, d.step, capsule)[0]


def admit(
    d: Dispatch,
    capsule: CapsuleSpec,
    policy: Policy,
    *,
    lineage: tuple[str, ...],
    depth: int,
    needs_image: bool,
) -> str | None:
    """Why the attempt may not start (a text starting with DENIED), or None: it may.

    `lineage` is the capsules of the plans above this one and this plan's own, outermost first;
    `depth` how deep this plan nests (0: a top-level plan). `needs_image`: the executor runs
    the step in an image (a cluster), so a step without one cannot start; an executor that runs
    local processes needs none, but an image that is named must be allowed all the same."""
    grants = pod_grants.refusals(d.step, d.kind, capsule, policy)  # [] unless it asks any
    if grants:
        return DENIED + "; ".join(r.message for r in grants)
    if d.kind == "ask":  # a question to a person: nothing runs
        return None
    if d.kind == "capsule":
        return _spawn(d.step.capsule or "", capsule, lineage, depth)
    if d.kind == "template":  # under this plan's Capsule: its child plan is judged itself
        return _nested(depth)
    if d.kind == "tool":
        tool = capsule.tool(d.step.tool or "")
        if tool is None:
            return f"{DENIED}tool {d.step.tool!r} is not in the Capsule's inventory"
        bad_input = tool_inputs.refusal(tool, d.input)
        if bad_input is not None:
            return DENIED + bad_input
    if d.kind == "shell":
        words = d.words or shell_words(d.step.shell or "")
        if not words or words[0] not in capsule.shell.allow:
            binary = words[0] if words else ""
            return f"{DENIED}binary {binary!r} is not in the Capsule's shell.allow"
    if d.kind in step_grants.OWN_COMMAND and (grants := step_grants.refusals(d.step, capsule)):
        return DENIED + "; ".join(r.message for r in grants)
    refused = image_refusal(d.kind, d.step, capsule, policy, needs_image=needs_image)
    return None if refused is None else DENIED + refused


def _spawn(target: str, capsule: CapsuleSpec, lineage: tuple[str, ...], depth: int) -> str | None:
    if target not in capsule.spawn.allow:
        return f"{DENIED}capsule {target!r} is not in the Capsule's spawn.allow"
    if target in lineage:
        return (
            f"{DENIED}capsule {target!r} already runs above this step (cycle: "
            f"{' -> '.join([*lineage, target])})"
        )
    return _nested(depth)


def _nested(depth: int) -> str | None:
    """Why a child plan of a plan `depth` deep may not start (the nesting bound), or None."""
    if depth + 1 >= MAX_DEPTH:
        return f"{DENIED}plans nest at most {MAX_DEPTH} deep"
    return None


def no_plan(target: str) -> str:
    """The failure of a capsule step whose target Capsule is gone or has no plan."""
    return f"capsule {target!r} does not exist or has no plan"


def timeout_seconds(step: Step, capsule: CapsuleSpec, policy: Policy) -> int:
    """One deadline rule for every executor, for a step's run time and an ask's wait: the
    step's timeout (or the Capsule's default, or an hour), bounded by the Capsule's and the
    operator's maximum."""
    return min(
        step.timeout_seconds or capsule.default_timeout_seconds or DEFAULT_TIMEOUT_SECONDS,
        capsule.max_timeout_seconds or policy.max_timeout_seconds,
        policy.max_timeout_seconds,
    )


def attempt_timeout(d: Dispatch, capsule: CapsuleSpec, policy: Policy, now: float) -> int:
    """The seconds attempt `d` may run from `now`: its step's timeout, bounded by its deadline
    when it has one (a finally step: the end of the finally steps' budget), at least 1."""
    seconds = timeout_seconds(d.step, capsule, policy)
    if d.deadline is None:
        return seconds
    return max(1, min(seconds, math.ceil(d.deadline - now)))


def resources(step: Step, capsule: CapsuleSpec) -> dict[str, dict[str, str]]:
    """The step's requests and limits, both always set (api.resources: step -> Capsule ->
    planops' defaults)."""
    return merged_resources(step.resources, capsule.resources)


def memory_limit_bytes(step: Step, capsule: CapsuleSpec) -> int:
    """The memory limit the step runs under, in bytes (a pod's cgroup limit, a local process's
    RLIMIT_DATA). Raises ValueError when it is not a quantity (a Capsule's: a step's own is
    refused by the validator)."""
    return int(parse(resources(step, capsule)["limits"]["memory"]))


def environment(plan: str, d: Dispatch, workspace: str | None) -> dict[str, str]:
    """The variables planops gives an attempt of a tool or shell step, in this order:
    PLANOPS_PLAN (the name of the plan it belongs to), PLANOPS_STEP (a body step's qualified
    name), PLANOPS_ATTEMPT (from 1), a tool's PLANOPS_INPUT (its JSON input, `{}` when it has
    none) and, when the run has a workspace, PLANOPS_WORKSPACE (where it is: /workspace in a
    pod, a directory of this machine locally). A tool's own `env` follows them; no name of it
    starts with PLANOPS_ (api.models refuses it)."""
    env = {"PLANOPS_PLAN": plan, "PLANOPS_STEP": d.step.id, "PLANOPS_ATTEMPT": str(d.attempt)}
    if d.kind == "tool":
        env["PLANOPS_INPUT"] = json.dumps(d.input if d.input is not None else {})
    if workspace is not None:
        env["PLANOPS_WORKSPACE"] = workspace
    return env
