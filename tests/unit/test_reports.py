"""A run's report in PlanReport chunks (planops.reconciler.history.chunks): which records go to
which chunk, that a closed chunk is never written again, that assembling returns every record in
order, and that a run restored from the chunks goes on as the live run does.

The API server's side of a chunk write is a JSON Patch (RFC 6902); `Store` applies the same
patches with the `jsonpatch` library, so the `test` that guards an append is exercised too
(tests/e2e/test_reports.py does it against the real API server)."""

from __future__ import annotations

import copy

import jsonpatch
import pytest

from planops.api.names import LABEL_PLAN, LABEL_RUN
from planops.engine import Facts, Report, Run, StepRecord
from planops.engine.facts import AttemptFact
from planops.kube.manifests import PlanRef
from planops.reconciler.history import chunks as reports
from planops.reconciler.run import status

from .helpers import plan

REF = PlanRef("ns", "big", "uid-1", "run1")


def rec(i: int, status_: str = "success", text: str = "") -> dict:
    return StepRecord(f"s{i}", status_, text or f"out {i}\n", None, 1, 1.0, 2.0).to_json()


class Store:
    """PlanReports as the API server keeps them: create refuses a taken name, patch applies
    RFC 6902 (a failed `test` changes nothing). `log` lists (verb, chunk index) of each write."""

    def __init__(self) -> None:
        self.objects: dict[str, dict] = {}
        self.log: list[tuple[str, int]] = []

    def write(self, written: reports.Written, new: list[dict], per_chunk: int = 5) -> None:
        for w in reports.plan_writes(written, new, per_chunk):
            name = reports.chunk_name(REF.name, REF.run, w.chunk.index)
            if w.create:
                assert name not in self.objects
                self.objects[name] = copy.deepcopy(reports.body(REF, w.chunk, w.records))
                self.log.append(("create", w.chunk.index))
            else:
                patch = jsonpatch.JsonPatch(reports.append_patch(w))
                self.objects[name] = patch.apply(self.objects[name])
                self.log.append(("append", w.chunk.index))
            reports.applied(written, w)

    def listed(self) -> list[dict]:
        return list(reversed(list(self.objects.values())))  # any order: assemble sorts


def test_records_fill_each_chunk_in_turn_and_closed_chunks_are_never_written_again():
    store, written = Store(), reports.Written("run1")
    batches = [range(0, 3), range(3, 7), range(7, 12), range(12, 13), range(13, 26)]
    for batch in batches:
        last_before = written.chunks[-1].index if written.chunks else -1
        store.log.clear()
        store.write(written, [rec(i) for i in batch])
        # a chunk that had a successor before this batch is never written
        assert all(index >= last_before for _, index in store.log), store.log
        # only the chunk that was open may be appended to, and only first
        appends = [index for verb, index in store.log if verb == "append"]
        assert appends in ([], [last_before])
    by_chunk = {o["chunk"]: [r["stepId"] for r in o["records"]] for o in store.objects.values()}
    assert by_chunk == {k: [f"s{i}" for i in range(5 * k, min(5 * k + 5, 26))] for k in range(6)}
    assert [o["first"] for o in sorted(store.objects.values(), key=lambda o: o["chunk"])] == [
        0,
        5,
        10,
        15,
        20,
        25,
    ]
    assert all(o["count"] == len(o["records"]) for o in store.objects.values())


def test_a_chunk_also_closes_at_its_byte_bound():
    big = "x" * (200 << 10)
    new = [rec(i, text=big) for i in range(5)]
    writes = reports.plan_writes(reports.Written("run1"), new, chunk_records=500)
    assert [len(w.records) for w in writes] == [2, 2, 1]  # 2 x 200 KiB fit in 512 KiB, 3 do not
    assert all(w.chunk.size <= reports.CHUNK_BYTES for w in writes)


def test_assembling_returns_every_record_in_order():
    store, written = Store(), reports.Written("run1")
    for start in range(0, 103, 7):
        store.write(written, [rec(i) for i in range(start, min(start + 7, 103))], per_chunk=10)
    again = reports.assemble(store.listed(), REF.uid, REF.run)
    assert [r.step_id for r in again.records] == [f"s{i}" for i in range(103)]
    assert again.records == written.records and again.ids == written.ids
    assert [(c.index, c.first, c.count) for c in again.chunks] == [
        (c.index, c.first, c.count) for c in written.chunks
    ]
    assert reports.records_json(store.listed(), REF.uid, REF.run) == [rec(i) for i in range(103)]
    # written on from the assembled state: the open chunk goes on where it ended
    store.log.clear()
    store.write(again, [rec(103), rec(104)], per_chunk=10)
    assert store.log == [("append", 10)]


