"""Who a run is started for, and whether they still may: a revoked Capsule `use` stops runs.

Creating or changing what a Plan or ScheduledPlan does needs `use` on its Capsule, checked by the
API server when the write is made (the chart's capsule-use admission policy). The operator then
starts runs later on that author's behalf, with its own rights: a ScheduledPlan's runs, for as
long as it exists, and a Plan's re-runs. So a grant that was revoked since would never be noticed.

The chart's record-author MutatingAdmissionPolicy writes who made the last author's act into the
annotation `planops.dev/author` (JSON: `{"username": ..., "groups": [...]}`). The API server
writes it from the request's authenticated user on every such act and keeps the old value on
any other write, so nobody can forge or remove it. Before each of those runs the operator asks
the API server (a SubjectAccessReview) whether that author may still `use` the Capsule; if not,
no run is started and the object's status and an Event say why.

An object with no record was written where the chart's policies are not installed, or before
they were (an upgrade), or by a cluster without MutatingAdmissionPolicy. Where the chart records
authors it tells the operator so (`--require-author-record`), and such an object gets no run
that needs the check until someone who may use its Capsule touches it (any author's act: the API
server then records them): the check fails closed, with an Event and status saying what to do
(reason AuthorUnknown). Without that flag (no recording anywhere) it is not checked, as `use`
itself is not enforced there. A record that cannot be read is refused.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from planops.api.names import ANNOTATION_AUTHOR, ANNOTATION_TOUCHED
from planops.api.status_model import PlanStatus
from planops.reconciler.effects.intents import Tell
from planops.reconciler.history import run_history
from planops.reconciler.run import status as status_

#: the Event and condition reason when a run is refused for its author
REASON = "UseRevoked"
#: ... and when no author is recorded where one must be (`required`)
UNKNOWN = "AuthorUnknown"


@dataclass(frozen=True)
class Refusal:
    """Why no run is started for an object's author: its reason (REASON, UNKNOWN) and text."""

    reason: str
    why: str


@dataclass(frozen=True)
class Author:
    username: str
    groups: tuple[str, ...]


class UnreadableAuthorError(ValueError):
    """The annotation is there but is not what the admission policy writes."""


def has_record(obj: dict[str, Any]) -> bool:
    """Whether an author is recorded on `obj` (readable or not)."""
    return ANNOTATION_AUTHOR in (obj["metadata"].get("annotations") or {})


def recorded_author(meta: dict[str, Any]) -> Author | None:
    """The author recorded on an object's metadata; None when nothing is recorded."""
    raw = (meta.get("annotations") or {}).get(ANNOTATION_AUTHOR)
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except (TypeError, ValueError):
        raise UnreadableAuthorError(raw) from None
    if not isinstance(value, dict):
        raise UnreadableAuthorError(raw)
    username, groups = value.get("username"), value.get("groups")
    if not isinstance(username, str) or not username or not isinstance(groups, list):
        raise UnreadableAuthorError(raw)
    if not all(isinstance(g, str) for g in groups):
        raise UnreadableAuthorError(raw)
    return Author(username, tuple(groups))


def question(obj: dict[str, Any], capsule: str, required: bool = False) -> Author | Refusal | None:
    """What a run started for `obj`'s recorded author under `capsule` needs asked first: the
    author whose `use` the API server is asked about (a SubjectAccessReview: effects.reads), a
    refusal already (a record that cannot be read; no record where one is `required`), or None
    (nothing recorded and no record required: not checked)."""
    kind = str(obj.get("kind") or "object")
    try:
        author = recorded_author(obj["metadata"])
    except UnreadableAuthorError:
        return Refusal(
            REASON,
            f"the author record ({ANNOTATION_AUTHOR}) of this {kind} cannot be read, so "
            f"whether its author may still use Capsule {capsule} cannot be checked: no run is "
            "started until someone who may use it changes the " + kind,
        )
    if author is None:
        return Refusal(UNKNOWN, unknown(obj, capsule)) if required else None
    return author


def answered(
    obj: dict[str, Any], author: Author, namespace: str, capsule: str, allowed: bool, why: str
) -> Refusal | None:
    """The API server's answer (`allowed`, and its reason `why`) to whether `author` may still
    use the Capsule, as a refusal of the run (None: it may start)."""
    if allowed:
        return None
    kind = str(obj.get("kind") or "object")
    return Refusal(
        REASON,
        f"{author.username}, who last changed what this {kind} does, may no longer use Capsule "
        f'{capsule} in namespace {namespace} (RBAC verb "use" on capsules.planops.dev'
        + (f": {why}" if why else "")
        + f"): no run is started for them; grant it again, or have someone who may use the "
        f"Capsule apply the {kind}",
    )


def unknown(obj: dict[str, Any], capsule: str) -> str:
    """Why no run is started for an object with no author record (written before the cluster
    recorded authors): what to do about it."""
    kind = str(obj.get("kind") or "object")
    name = str(obj["metadata"].get("name") or "")
    return (
        f"this {kind} has no author record ({ANNOTATION_AUTHOR}): it was written before the "
        "cluster recorded who changes what it does, so whether its author may use Capsule "
        f"{capsule} cannot be checked, and no run is started for it. Someone who may use the "
        "Capsule "
        f"touches it to be recorded as its author: kubectl annotate {kind.lower()} {name} "
        f"{ANNOTATION_TOUCHED}=$(date +%s) --overwrite (or applies it again with a change)"
    )


def refused_run_status(
    refusal: Refusal,
    *,
    generation: int,
    run: dict[str, Any],
    previous: dict[str, Any],
    now: float,
) -> PlanStatus:
    """A Plan's status when its re-run was refused for its author: the run ended (`Failed`,
    so it is not looked at again) before any step, the `Succeeded` condition says why. Another
    re-run, or a change of the Plan, starts a new run, checked again."""
    new = status_.invalid([], generation=generation, run=run, previous=previous, now=now)
    return new.model_copy(
        update={
            "phase": "Failed",
            "errors": None,
            "error_count": None,
            "started_at": status_.rfc3339(now),
            "finished_at": status_.rfc3339(now),
            "conditions": [
                status_.condition(
                    "False",
                    refusal.reason,
                    refusal.why,
                    generation,
                    previous.get("conditions", []),
                    now,
                )
            ],
        }
    )


def refused_start(
    run: dict[str, Any], previous: dict[str, Any], refusal: Refusal, now: float, told: Tell
) -> dict[str, Any]:
    """A run not started for its author: the Event (told to `told`), and its status (ended,
    saying why; its history carried on)."""
    rerun = run.get("rerun")
    what = f"re-run {rerun}" if rerun else f"run {run['id']}"
    told(refusal.reason, f"{what} not started: {refusal.why}", warning=True)
    new = refused_run_status(
        refusal, generation=int(run["generation"]), run=run, previous=previous, now=now
    )
    return run_history.carried(new.to_status(), previous)
