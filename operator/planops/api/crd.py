"""The CustomResourceDefinitions of planops, as data.

Why generated: the Plan spec schema appears twice (in Plan and in a Capsule's `plan` template), and
every field needs a description (`kubectl explain plan.spec.steps` must teach the language). One
source here; `python -m planops.api.crd DIR` writes `crds/*.yaml`, and tests/unit/test_crds.py
checks the committed files are current and cover every field of the pydantic models.

The API server enforces the cheap structural rules (types, enums, patterns, bounds, exactly one
step kind via CEL); the validator (planops.engine) judges the rest with the seed's codes.
"""

from __future__ import annotations

import functools
import sys
from pathlib import Path
from typing import Any

import yaml

from planops.api.documents import API_GROUP
from planops.api.models import (
    LABEL_KEY_PATTERN,
    LABEL_VALUE_PATTERN,
    NEEDS_A_MODEL,
    STEP_KINDS,
    CapsuleSpec,
    KeyRef,
    LabelSelectorRequirement,
    Model,
    PlanSpec,
    RetryBackoff,
    ScheduledPlanSpec,
    SecretMount,
    Step,
    Tool,
)
from planops.api.models import EnvVar as EnvVarModel

VERSION = "v1alpha1"
#: a Plan's spec as stored JSON: its status (planops.reconciler.status) shares the one object
SPEC_BUDGET = 768 << 10
#: literal steps: as many of the smallest steps (~26 bytes) as SPEC_BUDGET holds
MAX_STEPS = 30_000
MAX_DEPENDS_ON = 256

Schema = dict[str, Any]

#: the JSON Schema keywords that bound a value, in the order the CRDs list them
BOUNDS = ("pattern", "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "enum")


@functools.cache
def _model_schema(model: type[Model]) -> Schema:
    return model.model_json_schema(by_alias=True)


def bounds(model: type[Model], name: str) -> Schema:
    """The bounds of `model`'s field `name` (its camelCase name), as pydantic states them in
    JSON Schema: the models are the one source of every bound (tests/unit/test_crd_bounds.py
    walks both field by field). The models, not the CRDs, because every reader of a plan (the
    CLI, the webhook, the reconciler) goes through them, in or out of a cluster."""
    prop = _model_schema(model)["properties"][name]
    branches = [b for b in prop.get("anyOf", [prop]) if b.get("type") != "null"]
    found = {k: v for b in branches for k, v in b.items() if k in BOUNDS}
    return {k: found[k] for k in BOUNDS if k in found}


def _s(description: str, **kw: Any) -> Schema:
    return {"type": "string", "description": description, **kw}


def _i(description: str, **kw: Any) -> Schema:
    return {"type": "integer", "description": description, **kw}


def _obj(description: str, properties: dict[str, Schema], **kw: Any) -> Schema:
    return {"type": "object", "description": description, "properties": properties, **kw}


def _list(description: str, items: Schema, **kw: Any) -> Schema:
    return {"type": "array", "description": description, "items": items, **kw}


def _quantities(description: str) -> Schema:
    q = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}
    return _obj(
        description,
        {
            "cpu": {**q, "description": "CPU, in cores or millicores (500m)."},
            "memory": {**q, "description": "Memory, in bytes or with a suffix (64Mi)."},
        },
    )


def _resources(description: str) -> Schema:
    return _obj(
        description,
        {
            "requests": _quantities("What the step's container is guaranteed (scheduling)."),
            "limits": _quantities(
                "The cgroup limits of the step's container; exceeding memory is OOMKilled."
            ),
        },
    )


#: accepted by the schema so the validator can refuse them with the seed's code and a reason
REFUSED_KINDS = {k: "needs a language model: use a capsule step" for k in NEEDS_A_MODEL}

