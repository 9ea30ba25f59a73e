"""Every run keeps its record: when a re-run or a new generation replaces a Plan's run, the run
it replaces becomes the first entry of status.history (reconciler.history.run_history) and its
records stay in its PlanReports until its entry falls off spec.historyLimit
(reconciler.history.replacing). Driven through Reconciler.reconcile against the in-memory API
(fakekube.FakeKube); the cluster's e2e test (tests/e2e/test_run_history.py) runs the same on the
real API server."""

from __future__ import annotations

import asyncio
from typing import Any

from planops.api import names
from planops.archive.queue import earlier_row
from planops.archive.row import row
from planops.reconciler import earlier_run
from planops.reconciler.history import chunks as reports_
from planops.reconciler.history import run_history
from planops.reconciler.reconcile import Reconciler
from planops.reconciler.run import status as status_

from .harness import Cluster
from .test_reconcile_rules import CAPSULE, world
from .test_status_bound import stored_size, worst_status

REFUSED = 'admission webhook "x" denied the request'


def failing_world(status_records: int = 50, **spec: Any) -> Cluster:
    """A Plan whose two steps' Jobs the cluster refuses: its first run fails with two records."""
    w = world([{"id": "a", "shell": "true"}, {"id": "b", "shell": "true"}], **spec)
    w.reconciler = w.operator(status_records=status_records)
    w.kube.refuse("create_job", 403, REFUSED, times=None)
    return w


def rerun(w: Cluster, value: str, *, refuse: bool = False) -> dict[str, Any]:
    w.kube._refusals.clear()
    if refuse:
        w.kube.refuse("create_job", 403, REFUSED, times=None)
    w.annotate(names.ANNOTATION_RERUN, value)
    w.now += 60
    return w.reconciled()


def reports_of(w: Cluster, run: str) -> list[dict[str, Any]]:
    return [r for r in w.kube.of("planreport") if r["run"] == run]


def test_a_rerun_keeps_the_failed_run_in_the_history_with_its_whole_report():
    w = failing_world(status_records=1)  # the status repeats one record: the rest in PlanReports
    first = w.reconciled()
    assert first["phase"] == "Failed" and first["report"]["reportObjects"] == 1
    failed_run = first["run"]["id"]
    second = rerun(w, "1")
    assert second["run"]["id"] != failed_run and second["phase"] == "Running"
    [entry] = second["history"]
    assert entry["id"] == failed_run and entry["phase"] == "Failed"
    assert entry["failedStep"] == first["failedStep"] and entry["reason"] == "Failed"
    assert entry["counts"] == {"success": 0, "failed": 2, "skipped": 0}
    assert entry["records"] == 2 and entry["archived"] is False
    assert entry["startedAt"] == first["startedAt"] and entry["finishedAt"] == first["finishedAt"]
    assert len(reports_of(w, failed_run)) == 1  # kept, not deleted with the run's Jobs
    old = asyncio.run(earlier_run(w.kube, w.plan, failed_run))
    assert old is not None and old["phase"] == "Failed"
    assert [s["stepId"] for s in old["report"]["steps"]] == ["a", "b"]
    assert all(REFUSED in (s["error"] or "") for s in old["report"]["steps"])
    assert asyncio.run(earlier_run(w.kube, w.plan, "nosuchrun")) is None


def test_a_small_runs_records_held_in_its_status_are_written_to_a_planreport_when_replaced():
    w = failing_world()
    first = w.reconciled()
    assert first["report"]["reportObjects"] == 0 and w.kube.of("planreport") == []
    second = rerun(w, "1")
    assert second["history"][0]["reportObjects"] == 1
    old = asyncio.run(earlier_run(w.kube, w.plan, first["run"]["id"]))
    assert old is not None
    assert [s["stepId"] for s in old["report"]["steps"]] == ["a", "b"]
    # the new run's own report starts empty: nothing of the earlier run is counted as its
    assert second["report"]["records"] == 0


def test_the_history_keeps_history_limit_runs_and_deletes_the_planreports_of_the_rest():
    w = failing_world(status_records=1, historyLimit=2)
    ids = [w.reconciled()["run"]["id"]]
    for value in ("1", "2", "3"):
        ids.append(rerun(w, value, refuse=True)["run"]["id"])
    history = w.status()["history"]
    assert [e["id"] for e in history] == [ids[2], ids[1]]  # newest first, two of them
    assert {r["run"] for r in w.kube.of("planreport")} == {ids[3], ids[2], ids[1]}
    assert reports_of(w, ids[0]) == []


