"""The admission webhook covers ScheduledPlans and ClusterScheduledPlans with the same judgement
as their reconciler: a schedule that cannot be used, or a run template the one validator refuses,
is refused at `kubectl apply`; a missing Capsule is admitted, as for a Plan."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from planops.handlers import kopf_adapter, webhook
from planops.handlers.kopf_adapter import kopf
from planops.reconciler import Reconciler, ScheduleReconciler

from .fakekube import FakeKube

CAPSULE = {"spec": {"shell": {"allow": ["echo"]}}}


def _api() -> FakeKube:
    """What judging reads: each namespace's Capsule (none in `empty`)."""
    kube = FakeKube()
    for ns in ("team-a", "ns", "default", "team-b"):
        kube.put("capsule", {"metadata": {"name": "default", "namespace": ns}, **CAPSULE})
    return kube


def scheduled(kind: str = "ScheduledPlan", schedule: str = "*/5 * * * *", **template: Any):
    spec: dict[str, Any] = {
        "schedule": schedule,
        "planTemplate": {"spec": {"steps": [{"id": "a", "shell": "echo hi"}], **template}},
    }
    if kind == "ClusterScheduledPlan":
        spec["namespaceSelector"] = {"matchLabels": {"team": "a"}}
    meta = {"name": "nightly"} | ({"namespace": "team-a"} if kind == "ScheduledPlan" else {})
    return {"apiVersion": "planops.dev/v1alpha1", "kind": kind, "metadata": meta, "spec": spec}


def judge(obj: dict[str, Any], namespace: str | None = None) -> list[str]:
    plural = obj["kind"].lower() + "s"
    if namespace is not None:
        obj["metadata"]["namespace"] = namespace
    return asyncio.run(ScheduleReconciler(_api()).judge(plural, obj))


CYCLE = [
    {"id": "a", "shell": "echo", "dependsOn": ["b"]},
    {"id": "b", "shell": "echo", "dependsOn": ["a"]},
]


@pytest.mark.parametrize("kind", ["ScheduledPlan", "ClusterScheduledPlan"])
def test_a_good_scheduled_plan_is_admitted(kind):
    assert judge(scheduled(kind)) == []


@pytest.mark.parametrize("kind", ["ScheduledPlan", "ClusterScheduledPlan"])
def test_a_schedule_that_cannot_be_used_is_refused(kind):
    (error,) = judge(scheduled(kind, schedule="61 * * * *"))
    assert error.startswith("spec.schedule: ")


@pytest.mark.parametrize("kind", ["ScheduledPlan", "ClusterScheduledPlan"])
def test_a_run_template_the_validator_refuses_is_refused(kind):
    errors = judge(scheduled(kind, steps=CYCLE))
    assert any("[cycle]" in e and e.startswith("planTemplate.spec.steps[") for e in errors)


def test_a_scheduled_plans_template_is_judged_with_its_namespaces_capsule():
    errors = judge(scheduled(steps=[{"id": "a", "shell": "rm -rf /"}]))
    assert any("[shell-not-allowed]" in e for e in errors)


def test_a_missing_capsule_is_admitted_as_for_a_plan():
    assert judge(scheduled(), namespace="empty") == []


def test_an_unknown_field_is_refused_naming_the_nearest():
    obj = scheduled()
    obj["spec"]["schedul"] = obj["spec"].pop("schedule")
    errors = judge(obj)
    assert "spec.schedul: unknown field: did you mean `schedule`?" in errors


def webhook_handlers() -> dict[str, Any]:
    """The webhook's handlers by id, registered as main registers them (in the adapter's
    registry)."""
    kopf_adapter.register_webhook()
    return {h.id: h for h in kopf_adapter.REGISTRY._webhooks.get_all_handlers()}


def test_the_webhook_serves_each_kind_on_the_path_the_chart_names():
    handlers = webhook_handlers()
    assert {i: h.selector.any_name for i, h in handlers.items() if h.selector} == {
        "plans": "plans",
        "scheduledplans": "scheduledplans",
        "clusterscheduledplans": "clusterscheduledplans",
    }
    memo = kopf.Memo(operator=kopf.Memo(schedule_judge=ScheduleReconciler(_api())))
    bad = scheduled("ClusterScheduledPlan", schedule="61 * * * *")
    with pytest.raises(kopf.AdmissionError, match="clusterscheduledplan refused, 1 error"):
        asyncio.run(handlers["clusterscheduledplans"].fn(body=bad, memo=memo, operation="CREATE"))
    # an UPDATE that leaves the spec as it was (an annotation) is admitted, as for a Plan
    same = {"operation": "UPDATE", "old": bad}
    assert asyncio.run(handlers["clusterscheduledplans"].fn(body=bad, memo=memo, **same)) is None


def test_the_refusal_lists_every_reason_and_how_to_check_offline():
    error = webhook.refusal("scheduledplan", ["a: one", "b: two"])
    assert "scheduledplan refused, 2 error(s): a: one; b: two" in str(error)
    assert "kubectl plan validate" in str(error)


def test_a_capsule_that_cannot_be_used_refuses_a_plan_and_a_scheduled_plan_alike():
    """The one judge (run.judging): a Capsule that is there but cannot be used (its spec is not
    a Capsule's) is no missing Capsule for either kind: both reconciles refuse with the same
    reason; both webhooks admit it, as they admit a missing one (GitOps applies in any order)."""
    kube = FakeKube()
    broken = {"metadata": {"name": "default", "namespace": "team-a"}, "spec": {"shell": 3}}
    kube.put("capsule", broken)
    kube.put(
        "plan",
        {
            "apiVersion": "planops.dev/v1alpha1",
            "kind": "Plan",
            "metadata": {"name": "p", "namespace": "team-a", "generation": 1},
            "spec": {"steps": [{"id": "a", "shell": "echo hi"}]},
        },
    )
    kube.put("scheduledplan", scheduled())
    asyncio.run(Reconciler(kube).reconcile("team-a", "p"))
    asyncio.run(ScheduleReconciler(kube).reconcile("scheduledplans", "team-a", "nightly"))
    plan = kube.get("plan", "team-a", "p")
    schedule = kube.get("scheduledplan", "team-a", "nightly")
    assert plan is not None and schedule is not None
    [refused] = plan["status"]["errors"]
    assert plan["status"]["phase"] == "Invalid" and refused["code"] == "no-capsule"
    assert refused["message"].startswith("Capsule 'default' cannot be used: ")
    assert schedule["status"]["errors"] == [
        f"planTemplate.spec.capsule: [no-capsule] {refused['message']}"
    ]
    assert schedule["status"]["conditions"][0]["reason"] == "Invalid"
    # the webhooks: admitted, as a missing Capsule is
    plan_webhook = asyncio.run(Reconciler(kube).judge(plan))
    assert [e.code for e in plan_webhook[2]] == ["no-capsule"]  # (the webhook admits this code)
    assert asyncio.run(ScheduleReconciler(kube).judge("scheduledplans", scheduled())) == []
