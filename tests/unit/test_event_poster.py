"""Events are posted behind the reconciles: a reconcile that hands its events over does not wait
for the API, a failed post does not stop the posting of the rest, and a stop posts what is
queued."""

from __future__ import annotations

import asyncio

from planops.kube.client import ApiError
from planops.kube.events import Poster, Recorder

from .fakekube import FakeKube

PLAN = {
    "apiVersion": "planops.dev/v1alpha1",
    "kind": "Plan",
    "metadata": {"name": "p", "namespace": "ns", "uid": "u"},
}


def _kube() -> FakeKube:
    """An API server that answers only once its gate is set, and then refuses two Events: one
    with a server error, one by a broken connection."""
    kube = FakeKube(gate=asyncio.Event())
    kube.fail("create_event", ApiError(500, "InternalError", "etcd is slow"), name="StepStarted")
    kube.fail(
        "create_event", ConnectionResetError("the API server went away"), name="StepSucceeded"
    )
    return kube


def _posted(kube: FakeKube) -> list[str]:
    return [e["reason"] for e in kube.events]


def test_a_reconcile_hands_its_events_over_and_goes_on_and_a_stop_posts_them_all():
    async def main() -> None:
        kube = _kube()
        poster = Poster(kube, workers=1)
        poster.start()
        events = Recorder(kube, PLAN, poster)
        for reason in ("PlanStarted", "StepStarted", "StepSucceeded", "StepFailed", "PlanFailed"):
            events(reason, reason.lower())
        await asyncio.wait_for(events.flush(), 1)  # the API does not answer yet: no wait
        assert _posted(kube) == []
        kube.gate.set()
        await poster.stop()
        # in order; those the API refused or that never reached it are logged, and the rest
        # still go out
        assert _posted(kube) == ["PlanStarted", "StepFailed", "PlanFailed"]
        assert all(t.done() for t in poster.tasks)

    asyncio.run(main())


def test_without_a_poster_a_recorder_posts_at_once():
    async def main() -> None:
        kube = _kube()
        kube.gate.set()
        events = Recorder(kube, PLAN)
        events("PlanStarted", "go")
        await events.flush()
        assert _posted(kube) == ["PlanStarted"]

    asyncio.run(main())


def test_a_full_queue_drops_and_counts_with_one_log_line_per_interval(monkeypatch, caplog):
    import planops.kube.events as events_  # noqa: PLC0415

    monkeypatch.setattr(events_, "POSTER_QUEUE", 3)

    async def main() -> Poster:
        poster = Poster(_kube(), workers=1)  # not started: nothing drains
        body = {"reason": "StepSucceeded"}
        for _ in range(1003):
            poster.put("ns", body)
        return poster

    with caplog.at_level("WARNING", logger=events_.log.name):
        poster = asyncio.run(main())
    assert poster.dropped == 1000 and poster.queue.qsize() == 3
    dropped = [r for r in caplog.records if "dropped" in r.getMessage()]
    assert len(dropped) == 1, [r.getMessage() for r in dropped]  # not 1,000 lines
    assert dropped[0].getMessage().startswith("1 event(s) dropped (the last: StepSucceeded)")