#: a body (then / else / do): a single call {tool|shell|capsule|ask|filter|exit, input, ...}
#: or a list of steps with ids, run in order
_BODY = (
    "a single call (a step without id: {tool: x, input: ...} or {shell: ...}) or a list of "
    "steps with ids, run in order; bodies may not contain decide, map or reduce"
)
CONTROL_KINDS = {
    "decide": "Seed 2: fork: {if: gate, then: body, else?: body}. Result {branch, verdict, "
    f"reason, result}}. A body is {_BODY}; exit is allowed in branches.",
    "map": "Seed 2: run a body per item: {over: template rendering to an array, do: body, "
    "concurrency?: max items in flight (default 1)}; {{item}}, {{index}}, {{length}} in the "
    f"body. Result {{count, results}} in input order. A body is {_BODY}.",
    "reduce": "Seed 2: fold a list: {over, do: body, initial?}; {{accumulator}} starts at "
    "initial (default null) and becomes each item's result. Result {count, result}.",
    "ask": "Seed 2: ask a person: {prompt, outputSchema: object of string/number/integer/"
    "boolean/enum fields, whenUnanswered?: fail|default, default?}. Answer with kubectl plan "
    "answer PLAN STEP --set k=v; past the step's timeout whenUnanswered applies. Result "
    "{answer, answered, reason?}.",
}


def step_schema() -> Schema:
    """A step's schema. It sets no `default`: the API server would store each default in
    every step (29 bytes a step for onError and retries, half the spec of a 20,000-step plan
    of short shell steps), and the models apply the same defaults when a spec is read."""
    one_kind = " + ".join(f"(has(self.{k}) ? 1 : 0)" for k in STEP_KINDS) + " == 1"
    return _obj(
        "One step. Exactly one kind: tool, shell, capsule, or a control step (exit, filter, "
        "decide, map, reduce, ask).",
        {
            "id": _s(
                "Unique within the plan; other steps name it in dependsOn and in "
                "$<id>.output / $<id>.status references. Letters, digits, _ and -.",
                **bounds(Step, "id"),
            ),
            "tool": _s(
                "A tool of the Capsule's inventory (spec.tools of the Capsule). The tool "
                "receives the step's input as JSON. Tool steps of one plan run one at a time.",
                **bounds(Step, "tool"),
            ),
            "shell": _s(
                "A command line, split into words (POSIX shell quoting rules) but never given "
                "to a shell. Its first word must be in the Capsule's shell.allow; a pipeline "
                "belongs in a tool (an interpreter such as sh in shell.allow allows anything).",
                **bounds(Step, "shell"),
            ),
            "capsule": _s(
                "A Capsule in the plan's Capsule's spawn.allow; its plan runs as a child "
                "Plan, whose result becomes this step's.",
                **bounds(Step, "capsule"),
            ),
            "input": {
                "description": "Handed to the step: a tool step gets it as JSON (env "
                "PLANOPS_INPUT); "
                "a capsule step's input is its task text, a string or {objective: <text>}; a shell "
                "step ignores it. A string that is exactly $<id>.output or $<id>.status, at any "
                "depth, is replaced by that step's result when this step is dispatched.",
                "x-kubernetes-preserve-unknown-fields": True,
            },
            "exit": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "description": "Seed 2: end the plan early: {when?: gate, status: success|"
                "error, message?, output?}. Evaluated by planops (no Job).",
            },
            "filter": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "description": "Seed 2: partition a list: {over: template, where: gate with "
                "{{item}} and {{index}}}. Evaluated by planops (no Job).",
            },
            **{
                k: {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "description": why,
                }
                for k, why in CONTROL_KINDS.items()
            },
            **{
                k: {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "description": f"Seed 2 {k}: refused ({why}).",
                }
                for k, why in REFUSED_KINDS.items()
            },
            "dependsOn": _list(
                "Steps that must settle (succeed, fail or be skipped) before this one "
                "is dispatched. Omitted: the step is ready immediately.",
                {"type": "string", "maxLength": 63},
                maxItems=MAX_DEPENDS_ON,
            ),
            "if": _s(
                "A condition over references and quoted literals: == != > < (text comparison), "
                "&& (binds tighter) and ||, e.g. \"$test.status == 'failed'\". False settles the "
                "step skipped without running it.",
                **bounds(Step, "if"),
            ),
            "onError": _s(
                "What a failed step (after its retries) does to the plan: fail (settles "
                "failed, stops the plan), skip (settles skipped, continues), continue "
                "(settles failed, continues). Default: fail.",
                enum=["fail", "skip", "continue"],
            ),
            "retries": _i(
                "Extra dispatches after a failure: retries: 2 runs the step up to three "
                "times. Each attempt is its own Job. Default: 0.",
                **bounds(Step, "retries"),
            ),
            "retryBackoff": _retry_backoff(
                "The pause before each retry: attempt n+1 starts duration x factor^(n-1) after "
                "attempt n failed, at most maxDuration. Default: the Capsule's, else none."
            ),
            "timeoutSeconds": _i(
                "Deadline of each attempt (the Job's activeDeadlineSeconds). Default: "
                "the Capsule's defaultTimeoutSeconds.",
                **bounds(Step, "timeoutSeconds"),
            ),
            "image": _s(
                "Container image of a shell step; must match the Capsule's images. Default: "
                "the Capsule's image.",
                **bounds(Step, "image"),
            ),
            "resources": _resources(
                "Requests and limits of the step's container. Default: the "
                "Capsule's resources; bounded by its maxResources."
            ),
        },
        required=["id"],
        **{
            "x-kubernetes-validations": [
                {
                    "rule": one_kind,
                    "message": "a step declares exactly one of tool, shell, capsule, exit, filter, "
                    "decide, map, reduce, ask",
                }
            ]
        },
    )


