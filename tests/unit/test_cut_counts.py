"""The report's `cut` counts (records whose text was cut, and the bytes they had in full) are the
same whoever cut and whenever they are counted: the local runner's outputLimitBytes cut, the
run's budget (engine.budget), and in the cluster a Job log read to its share and a record cut to
its share of the PlanReports (reconciler.run.status). A restarted operator restores the records as
its PlanReports hold them, so each mark must carry the full size, and the live operator must
count the records as written, or the two disagree."""

from __future__ import annotations

import asyncio
from typing import Any

from bench import big_results

from planops.api import CapsuleSpec, PlanSpec
from planops.engine import Facts, Report, Run, StepRecord, outputs
from planops.engine import budget as budget_
from planops.kube.manifests import PlanRef
from planops.reconciler.effects.actuator import Actuator, StatusWriter
from planops.reconciler.history.report_book import ReportBook
from planops.reconciler.run import status

from .fakekube import FakeKube
from .helpers import capsule

REF = PlanRef("ns", "big", "uid-1", "run1")


def test_a_text_cut_by_the_budget_then_to_its_report_share_still_counts_its_full_size():
    whole = "x" * 600_000
    by_budget = budget_.cut(whole, 300_000)
    in_report = status.cap_text(by_budget, 10_000)
    assert in_report is not None and len(in_report) < 11_000
    assert outputs.cut_size(in_report) == 600_000  # not the 300,000 the budget kept
    record = StepRecord("m.1.f", "success", in_report, None, 1, 1.0, 2.0)
    assert budget_.tally([record]) == (1, 600_000)


def test_every_cut_mark_planops_writes_is_read_back_with_its_full_size():
    captured = outputs.Capture.for_limit(300)
    for _ in range(50):
        captured.feed(b"a" * 100)
    local = outputs.output_value(captured, 300)  # an executor's outputLimitBytes
    cluster = status.cap_text("b" * 5000, 100)
    budget = budget_.cut("c" * 5000, 200)
    tail = outputs.stderr_value(outputs.Capture.of("d" * 5000, outputs.STDERR_LIMIT, False))
    assert [outputs.cut_size(t) for t in (local, cluster, budget, tail)] == [5000] * 4
    assert outputs.cut_size("ends with ] but no mark]") is None


def test_the_marks_of_earlier_versions_are_still_read_back():
    """A run restored from PlanReports an earlier operator wrote (marks at the end)."""
    old = [
        "a" * 10 + "\n[planops: output truncated: 10 of 5001 bytes kept]",
        "b" * 10 + "\n[planops: output truncated at 10 of 5002 bytes]",
        "c" * 10 + "\n[planops: cut at 10 of 5003 bytes: the run's result budget]",
    ]
    assert [outputs.cut_size(t) for t in old] == [5001, 5002, 5003]
    assert budget_.tally([StepRecord("s", "success", old[0], None, 1, 0, 1)]) == (1, 5001)
    # cut again (a record restored, then cut to a smaller share): the first total stays
    again = outputs.cut(old[0], outputs.MARK_ROOM + 4, outputs.RUN_BUDGET)
    assert again is not None and again.startswith("aa") and outputs.cut_size(again) == 5001


def record(
    kube: FakeKube, report: Report, records: int, cap: CapsuleSpec, previous: dict[str, Any]
) -> Report:
    """The report as a new ReportBook's run writes it (Actuator.record)."""
    act = Actuator(kube, StatusWriter(kube))
    return asyncio.run(act.record(ReportBook(), REF, report, records, cap, previous))


def test_a_run_restored_from_its_planreports_counts_the_cut_the_live_run_counted():
    # 8 filter results of ~300 KB (the budget keeps the first ones whole, cuts the rest), then
    # each cut again to its share as the PlanReports hold them
    spec = PlanSpec.model_validate(big_results.plan(8, 1500)["spec"])
    live = Run("p", spec)
    while not live.decide(0.0).finished:
        pass
    as_written = record(FakeKube(), live.report(), len(live.settled), CapsuleSpec(), {})
    restored = Run.restore("p", spec, Facts(as_written.steps, ()))
    # every record holding a cut text is counted, at the size it had before any cut
    assert as_written.cut == budget_.tally(as_written.steps)
    assert restored.report().cut == as_written.cut
    assert as_written.cut[0] == 9  # 8 filter results and the map's results
    assert as_written.cut[1] > 2 * 8 * 250_000


def test_a_restarted_operator_reports_the_same_cut_as_the_one_that_wrote_the_report():
    kube = FakeKube()
    steps = tuple(
        StepRecord(f"s{i}", "success", "y" * 200_000, None, 1, 1.0, 2.0) for i in range(40)
    )
    report = Report("p", True, None, steps)
    live = record(kube, report, 40, capsule(), {})
    assert live.cut[0] == 40  # 40 x 200 KB is past every record's share of the report
    # a restart: a new book, which lists the chunks
    restored = record(kube, report, 40, capsule(), {"run": {"id": REF.run}})
    assert restored.cut == live.cut == (40, 40 * 200_000)
