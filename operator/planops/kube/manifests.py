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
from planops.api.grant_models import Volume
from planops.api.pod_models import NOBODY
from planops.api.resources import resources
from planops.engine import Dispatch, delegation, shell_words, step_grants
from planops.engine import dispatch as dispatch_
from planops.kube import step_pod

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
    annotation (the step's is names.ANNOTATION_STEP_ID, the others' the label's own key) when it
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
    key = names.ANNOTATION_STEP_ID if label == names.LABEL_STEP else label
    full = notes.get(key) if isinstance(notes, dict) else None
    if isinstance(full, str) and full and full != shown and label_value(full) == shown:
        return full
    return shown


def step_selector(plan: str, step: str, attempt: int | None = None) -> str:
    """The pods (and Jobs) of one step of a Plan, any run; of one attempt when given."""
    selector = f"{names.LABEL_PLAN}={label_value(plan)},{names.LABEL_STEP}={label_value(step)}"
    return selector + (f",{names.LABEL_ATTEMPT}={attempt}" if attempt is not None else "")


def answer_annotation(step_id: str) -> str:
    """The annotation that answers an ask step (its name part follows the label value rules)."""
    return names.ANNOTATION_ANSWER_PREFIX + label_value(step_id)


MANAGED_BY = {"app.kubernetes.io/managed-by": "planops"}
CONTAINER = "step"
QUEUE_ALLOWANCE_SECONDS = 3600
NON_ROOT_UID = NOBODY
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
    #: the Plan's recorded author (names.ANNOTATION_AUTHOR), handed to its child Plans
    author: str | None = None
    #: the Plan's labels (a Capsule's propagateLabels copies some to its steps' Jobs and pods)
    plan_labels: tuple[tuple[str, str], ...] = ()

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
            names.LABEL_PLAN: label_value(self.name),
            names.LABEL_RUN: self.run,
            names.LABEL_STEP: label_value(step),
            names.LABEL_ATTEMPT: str(attempt),
            **MANAGED_BY,
        }

    def annotations(self, step: str) -> dict[str, str]:
        """The full values of the labels that `label_value` shortened, and only those: a label
        that holds its whole value needs no copy (`full_value` reads the label then). Every
        byte of a Job's pod template is stored in etcd about five times (the Job, the pod, the
        field ownership of each), so the common case carries no annotation at all."""
        full = {names.ANNOTATION_STEP_ID: step, names.LABEL_PLAN: self.name}
        labels = {
            names.ANNOTATION_STEP_ID: label_value(step),
            names.LABEL_PLAN: label_value(self.name),
        }
        return {k: v for k, v in full.items() if labels[k] != v}

    def selector(self) -> str:
        """Jobs (and their pods) of this run."""
        return f"{names.LABEL_PLAN}={label_value(self.name)},{names.LABEL_RUN}={self.run}"

    def other_runs_selector(self) -> str:
        """Jobs, pods and workspace claims of this Plan's other runs."""
        return f"{names.LABEL_PLAN}={label_value(self.name)},{names.LABEL_RUN}!={self.run}"

    def children_selector(self) -> str:
        """Child Plans of this run."""
        return f"{names.LABEL_PARENT}={label_value(self.name)},{names.LABEL_RUN}={self.run}"

    def other_runs_children_selector(self) -> str:
        """Child Plans of this Plan's other runs."""
        return f"{names.LABEL_PARENT}={label_value(self.name)},{names.LABEL_RUN}!={self.run}"


def run_id(uid: str, generation: int, serial: int) -> str:
    """A run: one generation of a Plan, and each re-run requested by annotation; `serial`
    counts the Plan's runs (status.run.serial, one more for each new run), so a re-run value
    used again, or taken away, never names an earlier run's id again (reconciler.run.retrying).
    Nothing an author writes goes into it (a re-run value did: ten hex digits are 40 bits, and
    an author could search for a value naming an id the Plan had). Hashed from a JSON list: text
    that starts with `["run"`, unlike the ids of runs started before (`<uid>/<generation>/
    <rerun>`, then `["run", uid, generation, rerun, serial]`) and of retries (`["retry-of"`)."""
    text = json.dumps(["run", uid, generation, serial])
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
    owner's to use); a shell step's words, a script step's interpreter and script, exactly as
    the plan gives them (see `literal`)."""
    if d.kind == "tool":
        tool = capsule.tool(d.step.tool or "")
        return list(tool.command) if tool is not None else []
    if d.kind == "script":
        return [literal(w) for w in step_grants.script_argv(d.step, capsule)]
    return [literal(w) for w in d.words or shell_words(d.step.shell or "")]


#: a Capsule's volume in a step's pod: named apart from planops' own (workspace, secret-N)
STEP_VOLUME_PREFIX = "vol-"


def step_env(d: Dispatch) -> list[dict[str, Any]]:
    """A shell or script step's own env, in its order: its values as rendered (d.env), exactly
    (see `literal`), its keys of Secrets and ConfigMaps for the kubelet to read."""
    values = dict(d.env)
    env: list[dict[str, Any]] = []
    for e in d.step.env:
        if e.value_from is not None:
            env.append(
                {
                    "name": e.name,
                    "valueFrom": e.value_from.model_dump(by_alias=True, exclude_none=True),
                }
            )
        else:
            env.append({"name": e.name, "value": literal(values[e.name])})
    return env


def step_volumes(
    d: Dispatch, capsule: CapsuleSpec
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The Capsule's volumes a shell or script step mounts, as (pod volumes, container mounts):
    each volume once, read-only where the step or the Capsule says (an admitted step asks no
    writable mount of a read-only volume: engine.step_grants)."""
    volumes: dict[str, dict[str, Any]] = {}
    mounts: list[dict[str, Any]] = []
    for m in d.step.volume_mounts:
        volume = capsule.volume(m.name)
        assert volume is not None  # admitted
        name = STEP_VOLUME_PREFIX + volume.name
        read_only = step_grants.read_only(m.read_only, volume.always_read_only)
        if name not in volumes:
            volumes[name] = {"name": name, **_volume_source(volume)}
        mounts.append({"name": name, "mountPath": m.mount_path, "readOnly": read_only})
    return list(volumes.values()), mounts