def test_a_stale_append_changes_nothing():
    store, written = Store(), reports.Written("run1")
    store.write(written, [rec(0), rec(1)])
    stale = reports.Written("run1", chunks=[reports.Chunk(0, 0, 1, 100)])  # saw one record
    (w,) = reports.plan_writes(stale, [rec(1)], 5)
    name = reports.chunk_name(REF.name, REF.run, 0)
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        jsonpatch.JsonPatch(reports.append_patch(w)).apply(store.objects[name])
    assert store.objects[name]["count"] == 2


def test_chunks_of_other_runs_or_other_owners_are_not_the_runs_report():
    store, written = Store(), reports.Written("run1")
    store.write(written, [rec(i) for i in range(7)])
    copied = copy.deepcopy(store.objects[reports.chunk_name("big", "run1", 1)])
    copied["metadata"]["ownerReferences"][0]["uid"] = "someone-else"
    copied["metadata"]["name"] = "forged"
    copied["records"] = [rec(99)]
    other_run = copy.deepcopy(store.objects[reports.chunk_name("big", "run1", 0)])
    other_run["run"], other_run["metadata"]["name"] = "run0", "old"
    got = reports.assemble([*store.listed(), copied, other_run], REF.uid, REF.run)
    assert [r.step_id for r in got.records] == [f"s{i}" for i in range(7)]


def test_a_missing_chunk_is_said_not_papered_over():
    store, written = Store(), reports.Written("run1")
    store.write(written, [rec(i) for i in range(12)])
    del store.objects[reports.chunk_name("big", "run1", 1)]
    with pytest.raises(reports.BrokenReportError, match="does not continue chunk 0"):
        reports.assemble(store.listed(), REF.uid, REF.run)


def test_chunk_objects_are_labelled_owned_and_named_for_their_run():
    body = reports.body(REF, reports.Chunk(3, 15, 0, 0), [rec(15)])
    meta = body["metadata"]
    assert body["kind"] == "PlanReport" and meta["name"] == "big-run1-000003"
    assert meta["labels"][LABEL_PLAN] == "big" and meta["labels"][LABEL_RUN] == "run1"
    assert meta["ownerReferences"] == [REF.owner()]
    assert reports.selector(REF) == "planops.dev/plan=big,planops.dev/run=run1"
    long = reports.chunk_name("p" * 253, "0123456789", 999_999)
    assert len(long) <= 253 and long != reports.chunk_name("p" * 252 + "q", "0123456789", 999_999)


MAP_PLAN = plan(
    {"id": "a", "shell": "echo a"},
    {
        "id": "m",
        "dependsOn": ["a"],
        "map": {"over": list(range(12)), "concurrency": 3, "do": {"shell": "echo {{item}}"}},
    },
    {"id": "z", "dependsOn": ["m"], "shell": "echo z"},
)


