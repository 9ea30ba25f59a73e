"""Typed models of what users write: Plan specs, steps and Capsules.

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

import functools
import re
import typing
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

from planops.api import durations

#: A step id: also a Job label value and part of a Job name, hence the restriction (the seed
#: leaves ids free; planops needs them to be label-safe). Letters, digits, `_` and `-`.
STEP_ID_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]{0,62}$"

#: A Kubernetes object name (RFC 1123 subdomain, shortened to what a label value may hold).
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$"

#: The keys that make a step's kind: exactly one per step. tool, shell, capsule (seed 1) and the
#: seed-2 control steps; the validator says which of these planops runs (engine.validation).
STEP_KINDS = (
    "tool",
    "shell",
    "capsule",
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


@functools.cache
def _integer_keys(model: type[BaseModel]) -> tuple[str, ...]:
    """The keys (both spellings) of a model's fields that take an integer and not a number."""
    keys: list[str] = []
    for name, f in model.model_fields.items():
        annotation = f.annotation
        types = set(typing.get_args(annotation)) if typing.get_args(annotation) else {annotation}
        if int in types and float not in types:
            keys += [name] + ([f.alias] if f.alias and f.alias != name else [])
    return tuple(keys)


class Model(BaseModel):
    """Base: unknown fields refused, both spellings accepted, immutable; types strict, as the
    API server holds them to the CRD's schema (`retries: "3"` is refused, not converted), so
    what `kubectl apply` refuses is refused offline too."""

    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        populate_by_name=True,
        alias_generator=to_camel,
        frozen=True,
    )

    @model_validator(mode="before")
    @classmethod
    def _whole_numbers(cls, data: Any) -> Any:
        """JSON has one number type, and the API server takes 3.0 for a CRD's integer (a whole
        number is an integer there): so does the model, strict as it is otherwise."""
        if not isinstance(data, dict):
            return data
        fixed: dict[str, Any] | None = None
        for key in _integer_keys(cls):
            value = data.get(key)
            if isinstance(value, float) and value.is_integer():
                fixed = fixed if fixed is not None else dict(data)
                fixed[key] = int(value)
        return fixed if fixed is not None else data

    def dump(self) -> dict[str, Any]:
        """The camelCase form, without unset optional fields (as the seed writes plans)."""
        return self.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True)


class ResourceList(Model):
    """Kubernetes quantities (`cpu: 500m`, `memory: 64Mi`)."""

    cpu: str | int | None = None
    memory: str | int | None = None


class Resources(Model):
    """Requests and limits of a step's container (the cgroup limits)."""

    requests: ResourceList | None = None
    limits: ResourceList | None = None


class RetryBackoff(Model):
    """The pause before each retry: attempt n+1 starts `duration x factor^(n-1)` after attempt n
    failed, at most `maxDuration` (Argo's retryStrategy.backoff; the Job controller's backoff)."""

    duration: str | int = Field(description="The first pause (10s, 1m, 500ms).")
    factor: float = Field(default=2.0, ge=1, le=100, description="Each pause grows by this.")
    max_duration: str | int | None = Field(default=None, description="The longest pause.")

    @field_validator("duration", "max_duration")
    @classmethod
    def _is_duration(cls, value: Any) -> Any:
        if value is not None:
            durations.parse(value)
        return value

    def delay(self, failed_attempt: int) -> float:
        """Seconds to wait after attempt `failed_attempt` (1-based) failed."""
        first = durations.parse(self.duration)
        exponent = min(max(0, failed_attempt - 1), 64)  # bounded: 100 retries cannot overflow
        wait = first * self.factor**exponent
        if self.max_duration is not None:
            wait = min(wait, durations.parse(self.max_duration))
        return min(wait, durations.MAX_SECONDS)


class Step(Model):
    """One step of a plan. Exactly one kind: tool / shell / capsule or a seed-2 control step
    (checked by the validator)."""

    id: str = Field(pattern=STEP_ID_PATTERN, max_length=63, description="Unique within the plan.")
    tool: str | None = Field(
        default=None, min_length=1, max_length=253, description="A tool of the Capsule's inventory."
    )
    shell: str | None = Field(
        default=None,
        min_length=1,
        max_length=16384,
        description="A command line split into words (never given to a shell); "
        "its first word must be in the Capsule's shell.allow.",
    )
    capsule: str | None = Field(
        default=None,
        pattern=NAME_PATTERN,
        max_length=63,
        description="A Capsule name in spawn.allow, run as a child Plan.",
    )
    input: Any = Field(default=None, description="Handed to the step (object or string).")
    # seed 2 control steps, judged by the validator (typed loosely so errors carry seed codes)
    exit: Any = None
    filter: Any = None
    decide: Any = None
    map: Any = None
    reduce: Any = None
    ask: Any = None
    agent: Any = None
    infer: Any = None
    depends_on: list[str] = Field(default_factory=list)
    if_: str | None = Field(default=None, alias="if", max_length=4096)
    # Typed loosely on purpose: a bad value is the seed's `on-error` refusal (see module doc).
    on_error: Any = "fail"
    retries: int = Field(default=0, ge=0, le=100)
    retry_backoff: RetryBackoff | None = None
    timeout_seconds: int | None = Field(default=None, ge=1, le=7 * 24 * 3600)
    image: str | None = Field(default=None, max_length=512)
    resources: Resources | None = None