def _volume_source(volume: Volume) -> dict[str, Any]:
    if volume.config_map is not None:
        return {"configMap": {"name": volume.config_map.name}}
    if volume.secret is not None:
        secret = volume.secret.secret_name
        return {"secret": {"secretName": secret, "defaultMode": SECRET_FILE_MODE}}
    if volume.empty_dir is not None:
        return {"emptyDir": volume.empty_dir.model_dump(by_alias=True, exclude_defaults=True)}
    assert volume.persistent_volume_claim is not None  # exactly one (api.grant_models)
    claim = {"claimName": volume.persistent_volume_claim.claim_name}
    return {"persistentVolumeClaim": claim | ({"readOnly": True} if volume.read_only else {})}


def job(
    ref: PlanRef,
    d: Dispatch,
    capsule: CapsuleSpec,
    image: str,
    *,
    timeout_seconds: int,
    workspace_claim: str | None = None,
) -> dict[str, Any]:
    """The Job of one attempt of a tool, shell or script step: restricted pod security, limits
    set, backoffLimit 0 (planops owns retries, each attempt visible), deadline = the step
    timeout; a shell or script step's env and the Capsule's volumes it mounts, and what its
    Capsule grants its pod (kube.step_pod); none of these: today's one-container pod, byte for
    byte."""
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
    if d.kind in step_grants.OWN_COMMAND and (d.step.env or d.step.volume_mounts):
        env += step_env(d)  # after planops' own: no name of it starts with PLANOPS_
        volumes, mounts = step_volumes(d, capsule)
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
        "securityContext": step_pod.container_security(None),
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
    manifest = {
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
    # what the step's Capsule grants its pod: a security profile, services, placement, labels
    return step_pod.dress(manifest, d, capsule, ref.plan_labels)


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
            "labels": {
                names.LABEL_PLAN: label_value(ref.name),
                names.LABEL_RUN: ref.run,
                **MANAGED_BY,
            },
            "annotations": {names.LABEL_PLAN: ref.name},
            "ownerReferences": [ref.owner()],
        },
        "spec": spec,
    }


def child_plan(ref: PlanRef, d: Dispatch, target: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The child Plan of a capsule step: the target Capsule's plan, under the target Capsule."""
    objective = delegation.objective(d.input)
    declared = spec.get("input") if isinstance(spec.get("input"), dict) else None
    # the step's task text, as the child plan's input.objective (engine.delegation)
    given = delegation.child_input(declared, objective)
    return _child(ref, d, target, spec, given, {names.ANNOTATION_OBJECTIVE: objective[:4096]})


def template_child(
    ref: PlanRef, d: Dispatch, capsule: str, spec: dict[str, Any], template: dict[str, Any]
) -> dict[str, Any]:
    """The child Plan of a template step: the template's plan (engine.plan_templates.child_spec:
    its input merged already) under this plan's Capsule; the template it ran, recorded."""
    noted = json.dumps(template, sort_keys=True, separators=(",", ":"))
    return _child(ref, d, capsule, spec, spec.get("input"), {names.ANNOTATION_TEMPLATE: noted})


def _child(
    ref: PlanRef,
    d: Dispatch,
    target: str,
    spec: dict[str, Any],
    given: Any,
    notes: dict[str, str],
) -> dict[str, Any]:
    name = child_name(ref.name, ref.run, d.step.id, d.attempt)
    lineage = (*ref.lineage, target)
    return {
        "apiVersion": API_VERSION,
        "kind": "Plan",
        "metadata": {
            "name": name,
            "namespace": ref.namespace,
            "labels": {
                names.LABEL_PARENT: label_value(ref.name),
                names.LABEL_RUN: ref.run,
                names.LABEL_STEP: label_value(d.step.id),
                names.LABEL_ATTEMPT: str(d.attempt),
                names.LABEL_DEPTH: str(ref.depth + 1),
                **MANAGED_BY,
            },
            "annotations": {
                names.LABEL_PARENT: ref.name,
                names.ANNOTATION_STEP_ID: d.step.id,
                names.ANNOTATION_LINEAGE: ",".join(lineage),
                names.ANNOTATION_SPAWNED_BY: ref.uid,
                names.ANNOTATION_DELEGATION: hashlib.sha256(
                    f"{ref.uid}/{name}".encode()
                ).hexdigest()[:16],
                **notes,
                # a run of the child started later (it waited as Invalid) is started for the
                # parent's author (reconciler.run.authors)
                **({names.ANNOTATION_AUTHOR: ref.author} if ref.author else {}),
            },
            "ownerReferences": [ref.owner()],
        },
        "spec": {**spec, "capsule": target, "input": given},
    }
