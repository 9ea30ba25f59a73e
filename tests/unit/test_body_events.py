"""A big map posts a bounded number of Events (reconciler.effects.body_events): the first body steps
of each control step one Event each, then one summary per SUMMARY_EVERY body records; every step
keeps its JSON log line."""

from __future__ import annotations

import asyncio
import json
import logging

from planops.engine import StepRecord
from planops.kube.events import Recorder
from planops.reconciler.effects.body_events import (
    BODY_EVENTS,
    RUN_BODY_EVENTS,
    SUMMARY_EVERY,
    BodyEvents,
)

from .fakekube import FakeKube

PLAN = {
    "apiVersion": "planops.dev/v1alpha1",
    "kind": "Plan",
    "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
}


def rec(step_id: str, status: str = "success") -> StepRecord:
    return StepRecord(step_id, status, None, None, 1, 0.0, 1.0)


def passes(items: int, per_pass: int) -> tuple[int, int, list[str]]:
    """A map of `items` one-step bodies settling `per_pass` a reconcile: (Events of their own
    for settled body steps, for started ones, summary messages)."""
    settled: list[StepRecord] = []
    own = starts = 0
    summaries: list[str] = []
    for first in range(0, items, per_pass):
        new = [
            rec(f"each.{n}.call", "failed" if n % 100 == 7 else "success")
            for n in range(first, min(items, first + per_pass))
        ]
        settled += new
        body = BodyEvents(settled, new)
        own += sum(body.post_settled(r.step_id) for r in new)
        starts += sum(body.post_started(f"each.{n}.call") for n in range(per_pass))
        summaries += [m for _, m, _ in body.summaries()]
    return own, starts, summaries


def test_a_200000_item_map_posts_a_bounded_number_of_events():
    own, starts, summaries = passes(200_000, 5000)
    assert own == BODY_EVENTS
    assert starts <= BODY_EVENTS
    assert len(summaries) == 40  # at most one a pass (and one per SUMMARY_EVERY records)
    assert summaries[-1].startswith("step each: 200000 body steps settled (198000 success, ")


def test_thousands_of_small_maps_in_one_plan_post_a_bounded_number_of_events():
    """2,000 control steps of 40 body steps each: under BODY_EVENTS apiece, but the run as a
    whole gets RUN_BODY_EVENTS Events of its own for settled body steps, and as many for
    starts, whatever the passes."""
    settled: list[StepRecord] = []
    own = starts = 0
    for first in range(0, 2000, 200):  # 200 control steps settle a pass
        new = [rec(f"m{c}.{n}.call") for c in range(first, first + 200) for n in range(40)]
        settled += new
        body = BodyEvents(settled, new)
        starts += sum(body.post_started(f"m{c + 200}.0.call") for c in range(first, first + 200))
        own += sum(body.post_settled(r.step_id) for r in new)
    assert own == RUN_BODY_EVENTS
    assert starts <= RUN_BODY_EVENTS


def test_a_2000_item_map_settling_100_a_pass_posts_one_summary_per_500_records():
    own, starts, summaries = passes(2000, 100)
    assert own == BODY_EVENTS and starts <= BODY_EVENTS
    assert len(summaries) == 2000 // SUMMARY_EVERY


def test_a_small_map_keeps_an_event_per_body_step_and_top_level_steps_always_do():
    own, _, summaries = passes(BODY_EVENTS, 3)
    assert own == BODY_EVENTS and summaries == []
    body = BodyEvents([rec("a")] * 50, [rec("a")] * 50)
    assert all(body.post_settled("a") for _ in range(50))
    assert all(body.post_started("a") for _ in range(50))


def test_a_restarted_operator_owes_the_same_summaries():
    settled = [rec(f"each.{n}.call") for n in range(SUMMARY_EVERY + 10)]
    # the pass that crossed SUMMARY_EVERY owes one summary; a pass restored after it, none
    assert len(BodyEvents(settled, settled[-20:]).summaries()) == 1
    assert BodyEvents(settled, settled[-5:]).summaries() == []


def test_an_event_not_posted_still_has_its_log_line(caplog):
    kube = FakeKube()
    events = Recorder(kube, PLAN)
    events("StepSucceeded", "step each.30.call success", post=False, step="each.30.call")
    events("StepSucceeded", "step a success", step="a")
    with caplog.at_level(logging.INFO, logger="planops.trace"):
        asyncio.run(events.flush())
    assert [e["message"] for e in kube.events] == ["step a success"]
    logged = [json.loads(r.getMessage()) for r in caplog.records]
    assert [line["step"] for line in logged] == ["each.30.call", "a"]
    assert all("__post" not in line for line in logged)