class Workspace(Model):
    """One volume shared by every step of a run (seed 1's workdir)."""

    size: str | None = None
    storage_class_name: str | None = None
    claim_name: str | None = Field(default=None, description="Use an existing claim instead.")


#: earlier runs a Plan keeps in status.history by default (spec.historyLimit), and at most
HISTORY_LIMIT = 10
HISTORY_LIMIT_MAX = 50

#: When a Plan's step Jobs are deleted (planops.reconciler.history.retention): as each step settles,
#: once the run finished, once it succeeded, or never (the default).
PodGC = Literal["OnStepCompletion", "OnPlanCompletion", "OnPlanSuccess", "Never"]
POD_GC_POLICIES: tuple[str, ...] = typing.get_args(PodGC)


class PlanSpec(Model):
    """The spec of a Plan resource (and of a Capsule's plan template)."""

    capsule: str | None = Field(default=None, pattern=NAME_PATTERN, max_length=63)
    parallelism: int | None = Field(default=None, ge=1)
    active_deadline_seconds: int | None = Field(
        default=None,
        ge=1,
        le=30 * 24 * 3600,
        description="The longest the main steps may run: past it, those running are stopped, "
        "the finally steps run (within finallyTimeoutSeconds) and the plan fails (reason "
        "DeadlineExceeded).",
    )
    finally_timeout_seconds: int | None = Field(
        default=None,
        ge=1,
        le=30 * 24 * 3600,
        description="The finally steps' budget, counted from when the main steps were over or "
        "stopped: past it, those running are stopped and the plan fails (reason "
        "DeadlineExceeded). Default 600.",
    )
    history_limit: int | None = Field(
        default=None,
        ge=0,
        le=HISTORY_LIMIT_MAX,
        description="Earlier runs kept in status.history, each with its PlanReports "
        f"(default {HISTORY_LIMIT}; 0 keeps none).",
    )
    ttl_seconds_after_finished: int | None = Field(
        default=None,
        ge=0,
        le=2**31 - 1,
        description="Delete the Plan this many seconds after its run finished (Succeeded or "
        "Failed); with the archive on, not before the run is archived. Default: the operator's.",
    )
    pod_gc: PodGC | None = Field(
        default=None,
        alias="podGC",
        description="When the steps' Jobs (and their pods) are deleted; the report and every "
        "step's recorded output stay. Default: Never.",
    )
    workspace: Workspace | None = None
    input_schema: dict[str, Any] | None = Field(
        default=None, description="Seed 2: JSON Schema (Draft 2020-12) the input must satisfy."
    )
    input: dict[str, Any] | None = Field(default=None, description="Seed 2: values of {{input.*}}.")
    steps: list[Step]
    finally_: list[Step] = Field(
        default_factory=list,
        alias="finally",
        max_length=100,  # api.plan_schema.MAX_FINALLY_STEPS
        description="Steps that run once the main steps are over, whatever their outcome "
        "(after a failure, an exit or activeDeadlineSeconds too; after a cancel only with "
        "--run-finally), within finallyTimeoutSeconds; they read every step's result and the "
        "main steps' outcome as $plan.status.",
    )
    output: dict[str, Any] | None = Field(
        default=None,
        description="Seed 2: a template map "
        "rendered into the report's output when the plan completes.",
    )

    @field_validator("steps", mode="before")
    @classmethod
    def _steps_is_list(cls, value: Any) -> Any:
        if value is None:
            raise ValueError("steps must be a list (an empty list is a plan that does nothing)")
        return value


class SeedPlan(PlanSpec):
    """A bare seed-format plan object: `{"id": ..., "steps": [...]}`."""

    id: str = Field(min_length=1)


#: An environment variable name (a C identifier, as shells and most programs read them).
ENV_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
#: Set by planops on every step container; a Capsule's tool may not redefine them.
RESERVED_ENV_PREFIX = "PLANOPS_"


