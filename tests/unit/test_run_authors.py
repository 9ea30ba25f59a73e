"""A revoked Capsule `use` stops the runs the operator starts on an author's behalf: the decision
(planops.reconciler.run.authors) and its two callers, a ScheduledPlan's due run and a Plan's re-run,
against an in-memory API whose access review answers as told. The admission policy that records
the author, and the real SubjectAccessReview, are tested on the cluster
(tests/e2e/test_tenancy.py)."""

from __future__ import annotations

import asyncio
import copy
import json
from datetime import UTC, datetime
from typing import Any

import pytest

from planops.api.names import ANNOTATION_AUTHOR, ANNOTATION_RERUN
from planops.engine import schedule
from planops.kube.manifests import run_id
from planops.reconciler import ScheduleReconciler
from planops.reconciler.reconcile import Reconciler
from planops.reconciler.run import authors

from .fakekube import FakeKube

ALICE = json.dumps({"username": "alice", "groups": ["team-a", "system:authenticated"]})
T0 = 1_800_000_000.0  # a whole minute (divisible by 60)


SAFE = {"image": "busybox:1", "shell": {"allow": ["echo"]}, "spawn": {"allow": ["worker"]}}
WORKER = {**SAFE, "plan": {"steps": [{"id": "w", "shell": "echo"}]}}


def _api(obj: dict[str, Any], allowed: bool) -> FakeKube:
    """The API server holding `obj` (a Plan or a ScheduledPlan in team-a, uid u-1) and the
    Capsules it names, whose access review answers `allowed` for alice."""
    api = FakeKube()
    kind = {"Plan": "plan", "ScheduledPlan": "scheduledplan"}[obj["kind"]]
    api.put(kind, copy.deepcopy(obj))  # the test's own stays as it wrote it
    for name, spec in (("safe", SAFE), ("worker", WORKER), ("default", SAFE)):
        api.put("capsule", {"metadata": {"name": name, "namespace": "team-a"}, "spec": spec})
    if not allowed:
        api.use_denied |= {("team-a", c, "alice") for c in ("safe", "default", "worker")}
    return api


def _created(api: FakeKube) -> list[dict[str, Any]]:
    """The Jobs and Plans the operator created (not the object the test put there: u-1)."""
    return [
        o
        for (kind, _, _), o in api.objects.items()
        if kind == "job" or (kind == "plan" and o["metadata"]["uid"] != "u-1")
    ]


def _meta(author: str | None, **annotations: str) -> dict[str, Any]:
    notes = {**annotations, **({ANNOTATION_AUTHOR: author} if author is not None else {})}
    return {"name": "nightly", "namespace": "team-a", "uid": "u-1", "annotations": notes}


# -- the record and the decision ------------------------------------------------------------------


_Checked = tuple[authors.Refusal | None, FakeKube]


def _refusal(obj: dict[str, Any], allowed: bool, required: bool = False) -> _Checked:
    """The check a reconcile makes before a run for `obj`'s author under Capsule `safe`: the
    record read (run.authors), the API server asked (a SubjectAccessReview)."""
    api = _api(obj, allowed)
    check = Reconciler(api, require_author=required)._author
    return asyncio.run(check(obj, "team-a", "safe")), api


def test_the_recorded_author_is_read_with_their_groups():
    got = authors.recorded_author(_meta(ALICE))
    assert got == authors.Author("alice", ("team-a", "system:authenticated"))
    assert authors.recorded_author(_meta(None)) is None


@pytest.mark.parametrize(
    "raw",
    [
        "alice",  # not JSON
        '{"username": "alice"}',  # no groups
        '{"username": "", "groups": []}',
        '{"username": "alice", "groups": "team-a"}',
        '{"username": "alice", "groups": [1]}',
        '["alice"]',
        '{"username": "al\x01ice", "groups": []}',  # a control character (the policy's escape)
    ],
)
def test_an_author_record_that_is_not_the_policys_is_refused_without_asking(raw: str):
    refused, api = _refusal({"kind": "ScheduledPlan", "metadata": _meta(raw)}, allowed=True)
    assert refused is not None and "cannot be read" in refused.why
    assert refused.reason == authors.REASON
    assert api.reviews == []


def test_an_author_who_may_still_use_the_capsule_is_not_refused():
    refused, api = _refusal({"kind": "ScheduledPlan", "metadata": _meta(ALICE)}, allowed=True)
    assert refused is None
    assert api.reviews == [("team-a", "safe", "alice", ["team-a", "system:authenticated"])]


