"""Pure: a Plan's run as the cluster holds it: which run the Plan object asks for and its place in
the tree of plans (PlanRef), the attempts in flight the status records, and its workspace claim.
"""

from __future__ import annotations

from typing import Any

from planops.api import PlanSpec, names
from planops.api.status_model import InFlight
from planops.engine import Run
from planops.engine import policy as policy_
from planops.kube import manifests
from planops.reconciler.run import status as status_
from planops.reconciler.run.status import rfc3339


def plan_ref(namespace: str, name: str, meta: dict[str, Any], run_id: str) -> manifests.PlanRef:
    """The run `run_id` of the Plan whose metadata is `meta`: its depth (its label, set on child
    Plans), the capsules above it (its lineage annotation), its recorded author and its labels."""
    annotations = meta.get("annotations") or {}
    return manifests.PlanRef(
        namespace,
        name,
        meta["uid"],
        run_id,
        depth=depth((meta.get("labels") or {}).get(names.LABEL_DEPTH)),
        lineage=tuple(a for a in annotations.get(names.ANNOTATION_LINEAGE, "").split(",") if a),
        author=annotations.get(names.ANNOTATION_AUTHOR),
        plan_labels=plan_labels(meta.get("labels")),
    )


def plan_labels(labels: Any) -> tuple[tuple[str, str], ...]:
    """A Plan's labels as a PlanRef holds them (a Capsule's propagateLabels reads them)."""
    if not isinstance(labels, dict):
        return ()
    return tuple((k, v) for k, v in labels.items() if isinstance(k, str) and isinstance(v, str))


def claim(ref: manifests.PlanRef, spec: PlanSpec) -> tuple[str | None, dict[str, Any] | None]:
    """The claim mounted at /workspace in every step pod of this run, if the plan has one, and
    the claim to create for it (None: one the plan names, or none)."""
    ws = spec.workspace
    if ws is None:
        return None, None
    if ws.claim_name:
        return ws.claim_name, None
    body = manifests.workspace_claim(ref, ws.size or "1Gi", ws.storage_class_name)
    return str(body["metadata"]["name"]), body


#: kinds whose attempt is an object in the cluster (a Job, a child Plan)
WITH_OBJECT = ("shell", "script", "tool", "capsule", "template")


def in_flight(run: Run, previous: dict[str, Any], now: float) -> list[InFlight] | None:
    """The attempts in flight that have an object: recorded so that an object deleted behind
    the operator's back is a failed attempt (`run.facts.vanished`), not a step silently started
    again."""
    since = {(f["stepId"], f["attempt"]): f.get("since") for f in previous.get("inFlight") or []}
    out = [
        InFlight.model_construct(
            step_id=step, attempt=attempt, since=since.get((step, attempt)) or rfc3339(now)
        )
        for step, attempt in run.in_flight_attempts()
        if run.kind_of(step) in WITH_OBJECT
    ]
    return out[: status_.IN_FLIGHT_LIMIT] or None  # the status bound (reconciler.run.status)


def depth(label: Any) -> int:
    """How deep a Plan nests (its depth label, set on child Plans). Absent: a top-level Plan. Not
    a number (edited by hand): as deep as allowed, so it can spawn no children but never stops
    its own reconcile; reading it as 0 would let an edit lift the nesting cap."""
    if label is None:
        return 0
    return (
        int(label)
        if isinstance(label, str) and label.isascii() and label.isdigit()
        else policy_.MAX_DEPTH
    )
