"""What planops creates, as manifests: one Job per step attempt, one child Plan per capsule step.

Pure functions (no API calls). Names are deterministic (plan, run, step, attempt hashed into 63
characters), so a create after an operator restart finds the same object (AlreadyExists = adopt)
instead of making a second one. Labels are built fresh, never copied from the parent: copying
Argo CD's tracking label would make children look Argo-owned and get them pruned.

Label values hold at most 63 characters of a restricted syntax, but a Plan's name may have 253 and
a body step's qualified id (`scan.12.probe`) has no bound: every label value made from a name or
an id goes through `label_value` (itself when it fits, else a readable prefix and a hash of the
whole), and so does every selector that matches one. The full value of a shortened label is in an
annotation: `planops.dev/step-id` for the step, the label's own key for the others
(`planops.dev/plan`, `planops.dev/parent`); `full_value` reads it back when it agrees with the
label (shortened, it gives the label), else the label itself.
Child Plans always carry these annotations; a Job and its pod only for a label that was
shortened (a label that holds its whole value needs no copy, and the pod template's bytes are
stored several times over).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

from planops.api import API_VERSION, CapsuleSpec, names
from planops.api.resources import resources
from planops.engine import Dispatch, delegation, shell_words
from planops.engine import dispatch as dispatch_

#: the keys (api.names), importable from here too, where the objects carrying them are made
ANNOTATION_ANSWER_PREFIX = names.ANNOTATION_ANSWER_PREFIX
ANNOTATION_AUTHOR = names.ANNOTATION_AUTHOR
ANNOTATION_CANCEL = names.ANNOTATION_CANCEL
ANNOTATION_CANCEL_RUN_FINALLY = names.ANNOTATION_CANCEL_RUN_FINALLY
ANNOTATION_DELEGATION = names.ANNOTATION_DELEGATION
ANNOTATION_LINEAGE = names.ANNOTATION_LINEAGE
ANNOTATION_OBJECTIVE = names.ANNOTATION_OBJECTIVE
ANNOTATION_RERUN = names.ANNOTATION_RERUN
ANNOTATION_RETRY = names.ANNOTATION_RETRY
ANNOTATION_SCHEDULED_TIME = names.ANNOTATION_SCHEDULED_TIME
ANNOTATION_SPAWNED_BY = names.ANNOTATION_SPAWNED_BY
ANNOTATION_STEP_ID = names.ANNOTATION_STEP_ID
LABEL_ATTEMPT = names.LABEL_ATTEMPT
LABEL_CLUSTER_SCHEDULED_BY = names.LABEL_CLUSTER_SCHEDULED_BY
LABEL_DEPTH = names.LABEL_DEPTH
LABEL_PARENT = names.LABEL_PARENT
LABEL_PLAN = names.LABEL_PLAN
LABEL_RUN = names.LABEL_RUN
LABEL_SCHEDULED_BY = names.LABEL_SCHEDULED_BY
LABEL_STEP = names.LABEL_STEP
#: What only the operator writes on the Plans it manages (child Plans, scheduled runs): the
#: chart's admission policy (templates/admission-policy.yaml, kept equal by a unit test) lets only
#: holders of `manage` on plans create a Plan carrying any of them or change them.
RESERVED_LABELS = (
    LABEL_PARENT,
    LABEL_RUN,
    LABEL_STEP,
    LABEL_ATTEMPT,
    LABEL_DEPTH,
    LABEL_SCHEDULED_BY,
    LABEL_CLUSTER_SCHEDULED_BY,
)
RESERVED_ANNOTATIONS = (
    ANNOTATION_LINEAGE,
    ANNOTATION_SPAWNED_BY,
    ANNOTATION_DELEGATION,
    ANNOTATION_OBJECTIVE,
    ANNOTATION_STEP_ID,
    ANNOTATION_SCHEDULED_TIME,
    # the full values of labels that label_value may shorten (full_value reads them first)
    LABEL_PARENT,
    LABEL_SCHEDULED_BY,
    LABEL_CLUSTER_SCHEDULED_BY,
)


#: Kubernetes' syntax of a label value (and of an annotation key's name part), at most 63 chars.
LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
MAX_LABEL_VALUE = 63
_NOT_LABEL = re.compile(r"[^-A-Za-z0-9_.]+")
_DIGEST = 10  # hex characters: 40 bits, so two ids of one plan never share a label by chance


def label_value(text: str) -> str:
    """`text` as a label value: itself when it is one, else (longer than 63 characters, or not
    label syntax: `_x`, `a-`) a readable prefix and a hash of the whole text. Deterministic,
    so selectors built from the same text match; different texts get different values."""
    if len(text) <= MAX_LABEL_VALUE and LABEL_VALUE.fullmatch(text):
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:_DIGEST]
    prefix = _NOT_LABEL.sub("-", text)[: MAX_LABEL_VALUE - _DIGEST - 1].strip("-_.")
    return f"{prefix}-{digest}" if prefix else digest


def full_value(meta: dict[str, Any], label: str) -> str | None:
    """The full value behind one of our labels that `label_value` may have shortened: its
    annotation (the step's is ANNOTATION_STEP_ID, the others' the label's own key) when it
    agrees with the label, that is when shortening it gives the label exactly; else the label
    itself (a label that holds its whole value carries no annotation); None without the label.

    The label is what selectors match and the admission policy guards; the annotation only
    completes it. One that disagrees (`kubectl annotate job <build's Job>
    planops.dev/step-id=tests`) is not read: it would make an attempt of one step pass for
    another's."""
    labels, notes = meta.get("labels"), meta.get("annotations")
    shown = labels.get(label) if isinstance(labels, dict) else None
    if not isinstance(shown, str) or not shown:
        return None
    key = ANNOTATION_STEP_ID if label == LABEL_STEP else label
    full = notes.get(key) if isinstance(notes, dict) else None
    if isinstance(full, str) and full and full != shown and label_value(full) == shown:
        return full
    return shown


def step_selector(plan: str, step: str, attempt: int | None = None) -> str:
    """The pods (and Jobs) of one step of a Plan, any run; of one attempt when given."""
    selector = f"{LABEL_PLAN}={label_value(plan)},{LABEL_STEP}={label_value(step)}"
    return selector + (f",{LABEL_ATTEMPT}={attempt}" if attempt is not None else "")


def answer_annotation(step_id: str) -> str:
    """The annotation that answers an ask step (its name part follows the label value rules)."""
    return ANNOTATION_ANSWER_PREFIX + label_value(step_id)


MANAGED_BY = {"app.kubernetes.io/managed-by": "planops"}
CONTAINER = "step"
QUEUE_ALLOWANCE_SECONDS = 3600
NON_ROOT_UID = 65534
#: a tool's Secret files: readable by the step's group (fsGroup), by nobody else
SECRET_FILE_MODE = 0o440
WORKSPACE_MOUNT = "/workspace"
#: A tool's working directory when its run has a workspace: an emptyDir of its own pod. The
#: workspace is written by earlier steps, so a tool that reads a path relative to its working
#: directory (a config file, a plugin, `.npmrc`) while holding its Capsule's credentials must not
#: start there; it finds the workspace at WORKSPACE_MOUNT when it wants it.
TOOL_WORKDIR = "/planops/tool"

#: Applied when neither the step nor the Capsule says: requests and limits are always set.


@dataclass(frozen=True)
class PlanRef:
    """The Plan a child object belongs to."""

    namespace: str
    name: str
    uid: str
    run: str
    depth: int = 0
    lineage: tuple[str, ...] = ()
    #: the Plan's recorded author (ANNOTATION_AUTHOR), handed to its child Plans
    author: str | None = None

    def owner(self) -> dict[str, Any]:
        return {
            "apiVersion": API_VERSION,
            "kind": "Plan",
            "name": self.name,
            "uid": self.uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }

    def labels(self, step: str, attempt: int) -> dict[str, str]:
        return {
            LABEL_PLAN: label_value(self.name),
            LABEL_RUN: self.run,
            LABEL_STEP: label_value(step),
            LABEL_ATTEMPT: str(attempt),
            **MANAGED_BY,
        }

    def annotations(self, step: str) -> dict[str, str]:
        """The full values of the labels that `label_value` shortened, and only those: a label
        that holds its whole value needs no copy (`full_value` reads the label then). Every
        byte of a Job's pod template is stored in etcd about five times (the Job, the pod, the
        field ownership of each), so the common case carries no annotation at all."""
        full = {ANNOTATION_STEP_ID: step, LABEL_PLAN: self.name}
        labels = {ANNOTATION_STEP_ID: label_value(step), LABEL_PLAN: label_value(self.name)}
        return {k: v for k, v in full.items() if labels[k] != v}

    def selector(self) -> str:
        """Jobs (and their pods) of this run."""
        return f"{LABEL_PLAN}={label_value(self.name)},{LABEL_RUN}={self.run}"

    def other_runs_selector(self) -> str:
        """Jobs, pods and workspace claims of this Plan's other runs."""
        return f"{LABEL_PLAN}={label_value(self.name)},{LABEL_RUN}!={self.run}"

    def children_selector(self) -> str:
        """Child Plans of this run."""
        return f"{LABEL_PARENT}={label_value(self.name)},{LABEL_RUN}={self.run}"

    def other_runs_children_selector(self) -> str:
        """Child Plans of this Plan's other runs."""
        return f"{LABEL_PARENT}={label_value(self.name)},{LABEL_RUN}!={self.run}"


def run_id(uid: str, generation: int, rerun: str, serial: int) -> str:
    """A run: one generation of a Plan, and each re-run requested by annotation; `serial`
    counts the Plan's runs (status.run.serial, one more for each new run), so a re-run value
    used again, or taken away, never names an earlier run's id again (reconciler.run.retrying).
    Hashed from a JSON list: text that starts with `["run"`, unlike the ids of runs started
    before serials were counted (`<uid>/<generation>/<rerun>`) and of retries (`["retry-of"`)."""
    text = json.dumps(["run", uid, generation, rerun, serial])
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def child_name(plan: str, run: str, step: str, attempt: int) -> str:
    """Deterministic, DNS-1123, at most 63 characters (a Job's pods carry it as a label)."""
    digest = hashlib.sha256(f"{plan}/{run}/{step}/{attempt}".encode()).hexdigest()[:8]
    step_part = re.sub(r"[^a-z0-9-]+", "-", step.lower()).strip("-")[:16] or "step"
    plan_part = re.sub(r"[^a-z0-9-]+", "-", plan.lower()).strip("-")[:30] or "plan"
    return f"{plan_part}-{step_part}-{attempt}-{digest}"


def literal(text: str) -> str:
    """`text` as the kubelet will hand it over: it expands `$(VAR)` in a container's command
    and env values (from the container's environment) and turns `$$` into `$`, so every `$` a
    plan author wrote or a template rendered is doubled. Without this, a value such as
    `$(PLANOPS_INPUT)` would be rendered a second time, by the kubelet."""
    return text.replace("$", "$$")


def step_command(d: Dispatch, capsule: CapsuleSpec) -> list[str]:
    """The container command: a tool's as its Capsule's owner wrote it (`$(VAR)` there is the
    owner's to use); a shell step's words exactly as the plan gives them (see `literal`)."""
    if d.kind == "tool":
        tool = capsule.tool(d.step.tool or "")
        return list(tool.command) if tool is not None else []
    return [literal(w) for w in d.words or shell_words(d.step.shell or "")]


def job(
    ref: PlanRef,
    d: Dispatch,
    capsule: CapsuleSpec,
    image: str,
    *,
    timeout_seconds: int,
    workspace_claim: str | None = None,
) -> dict[str, Any]:
    """The Job of one attempt of a tool or shell step: restricted pod security, limits set,
    backoffLimit 0 (planops owns retries, each attempt visible), deadline = the step timeout."""
    labels = ref.labels(d.step.id, d.attempt)
    # the full values of shortened labels; none (no `annotations` key) when every label is whole
    annotated = {"annotations": a} if (a := ref.annotations(d.step.id)) else {}
    workspace = WORKSPACE_MOUNT if workspace_claim is not None else None
    env = [
        {"name": name, "value": literal(value)}
        for name, value in dispatch_.environment(ref.name, d, workspace).items()
    ]
    tool = capsule.tool(d.step.tool or "") if d.kind == "tool" else None
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    if tool is not None:  # the tool's credentials: on its own containers only
        env += [e.model_dump(by_alias=True, exclude_none=True) for e in tool.env]
        for n, m in enumerate(tool.secret_mounts):
            volumes.append(
                {
                    "name": f"secret-{n}",
                    "secret": {"secretName": m.secret_name, "defaultMode": SECRET_FILE_MODE},
                }
            )
            mounts.append({"name": f"secret-{n}", "mountPath": m.mount_path, "readOnly": True})
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": step_command(d, capsule),
        "env": env,
        "resources": resources(d.step.resources, capsule.resources),
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsNonRoot": True,
        },
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "activeDeadlineSeconds": timeout_seconds,
        "automountServiceAccountToken": capsule.automount_service_account_token,
        "enableServiceLinks": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": NON_ROOT_UID,
            "runAsGroup": NON_ROOT_UID,
            "fsGroup": NON_ROOT_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [container],
    }
    if capsule.service_account_name:
        pod_spec["serviceAccountName"] = capsule.service_account_name
    if capsule.node_selector:
        pod_spec["nodeSelector"] = dict(capsule.node_selector)
    tolerations = [
        {k: v for k, v in t.model_dump(by_alias=True, exclude_none=True).items() if v != ""}
        for t in capsule.tolerations
    ]
    if capsule.node_failure_toleration_seconds is not None:
        tolerations += [
            {
                "key": key,
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": capsule.node_failure_toleration_seconds,
            }
            for key in ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
        ]
    if tolerations:
        pod_spec["tolerations"] = tolerations
    if workspace_claim is not None:
        container["workingDir"] = WORKSPACE_MOUNT if tool is None else TOOL_WORKDIR
        mounts.append({"name": "workspace", "mountPath": WORKSPACE_MOUNT})
        mounts += [
            {
                "name": "workspace",
                "mountPath": f"{WORKSPACE_MOUNT}/{p.strip('/')}",
                "subPath": p.strip("/"),
                "readOnly": True,
            }
            for p in capsule.read_only_paths
        ]
        volumes.append(
            {"name": "workspace", "persistentVolumeClaim": {"claimName": workspace_claim}}
        )
        if tool is not None:
            mounts.append({"name": "tool-workdir", "mountPath": TOOL_WORKDIR})
            volumes.append({"name": "tool-workdir", "emptyDir": {}})
    if mounts:
        container["volumeMounts"] = mounts
        pod_spec["volumes"] = volumes
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": child_name(ref.name, ref.run, d.step.id, d.attempt),
            "namespace": ref.namespace,
            "labels": labels,
            **annotated,
            "ownerReferences": [ref.owner()],
        },
        "spec": {
            "backoffLimit": 0,
            # the step's timeout bounds its *running* time (on the pod, from the kubelet's start);
            # the Job's own deadline adds room for waiting on a busy cluster, so nothing waits
            # forever, and a step never times out only because the cluster was full
            "activeDeadlineSeconds": timeout_seconds + QUEUE_ALLOWANCE_SECONDS,
            "template": {
                "metadata": {"labels": labels, **annotated},
                "spec": pod_spec,
            },
        },
    }