class KeyRef(Model):
    """One key of a Secret or ConfigMap in the Plan's namespace (resolved by the kubelet)."""

    name: str = Field(pattern=NAME_PATTERN, description="The Secret's or ConfigMap's name.")
    key: str = Field(min_length=1, max_length=253, description="The key within it.")
    optional: bool = Field(default=False, description="Start the step even if it is missing.")


class EnvSource(Model):
    """Where a tool's environment variable comes from: exactly one of the two."""

    secret_key_ref: KeyRef | None = None
    config_map_key_ref: KeyRef | None = None

    @model_validator(mode="after")
    def _exactly_one(self) -> EnvSource:
        if (self.secret_key_ref is None) == (self.config_map_key_ref is None):
            raise ValueError("exactly one of secretKeyRef or configMapKeyRef")
        return self


class EnvVar(Model):
    """An environment variable of a tool's container: a value, or a Secret/ConfigMap key."""

    name: str = Field(pattern=ENV_NAME_PATTERN, max_length=256)
    value: str | None = None
    value_from: EnvSource | None = None

    @model_validator(mode="after")
    def _one_source(self) -> EnvVar:
        if self.name.startswith(RESERVED_ENV_PREFIX):
            raise ValueError(f"{self.name}: names starting with PLANOPS_ are set by planops")
        if (self.value is None) == (self.value_from is None):
            raise ValueError(f"{self.name}: exactly one of value or valueFrom")
        return self


#: the top directory of a step container that is planops' own: a tool's private working
#: directory is /planops/tool (kube.manifests.TOOL_WORKDIR), so nothing a Capsule or a plan sets
#: may mount there (a Secret there would be the tool's files; a mount over it, its workdir)
RESERVED_DIR = "planops"


class SecretMount(Model):
    """A Secret mounted read-only into a tool's container."""

    secret_name: str = Field(pattern=NAME_PATTERN)
    mount_path: str = Field(pattern=r"^/[^:]*$", max_length=1024)

    @field_validator("mount_path")
    @classmethod
    def _not_shared(cls, value: str) -> str:
        parts = [p for p in value.split("/") if p]
        if not parts or ".." in parts or parts[0] == "workspace":
            raise ValueError(
                f"{value}: an absolute path outside /workspace (where every step could read it)"
            )
        if parts[0] == RESERVED_DIR:
            raise ValueError(
                f"{value}: /{RESERVED_DIR} is planops' own (a tool starts in the private empty "
                f"directory /{RESERVED_DIR}/tool): mount the Secret elsewhere"
            )
        return value


class Tool(Model):
    """A tool of a Capsule's inventory: an image and a command that reads JSON input. Its
    credentials (`env` from Secrets, `secretMounts`) are the tool's: shell steps and child Plans
    never get them, and no Plan can name a Secret."""

    name: str = Field(min_length=1)
    image: str | None = None
    command: list[str] = Field(min_length=1)
    description: str | None = None
    input_schema: dict[str, Any] | None = None
    env: list[EnvVar] = Field(default_factory=list, max_length=64)
    secret_mounts: list[SecretMount] = Field(default_factory=list, max_length=16)

    @model_validator(mode="after")
    def _distinct(self) -> Tool:
        names = [e.name for e in self.env]
        paths = [m.mount_path.rstrip("/") for m in self.secret_mounts]
        for what, values in (("env name", names), ("secretMounts path", paths)):
            twice = sorted({v for v in values if values.count(v) > 1})
            if twice:
                raise ValueError(f"{what} declared twice: {', '.join(twice)}")
        return self


class AllowList(Model):
    allow: list[str] = Field(default_factory=list)


#: A label key as Kubernetes checks it: an optional DNS-subdomain prefix (at most 253 characters)
#: and `/`, then a name of at most 63 characters (letters, digits, `-`, `_`, `.`).
LABEL_KEY_PATTERN = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$"
)
LABEL_VALUE_PATTERN = r"^(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?$"
_LABEL_KEY, _LABEL_VALUE = re.compile(LABEL_KEY_PATTERN), re.compile(LABEL_VALUE_PATTERN)


def _label_key(key: str, where: str) -> str:
    if not _LABEL_KEY.fullmatch(key) or len(key.rsplit("/", 1)[0]) > 253:
        raise ValueError(
            f"{where} {key!r} is not a label key: [prefix/]name, the name at most 63 letters, "
            "digits, '-', '_' or '.', the prefix a DNS subdomain (example.com/zone)"
        )
    return key


def _schema(**bounds: Any) -> dict[str, Any]:
    """Bounds stated in the model's JSON Schema (so the CRD's come from here,
    api/schema_parts.bounds) but checked by the model's own validators, whose messages say what a
    label is (pydantic's would quote the regex)."""
    return bounds