def test_a_history_limit_of_zero_keeps_no_earlier_run():
    w = failing_world(status_records=1, historyLimit=0)
    first = w.reconciled()
    second = rerun(w, "1")
    assert "history" not in second
    assert reports_of(w, first["run"]["id"]) == []


def test_a_run_replaced_while_running_is_recorded_as_stopped_and_its_jobs_are_deleted():
    w = world([{"id": "a", "shell": "sleep 100"}])
    first = w.reconciled()
    assert first["phase"] == "Running" and len(w.kube.of("job")) == 1
    second = rerun(w, "1")
    [entry] = second["history"]
    assert entry["phase"] == "Failed" and entry["reason"] == run_history.REPLACED
    assert second["run"]["id"] in entry["message"]
    assert [j["metadata"]["labels"][names.LABEL_RUN] for j in w.kube.of("job")] == [
        second["run"]["id"]
    ]


def test_a_new_generation_replaces_the_run_too_and_the_history_goes_on_with_each_status():
    w = failing_world()
    first = w.reconciled()
    w.kube._refusals.clear()
    w.plan["metadata"]["generation"] = 2
    w.plan["spec"]["steps"] = [{"id": "a", "shell": "sleep 100"}]
    w.now += 60
    second = w.reconciled()
    assert [e["id"] for e in second["history"]] == [first["run"]["id"]]
    assert second["history"][0]["generation"] == 1
    w.now += 1
    w.kube.objects[("job", "ns", next(iter(j["metadata"]["name"] for j in w.kube.of("job"))))][
        "status"
    ] = {"failed": 1, "conditions": [{"type": "Failed", "status": "True"}]}
    third = w.reconciled()  # a later status of the same run carries the history as it was
    assert third["history"] == second["history"]


def test_a_rerun_value_used_again_or_taken_away_is_a_new_run_and_every_run_keeps_its_record():
    """A re-run value used before, or the annotation removed, needs no `use`: it once named an
    earlier run's id again, deleting that run's history entry and PlanReports (and its archive
    row kept the new run out). Each run now has an id of its own (status.run.serial)."""
    w = failing_world(status_records=1)
    first = w.reconciled()
    second = rerun(w, "1", refuse=True)
    third = rerun(w, "", refuse=True)  # the annotation emptied
    fourth = rerun(w, "1", refuse=True)  # a value used before
    ids = [s["run"]["id"] for s in (first, second, third, fourth)]
    assert len(set(ids)) == 4, ids
    assert [s["run"]["serial"] for s in (first, second, third, fourth)] == [1, 2, 3, 4]
    assert [e["id"] for e in fourth["history"]] == ids[2::-1]
    for rid in ids:
        assert reports_of(w, rid) != [], rid  # every run's records are its own, still there


def test_run_ids_stay_new_with_no_history_kept_and_across_an_operator_restart():
    """The count is in the status (only the operator writes it), not in the history (bounded,
    possibly empty) nor in the operator's memory: a restarted operator, or another leader, that
    reads the status goes on counting."""
    w = failing_world(historyLimit=0)
    ids = [w.reconciled()["run"]["id"]]
    for value in ("1", "", "1", ""):
        w.reconciler = Reconciler(w.kube, clock=lambda: w.now)  # a restart: nothing kept
        ids.append(rerun(w, value, refuse=True)["run"]["id"])
        assert "history" not in w.status()
    assert len(set(ids)) == len(ids), ids
    again = Reconciler(w.kube, clock=lambda: w.now)  # the same status: the same run, no new one
    asyncio.run(again.reconcile("ns", "p"))
    assert w.status()["run"]["id"] == ids[-1]


def test_while_the_archive_is_on_a_run_not_archived_stays_past_the_limit():
    w = failing_world(status_records=1, historyLimit=1)
    w.reconciler.archive = True
    ids = [w.reconciled()["run"]["id"]]
    for value in ("1", "2"):
        ids.append(rerun(w, value, refuse=True)["run"]["id"])
    assert [e["id"] for e in w.status()["history"]] == [ids[1], ids[0]]
    assert reports_of(w, ids[0]) != []
    for e in w.plan["status"]["history"]:  # the archive's writer marks them
        e["archived"] = True
    rerun(w, "3", refuse=True)
    assert [e["id"] for e in w.status()["history"]] == [ids[2]]
    assert reports_of(w, ids[0]) == [] and reports_of(w, ids[1]) == []


