"""A plan's workspace (spec.workspace) within what its Capsule allows.

A workspace is storage the operator creates or mounts on the author's behalf, so it is bounded
like everything else a plan reaches: an existing claim only when the Capsule lists it (any other
claim of the namespace may hold another team's data), a new claim no larger than the Capsule's
`workspace.maxSize`, and a storage class only from `workspace.storageClassNames` (classes differ
in cost and in who can read the disks). Deny by default: a Capsule that says nothing allows new
claims of at most 1Gi on the cluster's default class.
"""

from __future__ import annotations

from collections.abc import Iterator

from planops.api import quantity
from planops.api.capsule_models import CapsuleSpec
from planops.api.models import Workspace

DEFAULT_SIZE = "1Gi"


def problems(ws: Workspace, capsule: CapsuleSpec, capsule_name: str) -> Iterator[tuple[str, str]]:
    """(field path under spec.workspace, message) for everything the Capsule does not allow."""
    policy = capsule.workspace
    if ws.claim_name is not None:
        if ws.claim_name not in policy.claim_names:
            allowed = ", ".join(policy.claim_names) or "none"
            yield (
                "claimName",
                f"claim {ws.claim_name!r} is not one Capsule {capsule_name!r} lets plans mount "
                f"(workspace.claimNames: {allowed}); ask for it there, or let the plan create "
                "its own claim with size",
            )
        if ws.size is not None or ws.storage_class_name is not None:
            yield (
                "claimName",
                "claimName mounts an existing claim: size and storageClassName do not apply "
                "(remove them, or remove claimName to create a claim)",
            )
        return
    if ws.storage_class_name is not None and ws.storage_class_name not in (
        policy.storage_class_names
    ):
        allowed = ", ".join(policy.storage_class_names) or "none: leave it unset"
        yield (
            "storageClassName",
            f"storage class {ws.storage_class_name!r} is not allowed by Capsule "
            f"{capsule_name!r} (workspace.storageClassNames: {allowed})",
        )
    size = ws.size if ws.size is not None else DEFAULT_SIZE
    try:
        asked = quantity.parse(size)
    except ValueError as e:
        yield "size", str(e)
        return
    try:
        most = quantity.parse(policy.max_size)
    except ValueError:
        return  # the Capsule's own bad quantity: the Capsule is refused where it is read
    if asked > most:
        yield (
            "size",
            f"{size} exceeds Capsule {capsule_name!r}'s workspace.maxSize of {policy.max_size}",
        )