_LabelValue = Annotated[
    str, Field(json_schema_extra=_schema(maxLength=63, pattern=LABEL_VALUE_PATTERN))
]


class Toleration(Model):
    """A toleration of step pods (Kubernetes' own shape and rules): lets them onto nodes with a
    matching taint."""

    key: str = Field(
        default="", json_schema_extra=_schema(maxLength=317, pattern=f"^$|{LABEL_KEY_PATTERN}")
    )
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str = Field(default="", max_length=63, pattern=LABEL_VALUE_PATTERN)
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _kubernetes_rules(self) -> Toleration:
        if self.key:
            _label_key(self.key, "toleration key")
        elif self.operator != "Exists":
            raise ValueError("a toleration without a key must have operator Exists (all taints)")
        if self.operator == "Exists" and self.value:
            raise ValueError(f"toleration {self.key!r}: operator Exists takes no value")
        if self.toleration_seconds is not None and self.effect != "NoExecute":
            raise ValueError(f"toleration {self.key!r}: tolerationSeconds needs effect NoExecute")
        return self


class WorkspacePolicy(Model):
    """What workspaces (spec.workspace) plans under a Capsule may have. Deny by default: no
    existing claim, no storage class of the plan's choosing, new claims of at most 1Gi."""

    claim_names: list[str] = Field(default_factory=list)
    max_size: str | int = "1Gi"
    storage_class_names: list[str] = Field(default_factory=list)


class Concurrency(Model):
    """How many Plans may run on a Capsule at once, across the cluster (1: a mutex). Plans beyond
    it wait in phase Pending, in queue order (reconciler.queue.slots has the rule)."""

    max_running_plans: int = Field(ge=1, le=10_000)


class CapsuleSpec(Model):
    """Policy and inventory a Plan runs under. Deny by default: empty lists allow nothing."""

    image: str | None = Field(default=None, description="Default image of shell steps.")
    images: list[str] = Field(
        default_factory=list, description="Allowed image patterns (planops.engine.images)."
    )
    shell: AllowList = Field(default_factory=AllowList)
    tools: list[Tool] = Field(default_factory=list)
    spawn: AllowList = Field(default_factory=AllowList)
    resources: Resources | None = Field(default=None, description="Defaults of every step.")
    max_resources: ResourceList | None = None
    default_timeout_seconds: int | None = Field(default=None, ge=1)
    #: the retry pause of steps that set none (RetryBackoff); None: retries start at once
    retry_backoff: RetryBackoff | None = None
    max_timeout_seconds: int | None = Field(default=None, ge=1)
    output_limit_bytes: int = Field(default=65536, ge=256, le=1 << 20)
    service_account_name: str | None = None
    automount_service_account_token: bool = False
    read_only_paths: list[str] = Field(default_factory=list)
    workspace: WorkspacePolicy = Field(default_factory=WorkspacePolicy)
    #: seconds a step pod stays on a node that is NotReady or unreachable before it is evicted
    #: (and its attempt fails, naming the node); None: the cluster's default (300 s)
    node_failure_toleration_seconds: int | None = Field(default=None, ge=0, le=86400)
    #: where step pods may run (pod spec nodeSelector, tolerations): the Capsule owner's choice,
    #: never a plan author's (no step field sets them)
    node_selector: dict[str, _LabelValue] = Field(default_factory=dict, max_length=64)
    tolerations: list[Toleration] = Field(default_factory=list, max_length=64)
    plan: PlanSpec | None = Field(default=None, description="What runs when a plan spawns it.")
    #: at most this many of the Plans on this Capsule run at once; None: no limit
    concurrency: Concurrency | None = None

    @field_validator("read_only_paths")
    @classmethod
    def _inside_workspace(cls, value: list[str]) -> list[str]:
        for path in value:
            if not path.strip("/") or ".." in path.split("/"):
                raise ValueError(
                    f"readOnlyPaths {path!r}: a path inside the workspace (mounted at "
                    f"/workspace/{path.strip('/')}), without '..': it may not reach /workspace "
                    f"itself or outside it (/{RESERVED_DIR} is planops' own)"
                )
        return value

    @field_validator("node_selector")
    @classmethod
    def _node_labels(cls, value: dict[str, str]) -> dict[str, str]:
        for k, v in value.items():
            _label_key(k, "nodeSelector key")
            if not _LABEL_VALUE.fullmatch(v):
                raise ValueError(
                    f"nodeSelector {k}: {v!r} is not a label value (at most 63 letters, digits, "
                    "'-', '_' or '.', starting and ending with a letter or digit)"
                )
        return value

    def tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)
