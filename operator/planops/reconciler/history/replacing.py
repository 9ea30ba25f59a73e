"""Pure: what happens to a Plan's run when a new one replaces it.

When a re-run or a new generation starts a new run, the run it replaces becomes the first entry
of `status.history` (history.run_history says what an entry holds and which are kept). Its
Jobs, pods, child Plans and workspace claim are stopped; its PlanReports are kept while its
entry is in the history, and those of the entries that fall off are deleted, and so are those
of the entries past the history byte budget (such an entry keeps its summary:
run_history.within_budget). A run whose status was its whole report (a small run writes no
PlanReport: chunks.hold_in_status) gets its records written to a PlanReport now, since the new
run's status is about to replace them. A finished child Plan the archive does not hold yet is
kept: it deletes itself once archived (history.retention).

Two decisions around one read, because the byte budget counts the PlanReports as they are
stored: `begin` (the history's entries, and the replaced run's records to write), then, once
the actuator wrote them and effects.reads listed the Plan's other runs, `finish` (the budget,
and every object to delete).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any

from planops.kube import manifests
from planops.reconciler.effects.intents import Delete
from planops.reconciler.history import chunks, retention, run_history
from planops.reconciler.history.retention import Archived

Obj = dict[str, Any]


@dataclass(frozen=True)
class Replacement:
    """The first half of a run's replacement (`begin`)."""

    #: the new run
    new_run: str
    #: the entries the new run's history keeps (before the byte budget) and those it drops
    kept: list[Obj]
    dropped: list[Obj]
    #: the replaced run, and its records its status held, to be written to PlanReports now
    old: manifests.PlanRef | None = None
    writes: list[chunks.Write] = field(default_factory=list)

    @property
    def same_id(self) -> bool:
        """An earlier run of the new run's id is dropped (a re-run value used again): its
        PlanReports are not the new run's, and the selector of other runs does not find them."""
        return any(e["id"] == self.new_run for e in self.dropped)


@dataclass(frozen=True)
class OtherRuns:
    """What effects.reads found of the Plan's runs other than the new one (its own, by UID)."""

    jobs: list[Obj]
    children: list[Obj]
    claims: list[Obj]
    chunks: list[Obj]
    #: the chunks labelled with the new run's own id (an earlier run of that id)
    same_id: list[Obj]


def needed(previous: Obj, generation: int, rerun: str) -> bool:
    """Whether a new run may replace anything: run ids derive from (uid, generation, re-run), so
    a first generation that never ran and was never re-run has no other run to stop (three lists
    saved per new Plan)."""
    return bool(previous.get("run") or generation > 1 or rerun)


def begin(
    plan: Obj, previous: Obj, ref: manifests.PlanRef, now: float, archive: bool
) -> Replacement:
    """The new run `ref.run` replaces the run `previous` (the Plan's status) holds: the entries
    its history keeps, and the records of the replaced run its status held (to PlanReports)."""
    kept, dropped = run_history.replaced(
        previous, ref.run, run_history.limit(plan.get("spec")), now, archive=archive
    )
    current = (previous.get("run") or {}).get("id")
    if not (kept and kept[0]["id"] == current):
        return Replacement(ref.run, kept, dropped)
    old = replace(ref, run=current)
    held = chunks.from_status(old.run, previous.get("report") or {})
    if held is None:  # its records are in its PlanReports already
        return Replacement(ref.run, kept, dropped)
    records = [r.to_json() for r in held.records]
    writes = chunks.plan_writes(chunks.Written(old.run), records)
    written = chunks.Written(old.run)
    for w in writes:
        chunks.applied(written, w)
    first = {**kept[0], "records": len(records), "reportObjects": len(written.chunks)}
    return Replacement(ref.run, [first, *kept[1:]], dropped, old, writes)


def report_bytes(objects: list[Obj]) -> dict[str, int]:
    """The bytes of the PlanReports of each earlier run (their objects as JSON, as listed):
    what run_history.within_budget counts."""
    sizes: dict[str, int] = {}
    for chunk in objects:
        run = chunk.get("run")
        if isinstance(run, str):
            sizes[run] = sizes.get(run, 0) + len(json.dumps(chunk, separators=(",", ":")))
    return sizes


def finish(
    rep: Replacement,
    other: OtherRuns,
    *,
    archive: bool = False,
    budget: int | None = None,
    archived: Archived = None,
) -> tuple[list[Obj], list[Delete]]:
    """The new run's status.history (within the byte budget), and what to delete: the chunks
    of an earlier run of the new run's id, the other runs' Jobs, their child Plans (but a
    finished one the archive does not hold yet), claims, and the PlanReports of the runs the
    history does not keep (with their records)."""
    kept = rep.kept
    if kept:
        kept = run_history.within_budget(
            kept, report_bytes(other.chunks), archive=archive, budget=budget
        )
    keep = frozenset(e["id"] for e in kept if run_history.records_kept(e))
    deletes = [Delete("report", _name(c)) for c in other.same_id]
    deletes += [Delete("job", _name(j)) for j in other.jobs]
    deletes += [
        Delete("plan", _name(c))
        for c in other.children
        if not retention.waits_for_archive(c, archived)
    ]
    deletes += [Delete("claim", _name(c)) for c in other.claims]
    deletes += [Delete("report", _name(c)) for c in other.chunks if c.get("run") not in keep]
    return kept, deletes


def _name(obj: Obj) -> str:
    return str(obj["metadata"]["name"])
