"""What each running Plan's PlanReports hold: the book the one writer of them keeps.

history.chunks says what the objects are (pure: names, bodies, patches, how chunks fill and are
read back). This book keeps, per running Plan, what its PlanReports hold, so a reconcile writes
only the records settled since the last one and never lists the run's report again while this
replica leads: listed once per run and leadership term (effects.reads), then kept as written
(effects.actuator writes them, and tells the book).

A write that finds the world other than the book thought (a chunk a crashed reconcile created
before its status write, a count a stale writer moved) lists what is there and writes the rest
once more; a second surprise forgets the run and raises, so the next reconcile starts from a
fresh list (effects.actuator.Actuator.record).
"""

from __future__ import annotations

from typing import Any

from planops.engine import StepRecord
from planops.kube import manifests
from planops.reconciler.history import chunks as chunks_
from planops.reconciler.run import status as status_

Key = tuple[str, str]


class ReportBook:
    def __init__(
        self,
        chunk_records: int = chunks_.CHUNK_RECORDS,
        status_records: int = status_.STATUS_RECORDS,
    ) -> None:
        #: records per PlanReport chunk, and records repeated in the status (operator flags)
        self.chunk_records = chunk_records
        self.status_records = status_records
        #: what each running Plan's PlanReports hold
        self._held: dict[Key, chunks_.Written] = {}

    def chunks(self, key: Key) -> int:
        """PlanReports this Plan's run has (what its status counts as reportObjects)."""
        held = self._held.get(key)
        return len(held.chunks) if held is not None else 0

    def held(self, key: Key) -> chunks_.Written | None:
        """The book of this Plan's run as it stands (the same object until it is listed again)."""
        return self._held.get(key)

    def known(self, ref: manifests.PlanRef) -> chunks_.Written | None:
        """What the run's PlanReports hold as this book wrote them (None: list them)."""
        known = self._held.get((ref.namespace, ref.name))
        return known if known is not None and known.run == ref.run else None

    def forget(self, key: Key) -> None:
        """The run ended or the Plan went: its report is written."""
        self._held.pop(key, None)

    def clear(self) -> None:
        """This replica starts leading: list each run's report once first."""
        self._held.clear()

    def started(self, ref: manifests.PlanRef) -> chunks_.Written:
        """A new run: it has written nothing (a create that finds a chunk lists, then)."""
        self._held[(ref.namespace, ref.name)] = written = chunks_.Written(ref.run)
        return written

    def listed(
        self, ref: manifests.PlanRef, previous: dict[str, Any], objects: list[dict[str, Any]]
    ) -> chunks_.Written:
        """What the run's PlanReports hold, from their listing `objects`. A status an operator
        before PlanReports wrote (every record in status.report.steps, no `records` count) is
        read once from there; its records are then written out."""
        key = (ref.namespace, ref.name)
        written = chunks_.assemble(objects, ref.uid, ref.run)
        self._held[key] = written
        old = previous.get("report") or {}
        if not written.chunks and (held := chunks_.from_status(ref.run, old)) is not None:
            self._held[key] = held
            return held
        if not written.chunks and old.get("steps") and "records" not in old:
            return chunks_.Written(
                ref.run, [StepRecord.from_json(r) for r in old["steps"]], written.ids, []
            )
        return written

    def relisted(self, ref: manifests.PlanRef, objects: list[dict[str, Any]]) -> chunks_.Written:
        """A write found the chunks other than the book held: as listed now."""
        key = (ref.namespace, ref.name)
        self._held[key] = written = chunks_.assemble(objects, ref.uid, ref.run)
        return written

    def writes(
        self, written: chunks_.Written, steps: tuple[StepRecord, ...], records: int, limit: int
    ) -> list[chunks_.Write]:
        """The requests that write the run's records `steps` the book does not hold yet, each
        cut to its share of the report (`records` in the run, the Capsule's output `limit`)
        first. A run whose status repeats all its records unshortened writes none: they are held
        in the status (chunks_.hold_in_status), and the first that would not fit sends all of them
        to a chunk."""
        new = [
            status_.recut(r.to_json(), records, limit)
            for r in steps
            if r.step_id not in written.ids
        ]
        if not written.chunks:
            held = [r.to_json() for r in written.records]
            if status_.holds_all(held + new, self.status_records):
                chunks_.hold_in_status(written, new)
                return []
            new = chunks_.release(written) + new
        return chunks_.plan_writes(written, new, self.chunk_records)