def test_a_run_restored_from_its_chunks_goes_on_as_the_live_run():
    """The reconciler's restart: settled records from the chunks, attempts in flight from the
    Jobs; the restored run dispatches exactly what the live one does, and reports the same."""
    live = Run("p", MAP_PLAN)
    store, written = Store(), reports.Written("run1")
    now = 0.0
    flying = [(d.step.id, d.attempt) for d in live.decide(now).dispatch]
    for _ in range(6):  # settle what flies, writing the new records each round
        now += 1
        for step, attempt in flying:
            live.finish_attempt(step, attempt, "success", f"{step}\n", None, now)
        flying = [(d.step.id, d.attempt) for d in live.decide(now).dispatch]
        new = [
            status.recut(r.to_json(), live.record_count(), 65536)
            for r in live.report().steps
            if r.step_id not in written.ids
        ]
        store.write(written, new, per_chunk=4)
    assert len(store.objects) > 2  # the records span several chunks
    # restart: a fresh Reconciler lists the chunks and observes the Jobs in flight
    listed = reports.assemble(store.listed(), REF.uid, REF.run)
    facts = Facts(tuple(listed.records), tuple(AttemptFact(s, a, now - 0.5) for s, a in flying))
    restored = Run.restore("p", MAP_PLAN, facts)
    assert sorted(restored.in_flight_attempts()) == sorted(live.in_flight_attempts())
    while flying:
        now += 1
        for step, attempt in flying:
            live.finish_attempt(step, attempt, "success", f"{step}\n", None, now)
            restored.finish_attempt(step, attempt, "success", f"{step}\n", None, now)
        got, want = restored.decide(now), live.decide(now)
        assert sorted(d.step.id for d in got.dispatch) == sorted(d.step.id for d in want.dispatch)
        flying = [(d.step.id, d.attempt) for d in want.dispatch]
    assert live.report().completed and restored.report().completed
    assert {r.step_id: r for r in restored.report().steps} == {
        r.step_id: r for r in live.report().steps
    }


def test_a_runs_status_is_its_whole_report_while_it_repeats_every_record_unshortened():
    few = [rec(i) for i in range(3)]
    assert status.holds_all(few)
    assert not status.holds_all([])
    assert not status.holds_all([rec(i) for i in range(status.STATUS_RECORDS + 1)])
    assert not status.holds_all(few, status_records=2)  # the operator's --status-records
    # the newest record keeps LAST_TEXT of text, the others RECENT_TEXT (and a mark's room: a
    # text a mark would not shorten is kept whole)
    long = "x" * (status.RECENT_TEXT + status.MARK_ROOM + 1)
    assert status.holds_all([*few, rec(9, text=long)])
    assert not status.holds_all([rec(9, text=long), *few])
    assert not status.holds_all([rec(9, text="x" * (status.LAST_TEXT + status.MARK_ROOM + 1))])
    error = "e" * (status.ERROR_LIMIT + status.MARK_ROOM + 1)
    failed = StepRecord("f", "failed", None, error, 1, 1.0, 2.0)
    assert not status.holds_all([failed.to_json()])
    said = StepRecord("s", "success", "ok", None, 1, 1.0, 2.0, stderr="w" * status.LAST_TEXT)
    assert not status.holds_all([said.to_json()])  # its stderr would be shortened


def test_a_run_held_in_its_status_is_restored_from_it_exactly():
    written = reports.Written("run1")
    reports.hold_in_status(written, [rec(0), rec(1, "failed")])
    reports.hold_in_status(written, [rec(2, text="a\nb\n")])
    report = Report("p", False, None, tuple(written.records), None, None)
    # as the reconciler writes it: the summary of these records, and no PlanReport
    saved = {**status.summary(report), "reportObjects": 0}
    back = reports.from_status("run1", saved)
    assert back is not None and back.in_status
    assert back.records == written.records and back.ids == {"s0", "s1", "s2"}
    assert back.chunks == []


def test_a_status_that_is_not_the_whole_report_restores_nothing():
    written = reports.Written("run1")
    reports.hold_in_status(written, [rec(0), rec(1)])
    whole = {
        **status.summary(Report("p", False, None, tuple(written.records), None, None)),
        "reportObjects": 0,
    }
    assert reports.from_status("run1", whole) is not None
    for broken in (
        {"reportObjects": 1},  # its records are in chunks
        {"reportObjects": None},  # an operator before this one wrote it
        {"stepsOmitted": 1},  # the status repeats the last records only
        {"records": 3},  # ... or says it holds fewer than there are
        {"steps": []},
    ):
        assert reports.from_status("run1", {**whole, **broken}) is None, broken


def test_records_held_in_the_status_are_released_to_chunks_in_order():
    written = reports.Written("run1")
    reports.hold_in_status(written, [rec(0), rec(1)])
    held = reports.release(written)
    assert [r["stepId"] for r in held] == ["s0", "s1"]
    assert written.records == [] and written.ids == set() and not written.in_status
    store = Store()
    store.write(written, [*held, rec(2)])
    assert [r.step_id for r in written.records] == ["s0", "s1", "s2"]
    assert reports.release(written) == []  # in chunks now: nothing held
    assert [r.step_id for r in written.records] == ["s0", "s1", "s2"]
