"""What planops creates is accepted by the API server whatever the names: every label value fits
Kubernetes' rule (63 characters, label syntax), the full values are in annotations, and every
selector still matches what it selects."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest

from planops.api import PlanSpec, Step
from planops.api.names import (
    ANNOTATION_STEP_ID,
    LABEL_PARENT,
    LABEL_PLAN,
    LABEL_SCHEDULED_BY,
    LABEL_STEP,
)
from planops.engine import Dispatch, Run
from planops.engine.schedule import ScheduleSpec, run_name
from planops.kube import events, manifests
from planops.kube.manifests import PlanRef, full_value, label_value
from planops.reconciler.run import asks
from planops.reconciler.schedules import decide

from .helpers import capsule

LABEL_SYNTAX = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?")
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
#: an object name at its longest: 253 characters, DNS subdomain
LONG_PLAN = ".".join(["a" * 62 + str(n) for n in range(4)])[:252] + "z"
LONG_ID = "s" * 63  # the longest step id the schema allows


def valid_label(value: str) -> bool:
    return len(value) <= 63 and LABEL_SYNTAX.fullmatch(value) is not None


def valid_key(key: str) -> bool:
    """A label or annotation key: an optional DNS prefix and a name part of label syntax."""
    prefix, _, name = key.rpartition("/")
    return bool(name) and valid_label(name) and len(prefix) <= 253


def labels_of(obj: dict[str, Any]) -> list[dict[str, str]]:
    found = [obj["metadata"].get("labels") or {}]
    template = obj.get("spec", {}).get("template")
    if template is not None:
        found.append(template["metadata"].get("labels") or {})
    return found


def matches(selector: str, labels: dict[str, str]) -> bool:
    """A label selector of `k=v` and `k!=v` terms (the forms planops builds)."""
    for term in selector.split(","):
        if "!=" in term:
            key, value = term.split("!=")
            if labels.get(key) == value:
                return False
        else:
            key, value = term.split("=")
            if labels.get(key) != value:
                return False
    return True


def body_dispatches() -> list[Dispatch]:
    """A map over three items whose body step has the longest id: qualified, the ids are
    `<63 chars>.<index>.<63 chars>` (129 characters)."""
    spec = PlanSpec.model_validate(
        {
            "steps": [
                {
                    "id": LONG_ID,
                    "map": {
                        "over": [1, 2, 3],
                        "concurrency": 3,
                        "do": [{"id": "b" * 63, "tool": "notes", "input": {"n": "{{item}}"}}],
                    },
                }
            ]
        }
    )
    dispatches = Run(LONG_PLAN, spec).decide(0.0).dispatch
    assert dispatches and all(len(d.step.id) > 63 for d in dispatches)
    return list(dispatches)


REF = PlanRef("ns", LONG_PLAN, "uid-1", "0123456789", depth=1)


def test_every_label_of_a_job_a_child_plan_and_a_claim_is_valid_for_the_longest_names():
    (tool, *_) = body_dispatches()
    objects = [
        manifests.job(REF, tool, capsule(), "busybox", timeout_seconds=60, workspace_claim="c"),
        manifests.child_plan(REF, tool._replace(kind="capsule", input="go"), "child", {}),
        manifests.workspace_claim(REF, "1Gi", None),
    ]
    for obj in objects:
        assert DNS_LABEL.fullmatch(obj["metadata"]["name"]) and len(obj["metadata"]["name"]) <= 63
        for labels in labels_of(obj):
            bad = {k: v for k, v in labels.items() if not (valid_key(k) and valid_label(v))}
            assert bad == {}, obj["kind"]
        for key in obj["metadata"].get("annotations") or {}:
            assert valid_key(key)


def test_the_annotations_always_carry_the_full_names():
    (tool, *_) = body_dispatches()
    job = manifests.job(REF, tool, capsule(), "busybox", timeout_seconds=60)
    for meta in (job["metadata"], job["spec"]["template"]["metadata"]):  # the pod gets them too
        assert meta["annotations"][ANNOTATION_STEP_ID] == tool.step.id
        assert full_value(meta, LABEL_PLAN) == LONG_PLAN
        assert full_value(meta, LABEL_STEP) == tool.step.id
    capsule_step = tool._replace(kind="capsule", input="go")
    child = manifests.child_plan(REF, capsule_step, "child", {"steps": []})
    assert full_value(child["metadata"], LABEL_PARENT) == LONG_PLAN
    assert full_value(child["metadata"], LABEL_STEP) == tool.step.id
    claim = manifests.workspace_claim(REF, "1Gi", None)
    assert full_value(claim["metadata"], LABEL_PLAN) == LONG_PLAN


def test_full_value_falls_back_to_the_label_for_objects_made_before():
    assert full_value({"labels": {LABEL_PLAN: "old"}}, LABEL_PLAN) == "old"
    assert full_value({"labels": {LABEL_STEP: "a"}, "annotations": None}, LABEL_STEP) == "a"
    assert full_value({"labels": None}, LABEL_PLAN) is None
    assert full_value({}, LABEL_PARENT) is None


def test_two_long_ids_get_different_labels_and_each_always_the_same():
    ids = {d.step.id for d in body_dispatches()}
    assert len(ids) == 3  # three items: scan.0.b..., scan.1.b..., scan.2.b...
    labels = {label_value(i) for i in ids}
    assert len(labels) == 3 and all(valid_label(v) for v in labels)
    assert {label_value(i) for i in ids} == labels  # deterministic
    assert all(v.startswith("s" * 20) for v in labels)  # a readable prefix
    a, b = "x" * 100 + "1", "x" * 100 + "2"
    assert label_value(a) != label_value(b)


@pytest.mark.parametrize("value", ["build", "scan.3.probe", "A_b-c.d", "x" * 63, "a"])
def test_a_value_that_is_a_label_already_is_kept_as_it_is(value):
    """Objects made before keep matching (kubectl -l planops.dev/plan=NAME in the docs)."""
    assert label_value(value) == value


@pytest.mark.parametrize("value", ["_x", "x-", "-", "_", "x" * 64, "é", "a b", "a\x00b", "\udc80"])
def test_a_value_that_is_no_label_becomes_a_valid_one(value):
    assert valid_label(label_value(value))
    assert label_value(value) != ""


def test_the_selectors_match_what_they_select():
    (tool, *_) = body_dispatches()
    job = manifests.job(REF, tool, capsule(), "busybox", timeout_seconds=60)
    pod_labels = job["spec"]["template"]["metadata"]["labels"]
    assert matches(REF.selector(), job["metadata"]["labels"])
    assert matches(REF.selector(), pod_labels)
    assert not matches(REF.other_runs_selector(), pod_labels)
    other_run = PlanRef("ns", LONG_PLAN, "uid-1", "9999999999")
    assert matches(other_run.other_runs_selector(), pod_labels)
    assert matches(manifests.step_selector(LONG_PLAN, tool.step.id), pod_labels)
    assert matches(manifests.step_selector(LONG_PLAN, tool.step.id, 1), pod_labels)
    assert not matches(manifests.step_selector(LONG_PLAN, tool.step.id, 2), pod_labels)
    claim = manifests.workspace_claim(REF, "1Gi", None)
    assert matches(REF.selector(), claim["metadata"]["labels"])
    child = manifests.child_plan(REF, tool._replace(kind="capsule"), "child", {"steps": []})
    assert matches(REF.children_selector(), child["metadata"]["labels"])
    assert matches(other_run.other_runs_children_selector(), child["metadata"]["labels"])


def test_a_scheduled_run_of_a_long_scheduled_plan_has_valid_labels_and_names():
    long_name = "n" * 200 + "." + "m" * 52
    owner = {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "ScheduledPlan",
        "metadata": {"name": long_name, "uid": "u"},
    }
    from planops.api.schedule_models import ScheduledPlanSpec  # noqa: PLC0415

    spec = ScheduledPlanSpec.model_validate(
        {"schedule": "* * * * *", "planTemplate": {"spec": {"steps": []}}}
    )
    at = datetime(2024, 1, 1, tzinfo=UTC)
    sched = ScheduleSpec(spec.schedule, None, None, "Allow", False)
    where = decide.Where(owner, "ns", False, spec, sched, at)
    run = decide.run_body(where, run_name(long_name, at), at)
    labels = run["metadata"]["labels"]
    assert all(valid_label(v) for v in labels.values())
    assert full_value(run["metadata"], LABEL_SCHEDULED_BY) == long_name
    assert matches(f"{LABEL_SCHEDULED_BY}={label_value(long_name)}", labels)


@pytest.mark.parametrize("name", ["a" * 51 + ".b", "a" * 51 + "-b", "a" * 52])
def test_a_scheduled_runs_name_is_an_object_name_wherever_the_cut_falls(name):
    made = run_name(name, datetime(2024, 1, 1, tzinfo=UTC))
    assert len(made) <= 63
    assert all(DNS_LABEL.fullmatch(part) for part in made.split("."))


def test_an_events_name_is_an_object_name_wherever_the_cut_falls():
    plan = {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": {"name": "a" * 199 + ".b" * 27, "namespace": "ns", "uid": "u"},
    }
    name = events.event(plan, "PlanStarted", "m")["metadata"]["name"]
    assert all(DNS_LABEL.fullmatch(part) for part in name.split("."))


def test_the_answer_to_a_long_body_ask_is_a_valid_annotation_read_back_by_the_reconciler():
    step_id = f"{LONG_ID}.12.{'q' * 63}"
    key = manifests.answer_annotation(step_id)
    assert valid_key(key)
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    waiting = asks.Waiting(
        step_id, 1, {"prompt": "?", "outputSchema": schema}, 0.0, 100.0, question="q1"
    )
    given = {key: json.dumps({"run": "r", "question": "q1", "answer": {"ok": True}})}
    outcome = asks.judge(waiting, given, "r", 1.0)
    assert isinstance(outcome, asks.Outcome) and outcome.status == "success"


def test_the_handlers_find_the_full_plan_name_of_a_job_and_its_pod():
    """The kopf handlers queue a Plan by name: from the annotation, not the shortened label."""
    (tool, *_) = body_dispatches()
    job = manifests.job(REF, tool, capsule(), "busybox", timeout_seconds=60)
    assert job["metadata"]["labels"][LABEL_PLAN] != LONG_PLAN
    assert full_value(job["metadata"], LABEL_PLAN) == LONG_PLAN
    assert full_value(job["spec"]["template"]["metadata"], LABEL_PLAN) == LONG_PLAN


def test_step_ids_that_are_no_labels_get_a_job_the_api_server_accepts():
    """`_x` and `x-` are valid step ids (the schema's pattern) but no label values."""
    for step_id in ("_x", "x-", "x_"):
        step = Step.model_validate({"id": step_id, "shell": "true"})
        job = manifests.job(
            REF, Dispatch(step, 1, "shell", None, ["true"]), capsule(), "b", timeout_seconds=1
        )
        assert all(valid_label(v) for v in job["metadata"]["labels"].values())
        assert full_value(job["metadata"], LABEL_STEP) == step_id


def test_the_reconciler_finds_a_child_plans_full_step_id():
    """Child Plans now carry the step-id annotation (observe prefers it to the label)."""
    from planops.reconciler.run.observe import child_attempt  # noqa: PLC0415

    (tool, *_) = body_dispatches()
    child = manifests.child_plan(REF, tool._replace(kind="capsule"), "child", {"steps": []})
    child["metadata"]["creationTimestamp"] = "2024-01-01T00:00:00Z"
    observed = child_attempt(child)
    assert observed is not None and observed.step_id == tool.step.id