def test_an_author_who_lost_use_is_refused_with_the_reason():
    refused, _ = _refusal({"kind": "ScheduledPlan", "metadata": _meta(ALICE)}, allowed=False)
    assert refused is not None and refused.reason == authors.REASON
    assert "alice, who last changed what this ScheduledPlan does" in refused.why
    assert "may no longer use Capsule safe in namespace team-a" in refused.why


def test_nothing_recorded_means_nothing_checked():
    """Where the chart's policies are not installed, `use` is not enforced at all."""
    obj = {"kind": "ScheduledPlan", "metadata": _meta(None)}
    refused, api = _refusal(obj, allowed=False)
    assert refused is None and api.reviews == []
    unknown, api = _refusal(obj, allowed=False, required=True)  # where the chart records authors
    assert unknown is not None and unknown.reason == authors.UNKNOWN and api.reviews == []


# -- a ScheduledPlan's due run ----------------------------------------------------------------


def _scheduled(author: str | None) -> dict[str, Any]:
    meta = {**_meta(author), "creationTimestamp": "2027-01-15T07:59:30Z", "generation": 1}
    return {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "ScheduledPlan",
        "metadata": meta,
        "spec": {
            "schedule": "* * * * *",
            "planTemplate": {"spec": {"capsule": "safe", "steps": [{"id": "a", "shell": "echo"}]}},
        },
    }


def _schedule(author: str | None, allowed: bool) -> FakeKube:
    api = _api(_scheduled(author), allowed)
    reconciler = ScheduleReconciler(api, clock=lambda: T0 + 1, budget=None)
    asyncio.run(reconciler.reconcile("scheduledplans", "team-a", "nightly"))
    return api


def _authorized(status: dict[str, Any]) -> list[dict[str, Any]]:
    return [c for c in status["conditions"] if c["type"] == "Authorized"]


def test_a_due_run_is_not_created_when_its_author_lost_use():
    api = _schedule(ALICE, allowed=False)
    assert _created(api) == []
    assert api.reviews == [("team-a", "safe", "alice", ["team-a", "system:authenticated"])]
    (status,) = api.statuses
    (cond,) = _authorized(status)
    assert (cond["status"], cond["reason"]) == ("False", "UseRevoked")
    assert "alice" in cond["message"] and "Capsule safe" in cond["message"]
    assert status["activeCount"] == 0 and status["lastScheduleTime"]  # the time is spent
    (event,) = api.events
    assert event["reason"] == "UseRevoked" and event["type"] == "Warning"
    assert "not started" in event["message"]


def test_a_due_run_is_created_when_its_author_still_may():
    api = _schedule(ALICE, allowed=True)
    (run,) = _created(api)
    assert run["kind"] == "Plan" and run["spec"]["capsule"] == "safe"
    (cond,) = _authorized(api.statuses[0])
    assert (cond["status"], cond["reason"]) == ("True", "AuthorMayUse")
    assert [e["reason"] for e in api.events] == ["RunStarted"]


def test_a_scheduled_plan_with_no_author_record_runs_unchecked():
    api = _schedule(None, allowed=False)
    assert len(_created(api)) == 1 and api.reviews == []
    assert _authorized(api.statuses[0]) == []


def test_where_authors_are_recorded_a_scheduled_plan_without_a_record_gets_no_run():
    """Written before the chart recorded authors (an upgrade): nobody can say who may run it,
    so it is refused until someone who may use the Capsule touches it, and told how."""
    api = _api(_scheduled(None), allowed=True)
    reconciler = ScheduleReconciler(api, clock=lambda: T0 + 1, budget=None, require_author=True)
    asyncio.run(reconciler.reconcile("scheduledplans", "team-a", "nightly"))
    assert _created(api) == [] and api.reviews == []
    (cond,) = _authorized(api.statuses[0])
    assert (cond["status"], cond["reason"]) == ("False", "AuthorUnknown")
    assert "has no author record" in cond["message"]
    assert "kubectl annotate scheduledplan nightly planops.dev/touched=" in cond["message"]
    (event,) = api.events
    assert (event["reason"], event["type"]) == ("AuthorUnknown", "Warning")


def _cluster_scheduled(author: str | None) -> dict[str, Any]:
    obj = _scheduled(author)
    obj["kind"] = "ClusterScheduledPlan"
    obj["metadata"].pop("namespace")
    obj["spec"]["namespaceSelector"] = {"matchLabels": {"tenant": "yes"}}
    since = {"since": "2027-01-15T07:59:30Z"}  # seen in both namespaces before the due time
    obj["status"] = {"namespaces": {"team-a": since, "team-b": since}}
    return obj


