"""Typed models of a Capsule: the policy and inventory a Plan runs under (images, binaries, tools
and their credentials, limits, pod placement, the plan it runs when spawned).

Apart from the plan models (planops.api.models), which they build on (a Capsule's defaults are a
step's resources and retry pause, api.attempt_models; its `plan` a PlanSpec): the engine asks
them what a plan may do, the executors how a step's pod is made. Their fields' text is what
`kubectl explain capsule.spec` prints (the CRD is made from them, api.structural); `crd(...)`
states what only the API server adds (api.crd_hints).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import ConfigDict, Field, field_validator, model_validator

from planops.api.affinity_models import Affinity
from planops.api.artifact_models import ArtifactRepository
from planops.api.attempt_models import ResourceList, Resources, RetryBackoff
from planops.api.base import NAME_PATTERN, Model
from planops.api.container_models import EnvVar, distinct
from planops.api.crd_hints import crd
from planops.api.file_models import ArtifactPolicy
from planops.api.grant_models import EnvGrants, Scripts, Volume, distinct_volumes
from planops.api.labels import (
    LABEL_KEY_PATTERN,
    LABEL_VALUE_PATTERN,
    LabelKey,
    reserved_key_rule,
)
from planops.api.labels import LabelValue as _LabelValue
from planops.api.labels import label_key as _label_key
from planops.api.labels import label_value as _label_value
from planops.api.labels import schema_bounds as _schema
from planops.api.models import PlanSpec
from planops.api.pod_models import (
    LocalObjectReference,
    PodMetadata,
    SecurityProfile,
    check_grants,
    propagated,
)
from planops.api.service_models import Service

#: the top directory of a step container that is planops' own: a tool's private working
#: directory is /planops/tool (kube.manifests.TOOL_WORKDIR), so nothing a Capsule or a plan sets
#: may mount there (a Secret there would be the tool's files; a mount over it, its workdir)
RESERVED_DIR = "planops"


class SecretMount(Model):
    """A Secret of the namespace as files under mountPath."""

    # mounted read-only into a tool's container
    secret_name: str = Field(pattern=NAME_PATTERN, description="The Secret's name.")
    mount_path: str = Field(
        pattern=r"^/[^:]*$", max_length=1024, description="An absolute path outside /workspace."
    )

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
    """A tool: an image and a command that reads its JSON input from env PLANOPS_INPUT (and
    stdin when run locally)."""

    # A tool of a Capsule's inventory. Its credentials (`env` from Secrets, `secretMounts`) are
    # the tool's: shell steps and child Plans never get them, and no Plan can name a Secret.
    name: str = Field(min_length=1, description="The name tool steps use.")
    image: str | None = Field(
        default=None, description="The tool's image (default: the Capsule's image)."
    )
    command: list[str] = Field(min_length=1, description="The container command.")
    description: str | None = Field(
        default=None, description="What the tool does, for people and `kubectl explain`."
    )
    input_schema: dict[str, Any] | None = Field(
        default=None,
        description="JSON Schema (Draft 2020-12) of the tool's input: a step's literal input "
        "outside it is refused before anything runs, a rendered one at dispatch (call denied), "
        "so no other input reaches the tool.",
    )
    env: list[EnvVar] = Field(
        default_factory=list,
        max_length=64,
        description="Environment variables of this tool's containers only (never of shell "
        "steps or child Plans): a value, or a key of a Secret or ConfigMap of the namespace, "
        "resolved by the kubelet (the operator never reads it). Names starting with PLANOPS_ "
        "are planops'.",
    )
    secret_mounts: list[SecretMount] = Field(
        default_factory=list,
        max_length=16,
        description="Secrets mounted read-only into this tool's containers only.",
    )

    @model_validator(mode="after")
    def _distinct(self) -> Tool:
        distinct("env name", [e.name for e in self.env])
        distinct("secretMounts path", [m.mount_path.rstrip("/") for m in self.secret_mounts])
        return self


class AllowList(Model):
    """Names allowed. Empty: nothing is allowed."""

    allow: list[str] = Field(
        default_factory=list, description="The allowed names. Empty: nothing is allowed."
    )


class Toleration(Model):
    """A toleration: matches taints with this key (any key when empty, operator Exists)."""

    # A toleration of step pods, Kubernetes' own shape and rules (the API server's CEL rules
    # and _kubernetes_rules below say the same); its defaults are stored, as in a pod's.
    model_config = ConfigDict(
        json_schema_extra=crd(
            rules=[
                (
                    "!has(self.tolerationSeconds) || "
                    "has(self.effect) && self.effect == 'NoExecute'",
                    "tolerationSeconds needs effect NoExecute",
                ),
                ("self.operator != 'Exists' || self.value == ''", "operator Exists takes no value"),
                (
                    "self.key != '' || self.operator == 'Exists'",
                    "without a key, operator is Exists",
                ),
            ]
        )
    )

    key: str = Field(
        default="",
        description="The taint's key; empty matches every key.",
        json_schema_extra=_schema(maxLength=317, pattern=f"^$|{LABEL_KEY_PATTERN}")
        | crd(store_default=True),
    )
    operator: Literal["Exists", "Equal"] = Field(
        default="Equal",
        description="Equal (the value must match) or Exists (any value).",
        json_schema_extra=crd(store_default=True),
    )
    value: str = Field(
        default="",
        max_length=63,
        pattern=LABEL_VALUE_PATTERN,
        description="The taint's value (operator Equal).",
        json_schema_extra=crd(store_default=True),
    )
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        default=None, description="The taint effect to tolerate; omitted: every effect."
    )
    toleration_seconds: int | None = Field(
        default=None,
        ge=0,
        description="How long the pod stays once a NoExecute taint appears. Default: forever.",
    )

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
    """What workspaces (a Plan's spec.workspace) plans under this Capsule may have. Deny by
    default: no existing claim, no storage class of the plan's choosing, new claims of at most
    1Gi."""

    claim_names: list[str] = Field(
        default_factory=list,
        description="Existing PersistentVolumeClaims a plan may mount (claimName).",
    )
    max_size: str | int = Field(
        default="1Gi", description="The largest new claim (a quantity). Default 1Gi."
    )
    storage_class_names: list[str] = Field(
        default_factory=list,
        description="Storage classes a plan may name for a new claim. Empty: the cluster's "
        "default class only (storageClassName unset).",
    )


class Concurrency(Model):
    """How many Plans may run on this Capsule at once, across the cluster. Plans beyond it wait
    in phase Pending (their status names the Plans ahead) and start in queue order as running
    ones finish: a Plan's first run in its place of creation, a later run (re-run, retry, new
    generation) behind the runs already waiting. Omitted: no limit."""

    # 1: a mutex; reconciler.queue.slots has the rule
    max_running_plans: int = Field(
        ge=1,
        le=10_000,
        description="The most Plans that run at once on this Capsule (1: one at a time, a "
        "mutex). Counted from the cluster: a Plan holds its place from the moment the operator "
        "starts it until it succeeds or fails. A capsule step's child Plan runs within an "
        "ancestor's place (not counted) when a Capsule above it has a limit; under unlimited "
        "Capsules only, it is counted and waits like any Plan.",
    )


class CapsuleSpec(Model):
    """Policy and inventory plans run under. Deny by default: empty lists allow nothing."""

    image: str | None = Field(default=None, description="Default image of shell steps.")
    images: list[str] = Field(
        default_factory=list,
        description="Image patterns steps and tools may use, matched component by component "
        "(e.g. registry.example.com/team/*: `*` stays within one path component, `**` spans "
        "components, a tag or digest is matched on its own; no tag: any tag or digest; a tag "
        "pattern admits no digest, which needs a digest pattern). Intersected with the "
        "operator's allowlist.",
    )
    shell: AllowList = Field(
        default_factory=AllowList,
        description="Binaries shell steps may start (the command line's first word, exactly).",
    )
    tools: list[Tool] = Field(default_factory=list, description="The tool inventory.")
    spawn: AllowList = Field(
        default_factory=AllowList,
        description="Capsules that capsule steps may run as child plans.",
    )
    # what shell and script steps may reach beyond the restricted pod (api.grant_models)
    scripts: Scripts = Field(
        default_factory=Scripts,
        description="Interpreters script steps may run. Default: none (no script step runs).",
    )
    env: EnvGrants = Field(
        default_factory=EnvGrants,
        description="Secrets and ConfigMaps whose keys a shell or script step's env may read. "
        "Default: none.",
    )
    volumes: list[Volume] = Field(
        default_factory=list,
        max_length=64,
        description="Volumes shell and script steps may mount by name (volumeMounts): "
        "configMap, secret, emptyDir or persistentVolumeClaim, never hostPath. Default: none.",
    )
    resources: Resources | None = Field(
        default=None, description="Default requests and limits of every step."
    )
    max_resources: ResourceList | None = Field(
        default=None, description="The most any step may ask for."
    )
    default_timeout_seconds: int | None = Field(
        default=None, ge=1, description="Default deadline of each step attempt."
    )
    #: None: retries start at once
    retry_backoff: RetryBackoff | None = Field(
        default=None,
        description="The retry pause of steps that set none (see a step's retryBackoff).",
    )
    max_timeout_seconds: int | None = Field(
        default=None, ge=1, description="The longest deadline a step may ask for."
    )
    output_limit_bytes: int = Field(
        default=65536,
        ge=256,
        le=1 << 20,
        description="Cap on each step's recorded output: past it, the output keeps its head "
        "and its tail with a mark between them.",
        json_schema_extra=crd(store_default=True),
    )
    artifacts: ArtifactPolicy | None = Field(
        default=None,
        description="What bounds its steps' artifacts (maxBytes, one artifact's most bytes). "
        "Steps move artifacts only through a repository: artifactRepository, else the "
        "operator's default.",
    )
    service_account_name: str | None = Field(
        default=None, description="Service account of step pods."
    )
    automount_service_account_token: bool = Field(
        default=False,
        description="Mount the service account token into step pods. Default false.",
        json_schema_extra=crd(store_default=True),
    )
    #: None: the cluster's default (300 s)
    node_failure_toleration_seconds: int | None = Field(
        default=None,
        ge=0,
        le=86400,
        description="Seconds a step pod stays on a node that is NotReady or unreachable before "
        "it is evicted and its attempt fails naming the node (retries apply). Default: the "
        "cluster's (300).",
    )
    # where step pods may run (pod spec nodeSelector, tolerations): the Capsule owner's choice,
    # never a plan author's (no step field sets them)
    node_selector: dict[str, _LabelValue] = Field(
        default_factory=dict,
        max_length=64,
        description="Node labels a step pod's node must have (the pod's nodeSelector), e.g. "
        "{pool: batch}. Set by the Capsule's owner only: no plan field changes where steps run.",
        json_schema_extra=crd(
            rules=[
                (
                    f"self.all(k, size(k) <= 317 && k.matches(r'{LABEL_KEY_PATTERN}'))",
                    "every key is a label key: [prefix/]name (example.com/zone)",
                )
            ]
        ),
    )
    tolerations: list[Toleration] = Field(
        default_factory=list,
        max_length=64,
        description="Taints step pods tolerate (the pod's tolerations, Kubernetes' shape), "
        "e.g. to run on a dedicated or simulated pool. Set by the Capsule's owner only.",
    )
    # what step pods may run as and beside, where and labelled how (api.pod_models): the
    # Capsule owner's grants, a step only picks a profile and lists services by name
    security_profiles: list[SecurityProfile] = Field(
        default_factory=list,
        max_length=32,
        description="Named ways a step's container may run beyond today's restricted one (a "
        "uid, root, capabilities, a read-only root filesystem, ...), capped by the operator's "
        "policy.securityProfiles; a shell step picks one with securityProfile. Default: none.",
    )
    services: list[Service] = Field(
        default_factory=list,
        max_length=32,
        description="Named containers (a database, a cache) a shell step may list in its "
        "services: each runs beside the step's command as a native sidecar, ready before it "
        "starts and stopped when it ends. Default: none.",
    )
    priority_class_name: str | None = Field(
        default=None,
        pattern=NAME_PATTERN,
        max_length=253,
        description="The PriorityClass of step pods (the cluster's: a ResourceQuota may "
        "limit which a namespace uses). Default: the cluster's default.",
    )
    image_pull_secrets: list[LocalObjectReference] = Field(
        default_factory=list,
        max_length=16,
        description="Secrets of the namespace the kubelet pulls step and service images with "
        "(docker-registry Secrets; no step reads them).",
    )
    affinity: Affinity | None = Field(
        default=None,
        description="Node and pod affinity of step pods (Kubernetes' shape). Set by the "
        "Capsule's owner only.",
    )
    pod_metadata: PodMetadata | None = Field(
        default=None,
        description="Labels and annotations of every step pod (cost tools read them).",
    )
    propagate_labels: list[LabelKey] = Field(
        default_factory=list,
        max_length=32,
        description="Keys of the Plan's labels copied to its steps' Jobs and pods (only these; "
        "a key the Plan does not have is left out). Whoever may label the Plan sets the values "
        "(any plan author of the namespace: a label needs no use of the Capsule): list no key "
        "a NetworkPolicy or a Service selects pods by.",
        json_schema_extra=crd(rules=[reserved_key_rule("label")]),
    )
    read_only_paths: list[str] = Field(
        default_factory=list,
        description="Paths inside /workspace mounted read-only in every step.",
    )
    workspace: WorkspacePolicy = Field(default_factory=WorkspacePolicy)
    plan: PlanSpec | None = Field(
        default=None,
        description="What runs when another plan's capsule step spawns this Capsule.",
    )
    #: None: no limit
    concurrency: Concurrency | None = None
    artifact_repository: ArtifactRepository | None = Field(
        default=None,
        description="Where runs under this Capsule keep their artifacts and full step logs "
        "(an S3-compatible store; docs/artifacts.md). Unset: the operator's default "
        "(the chart's artifactRepository), if any.",
    )

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

    @field_validator("volumes")
    @classmethod
    def _volume_names(cls, value: list[Volume]) -> list[Volume]:
        return distinct_volumes(value)

    @field_validator("node_selector")
    @classmethod
    def _node_labels(cls, value: dict[str, str]) -> dict[str, str]:
        for k, v in value.items():
            _label_key(k, "nodeSelector key")
            _label_value(v, f"nodeSelector {k}")
        return value

    @field_validator("propagate_labels")
    @classmethod
    def _propagated(cls, value: list[str]) -> list[str]:
        return propagated(value)

    @model_validator(mode="after")
    def _pod_grants(self) -> CapsuleSpec:
        check_grants(
            self.security_profiles, self.services, self.pod_metadata, self.propagate_labels
        )
        return self

    def security_profile(self, name: str) -> SecurityProfile | None:
        return next((p for p in self.security_profiles if p.name == name), None)

    def service(self, name: str) -> Service | None:
        return next((s for s in self.services if s.name == name), None)

    def tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)

    def volume(self, name: str) -> Volume | None:
        return next((v for v in self.volumes if v.name == name), None)
