"""The run and step metrics carry their Plan's tenant (namespace, Capsule), checked on the
in-memory reconcile (tests.unit.harness): the right values, only names an administrator made (a
Capsule that does not exist is never a label value, nor a Plan's name or a step id), and no tenant
labels at all when the operator's flag drops them."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from planops import metrics

from .harness import Cluster

CAPSULE = {"image": "busybox:1", "shell": {"allow": ["true", "sleep"]}}
TENANTED = {m.metric._name for m in metrics.TENANTED}  # the families' names


def value(name: str, **labels: str) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


def samples() -> list[Any]:
    return [s for family in metrics.REGISTRY.collect() for s in family.samples]


@pytest.fixture
def labels_off() -> Iterator[None]:
    metrics.configure(tenant_labels=False)
    yield
    metrics.configure(tenant_labels=True)


def test_a_runs_plan_and_step_metrics_carry_its_namespace_and_capsule():
    c = Cluster({"team-blue": CAPSULE})
    c.new_plan("p", steps=[{"id": "a", "shell": "true"}], capsule="team-blue")
    tenant = {"namespace": "ns", "capsule": "team-blue"}
    plans = value("planops_plans_total", **tenant, result="succeeded")
    steps = value("planops_steps_total", **tenant, kind="shell", status="success")
    durations = value("planops_step_duration_seconds_count", **tenant, kind="shell")
    c.reconcile()
    assert value("planops_steps_running", **tenant) == 1
    c.finish("a", ok=True)
    c.reconcile()
    assert c.status()["phase"] == "Succeeded"
    assert value("planops_steps_running", **tenant) == 0
    assert value("planops_plans_total", **tenant, result="succeeded") == plans + 1
    assert value("planops_steps_total", **tenant, kind="shell", status="success") == steps + 1
    assert value("planops_step_duration_seconds_count", **tenant, kind="shell") == durations + 1
    assert value("planops_plan_duration_seconds_count", **tenant) >= 1


def test_a_capsule_that_does_not_exist_is_never_a_label_value_nor_a_plan_name_or_step_id():
    c = Cluster({"team-blue": CAPSULE})
    free = "authors-free-text-7f3a"
    c.new_plan("plan-name-91c2", steps=[{"id": "step-id-55e1", "shell": "true"}], capsule=free)
    invalid = value("planops_plans_total", namespace="ns", capsule="", result="invalid")
    refused = value(
        "planops_validation_refusals_total", namespace="ns", capsule="", code="no-capsule"
    )
    c.reconcile("plan-name-91c2")
    assert c.status("plan-name-91c2")["phase"] == "Invalid"
    assert value("planops_plans_total", namespace="ns", capsule="", result="invalid") == invalid + 1
    after = value(
        "planops_validation_refusals_total", namespace="ns", capsule="", code="no-capsule"
    )
    assert after == refused + 1
    values = {v for s in samples() for v in s.labels.values()}
    assert not values & {free, "plan-name-91c2", "step-id-55e1"}


def test_plans_waiting_for_a_slot_are_counted_on_their_capsules_queue():
    c = Cluster({"queued": {**CAPSULE, "concurrency": {"maxRunningPlans": 1}}})
    for name, second in (("first", 1), ("second", 2)):
        c.new_plan(name, second, steps=[{"id": "a", "shell": "sleep 100"}], capsule="queued")
    c.reconcile("first", "second")
    tenant = {"namespace": "ns", "capsule": "queued"}
    assert c.status("second")["phase"] == "Pending"
    assert value("planops_plans_waiting", **tenant) == 1
    c.end("a", name="first")
    c.reconcile("first", "second")
    assert c.status("second")["phase"] == "Running"
    assert value("planops_plans_waiting", **tenant) == 0


@pytest.mark.usefixtures("labels_off")
def test_without_tenant_labels_the_run_and_step_metrics_have_none():
    c = Cluster({"default": CAPSULE})
    c.new_plan("p", steps=[{"id": "a", "shell": "true"}])
    c.reconcile()
    assert value("planops_steps_running") == 1
    c.finish("a", ok=True)
    c.reconcile()
    assert value("planops_plans_total", result="succeeded") == 1  # a new family: counted afresh
    assert value("planops_steps_total", kind="shell", status="success") == 1
    assert value("planops_steps_running") == 0
    tenanted = [s for s in samples() if s.name.startswith(tuple(TENANTED))]
    assert tenanted and not any({"namespace", "capsule"} & set(s.labels) for s in tenanted)
