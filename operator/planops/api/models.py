"""Typed models of what users write: Plan specs and their steps (a Capsule's: api.capsule_models).

Why pydantic: the structure of a document (unknown fields, wrong types) is checked here, once,
with precise field paths; the *meaning* of a plan (duplicate ids, cycles, allowlists) is checked by
`planops.engine.validation`, which reports every refusal at once with a code. So fields whose
values carry a seed refusal (`onError`, the step kinds) are typed loosely here on purpose: a bad
`onError` must come back as the seed's `on-error` refusal, not as a type error.

Spelling: the Kubernetes spelling is camelCase; files may use the seeds' snake_case. Every model
accepts both (alias + populate_by_name) and always *emits* camelCase. Only the plan language's own
keys are normalized: a step's `input` belongs to its tool and is never rewritten.
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from planops.api import base
from planops.api import template_ref as refs
from planops.api.attempt_models import Resources, RetryBackoff
from planops.api.base import Model
from planops.api.container_models import MAX_SCRIPT, StepEnvVar, VolumeMount, distinct
from planops.api.crd_hints import crd
from planops.api.file_models import MAX_RESULTS, ResultDecl, StepInputs, StepOutputs
from planops.api.labels import DNS_LABEL_PATTERN
from planops.api.limits import (
    HISTORY_LIMIT,
    HISTORY_LIMIT_MAX,
    MAX_DEPENDS_ON,
    MAX_FINALLY_STEPS,
    MAX_STEPS,
)

#: A Kubernetes object name (api.base's, named here too: the plan's fields and others use it)
NAME_PATTERN = base.NAME_PATTERN

#: A step id: also a Job label value and part of a Job name, hence the restriction (the seed
#: leaves ids free; planops needs them to be label-safe). Letters, digits, `_` and `-`.
STEP_ID_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]{0,62}$"

#: The keys that make a step's kind: exactly one per step. tool, shell, capsule (seed 1), script
#: (planops') and the seed-2 control steps; the validator says which of these planops runs
#: (engine.validation).
STEP_KINDS = (
    "tool",
    "shell",
    "script",
    "capsule",
    "template",
    "exit",
    "filter",
    "decide",
    "map",
    "reduce",
    "ask",
    "agent",
    "infer",
)
#: Kinds the schema accepts but the validator refuses (code `unsupported`): they need a model.
NEEDS_A_MODEL = ("agent", "infer")


#: a body (then / else / do): a single call {tool|shell|capsule|ask|filter|exit, input, ...} or
#: a list of steps with ids, run in order
_BODY = (
    "a single call (a step without id: {tool: x, input: ...} or {shell: ...}) or a list of "
    "steps with ids, run in order; bodies may not contain decide, map or reduce"
)
#: the API server's count of a step's kinds (the validator says which kind is missing or extra)
_ONE_KIND = " + ".join(f"(has(self.{k}) ? 1 : 0)" for k in STEP_KINDS) + " == 1"


def _control(description: str) -> Any:
    """A seed-2 control step's field: typed loosely here, so that the validator refuses a bad
    value with the seed's code (`control`, at the field's path); the API server takes objects."""
    return Field(default=None, description=description, json_schema_extra=crd(type="object"))


#: a service of the Capsule, by name (api.pod_models.Service.name)
_ServiceName = Annotated[
    str, Field(pattern=DNS_LABEL_PATTERN, max_length=63, description="A service's name.")
]


def _refused(kind: str) -> Any:
    return _control(f"Seed 2 {kind}: refused (needs a language model: use a capsule step).")


class Step(Model):
    """One step. Exactly one kind: tool, shell, script, capsule, or a control step (exit, filter,
    decide, map, reduce, ask)."""

    # No field of a step has a default in the CRD (crd_hints): the API server would store each
    # in every step (29 bytes a step for onError and retries, half the spec of a 20,000-step
    # plan of short shell steps); the model applies them when a spec is read.
    model_config = ConfigDict(
        json_schema_extra=crd(
            rules=[
                (
                    _ONE_KIND,
                    "a step declares exactly one of tool, shell, script, capsule, template, "
                    "exit, filter, decide, map, reduce, ask",
                )
            ]
        )
    )

    id: str = Field(
        pattern=STEP_ID_PATTERN,
        max_length=63,
        description="Unique within the plan; other steps name it in dependsOn and in "
        "$<id>.output / $<id>.status references. Letters, digits, _ and -.",
    )
    tool: str | None = Field(
        default=None,
        min_length=1,
        max_length=253,
        description="A tool of the Capsule's inventory (spec.tools of the Capsule). The tool "
        "receives the step's input as JSON. Tool steps of one plan run one at a time.",
    )
    shell: str | None = Field(
        default=None,
        min_length=1,
        max_length=16384,
        description="A command line, split into words (POSIX shell quoting rules) but never "
        "given to a shell. Its first word must be in the Capsule's shell.allow; a pipeline "
        "belongs in a script step (an interpreter such as sh in shell.allow allows anything).",
    )
    capsule: str | None = Field(
        default=None,
        pattern=NAME_PATTERN,
        max_length=63,
        description="A Capsule in the plan's Capsule's spawn.allow; its plan runs as a child "
        "Plan given this step's task text as input.objective; the child's output (as JSON "
        "text), or else its last step's output, becomes this step's.",
    )
    template: Any = Field(
        default=None, description=refs.STEP_TEXT, json_schema_extra=crd(type="object")
    )
    script: str | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_SCRIPT,
        description="A script (several lines), run by an interpreter the Capsule allows "
        "(scripts.allow; see interpreter) in the step's image: `sh -c SCRIPT`. Never rendered: "
        "a {{ in it is refused; values reach it as data through env.",
    )
    interpreter: str | None = Field(
        default=None,
        max_length=63,
        description="The interpreter of a script step: one of the Capsule's scripts.allow "
        "(sh, bash, python3, ...). Default: the first it allows.",
    )
    env: list[StepEnvVar] = Field(
        default_factory=list,
        max_length=64,
        description="Environment variables of a shell or script step: a value (templates "
        "rendered once, as data), or a key of a Secret or ConfigMap the Capsule lists in "
        "env.secrets / env.configMaps. Names starting with PLANOPS_ are planops'; PATH, LD_*, "
        "GCONV_PATH, BASH_ENV, ENV, SHELLOPTS, BASHOPTS and PS4 are the image's (they choose "
        "which program runs).",
    )
    volume_mounts: list[VolumeMount] = Field(
        default_factory=list,
        max_length=16,
        description="Volumes of the Capsule (spec.volumes, by name) mounted into a shell or "
        "script step; a volume the Capsule marks readOnly is mounted read-only.",
    )
    input: Any = Field(
        default=None,
        description="Handed to the step: a tool step gets it as JSON (env PLANOPS_INPUT); a "
        "capsule step's input is its task text, a string or {objective: <text>}; a shell step "
        "ignores it. A string that is exactly $<id>.output or $<id>.status, at any depth, is "
        "replaced by that step's result when this step is dispatched.",
    )
    # seed 2 control steps, judged by the validator (typed loosely so errors carry seed codes)
    exit: Any = _control(
        "Seed 2: end the plan early: {when?: gate, status: success|error, message?, "
        "output?}. Evaluated by planops (no Job)."
    )
    filter: Any = _control(
        "Seed 2: partition a list: {over: template, where: gate with {{item}} and {{index}}}. "
        "Evaluated by planops (no Job)."
    )
    decide: Any = _control(
        "Seed 2: fork: {if: gate, then: body, else?: body}. Result {branch, verdict, reason, "
        f"result}}. A body is {_BODY}; exit is allowed in branches."
    )
    map: Any = _control(
        "Seed 2: run a body per item: {over: template rendering to an array, do: body, "
        "concurrency?: max items in flight (default 1)}; {{item}}, {{index}}, {{length}} in the "
        f"body. Result {{count, results}} in input order. A body is {_BODY}."
    )
    reduce: Any = _control(
        "Seed 2: fold a list: {over, do: body, initial?}; {{accumulator}} starts at initial "
        "(default null) and becomes each item's result. Result {count, result}."
    )
    ask: Any = _control(
        "Seed 2: ask a person: {prompt, outputSchema: object of string/number/integer/"
        "boolean/enum fields, whenUnanswered?: fail|default, default?}. Answer with kubectl "
        "plan answer PLAN STEP --set k=v; past the step's timeout whenUnanswered applies. "
        "Result {answer, answered, reason?}."
    )
    agent: Any = _refused("agent")
    infer: Any = _refused("infer")
    depends_on: list[str] = Field(
        default_factory=list,
        description="Steps that must settle (succeed, fail or be skipped) before this one is "
        "dispatched. Omitted: the step is ready immediately.",
        # the API server's bounds of a stored Plan; the validator judges each entry
        # (unknown-step: no step id is longer than 63) whatever their number
        json_schema_extra=crd(maxItems=MAX_DEPENDS_ON, items={"maxLength": 63}),
    )
    if_: str | None = Field(
        default=None,
        alias="if",
        max_length=4096,
        description="A condition over references, the plan's input ($input.NAME) and quoted "
        'literals: == != > < (text comparison), && (binds tighter) and ||, e.g. "$test.status '
        "== 'failed' || $input.env == 'prod'\". Never rendered: no {{...}} (use a decide "
        "step). False settles the step skipped without running it.",
    )
    # Typed loosely on purpose: a bad value is the seed's `on-error` refusal (see module doc);
    # the API server holds it to the three values.
    on_error: Any = Field(
        default="fail",
        description="What a failed step (after its retries) does to the plan: fail (settles "
        "failed, stops the plan), skip (settles skipped, continues), continue (settles failed, "
        "continues). Default: fail.",
        json_schema_extra=crd(type="string", enum=["fail", "skip", "continue"]),
    )
    retries: int = Field(
        default=0,
        ge=0,
        le=100,
        description="Extra dispatches after a failure: retries: 2 runs the step up to three "
        "times. Each attempt is its own Job. Default: 0.",
    )
    retry_backoff: RetryBackoff | None = Field(
        default=None,
        description="The pause before each retry: attempt n+1 starts duration x factor^(n-1) "
        "after attempt n failed, at most maxDuration. Default: the Capsule's, else none.",
    )
    timeout_seconds: int | None = Field(
        default=None,
        ge=1,
        le=7 * 24 * 3600,
        description="Deadline of each attempt (the Job's activeDeadlineSeconds). Default: the "
        "Capsule's defaultTimeoutSeconds.",
    )
    image: str | None = Field(
        default=None,
        max_length=512,
        description="Container image of a shell step; must match the Capsule's images. "
        "Default: the Capsule's image.",
    )
    # what the step picks of its Capsule's pod grants (api.pod_models; engine.pod_grants)
    security_profile: str | None = Field(
        default=None,
        pattern=DNS_LABEL_PATTERN,
        max_length=63,
        description="One of the Capsule's securityProfiles the step's container runs under "
        "(root, a uid, capabilities, ...: what the Capsule's owner declared, within the "
        "operator's cap). Default: today's restricted container (uid 65534, nothing added).",
    )
    services: list[_ServiceName] = Field(
        default_factory=list,
        max_length=16,
        description="Services of the Capsule (spec.services, by name) started beside the "
        "step's command, as sidecars of its pod: each is ready before the command starts, "
        "reached on localhost or by its name, and stopped when it ends.",
    )
    resources: Resources | None = Field(
        default=None,
        description="Requests and limits of the step's container. Default: the Capsule's "
        "resources; bounded by its maxResources.",
    )
    # files passed on (api.file_models; the rules: engine.step_files)
    results: list[ResultDecl] = Field(
        default_factory=list,
        max_length=MAX_RESULTS,
        description="Small values the step writes to $PLANOPS_RESULTS/NAME (a shell, script or "
        "tool step); later steps read {{<id>.results.NAME}} (one trailing line end dropped). "
        "3 KiB for all of a step's results together (as the JSON object they travel in): past "
        "it the step fails, naming the result.",
    )
    outputs: StepOutputs | None = Field(
        default=None,
        description="Files the step leaves for later steps: {artifacts: [{name, path}]}, kept "
        "in the artifact repository (its Capsule's artifactRepository or the operator's).",
    )
    inputs: StepInputs | None = Field(
        default=None,
        description="Files of earlier steps placed before the command starts: {artifacts: "
        "[{from: '{{<id>.artifacts.NAME}}', path}]}.",
    )

    @field_validator("template", mode="before")
    @classmethod
    def _template_by_name(cls, value: Any) -> Any:
        return refs.as_ref(value)  # a file's `template: NAME`, as the API server takes it

    @field_validator("script")
    @classmethod
    def _no_nul(cls, value: str | None) -> str | None:
        if value is not None and "\x00" in value:  # no process can be given it
            raise ValueError(
                "a script cannot hold a NUL byte (it reaches its interpreter as a C string)"
            )
        return value

    @model_validator(mode="after")
    def _distinct_env_and_mounts(self) -> Step:
        distinct("env name", [e.name for e in self.env])
        distinct("volumeMounts mountPath", [m.mount_path for m in self.volume_mounts])
        return self


class Workspace(Model):
    """One volume shared by every step of a run, mounted at /workspace, the working directory of
    shell steps (tools start in a private one)."""

    # seed 1's workdir
    size: str | None = Field(
        default=None, description="Size of a new claim made for the run (1Gi)."
    )
    storage_class_name: str | None = Field(default=None, description="Storage class of that claim.")
    claim_name: str | None = Field(
        default=None, description="Use this existing PersistentVolumeClaim instead."
    )


#: When a Plan's step Jobs are deleted (planops.reconciler.history.retention): as each step settles,
#: once the run finished, once it succeeded, or never (the default).
PodGC = Literal["OnStepCompletion", "OnPlanCompletion", "OnPlanSuccess", "Never"]
POD_GC_POLICIES: tuple[str, ...] = typing.get_args(PodGC)


class PlanSpec(Model):
    """A set of steps and the order they may run in."""

    # The spec of a Plan resource, of a Capsule's plan template and of a ScheduledPlan's.
    model_config = ConfigDict(json_schema_extra=refs.PLAN_SPEC_HINTS)

    capsule: str | None = Field(
        default=None,
        pattern=NAME_PATTERN,
        max_length=63,
        description="The Capsule (policy and inventory) this plan runs under, in the plan's "
        "namespace. Default: default. No such Capsule: the plan is Invalid.",
    )
    parallelism: int | None = Field(
        default=None, ge=1, description="The most steps in flight at once. Default: no cap."
    )
    active_deadline_seconds: int | None = Field(
        default=None,
        ge=1,
        le=30 * 24 * 3600,
        description="The longest the main steps may run, in seconds from the run's start: past "
        "it, those running are stopped, the finally steps run (within finallyTimeoutSeconds) "
        "and the plan fails (condition reason DeadlineExceeded). Default: no deadline.",
    )
    finally_timeout_seconds: int | None = Field(
        default=None,
        ge=1,
        le=30 * 24 * 3600,
        description="The finally steps' budget, in seconds from the moment the main steps were "
        "over or stopped (a failure, an exit, activeDeadlineSeconds, a cancel with "
        "--run-finally): each attempt's deadline is its end, and past it those running are "
        "stopped and the plan fails (reason DeadlineExceeded). Default: 600.",
    )
    history_limit: int | None = Field(
        default=None,
        ge=0,
        le=HISTORY_LIMIT_MAX,
        description="Earlier runs kept in status.history, newest first, each with its "
        "PlanReports (kubectl plan get NAME --run ID shows one): a re-run or a new generation "
        "makes the run it replaces the first entry, and an entry past the limit is deleted with "
        "its PlanReports (while the archive is on, only once archived). "
        f"Default {HISTORY_LIMIT}; 0 keeps none.",
    )
    ttl_seconds_after_finished: int | None = Field(
        default=None,
        ge=0,
        le=2**31 - 1,
        description="Delete the Plan (with its Jobs, pods and PlanReports) this many seconds "
        "after its run finished, Succeeded or Failed (not Invalid). With the archive on, not "
        "before the run is archived. Ignored on a capsule step's child Plan (it goes with its "
        "parent). Default: the operator's --ttl-seconds-after-finished (none).",
    )
    pod_gc: PodGC | None = Field(
        default=None,
        alias="podGC",
        description="When the steps' Jobs and their pods are deleted: OnStepCompletion (as "
        "each step settles), OnPlanCompletion (once the run finished), OnPlanSuccess (once it "
        "succeeded; a failed run keeps them), Never (the default). The report and each step's "
        "recorded output stay (kubectl plan get / logs).",
    )
    workspace: Workspace | None = None
    template_ref: refs.TemplateRef | None = Field(
        default=None,
        description="Run a PlanTemplate or ClusterPlanTemplate: its steps, finally, output and "
        "inputSchema, under this plan's Capsule (a template grants nothing), with this plan's "
        "input (checked against the template's inputSchema). The plan's author needs `get` on "
        "the template. What ran (uid, generation) is recorded in status.template, and a "
        "template edited during a run does not change it. Excludes steps.",
    )
    input_schema: dict[str, Any] | None = Field(
        default=None,
        description="JSON Schema (Draft 2020-12) the input must satisfy before any step runs "
        "(seed 2); every violation is reported with its path.",
    )
    input: dict[str, Any] | None = Field(
        default=None, description="Values for {{input.*}} templates in steps and output."
    )
    steps: list[Step] = Field(
        description="The steps. An empty list is a plan that completes having done nothing.",
        # the API server's bound on a stored Plan (what SPEC_BUDGET holds); a plan read by
        # kubectl-plan is bounded by the operator's Policy.max_steps (code `limits`)
        json_schema_extra=crd(maxItems=MAX_STEPS),
    )
    finally_: list[Step] = Field(
        default_factory=list,
        alias="finally",
        max_length=MAX_FINALLY_STEPS,
        description="Steps that run once the main steps are over, whatever their outcome (after "
        "a failure, an exit or activeDeadlineSeconds too; after kubectl plan cancel only with "
        "--run-finally), within finallyTimeoutSeconds. They read every step's "
        "$id.status/$id.output and the main steps' outcome as $plan.status (success or "
        "failed); dependsOn may name other finally steps. They follow the main steps in the "
        "report, and fail the plan only when one fails with onError: fail.",
    )
    output: dict[str, Any] | None = Field(
        default=None,
        description="A template map rendered into the report's output (status.report.output) "
        "once every step settled, e.g. {count: '{{list.json.count}}'}.",
    )

    @field_validator("steps", mode="before")
    @classmethod
    def _steps_is_list(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("steps must be a list (an empty list is a plan that does nothing)")
        return value

    @model_validator(mode="before")
    @classmethod
    def _from_template(cls, data: Any) -> Any:
        return refs.from_template(data)

    def dump(self) -> dict[str, Any]:
        """The camelCase form as written (base.Model.dump): a plan from a template without the
        `steps: []` it reads as (the API server refuses steps beside a templateRef)."""
        out = super().dump()
        if self.template_ref is not None:
            out.pop("steps", None)
        return out


class SeedPlan(PlanSpec):
    """A bare seed-format plan object: `{"id": ..., "steps": [...]}`."""

    id: str = Field(min_length=1)