def plan_spec_schema(description: str) -> Schema:
    return _obj(
        description,
        {
            "capsule": _s(
                "The Capsule (policy and inventory) this plan runs under, in the plan's "
                "namespace. Default: default. No such Capsule: the plan is Invalid.",
                **bounds(PlanSpec, "capsule"),
            ),
            "parallelism": _i(
                "The most steps in flight at once. Default: no cap.",
                **bounds(PlanSpec, "parallelism"),
            ),
            "workspace": _obj(
                "One volume shared by every step of a run, mounted at /workspace, "
                "the steps' working directory.",
                {
                    "size": _s("Size of a new claim made for the run (1Gi)."),
                    "storageClassName": _s("Storage class of that claim."),
                    "claimName": _s("Use this existing PersistentVolumeClaim instead."),
                },
            ),
            "inputSchema": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "description": "JSON Schema (Draft 2020-12) the input must satisfy before any step "
                "runs (seed 2); every violation is reported with its path.",
            },
            "input": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "description": "Values for {{input.*}} templates in steps and output.",
            },
            "output": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "description": "A template map rendered into the report's output (status.report."
                "output) once every step settled, e.g. {count: '{{list.json.count}}'}.",
            },
            "activeDeadlineSeconds": _i(
                "The longest a run may take, in seconds: past it, what runs is stopped and the "
                "plan fails (condition reason DeadlineExceeded). Default: no deadline.",
                **bounds(PlanSpec, "activeDeadlineSeconds"),
            ),
            "steps": _list(
                "The steps. An empty list is a plan that completes having done nothing.",
                step_schema(),
                maxItems=MAX_STEPS,
            ),
        },
        required=["steps"],
    )


def _env_var() -> Schema:
    def ref(what: str) -> Schema:
        return _obj(
            f"A key of a {what} in the Plan's namespace.",
            {
                "name": _s(f"The {what}'s name.", **bounds(KeyRef, "name")),
                "key": _s("The key.", **bounds(KeyRef, "key")),
                "optional": {
                    "type": "boolean",
                    "description": "Start the step even when the key is missing.",
                },
            },
            required=["name", "key"],
        )

    return _obj(
        "One variable: exactly one of value or valueFrom.",
        {
            "name": _s("The variable's name.", **bounds(EnvVarModel, "name")),
            "value": _s("A literal value."),
            "valueFrom": _obj(
                "Exactly one of secretKeyRef or configMapKeyRef.",
                {"secretKeyRef": ref("Secret"), "configMapKeyRef": ref("ConfigMap")},
                **{
                    "x-kubernetes-validations": [
                        {
                            "rule": "has(self.secretKeyRef) != has(self.configMapKeyRef)",
                            "message": "exactly one of secretKeyRef or configMapKeyRef",
                        }
                    ]
                },
            ),
        },
        required=["name"],
        **{
            "x-kubernetes-validations": [
                {
                    "rule": "has(self.value) != has(self.valueFrom)",
                    "message": "exactly one of value or valueFrom",
                },
                {
                    "rule": "!self.name.startsWith('PLANOPS_')",
                    "message": "names starting with PLANOPS_ are set by planops",
                },
            ]
        },
    )


