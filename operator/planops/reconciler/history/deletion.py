"""Pure: a Plan's stored objects when a user deletes it (`kubectl delete plan X`), as decisions.

A Plan whose run stores objects (its Capsule's artifact repository, else the operator's default,
collecting with `artifactGC.strategy: OnRunDeletion`) carries the finalizer FINALIZER from its
first reconcile, before any step runs: without it the operator would never see the deletion,
and the Plan's prefix would stay in the bucket. A Plan without such a repository never gets it
(no request, no finalizer: `wants_finalizer`).

Once the Plan is being deleted (its `deletionTimestamp`), its deletion goes, in order:

1. the archive: while it is on and the Plan's ended run is not archived yet, the objects wait
   (the archive's row points at the stored log; deleting first would lose what the row names);
2. the steps: the Plan's Jobs are deleted (the finalizer holds the garbage collector back), and
   the objects wait until their pods are gone (a collector's last PUT lands before the prefix
   is deleted), at most STEPS_WAIT seconds;
3. the store: every object beneath the Plan's prefix deleted, then the finalizer removed.

Bounded: a store that is down, or an archive that does not answer, never holds a deletion for
ever. Retried with a growing pause (`pause`) until `give_up` seconds after the deletion began
(GIVE_UP by default; `--artifact-gc-timeout`); then a Warning Event says what is left where,
and the finalizer is removed (what is left is the bucket's lifecycle rules' to remove). While
it waits each failed try is a Warning Event too. Everything is derived from the Plan object and
the clock (its deletionTimestamp), so a restarted operator resumes the same deletion.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from planops.api import names
from planops.engine.report import parse_rfc3339
from planops.reconciler.history.retention import Archived, waits_for_archive

FINALIZER = names.FINALIZER_ARTIFACTS
#: seconds after a deletion began that it gives up on the store or the archive
GIVE_UP = 600.0
#: seconds after a deletion began that the objects stop waiting for the steps' pods to go
STEPS_WAIT = 90.0
#: the pauses between two tries, in seconds: half the time since the deletion began, within
PAUSE_MIN, PAUSE_MAX = 2.0, 60.0

Obj = dict[str, Any]


def finalizers(plan: Obj) -> list[str]:
    found = (plan.get("metadata") or {}).get("finalizers")
    return [f for f in found if isinstance(f, str)] if isinstance(found, list) else []


def collects(repository: Obj | None) -> bool:
    """Whether a repository (its spec as written: a Capsule's `artifactRepository`, or the
    operator's default as JSON) has its objects deleted with their runs."""
    if not isinstance(repository, dict):
        return False
    gc = repository.get("artifactGC")
    strategy = gc.get("strategy") if isinstance(gc, dict) else None
    return strategy in (None, "OnRunDeletion")


def may_want(plan: Obj) -> bool:
    """Whether the Plan could get the finalizer: not being deleted, and without it."""
    meta = plan.get("metadata") or {}
    return not meta.get("deletionTimestamp") and FINALIZER not in finalizers(plan)


def wants_finalizer(plan: Obj, capsule_repository: Obj | None, default: Obj | None) -> bool:
    """Whether the Plan must get the finalizer now: `may_want`, and its run stores objects in a
    repository that collects them (its Capsule's `artifactRepository`, else the default)."""
    if not may_want(plan):
        return False
    return collects(capsule_repository if capsule_repository is not None else default)


def with_finalizer(plan: Obj) -> Obj:
    """The merge patch adding it (the Plan as read: its resourceVersion a precondition)."""
    meta = plan.get("metadata") or {}
    return {
        "metadata": {
            "finalizers": [*finalizers(plan), FINALIZER],
            "resourceVersion": meta.get("resourceVersion"),
        }
    }


def without_finalizer(plan: Obj) -> Obj:
    """The merge patch removing it, keeping any other controller's (a precondition as above)."""
    meta = plan.get("metadata") or {}
    left = [f for f in finalizers(plan) if f != FINALIZER]
    return {
        "metadata": {"finalizers": left or None, "resourceVersion": meta.get("resourceVersion")}
    }


@dataclass(frozen=True)
class Deletion:
    """What a deleted Plan's objects wait for now, or what is done with them.

    - `none`: not ours (no finalizer, or not being deleted);
    - `hold`: the archive does not hold the run yet: look again in `wake`;
    - `collect`: stop the steps, then delete the prefix (`wait_for_steps`: pods still running
      hold it);
    - `abandon`: give up (`why`): the finalizer goes, the objects stay."""

    action: Literal["none", "hold", "collect", "abandon"]
    wake: float | None = None
    why: str = ""
    wait_for_steps: bool = True
    #: seconds since the deletion began
    elapsed: float = 0.0


def elapsed(plan: Obj, now: float) -> float | None:
    """Seconds since the Plan's deletion began (None: not being deleted)."""
    at = (plan.get("metadata") or {}).get("deletionTimestamp")
    began = parse_rfc3339(at) if isinstance(at, str) else None
    return None if began is None else max(0.0, now - began)


def pause(since: float, give_up: float) -> float:
    """The pause before the next try, `since` seconds into the deletion: growing, and never
    past the moment it gives up (that look gives up)."""
    grow = min(PAUSE_MAX, max(PAUSE_MIN, since / 2))
    return max(0.5, min(grow, give_up - since + 0.5))


def decide(plan: Obj, now: float, archived: Archived, give_up: float = GIVE_UP) -> Deletion:
    """The next move of a deleted Plan's objects (the module's order)."""
    since = elapsed(plan, now)
    if since is None or FINALIZER not in finalizers(plan):
        return Deletion("none")
    if waits_for_archive(plan, archived):
        if since >= give_up:
            return Deletion(
                "abandon",
                why=f"the archive did not hold its run within {give_up:.0f}s; the objects are "
                "kept (the archive's row would name them)",
                elapsed=since,
            )
        return Deletion("hold", wake=pause(since, give_up), elapsed=since)
    return Deletion("collect", wait_for_steps=since < STEPS_WAIT, elapsed=since)


def after_failure(since: float, give_up: float, error: str) -> Deletion:
    """A try that failed (the store down, its credentials refused): again after a pause, or,
    `give_up` seconds into the deletion, abandoned."""
    if since >= give_up:
        return Deletion(
            "abandon",
            why=f"the store failed for {give_up:.0f}s ({error}); the objects are left",
            elapsed=since,
        )
    return Deletion("hold", wake=pause(since, give_up), why=error, elapsed=since)
