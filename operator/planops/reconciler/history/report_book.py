"""The reconciler's one writer of PlanReports: each run's settled records, written as they settle.

reconciler.reports says what the objects are (pure: names, bodies, patches, how chunks fill and
are read back). This module keeps, per running Plan, what its PlanReports hold, so a reconcile
writes only the records settled since the last one and never lists the run's report again while
this replica leads: listed once per run and leadership term, then kept as written.

A write that finds the world other than it thought (a chunk a crashed reconcile created before its
status write, a count a stale writer moved) lists what is there and writes the rest once more; a
second surprise forgets the run and raises, so the next reconcile starts from a fresh list.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from planops.api import CapsuleSpec
from planops.engine import Report, StepRecord, budget
from planops.kube import manifests
from planops.kube.api import KubeApi
from planops.kube.client import ApiError
from planops.kube.errors import ErrorKind
from planops.reconciler.history import chunks as reports_
from planops.reconciler.run import status as status_

Key = tuple[str, str]


class ReportBook:
    def __init__(
        self,
        kube: KubeApi,
        chunk_records: int = reports_.CHUNK_RECORDS,
        status_records: int = status_.STATUS_RECORDS,
    ) -> None:
        self.kube = kube
        #: records per PlanReport chunk, and records repeated in the status (operator flags)
        self.chunk_records = chunk_records
        self.status_records = status_records
        #: what each running Plan's PlanReports hold
        self._held: dict[Key, reports_.Written] = {}

    def chunks(self, key: Key) -> int:
        """PlanReports this Plan's run has (what its status counts as reportObjects)."""
        held = self._held.get(key)
        return len(held.chunks) if held is not None else 0

    def held(self, key: Key) -> reports_.Written | None:
        """The book of this Plan's run as it stands (the same object until it is listed again)."""
        return self._held.get(key)

    def forget(self, key: Key) -> None:
        """The run ended or the Plan went: its report is written."""
        self._held.pop(key, None)

    def clear(self) -> None:
        """This replica starts leading: list each run's report once first."""
        self._held.clear()

    async def written(self, ref: manifests.PlanRef, previous: dict[str, Any]) -> reports_.Written:
        """What the run's PlanReports hold: as this book wrote them, else listed. A status an
        operator before PlanReports wrote (every record in status.report.steps, no `records`
        count) is read once from there; its records are then written out."""
        key = (ref.namespace, ref.name)
        known = self._held.get(key)
        if known is not None and known.run == ref.run:
            return known
        listed = await self.kube.list_plan_reports(ref.namespace, reports_.selector(ref))
        written = reports_.assemble(listed, ref.uid, ref.run)
        self._held[key] = written
        old = previous.get("report") or {}
        if not written.chunks and (held := reports_.from_status(ref.run, old)) is not None:
            self._held[key] = held
            return held
        if not written.chunks and old.get("steps") and "records" not in old:
            return reports_.Written(
                ref.run, [StepRecord.from_json(r) for r in old["steps"]], written.ids, []
            )
        return written

    async def record(
        self,
        ref: manifests.PlanRef,
        report: Report,
        records: int,
        capsule: CapsuleSpec | None,
        previous: dict[str, Any],
    ) -> Report:
        """Write the records the run's PlanReports do not hold yet (each cut to its share of
        the report first), before the status that counts them; returns the report with its
        records as written (what the summary repeats, what a restart restores) and what of
        them was cut (Report.cut, counted from them). A run whose
        status repeats all its records unshortened writes none (reports.hold_in_status)."""
        key = (ref.namespace, ref.name)
        if key not in self._held or self._held[key].run != ref.run:
            fresh = (previous.get("run") or {}).get("id") != ref.run
            # a new run has written nothing (a create that finds a chunk lists, below)
            self._held[key] = (
                reports_.Written(ref.run) if fresh else await self.written(ref, previous)
            )
        limit = capsule.output_limit_bytes if capsule is not None else status_.RECORD_TEXT_LIMIT
        for retry in (False, True):
            written = self._held[key]
            new = [
                status_.recut(r.to_json(), records, limit)
                for r in report.steps
                if r.step_id not in written.ids
            ]
            if not written.chunks:  # a run whose status may be its whole report (reports.py)
                held = [r.to_json() for r in written.records]
                if status_.holds_all(held + new, self.status_records):
                    reports_.hold_in_status(written, new)
                    break
                new = reports_.release(written) + new
            try:
                for w in reports_.plan_writes(written, new, self.chunk_records):
                    if w.create:
                        body = reports_.body(ref, w.chunk, w.records)
                        await self.kube.create_plan_report(ref.namespace, body)
                    else:
                        await self.kube.patch_plan_report(
                            ref.namespace,
                            reports_.chunk_name(ref.name, ref.run, w.chunk.index),
                            reports_.append_patch(w),
                        )
                    reports_.applied(written, w)
                break
            except ApiError as e:
                # a chunk there already, or a count its `test` did not find: read, write again
                if retry or e.kind not in (ErrorKind.ALREADY_EXISTS, ErrorKind.INVALID):
                    self._held.pop(key, None)
                    raise
                listed = await self.kube.list_plan_reports(ref.namespace, reports_.selector(ref))
                self._held[key] = reports_.assemble(listed, ref.uid, ref.run)
        # what was cut, counted from the records as written (cut when read, by the run's
        # budget or to their share here): the same count a restarted operator restores
        records_ = tuple(self._held[key].records)
        return replace(report, steps=records_, cut=budget.tally(records_))