def _retry_backoff(description: str) -> Schema:
    duration = {
        "x-kubernetes-int-or-string": True,
        "anyOf": [{"type": "integer"}, {"type": "string"}],
    }
    return _obj(
        description,
        {
            "duration": {**duration, "description": "The first pause: 10s, 1m30s, 500ms."},
            "factor": {
                "type": "number",
                **bounds(RetryBackoff, "factor"),
                "description": "Each further pause is the previous one times this. Default 2.",
            },
            "maxDuration": {**duration, "description": "The longest pause. Default: none."},
        },
        required=["duration"],
    )


def _node_selector() -> Schema:
    return {
        "type": "object",
        "description": "Node labels a step pod's node must have (the pod's nodeSelector), e.g. "
        "{pool: batch}. Set by the Capsule's owner only: no plan field changes where steps run.",
        "additionalProperties": _s("A label value.", pattern=LABEL_VALUE_PATTERN, maxLength=63),
        "maxProperties": 64,
        "x-kubernetes-validations": [
            {
                "rule": f"self.all(k, size(k) <= 317 && k.matches(r'{LABEL_KEY_PATTERN}'))",
                "message": "every key is a label key: [prefix/]name (example.com/zone)",
            }
        ],
    }


def _tolerations() -> Schema:
    rules = [
        (
            "!has(self.tolerationSeconds) || has(self.effect) && self.effect == 'NoExecute'",
            "tolerationSeconds needs effect NoExecute",
        ),
        ("self.operator != 'Exists' || self.value == ''", "operator Exists takes no value"),
        ("self.key != '' || self.operator == 'Exists'", "without a key, operator is Exists"),
    ]
    return _list(
        "Taints step pods tolerate (the pod's tolerations, Kubernetes' shape), e.g. to run on "
        "a dedicated or simulated pool. Set by the Capsule's owner only.",
        _obj(
            "A toleration: matches taints with this key (any key when empty, operator Exists).",
            {
                "key": _s(
                    "The taint's key; empty matches every key.",
                    default="",
                    pattern=f"^$|{LABEL_KEY_PATTERN}",
                    maxLength=317,
                ),
                "operator": _s(
                    "Equal (the value must match) or Exists (any value).",
                    enum=["Exists", "Equal"],
                    default="Equal",
                ),
                "value": _s(
                    "The taint's value (operator Equal).",
                    default="",
                    pattern=LABEL_VALUE_PATTERN,
                    maxLength=63,
                ),
                "effect": _s(
                    "The taint effect to tolerate; omitted: every effect.",
                    enum=["NoSchedule", "PreferNoSchedule", "NoExecute"],
                ),
                "tolerationSeconds": _i(
                    "How long the pod stays once a NoExecute taint appears. Default: forever.",
                    minimum=0,
                ),
            },
            **{"x-kubernetes-validations": [{"rule": r, "message": m} for r, m in rules]},
        ),
        maxItems=64,
    )