def _cluster_api() -> FakeKube:
    """The API server with alice's ClusterScheduledPlan over two tenant namespaces, each with
    Capsule `safe`; alice may use it in `team-b` only."""
    api = FakeKube()
    api.put("clusterscheduledplan", _cluster_scheduled(ALICE))
    for ns in ("team-a", "team-b"):
        api.put("namespace", {"metadata": {"name": ns, "labels": {"tenant": "yes"}}})
        api.put("capsule", {"metadata": {"name": "safe", "namespace": ns}, "spec": SAFE})
    api.use_denied.add(("team-a", "safe", "alice"))
    return api


def test_a_cluster_scheduled_plans_runs_are_checked_in_each_namespace_for_its_author():
    api = _cluster_api()
    reconciler = ScheduleReconciler(api, clock=lambda: T0 + 1, budget=None)
    asyncio.run(reconciler.reconcile("clusterscheduledplans", "", "nightly"))
    created = [o for (kind, _, _), o in api.objects.items() if kind == "plan"]
    assert [(r[0], r[1], r[2]) for r in api.reviews] == [
        ("team-a", "safe", "alice"),
        ("team-b", "safe", "alice"),
    ]
    assert [b["metadata"]["namespace"] for b in created] == ["team-b"]
    (cond,) = _authorized(api.statuses[0])
    assert (cond["status"], cond["reason"]) == ("False", "UseRevoked")
    assert "namespace team-a" in cond["message"]  # a refusal, though the last one was allowed
    assert "UseRevoked" in [e["reason"] for e in api.events]


# -- a Plan's re-run ------------------------------------------------------------------------------


def _plan(author: str | None, rerun: str | None) -> dict[str, Any]:
    notes = {ANNOTATION_RERUN: rerun} if rerun else {}
    meta = {**_meta(author, **notes), "name": "p", "generation": 1}
    return {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": meta,
        "spec": {"capsule": "safe", "steps": [{"id": "a", "shell": "echo hi"}]},
    }


def _rerun(author: str | None, rerun: str | None, allowed: bool) -> FakeKube:
    api = _api(_plan(author, rerun), allowed)
    reconciler = Reconciler(api, clock=lambda: T0)
    asyncio.run(reconciler.reconcile("team-a", "p"))
    return api


def test_a_rerun_is_not_started_when_the_plans_author_lost_use():
    api = _rerun(ALICE, "again", allowed=False)
    assert _created(api) == []  # no Job
    assert api.reviews == [("team-a", "safe", "alice", ["team-a", "system:authenticated"])]
    (status,) = api.statuses
    assert status["phase"] == "Failed" and status["run"]["rerun"] == "again"
    (cond,) = status["conditions"]
    assert (cond["type"], cond["status"], cond["reason"]) == ("Succeeded", "False", "UseRevoked")
    assert "alice" in cond["message"]
    assert [e["reason"] for e in api.events] == ["UseRevoked"]


def test_where_authors_are_recorded_a_rerun_of_a_plan_without_a_record_is_refused():
    api = _api(_plan(None, "again"), allowed=True)
    reconciler = Reconciler(api, clock=lambda: T0, require_author=True)
    asyncio.run(reconciler.reconcile("team-a", "p"))
    assert _created(api) == [] and api.reviews == []
    (status,) = api.statuses
    (cond,) = status["conditions"]
    assert (status["phase"], cond["reason"]) == ("Failed", "AuthorUnknown")
    assert "kubectl annotate plan p planops.dev/touched=" in cond["message"]
    assert [e["reason"] for e in api.events] == ["AuthorUnknown"]


def test_a_rerun_starts_when_the_author_still_may():
    api = _rerun(ALICE, "again", allowed=True)
    assert [b["kind"] for b in _created(api)] == ["Job"]
    assert api.statuses[-1]["phase"] == "Running"


def test_a_first_run_is_not_asked_about_again():
    """Creating or changing the Plan was the author's act, checked by the API server then."""
    api = _rerun(ALICE, None, allowed=False)
    assert api.reviews == [] and [b["kind"] for b in _created(api)] == ["Job"]


def _again(obj: dict[str, Any], allowed: bool) -> FakeKube:
    api = _api(obj, allowed)
    asyncio.run(Reconciler(api, clock=lambda: T0 + 60).reconcile("team-a", "p"))
    return api


@pytest.mark.parametrize("after", [None, ""], ids=["removed", "emptied"])
def test_taking_the_rerun_annotation_away_starts_no_unchecked_run(after: str | None):
    """After a refused re-run, removing (or emptying) the annotation names the first run's id
    again: a run started later on the author's behalf all the same, so it is asked about."""
    refused = _rerun(ALICE, "again", allowed=False).statuses[-1]
    obj = _plan(ALICE, after)
    obj["status"] = refused
    api = _again(obj, allowed=False)
    assert _created(api) == []  # no Job
    assert [r[2] for r in api.reviews] == ["alice"]
    assert api.statuses[-1]["phase"] == "Failed"
    assert [e["reason"] for e in api.events] == ["UseRevoked"]
    assert [b["kind"] for b in _created(_again(obj, allowed=True))] == ["Job"]


