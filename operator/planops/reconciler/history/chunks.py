"""A run's full report as PlanReport objects: append-only chunks of settled records.

A Plan's status holds a bounded summary (reconciler.run.status); every settled record of a run is
written here, in the order the operator settled it, to objects of the namespaced kind
`PlanReport` (planops.dev), the way Kubernetes keeps what outgrows one object: owned children.
- Each chunk is one PlanReport named `<plan>-<run>-<index>`, labelled with the Plan
  (`planops.dev/plan`), the run (`planops.dev/run`) and its index (`planops.dev/chunk`), whose
  controller is the Plan (garbage-collected with it; trusted only by that owner reference, as
  Jobs are: reconciler.run.observe.owned).
- Records go to the last chunk until it holds `chunk_records` records or CHUNK_BYTES bytes;
  then the next chunk is created. Only the last chunk is ever written again, by a JSON Patch
  that appends the new records behind a `test` of its count (a stale writer fails instead of
  appending twice); a chunk with a successor is never written again.
- A run whose records the status repeats in full (at most its `status_records`, none of their
  texts shortened: status.holds_all, which most runs of a few dozen steps are) writes no
  chunk: its status is its whole report (`reportObjects: 0`), one write fewer per settled step.
  The first record that would not fit makes the run write every record so far to chunks, and it
  keeps to chunks from then on. A restarted operator restores such a run from its status.
- `assemble` reads them back: the run's chunks in index order, each continuing where the one
  before ended. It is what a restarted operator restores the run from, and what `kubectl plan
  describe/get` show.

Pure: the reconciler does the requests (planops.kube.client).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from planops.api import names
from planops.api.documents import API_VERSION
from planops.engine import StepRecord
from planops.kube import manifests
from planops.reconciler.run.observe import owned
from planops.reconciler.run.status import json_size

KIND = "PlanReport"
PLURAL = "planreports"
LABEL_CHUNK = names.LABEL_CHUNK
#: records per chunk (the operator's --report-chunk-records)
CHUNK_RECORDS = 500
#: a chunk's records in bytes: a record keeps at most status.RECORD_TEXT_LIMIT of text, so a
#: chunk stays under CHUNK_BYTES + one record, about half of etcd's 1.5 MiB
CHUNK_BYTES = 512 << 10
#: names: <plan>-<run>-<index>, a DNS subdomain of at most 253 characters
_NAME_ROOM = 253 - 1 - 10 - 1 - 6


@dataclass
class Chunk:
    index: int
    first: int  # the run's record number of its first record
    count: int
    size: int  # bytes of its records (json_size)


@dataclass
class Written:
    """What a run's PlanReport objects hold (as listed, then as this operator wrote them)."""

    run: str
    records: list[StepRecord] = field(default_factory=list)
    ids: set[str] = field(default_factory=set)
    chunks: list[Chunk] = field(default_factory=list)
    #: the records are in the status only (no chunk yet: status.holds_all)
    in_status: bool = False


@dataclass(frozen=True)
class Write:
    """One request: create chunk `chunk` with `records`, or append `records` to it (whose
    count was `before`)."""

    create: bool
    chunk: Chunk
    records: list[dict[str, Any]]
    before: int


def chunk_name(plan: str, run: str, index: int) -> str:
    """Deterministic (a create repeated after a crash finds the same name: AlreadyExists)."""
    if len(plan) > _NAME_ROOM:
        digest = hashlib.sha256(plan.encode()).hexdigest()[:8]
        plan = plan[: _NAME_ROOM - 9].rstrip("-.") + "-" + digest
    return f"{plan}-{run}-{index:06d}"


def selector(ref: manifests.PlanRef) -> str:
    """The run's PlanReports (the same labels as its Jobs)."""
    return ref.selector()


def body(ref: manifests.PlanRef, chunk: Chunk, records: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": chunk_name(ref.name, ref.run, chunk.index),
            "labels": {
                names.LABEL_PLAN: manifests.label_value(ref.name),
                names.LABEL_RUN: ref.run,
                LABEL_CHUNK: str(chunk.index),
                **manifests.MANAGED_BY,
            },
            "annotations": {names.LABEL_PLAN: ref.name},
            "ownerReferences": [ref.owner()],
        },
        "plan": ref.name,
        "run": ref.run,
        "chunk": chunk.index,
        "first": chunk.first,
        "count": len(records),
        "records": records,
    }


def append_patch(write: Write) -> list[dict[str, Any]]:
    """The JSON Patch appending `write.records` to its chunk: it applies only if the chunk
    still holds `write.before` records (otherwise the API server answers 422 and nothing
    changes: the reconcile fails, and the next one lists the chunks again)."""
    ops: list[dict[str, Any]] = [{"op": "test", "path": "/count", "value": write.before}]
    ops += [{"op": "add", "path": "/records/-", "value": r} for r in write.records]
    ops.append({"op": "replace", "path": "/count", "value": write.before + len(write.records)})
    return ops