def capsule_spec_schema() -> Schema:
    def allow(what: str) -> Schema:
        names = _list("The allowed names. Empty: nothing is allowed.", {"type": "string"})
        return _obj(what, {"allow": names})

    return _obj(
        "Policy and inventory plans run under. Deny by default: empty lists allow nothing.",
        {
            "image": _s("Default image of shell steps."),
            "images": _list(
                "Image patterns steps and tools may use, matched component by component (e.g. "
                "registry.example.com/team/*: `*` stays within one path component, `**` spans "
                "components, a tag or digest is matched on its own; no tag: any tag). "
                "Intersected with the operator's allowlist.",
                {"type": "string"},
            ),
            "shell": allow(
                "Binaries shell steps may start (the command line's first word, exactly)."
            ),
            "tools": _list(
                "The tool inventory.",
                _obj(
                    "A tool: an image and a command that reads "
                    "its JSON input from env PLANOPS_INPUT (and stdin when run locally).",
                    {
                        "name": _s("The name tool steps use.", **bounds(Tool, "name")),
                        "image": _s("The tool's image (default: the Capsule's image)."),
                        "command": _list(
                            "The container command.", {"type": "string"}, **bounds(Tool, "command")
                        ),
                        "description": _s("What the tool does, for people and `kubectl explain`."),
                        "inputSchema": {
                            "description": "JSON Schema of the tool's input.",
                            "x-kubernetes-preserve-unknown-fields": True,
                            "type": "object",
                        },
                        "env": _list(
                            "Environment variables of this tool's containers only (never of "
                            "shell steps or child Plans): a value, or a key of a Secret or "
                            "ConfigMap of the namespace, resolved by the kubelet (the operator "
                            "never reads it). Names starting with PLANOPS_ are planops'.",
                            _env_var(),
                            **bounds(Tool, "env"),
                        ),
                        "secretMounts": _list(
                            "Secrets mounted read-only into this tool's containers only.",
                            _obj(
                                "A Secret of the namespace as files under mountPath.",
                                {
                                    "secretName": _s(
                                        "The Secret's name.", **bounds(SecretMount, "secretName")
                                    ),
                                    "mountPath": _s(
                                        "An absolute path outside /workspace.",
                                        **bounds(SecretMount, "mountPath"),
                                    ),
                                },
                                required=["secretName", "mountPath"],
                            ),
                            **bounds(Tool, "secretMounts"),
                        ),
                    },
                    required=["name", "command"],
                ),
            ),
            "spawn": allow("Capsules that capsule steps may run as child plans."),
            "resources": _resources("Default requests and limits of every step."),
            "maxResources": _quantities("The most any step may ask for."),
            "defaultTimeoutSeconds": _i(
                "Default deadline of each step attempt.",
                **bounds(CapsuleSpec, "defaultTimeoutSeconds"),
            ),
            "retryBackoff": _retry_backoff(
                "The retry pause of steps that set none (see a step's retryBackoff)."
            ),
            "maxTimeoutSeconds": _i(
                "The longest deadline a step may ask for.",
                **bounds(CapsuleSpec, "maxTimeoutSeconds"),
            ),
            "outputLimitBytes": _i(
                "Cap on each step's recorded output (a truncation mark is appended).",
                **bounds(CapsuleSpec, "outputLimitBytes"),
                default=65536,
            ),
            "serviceAccountName": _s("Service account of step pods."),
            "automountServiceAccountToken": {
                "type": "boolean",
                "default": False,
                "description": "Mount the service account token into step pods. Default false.",
            },
            "nodeFailureTolerationSeconds": _i(
                "Seconds a step pod stays on a node that is NotReady or unreachable before it "
                "is evicted and its attempt fails naming the node (retries apply). Default: the "
                "cluster's (300).",
                **bounds(CapsuleSpec, "nodeFailureTolerationSeconds"),
            ),
            "nodeSelector": _node_selector(),
            "tolerations": _tolerations(),
            "readOnlyPaths": _list(
                "Paths inside /workspace mounted read-only in every step.", {"type": "string"}
            ),
            "workspace": _obj(
                "What workspaces (a Plan's spec.workspace) plans under this Capsule may have. "
                "Deny by default: no existing claim, no storage class of the plan's choosing, "
                "new claims of at most 1Gi.",
                {
                    "claimNames": _list(
                        "Existing PersistentVolumeClaims a plan may mount (claimName).",
                        {"type": "string"},
                    ),
                    "maxSize": {
                        "x-kubernetes-int-or-string": True,
                        "anyOf": [{"type": "integer"}, {"type": "string"}],
                        "description": "The largest new claim (a quantity). Default 1Gi.",
                    },
                    "storageClassNames": _list(
                        "Storage classes a plan may name for a new claim. Empty: the "
                        "cluster's default class only (storageClassName unset).",
                        {"type": "string"},
                    ),
                },
            ),
            "plan": plan_spec_schema(
                "What runs when another plan's capsule step spawns this Capsule."
            ),
        },
    )


def plan_status_schema() -> Schema:
    return {
        "type": "object",
        "description": "The run's report, written by the operator.",
        "x-kubernetes-preserve-unknown-fields": True,
    }


def _crd(
    plural: str,
    kind: str,
    short: list[str],
    spec: Schema,
    status: Schema | None,
    columns: list[dict[str, Any]],
    description: str,
) -> dict[str, Any]:
    props: dict[str, Schema] = {"spec": spec}
    if status is not None:
        props["status"] = status
    version: dict[str, Any] = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {
                "type": "object",
                "description": description,
                "properties": props,
                "required": ["spec"],
            }
        },
        "additionalPrinterColumns": columns,
    }
    if status is not None:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{API_GROUP}"},
        "spec": {
            "group": API_GROUP,
            "scope": "Namespaced",
            "names": {
                "plural": plural,
                "singular": kind.lower(),
                "kind": kind,
                "shortNames": short,
                "categories": ["planops"],
            },
            "versions": [version],
        },
    }