def test_the_limit_is_read_within_its_bounds():
    assert run_history.limit({}) == run_history.HISTORY_LIMIT == 10
    assert run_history.limit({"historyLimit": 3}) == 3
    assert run_history.limit({"historyLimit": 10_000}) == run_history.HISTORY_LIMIT_MAX
    assert run_history.limit({"historyLimit": -1}) == 0
    assert run_history.limit({"historyLimit": True}) == 10
    assert run_history.limit({"historyLimit": "5"}) == 10


def test_the_worst_history_stays_within_its_share_of_the_status():
    long = "é<" * 100_000
    status = {
        "run": {"id": "r" * 300, "generation": 2**31, "rerun": long, "capsule": "c" * 63},
        "phase": "Failed",
        "startedAt": "2026-11-30T00:00:00.123456Z",
        "finishedAt": "2026-11-30T00:00:00.123456Z",
        "failedStep": long,
        "conditions": [{"type": "Succeeded", "reason": long, "message": long}],
        "counts": {"success": 2**31, "failed": 2**31, "skipped": 2**31},
        "report": {"records": 2**31, "reportObjects": 2**31, "completed": True},
        "history": [{"id": f"{i:010d}", "phase": "Failed"} for i in range(500)],
    }
    found = run_history.entry(status, "n" * 10, 0.0)
    assert found is not None  # with the fields the history byte budget adds, at their widest
    [one] = run_history.within_budget([found], {found["id"]: 2**62}, budget=0)
    assert stored_size(one) <= run_history.ENTRY_BYTES
    kept, _ = run_history.replaced(status, "new", run_history.HISTORY_LIMIT_MAX, 0.0, archive=True)
    assert len(kept) == run_history.ENTRIES_MAX
    worst = [one] * run_history.ENTRIES_MAX
    total = stored_size({**worst_status(100_000, status_.STATUS_RECORDS_MAX), "history": worst})
    assert total < status_.SUMMARY_BUDGET, f"{total} bytes"


def test_an_earlier_runs_status_shows_its_entry_and_every_record():
    entry = {
        "id": "abc",
        "generation": 3,
        "phase": "Failed",
        "reason": "Failed",
        "message": "step 'b' failed and stopped the plan",
        "startedAt": "2026-12-01T00:00:00.000Z",
        "finishedAt": "2026-12-01T00:01:30.000Z",
        "failedStep": "b",
        "counts": {"success": 1, "failed": 1, "skipped": 0},
    }
    records = [{"stepId": "a", "status": "success"}, {"stepId": "b", "status": "failed"}]
    st = run_history.earlier_status("p", entry, records)
    assert st["run"]["id"] == "abc" and st["phase"] == "Failed" and st["failedStep"] == "b"
    assert st["report"]["steps"] == records and st["report"]["records"] == 2
    assert st["duration"] == "1m30s" and st["progress"] == "2/2"
    assert st["conditions"][0]["status"] == "False"


def test_a_run_records_its_capsule_as_it_starts_and_its_history_entry_and_row_keep_it():
    """A run records the Capsule it runs under in status.run when it starts; switched to another
    Capsule (a new generation), the Plan's next run records that one, and the run it replaced
    keeps its own in its history entry: the archive's row of each names the Capsule it ran
    under, whatever the Plan's is when the row is written."""
    w = failing_world()
    first = w.reconciled()
    assert first["run"]["capsule"] == "default"
    w.kube.put("capsule", {"metadata": {"name": "other", "namespace": "ns"}, "spec": CAPSULE})
    w.plan["spec"]["capsule"] = "other"
    w.plan["metadata"]["generation"] = 2
    w.plan["metadata"]["resourceVersion"] += "1"
    w.now += 60
    second = w.reconciled()
    assert second["run"]["capsule"] == "other"
    [entry] = second["history"]
    assert entry["id"] == first["run"]["id"] and entry["capsule"] == "default"
    chunks = reports_of(w, entry["id"])
    records = reports_.records_json(chunks, w.plan["metadata"]["uid"], entry["id"])
    assert earlier_row(w.plan, entry, records).capsule == "default"
    w.now += 60
    w.reconciled()
    w.plan["status"]["phase"] = "Failed"  # (however its run ends)
    assert row(w.plan).capsule == "other"
