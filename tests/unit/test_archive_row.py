"""What a finished run becomes in the archive (planops.archive.row), which runs are still to be
archived, the writer queue's bound (planops.archive.queue: offer and sweep never touch the
database), and the operator's --archive flag."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from planops import metrics
from planops.api.names import LABEL_SCHEDULED_BY
from planops.archive.queue import Archiver
from planops.archive.row import archived, pending_run, row, spec_digest
from planops.kube.cache import WatchCache

from .fakekube import FakeKube


def plan(
    name: str = "p",
    phase: str = "Succeeded",
    run: str = "abc123",
    archived_run: str | None = None,
    generation: int = 1,
    run_generation: int = 1,
    **status: Any,
) -> dict[str, Any]:
    return {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": {
            "namespace": "team",
            "name": name,
            "uid": f"uid-{name}",
            "generation": generation,
            "labels": {"app": "x"},
            "annotations": {},
        },
        "spec": {"capsule": "builders", "input": {"n": 3}, "steps": [{"id": "a", "shell": "true"}]},
        "status": {
            "phase": phase,
            "run": {"id": run, "generation": run_generation},
            "startedAt": "2026-12-03T10:00:00Z",
            "finishedAt": "2026-12-03T10:00:42Z",
            "failedStep": None,
            "report": {
                "planId": name,
                "completed": phase == "Succeeded",
                "steps": [{"stepId": "a", "status": "success", "output": "tail"}],
                "records": 1,
                "stepsOmitted": 0,
            },
            **({"archived": archived_run} if archived_run else {}),
            **status,
        },
    }


def test_a_finished_run_is_pending_until_its_status_says_it_is_archived():
    assert pending_run(plan()) == "abc123"
    assert not archived(plan())
    done = plan(archived_run="abc123")
    assert pending_run(done) is None
    assert archived(done)


def test_a_rerun_is_pending_again_though_an_earlier_run_was_archived():
    assert pending_run(plan(run="new", archived_run="old")) == "new"


@pytest.mark.parametrize("phase", ["Running", "Pending", "Invalid", None])
def test_a_run_not_finished_is_never_archived(phase: str | None):
    p = plan(phase=phase or "")
    if phase is None:
        del p["status"]
    assert pending_run(p) is None
    assert not archived(p)


def test_the_row_holds_spec_inputs_owner_labels_capsule_and_timings():
    r = row(plan())
    assert (r.plan_uid, r.run_id, r.namespace, r.name) == ("uid-p", "abc123", "team", "p")
    assert r.phase == "Succeeded"
    assert r.capsule == "builders"
    assert r.inputs == {"n": 3}
    assert r.spec is not None and r.spec["steps"] == [{"id": "a", "shell": "true"}]
    assert r.spec_digest == spec_digest(r.spec)
    assert r.labels == {"app": "x"}
    assert r.duration_seconds == 42.0
    assert r.finished_at is not None and r.started_at is not None
    assert r.finished_at - r.started_at == 42.0
    assert r.report["steps"] == [{"stepId": "a", "status": "success", "output": "tail"}]


def test_the_row_takes_every_record_from_the_report_objects_when_given():
    records = [{"stepId": f"s{i}", "status": "success", "output": "full"} for i in range(7)]
    r = row(plan(), records)
    assert r.report["steps"] == records
    assert r.report["stepsOmitted"] == 0
    assert r.report["planId"] == "p"


def test_a_spec_changed_after_the_run_started_is_not_recorded_as_the_runs():
    r = row(plan(generation=2, run_generation=1))
    assert r.spec is None and r.spec_digest is None and r.inputs is None
    # a run of another generation that recorded no Capsule (an older operator's): unknown,
    # rather than the Plan's Capsule now, which may not be the one it ran under
    assert r.capsule is None


def test_the_row_names_the_capsule_the_run_ran_under_not_the_plans_now():
    """The run started on `builders`; the Plan was switched to `other` (a new generation) before
    its row was written: the row says `builders`, as the run's status recorded it."""
    p = plan(generation=2, run_generation=1)
    p["status"]["run"]["capsule"] = "builders"
    p["spec"]["capsule"] = "other"
    assert row(p).capsule == "builders"
    same = plan()
    same["status"]["run"]["capsule"] = "builders"
    assert row(same).capsule == "builders"


def test_the_digest_is_the_same_for_equal_specs_whatever_the_key_order():
    assert spec_digest({"a": 1, "b": [1, {"x": 2, "y": 3}]}) == spec_digest(
        {"b": [1, {"y": 3, "x": 2}], "a": 1}
    )
    assert spec_digest({"a": 1}) != spec_digest({"a": 2})
    assert spec_digest({"a": 1}).startswith("sha256:")


def test_the_creator_is_the_schedule_when_the_cluster_says_so_and_the_capsule_defaults():
    p = plan()
    p["metadata"].setdefault("labels", {})[LABEL_SCHEDULED_BY] = "nightly"  # (and its full value)
    p["metadata"]["annotations"][LABEL_SCHEDULED_BY] = "nightly"
    del p["spec"]["capsule"]
    r = row(p)
    assert r.created_by == "scheduledplan/nightly"
    assert r.capsule == "default"
    assert row(plan()).created_by is None


def test_a_run_not_finished_has_no_row():
    with pytest.raises(ValueError, match="no finished run"):
        row(plan(phase="Running"))


def _archiver(capacity: int = 10) -> tuple[Archiver, WatchCache]:
    cache = WatchCache()

    async def no_database() -> Any:
        raise AssertionError("offer and sweep never touch the database")

    return Archiver(no_database, FakeKube(), cache, capacity=capacity), cache


def test_offer_queues_each_finished_run_once_and_nothing_else():
    a, _ = _archiver()
    assert a.offer(plan("one"))
    assert a.offer(plan("one"))  # the same key: still one entry
    assert not a.offer(plan("busy", phase="Running"))
    assert not a.offer(plan("done", archived_run="abc123"))
    assert list(a.queue) == [("team", "one")]


def test_a_full_queue_counts_what_it_did_not_take_and_the_sweep_finds_it_again():
    a, cache = _archiver(capacity=2)
    for n in ("a", "b", "c"):
        cache.seen("ADDED", plan(n))
    before = metrics.archive_overflow._value.get()
    assert [a.offer(cache.get("team", n) or {}) for n in ("a", "b", "c")] == [True, True, False]
    assert metrics.archive_overflow._value.get() == before + 1
    assert len(a.queue) == 2
    a.queue.clear()  # written meanwhile, and their statuses seen
    for n in ("a", "b"):
        done = plan(n, archived_run="abc123")
        done["metadata"]["resourceVersion"] = "2"
        cache.seen("MODIFIED", done)
    assert a.sweep() == 1  # the third, which the full queue never took
    assert list(a.queue) == [("team", "c")]


def test_the_sweep_skips_runs_already_archived():
    a, cache = _archiver()
    cache.seen("ADDED", plan("x", archived_run="abc123"))
    cache.seen("ADDED", copy.deepcopy(plan("y")))
    assert a.sweep() == 1
    assert list(a.queue) == [("team", "y")]


def test_the_operator_refuses_archive_without_a_dsn(monkeypatch: pytest.MonkeyPatch, capsys):
    from planops.main import main  # noqa: PLC0415

    monkeypatch.delenv("PLANOPS_ARCHIVE_DSN", raising=False)
    with pytest.raises(SystemExit) as e:
        main(["--archive"], run=lambda **_: None)
    assert e.value.code == 2
    assert "PLANOPS_ARCHIVE_DSN" in capsys.readouterr().err