def plan_writes(
    written: Written,
    new: list[dict[str, Any]],
    chunk_records: int = CHUNK_RECORDS,
    chunk_bytes: int = CHUNK_BYTES,
) -> list[Write]:
    """The requests that append `new` records (StepRecord.to_json, already cut) behind what
    `written` holds: the last chunk filled up, then new chunks. `written` is not changed
    (`applied` does that once the requests succeeded)."""
    writes: list[Write] = []
    last = written.chunks[-1] if written.chunks else None
    if last is not None:
        last = Chunk(last.index, last.first, last.count, last.size)
    before = last.count if last is not None else 0
    pending: list[dict[str, Any]] = []
    creating = False

    def close() -> None:
        if last is not None and pending:
            writes.append(Write(creating, last, list(pending), 0 if creating else before))

    for record in new:
        size = json_size(record)
        if last is None or (
            last.count >= chunk_records or (last.count and last.size + size > chunk_bytes)
        ):
            close()
            nxt = (last.index + 1) if last is not None else 0
            first = (last.first + last.count) if last is not None else 0
            last, pending, creating, before = Chunk(nxt, first, 0, 0), [], True, 0
        pending.append(record)
        last.count += 1
        last.size += size
    close()
    return writes


def hold_in_status(written: Written, new: list[dict[str, Any]]) -> None:
    """Keep `new` records (cut) with those before them, in the status only."""
    records = [StepRecord.from_json(r) for r in new]
    written.records += records
    written.ids.update(r.step_id for r in records)
    written.in_status = True


def from_status(run: str, report: dict[str, Any]) -> Written | None:
    """The records of a run whose status is its whole report (`hold_in_status`), else None."""
    steps = report.get("steps") or []
    if report.get("reportObjects") != 0 or not steps or report.get("stepsOmitted"):
        return None
    if report.get("records") != len(steps):
        return None
    out = Written(run, in_status=True)
    hold_in_status(out, [r for r in steps if isinstance(r, dict)])
    return out


def release(written: Written) -> list[dict[str, Any]]:
    """The records held in the status, to be written to chunks now (`written` is emptied:
    `applied` adds them back as they are written)."""
    held = [r.to_json() for r in written.records] if written.in_status else []
    if written.in_status:
        written.records, written.ids, written.in_status = [], set(), False
    return held


def applied(written: Written, write: Write) -> None:
    """Record that `write` succeeded."""
    records = [StepRecord.from_json(r) for r in write.records]
    written.records += records
    written.ids.update(r.step_id for r in records)
    if written.chunks and written.chunks[-1].index == write.chunk.index:
        written.chunks[-1] = write.chunk
    else:
        written.chunks.append(write.chunk)


class BrokenReportError(ValueError):
    """The run's chunks do not continue one another (one was deleted or edited by hand)."""


def assemble(objects: list[dict[str, Any]], uid: str, run: str) -> Written:
    """The run's records from its PlanReport objects: those whose controller is the Plan `uid`
    and whose run is `run`, in chunk order. Raises BrokenReportError when a chunk is missing or
    does not start where the one before ended (records would be lost or doubled)."""
    mine = [o for o in owned(objects, uid) if o.get("run") == run]
    mine.sort(key=lambda o: int(o.get("chunk") or 0))
    out = Written(run)
    for o in mine:
        index, first = int(o.get("chunk") or 0), int(o.get("first") or 0)
        records = [r for r in o.get("records") or [] if isinstance(r, dict)]
        expected = out.chunks[-1].first + out.chunks[-1].count if out.chunks else 0
        if index != len(out.chunks) or first != expected or len(records) != o.get("count"):
            raise BrokenReportError(
                f"PlanReport {o.get('metadata', {}).get('name')} (chunk {index}, first record "
                f"{first}, {len(records)} records) does not continue chunk {len(out.chunks) - 1} "
                f"(which ends before record {expected})"
            )
        out.chunks.append(Chunk(index, first, len(records), sum(map(json_size, records))))
        for r in records:
            rec = StepRecord.from_json(r)
            out.records.append(rec)
            out.ids.add(rec.step_id)
    return out


def records_json(objects: list[dict[str, Any]], uid: str, run: str) -> list[dict[str, Any]]:
    """Every record of the run as JSON (the CLI's view: `assemble`, without parsing)."""
    mine = [o for o in owned(objects, uid) if o.get("run") == run]
    mine.sort(key=lambda o: int(o.get("chunk") or 0))
    return [r for o in mine for r in o.get("records") or [] if isinstance(r, dict)]