def test_a_run_that_waited_as_invalid_is_asked_about_when_it_starts():
    """A Plan that was Invalid (its Capsule missing) starts later, when the Capsule appears: on
    its author's behalf, so their `use` is asked then."""
    obj = _plan(ALICE, None)
    rid = run_id("u-1", 1, 1)
    obj["status"] = {"phase": "Invalid", "run": {"id": rid, "generation": 1}, "conditions": []}
    api = _again(obj, allowed=False)
    assert _created(api) == [] and [r[2] for r in api.reviews] == ["alice"]
    assert api.statuses[-1]["phase"] == "Failed"
    assert [b["kind"] for b in _created(_again(obj, allowed=True))] == ["Job"]


def test_a_new_generation_is_its_authors_act_and_not_asked_about():
    refused = _rerun(ALICE, "again", allowed=False).statuses[-1]
    obj = _plan(ALICE, None)
    obj["metadata"]["generation"] = 2  # the author changed the spec: the API server checked them
    obj["status"] = refused
    api = _again(obj, allowed=False)
    assert api.reviews == [] and [b["kind"] for b in _created(api)] == ["Job"]


def test_between_due_runs_the_last_check_stays_in_the_status():
    obj = _scheduled(ALICE)
    refused = {"type": "Authorized", "status": "False", "reason": "UseRevoked", "message": "m"}
    obj["status"] = {"lastScheduleTime": "2027-01-15T08:00:00Z", "conditions": [refused]}
    api = _api(obj, allowed=True)
    reconciler = ScheduleReconciler(api, clock=lambda: T0 + 30, budget=None)
    asyncio.run(reconciler.reconcile("scheduledplans", "team-a", "nightly"))
    assert api.reviews == [] and _created(api) == []  # nothing due: nothing asked
    assert _authorized(api.statuses[0]) == [refused]


# -- a scheduled run's name taken in advance -----------------------------------------------------


def _squatted(controller_uid: str) -> FakeKube:
    """The due run's name is taken: by a Plan of another controller, or by our own run."""
    api = _api(_scheduled(None), allowed=True)
    name = schedule.run_name("nightly", datetime.fromtimestamp(T0, UTC))
    owner = {"apiVersion": "planops.dev/v1alpha1", "kind": "ScheduledPlan", "name": "nightly"}
    owner |= {"uid": controller_uid, "controller": True}
    api.put("plan", {"metadata": {"name": name, "namespace": "team-a", "ownerReferences": [owner]}})
    return api


def _due(api: FakeKube) -> dict[str, Any]:
    reconciler = ScheduleReconciler(api, clock=lambda: T0 + 1, budget=None)
    asyncio.run(reconciler.reconcile("scheduledplans", "team-a", "nightly"))
    return api.statuses[-1]


def test_a_scheduled_runs_name_taken_by_another_plan_is_no_run_of_ours():
    api = _squatted("u-squatter")
    status = _due(api)
    assert status["activeCount"] == 0 and status["lastScheduleTime"]  # the time is spent
    (event,) = api.events
    assert (event["reason"], event["type"]) == ("RunNameTaken", "Warning")
    assert "is not this schedule's" in event["message"]


def test_a_scheduled_run_made_before_a_restart_is_adopted():
    api = _squatted("u-1")  # the ScheduledPlan's own uid: our run, created before a restart
    assert _due(api)["activeCount"] == 1 and api.events == []


# -- the Plans the operator creates carry their owner's author --------------------------------


def test_a_scheduled_run_carries_its_schedules_author():
    (run,) = _created(_schedule(ALICE, allowed=True))
    assert run["metadata"]["annotations"][ANNOTATION_AUTHOR] == ALICE
    (unrecorded,) = _created(_schedule(None, allowed=True))
    assert ANNOTATION_AUTHOR not in unrecorded["metadata"]["annotations"]


def test_a_child_plan_carries_its_parents_author():
    obj = _plan(ALICE, None)
    obj["spec"]["steps"] = [{"id": "delegate", "capsule": "worker", "input": "do it"}]
    api = _api(obj, allowed=True)
    asyncio.run(Reconciler(api, clock=lambda: T0).reconcile("team-a", "p"))
    (child,) = _created(api)
    assert child["kind"] == "Plan" and child["spec"]["capsule"] == "worker"
    assert child["metadata"]["annotations"][ANNOTATION_AUTHOR] == ALICE
