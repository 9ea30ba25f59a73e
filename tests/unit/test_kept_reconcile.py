"""The reconciler keeps each running Plan's Run between reconciles (reconciler.run.kept_runs) and
uses it only when nothing moved under it: against the in-memory API, a run reconciled with the kept
Run writes exactly the statuses, reports and Jobs of the same run restored every time; a lost status
write, a write by someone else and a new leadership term restore."""

from __future__ import annotations

from typing import Any

import pytest

from planops.engine import decider
from planops.kube.client import ApiError

from .test_retry_reconcile import world

STEPS = [
    {"id": "a", "shell": "true"},
    {"id": "b", "shell": "true", "dependsOn": ["a"], "retries": 2},
    {"id": "c", "shell": "true"},
    {"id": "d", "shell": "true", "dependsOn": ["b", "c"], "onError": "continue"},
    {"id": "e", "shell": "true", "dependsOn": ["d"]},
]


@pytest.fixture
def restores(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The top-level restores made (a kept Run advanced makes none)."""
    made: list[str] = []
    real = decider.Run.restore.__func__  # type: ignore[attr-defined]

    def counted(cls: Any, plan_id: str, *args: Any, **kwargs: Any) -> Any:
        if kwargs.get("parent") is None:
            made.append(plan_id)
        return real(cls, plan_id, *args, **kwargs)

    monkeypatch.setattr(decider.Run, "restore", classmethod(counted))
    return made


def script(keep: bool) -> list[Any]:
    """One run, step by step (a failed attempt retried, a failure continued past); what the
    cluster held after each reconcile."""
    w = world(STEPS, status_records=2)  # the records go to PlanReports from the third on
    if not keep:
        w.reconciler._kept.limit = 0
    seen = [w.reconciled()]
    for step, ok in [("a", True), ("c", True), ("b", False), ("b", True), ("d", False)]:
        w.finish(step, ok)  # the step's latest attempt
        seen.append(w.reconciled())
    w.finish("e", True)
    seen.append(w.reconciled())
    reports = sorted((r["metadata"]["name"], r.get("records")) for r in w.kube.of("planreport"))
    jobs = sorted(j["metadata"]["name"] for j in w.kube.of("job"))
    return [seen, reports, jobs]


def test_a_run_kept_between_reconciles_writes_what_a_restored_run_writes(restores):
    kept = script(keep=True)
    used = len(restores)
    restores.clear()
    again = script(keep=False)
    assert kept == again
    assert used < len(restores)  # the kept path was taken
    assert kept[0][-1]["phase"] in ("Succeeded", "Failed")


def test_a_lost_status_write_or_another_writer_restores_the_run(restores):
    w = world(STEPS)
    w.reconciled()
    w.finish("a", True)
    w.reconciled()
    assert len(restores) == 1  # the second reconcile advanced the kept Run
    w.kube.refuse("patch_plan_status", 500, "etcd timeout", times=1)
    w.finish("c", True)
    with pytest.raises(ApiError):
        w.reconciled()  # it advanced the kept Run, and lost it with the write
    w.reconciled()
    assert len(restores) == 2  # restored: the failed reconcile's Run was not kept
    w.plan["metadata"]["resourceVersion"] += "1"  # someone else wrote the Plan
    w.finish("b", True)
    w.reconciled()
    assert len(restores) == 3
    w.reconciler.check_all()  # this replica starts leading again
    w.finish("d", True)
    w.reconciled()
    assert len(restores) == 4