def workspace_claim(ref: PlanRef, size: str, storage_class: str | None) -> dict[str, Any]:
    """The run's workspace: one claim, owned by the Plan (removed with it), named per run."""
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": size}},
    }
    if storage_class:
        spec["storageClassName"] = storage_class
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {
            "name": child_name(ref.name, ref.run, "workspace", 0),
            "namespace": ref.namespace,
            "labels": {LABEL_PLAN: label_value(ref.name), LABEL_RUN: ref.run, **MANAGED_BY},
            "annotations": {LABEL_PLAN: ref.name},
            "ownerReferences": [ref.owner()],
        },
        "spec": spec,
    }


def child_plan(ref: PlanRef, d: Dispatch, target: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The child Plan of a capsule step: the target Capsule's plan, under the target Capsule."""
    name = child_name(ref.name, ref.run, d.step.id, d.attempt)
    objective = delegation.objective(d.input)
    declared = spec.get("input") if isinstance(spec.get("input"), dict) else None
    lineage = (*ref.lineage, target)
    return {
        "apiVersion": API_VERSION,
        "kind": "Plan",
        "metadata": {
            "name": name,
            "namespace": ref.namespace,
            "labels": {
                LABEL_PARENT: label_value(ref.name),
                LABEL_RUN: ref.run,
                LABEL_STEP: label_value(d.step.id),
                LABEL_ATTEMPT: str(d.attempt),
                LABEL_DEPTH: str(ref.depth + 1),
                **MANAGED_BY,
            },
            "annotations": {
                LABEL_PARENT: ref.name,
                ANNOTATION_STEP_ID: d.step.id,
                ANNOTATION_LINEAGE: ",".join(lineage),
                ANNOTATION_SPAWNED_BY: ref.uid,
                ANNOTATION_DELEGATION: hashlib.sha256(f"{ref.uid}/{name}".encode()).hexdigest()[
                    :16
                ],
                ANNOTATION_OBJECTIVE: str(objective)[:4096],
                # a run of the child started later (it waited as Invalid) is started for the
                # parent's author (reconciler.run.authors)
                **({ANNOTATION_AUTHOR: ref.author} if ref.author else {}),
            },
            "ownerReferences": [ref.owner()],
        },
        "spec": {
            **spec,
            "capsule": target,
            # the step's task text, as the child plan's input.objective (engine.delegation)
            "input": delegation.child_input(declared, objective),
        },
    }
