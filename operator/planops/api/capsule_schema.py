"""The Capsule spec's schema: what a Capsule grants (images, tools, shell, limits, secrets, pod
placement) and the plan template it runs when spawned, with the text `kubectl explain` shows.
"""

from __future__ import annotations

from planops.api.capsule_models import (
    LABEL_KEY_PATTERN,
    LABEL_VALUE_PATTERN,
    CapsuleSpec,
    Concurrency,
    KeyRef,
    SecretMount,
    Tool,
)
from planops.api.capsule_models import EnvVar as EnvVarModel
from planops.api.plan_schema import plan_spec_schema, retry_backoff
from planops.api.schema_parts import (
    Schema,
    array,
    bounds,
    integer,
    obj,
    quantities,
    resources,
    text,
)


def env_var() -> Schema:
    def ref(what: str) -> Schema:
        return obj(
            f"A key of a {what} in the Plan's namespace.",
            {
                "name": text(f"The {what}'s name.", **bounds(KeyRef, "name")),
                "key": text("The key.", **bounds(KeyRef, "key")),
                "optional": {
                    "type": "boolean",
                    "description": "Start the step even when the key is missing.",
                },
            },
            required=["name", "key"],
        )

    return obj(
        "One variable: exactly one of value or valueFrom.",
        {
            "name": text("The variable's name.", **bounds(EnvVarModel, "name")),
            "value": text("A literal value."),
            "valueFrom": obj(
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


def node_selector() -> Schema:
    return {
        "type": "object",
        "description": "Node labels a step pod's node must have (the pod's nodeSelector), e.g. "
        "{pool: batch}. Set by the Capsule's owner only: no plan field changes where steps run.",
        "additionalProperties": text("A label value.", pattern=LABEL_VALUE_PATTERN, maxLength=63),
        "maxProperties": 64,
        "x-kubernetes-validations": [
            {
                "rule": f"self.all(k, size(k) <= 317 && k.matches(r'{LABEL_KEY_PATTERN}'))",
                "message": "every key is a label key: [prefix/]name (example.com/zone)",
            }
        ],
    }


def tolerations() -> Schema:
    rules = [
        (
            "!has(self.tolerationSeconds) || has(self.effect) && self.effect == 'NoExecute'",
            "tolerationSeconds needs effect NoExecute",
        ),
        ("self.operator != 'Exists' || self.value == ''", "operator Exists takes no value"),
        ("self.key != '' || self.operator == 'Exists'", "without a key, operator is Exists"),
    ]
    return array(
        "Taints step pods tolerate (the pod's tolerations, Kubernetes' shape), e.g. to run on "
        "a dedicated or simulated pool. Set by the Capsule's owner only.",
        obj(
            "A toleration: matches taints with this key (any key when empty, operator Exists).",
            {
                "key": text(
                    "The taint's key; empty matches every key.",
                    default="",
                    pattern=f"^$|{LABEL_KEY_PATTERN}",
                    maxLength=317,
                ),
                "operator": text(
                    "Equal (the value must match) or Exists (any value).",
                    enum=["Exists", "Equal"],
                    default="Equal",
                ),
                "value": text(
                    "The taint's value (operator Equal).",
                    default="",
                    pattern=LABEL_VALUE_PATTERN,
                    maxLength=63,
                ),
                "effect": text(
                    "The taint effect to tolerate; omitted: every effect.",
                    enum=["NoSchedule", "PreferNoSchedule", "NoExecute"],
                ),
                "tolerationSeconds": integer(
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
        names = array("The allowed names. Empty: nothing is allowed.", {"type": "string"})
        return obj(what, {"allow": names})

    return obj(
        "Policy and inventory plans run under. Deny by default: empty lists allow nothing.",
        {
            "image": text("Default image of shell steps."),
            "images": array(
                "Image patterns steps and tools may use, matched component by component (e.g. "
                "registry.example.com/team/*: `*` stays within one path component, `**` spans "
                "components, a tag or digest is matched on its own; no tag: any tag or digest; "
                "a tag pattern admits no digest, which needs a digest pattern). "
                "Intersected with the operator's allowlist.",
                {"type": "string"},
            ),
            "shell": allow(
                "Binaries shell steps may start (the command line's first word, exactly)."
            ),
            "tools": array(
                "The tool inventory.",
                obj(
                    "A tool: an image and a command that reads "
                    "its JSON input from env PLANOPS_INPUT (and stdin when run locally).",
                    {
                        "name": text("The name tool steps use.", **bounds(Tool, "name")),
                        "image": text("The tool's image (default: the Capsule's image)."),
                        "command": array(
                            "The container command.", {"type": "string"}, **bounds(Tool, "command")
                        ),
                        "description": text(
                            "What the tool does, for people and `kubectl explain`."
                        ),
                        "inputSchema": {
                            "description": "JSON Schema (Draft 2020-12) of the tool's input: a "
                            "step's literal input outside it is refused before anything runs, a "
                            "rendered one at dispatch (call denied), so no other input reaches "
                            "the tool.",
                            "x-kubernetes-preserve-unknown-fields": True,
                            "type": "object",
                        },
                        "env": array(
                            "Environment variables of this tool's containers only (never of "
                            "shell steps or child Plans): a value, or a key of a Secret or "
                            "ConfigMap of the namespace, resolved by the kubelet (the operator "
                            "never reads it). Names starting with PLANOPS_ are planops'.",
                            env_var(),
                            **bounds(Tool, "env"),
                        ),
                        "secretMounts": array(
                            "Secrets mounted read-only into this tool's containers only.",
                            obj(
                                "A Secret of the namespace as files under mountPath.",
                                {
                                    "secretName": text(
                                        "The Secret's name.", **bounds(SecretMount, "secretName")
                                    ),
                                    "mountPath": text(
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
            "resources": resources("Default requests and limits of every step."),
            "maxResources": quantities("The most any step may ask for."),
            "defaultTimeoutSeconds": integer(
                "Default deadline of each step attempt.",
                **bounds(CapsuleSpec, "defaultTimeoutSeconds"),
            ),
            "retryBackoff": retry_backoff(
                "The retry pause of steps that set none (see a step's retryBackoff)."
            ),
            "maxTimeoutSeconds": integer(
                "The longest deadline a step may ask for.",
                **bounds(CapsuleSpec, "maxTimeoutSeconds"),
            ),
            "outputLimitBytes": integer(
                "Cap on each step's recorded output: past it, the output keeps its head and its "
                "tail with a mark between them.",
                **bounds(CapsuleSpec, "outputLimitBytes"),
                default=65536,
            ),
            "serviceAccountName": text("Service account of step pods."),
            "automountServiceAccountToken": {
                "type": "boolean",
                "default": False,
                "description": "Mount the service account token into step pods. Default false.",
            },
            "nodeFailureTolerationSeconds": integer(
                "Seconds a step pod stays on a node that is NotReady or unreachable before it "
                "is evicted and its attempt fails naming the node (retries apply). Default: the "
                "cluster's (300).",
                **bounds(CapsuleSpec, "nodeFailureTolerationSeconds"),
            ),
            "nodeSelector": node_selector(),
            "tolerations": tolerations(),
            "readOnlyPaths": array(
                "Paths inside /workspace mounted read-only in every step.", {"type": "string"}
            ),
            "workspace": obj(
                "What workspaces (a Plan's spec.workspace) plans under this Capsule may have. "
                "Deny by default: no existing claim, no storage class of the plan's choosing, "
                "new claims of at most 1Gi.",
                {
                    "claimNames": array(
                        "Existing PersistentVolumeClaims a plan may mount (claimName).",
                        {"type": "string"},
                    ),
                    "maxSize": {
                        "x-kubernetes-int-or-string": True,
                        "anyOf": [{"type": "integer"}, {"type": "string"}],
                        "description": "The largest new claim (a quantity). Default 1Gi.",
                    },
                    "storageClassNames": array(
                        "Storage classes a plan may name for a new claim. Empty: the "
                        "cluster's default class only (storageClassName unset).",
                        {"type": "string"},
                    ),
                },
            ),
            "plan": plan_spec_schema(
                "What runs when another plan's capsule step spawns this Capsule."
            ),
            "concurrency": obj(
                "How many Plans may run on this Capsule at once, across the cluster. Plans "
                "beyond it wait in phase Pending (their status names the Plans ahead) and start "
                "in queue order as running ones finish: a Plan's first run in its place of "
                "creation, a later run (re-run, retry, new generation) behind the runs already "
                "waiting. "
                "Omitted: no limit.",
                {
                    "maxRunningPlans": integer(
                        "The most Plans that run at once on this Capsule (1: one at a time, a "
                        "mutex). Counted from the cluster: a Plan holds its place from the moment "
                        "the operator starts it until it succeeds or fails. A capsule step's "
                        "child Plan runs within an ancestor's place (not counted) when a Capsule "
                        "above it has a limit; under unlimited Capsules only, it is counted and "
                        "waits like any Plan.",
                        **bounds(Concurrency, "maxRunningPlans"),
                    )
                },
                required=["maxRunningPlans"],
            ),
        },
    )