def plan_crd() -> dict[str, Any]:
    return _crd(
        "plans",
        "Plan",
        ["pl"],
        plan_spec_schema("A set of steps and the order they may run in."),
        plan_status_schema(),
        [
            {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
            {
                "name": "Steps",
                "type": "string",
                "jsonPath": ".status.progress",
                "description": "Steps settled / steps in the plan",
            },
            {
                "name": "Failed",
                "type": "string",
                "jsonPath": ".status.failedStep",
                "description": "The step that stopped the plan",
            },
            {"name": "Duration", "type": "string", "jsonPath": ".status.duration"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
        "A Plan: one run of a set of steps. planops validates it, runs each ready step as a Job, "
        "and writes the report to status.",
    )


def capsule_crd() -> dict[str, Any]:
    return _crd(
        "capsules",
        "Capsule",
        ["cap"],
        capsule_spec_schema(),
        None,
        [
            {"name": "Image", "type": "string", "jsonPath": ".spec.image"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
        "A Capsule: the policy and inventory Plans run under (images, binaries, tools, limits).",
    )


def _scheduled_spec(description: str, cluster: bool) -> Schema:
    props: dict[str, Schema] = {
        "schedule": _s(
            "When to run, in cron syntax (minute hour day-of-month month day-of-week) "
            "or a macro: @yearly @monthly @weekly @daily @hourly.",
            **bounds(ScheduledPlanSpec, "schedule"),
        ),
        "timeZone": _s(
            "IANA time zone of the schedule (Europe/Berlin). Default: UTC. When clocks "
            "go back, a schedule naming its hours runs once; see docs/schedules.md."
        ),
        "concurrencyPolicy": _s(
            "What to do when a run is due while another is active: Allow "
            "(start it), Forbid (wait until the active run ends), Replace "
            "(stop the active run, start the new one).",
            **bounds(ScheduledPlanSpec, "concurrencyPolicy"),
            default="Allow",
        ),
        "startingDeadlineSeconds": _i(
            "A due time older than this is missed, not started late.",
            **bounds(ScheduledPlanSpec, "startingDeadlineSeconds"),
        ),
        "suspend": {
            "type": "boolean",
            "default": False,
            "description": "Start no new runs (due times pass and are reported missed).",
        },
        "successfulRunsHistoryLimit": _i(
            "Succeeded runs kept.",
            **bounds(ScheduledPlanSpec, "successfulRunsHistoryLimit"),
            default=3,
        ),
        "failedRunsHistoryLimit": _i(
            "Failed runs kept.", **bounds(ScheduledPlanSpec, "failedRunsHistoryLimit"), default=1
        ),
        "planTemplate": _obj(
            "The Plan each run creates.",
            {
                "metadata": _obj(
                    "Labels and annotations of each run.",
                    {
                        "labels": {
                            "type": "object",
                            "description": "Labels of each run.",
                            "additionalProperties": {"type": "string"},
                        },
                        "annotations": {
                            "type": "object",
                            "description": "Annotations of each run.",
                            "additionalProperties": {"type": "string"},
                        },
                    },
                ),
                "spec": plan_spec_schema("The spec of each run."),
            },
            required=["spec"],
        ),
    }
    required = ["schedule", "planTemplate"]
    if cluster:
        req = _obj(
            "A label selector requirement.",
            {
                "key": _s("The label key."),
                "operator": _s(
                    "In, NotIn, Exists or DoesNotExist.",
                    **bounds(LabelSelectorRequirement, "operator"),
                ),
                "values": _list("Values for In and NotIn.", {"type": "string"}),
            },
            required=["key", "operator"],
        )
        props["namespaceSelector"] = _obj(
            "Namespaces to stamp a run into at each scheduled time (each run uses the Capsule of "
            "its own namespace).",
            {
                "matchLabels": {
                    "type": "object",
                    "description": "Labels a namespace must have.",
                    "additionalProperties": {"type": "string"},
                },
                "matchExpressions": _list("Requirements a namespace must meet.", req),
            },
        )
        required.append("namespaceSelector")
    return _obj(description, props, required=required)


def _scheduled_crd(cluster: bool) -> dict[str, Any]:
    kind = "ClusterScheduledPlan" if cluster else "ScheduledPlan"
    crd = _crd(
        kind.lower() + "s",
        kind,
        ["cspl"] if cluster else ["spl"],
        _scheduled_spec(
            f"A {kind}: runs a Plan on a schedule"
            + (" in every matching namespace." if cluster else "."),
            cluster,
        ),
        plan_status_schema(),
        [
            {"name": "Schedule", "type": "string", "jsonPath": ".spec.schedule"},
            {"name": "Suspend", "type": "boolean", "jsonPath": ".spec.suspend"},
            {"name": "Active", "type": "integer", "jsonPath": ".status.activeCount"},
            {"name": "Last Schedule", "type": "date", "jsonPath": ".status.lastScheduleTime"},
            {"name": "Next", "type": "string", "jsonPath": ".status.nextScheduleTime"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
        f"A {kind}: CronJob semantics for Plans.",
    )
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"][
        "description"
    ] = "Schedule history, written by the operator."
    if cluster:
        crd["spec"]["scope"] = "Cluster"
    return crd


def plan_report_crd() -> dict[str, Any]:
    """PlanReport: one chunk of a run's report (planops.reconciler.reports). Written by the
    operator only, owned by its Plan, no spec and no status: its records are its data."""
    record = _obj(
        "One settled step, as in the Plan's status.report.steps.",
        {
            "stepId": _s("The step (a body step: CONTROL.BRANCH-OR-ITEM.STEP, e.g. scan.3.probe)."),
            "status": _s("success, failed or skipped."),
            "output": _s("The step's output, cut to its share of the report (docs/operator.md)."),
            "error": _s("Why it failed or was skipped."),
            "attempts": _i("Attempts made."),
            "startedAt": _s("RFC 3339."),
            "finishedAt": _s("RFC 3339."),
        },
    )
    for key in ("output", "error", "startedAt", "finishedAt"):
        record["properties"][key]["nullable"] = True
    crd = _crd(
        "planreports",
        "PlanReport",
        ["planrep"],
        {},
        None,
        [
            {"name": "Plan", "type": "string", "jsonPath": ".plan"},
            {"name": "Run", "type": "string", "jsonPath": ".run"},
            {"name": "Chunk", "type": "integer", "jsonPath": ".chunk"},
            {
                "name": "First",
                "type": "integer",
                "jsonPath": ".first",
                "description": "The run's record number of the chunk's first record",
            },
            {"name": "Records", "type": "integer", "jsonPath": ".count"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
        "One chunk of a Plan run's report: settled step records in the order they settled, "
        "written by the operator (the Plan's status keeps a summary). Owned by the Plan.",
    )
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["properties"] = {
        "plan": _s("The Plan's name."),
        "run": _s("The run (the Plan's status.run.id)."),
        "chunk": _i("This chunk's index in the run (0, 1, ...).", minimum=0),
        "first": _i("The run's record number of this chunk's first record.", minimum=0),
        "count": _i("Records in this chunk.", minimum=0),
        "records": _list("The records, in the order they settled.", record),
    }
    schema["required"] = ["plan", "run", "chunk", "first", "count", "records"]
    return crd


def render() -> dict[str, str]:
    """File name -> YAML text of every CRD."""
    head = "# Generated by `python -m planops.api.crd`: edit operator/planops/api/crd.py.\n"
    return {
        f"{crd['metadata']['name']}.yaml": head + yaml.safe_dump(crd, sort_keys=False, width=100)
        for crd in (
            plan_crd(),
            capsule_crd(),
            _scheduled_crd(False),
            _scheduled_crd(True),
            plan_report_crd(),
        )
    }


#: where the CRDs are written: kubectl apply -f crds/, and the Helm chart's copy (its templates
#: render them, so `helm upgrade` upgrades them)
OUTPUTS = ("crds", "charts/planops/files/crds")

if __name__ == "__main__":
    if any(arg.startswith("-") for arg in sys.argv[1:]):
        # an option is never a directory: `--help` once left a directory named --help behind
        sys.exit("usage: python -m planops.api.crd [DIRECTORY...] (default: crds/ and the chart)")
    for where in sys.argv[1:] or OUTPUTS:
        out = Path(where)
        out.mkdir(parents=True, exist_ok=True)
        for name, text in render().items():
            (out / name).write_text(text)
            print(out / name)
