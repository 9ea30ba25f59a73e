"""What a step costs in API requests, counted on the in-memory Kube with the operator's watch
caches fed as the watches would feed them: a change that adds a request to a step's life fails
here, where no timing can hide it. Controller CPU per step beside Argo's is bound by requests
and watch events (docs/performance.md, "Beside Argo Workflows and Tekton"): each request costs
its TLS, HTTP and JSON work in the operator whatever it carries.

The budget of a one-step run: the Job's create, two status writes (the run starts; it ends),
four Events (plan_start, plan_step_start, plan_step, plan_end), and the log read apart as two
streams (stdout, stderr). A chain's step adds a create, a status write, two Events and the two
log reads. Reads of the Plan, its Capsule, the run's Jobs and pods come from the caches."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from planops.api import names
from planops.kube.cache import RunObjects, WatchCache
from planops.kube.errors import ApiError

from .harness import Cluster

CAPSULE = {"image": "busybox:1", "shell": {"allow": ["true"]}}
Obj = dict[str, Any]


class Watched(Cluster):
    """The harness with the operator's caches, fed from the fake's objects before each
    reconcile as the watches would have shown them."""

    def __init__(self, **kw: Any) -> None:
        self.plan_cache, self.capsule_cache = WatchCache(), WatchCache()
        self.run_cache = RunObjects(names.LABEL_PLAN, names.LABEL_RUN)
        super().__init__({"default": CAPSULE}, **kw)
        caches = {"plans": self.plan_cache, "capsules": self.capsule_cache, "runs": self.run_cache}
        self._operator = {**self._operator, **caches}
        self.reconciler = self.operator()

    def watch(self) -> None:
        caches = {"plan": self.plan_cache.seen, "capsule": self.capsule_cache.seen}
        for (kind, _, _), obj in list(self.kube.objects.items()):
            if kind in caches:
                caches[kind]("MODIFIED", obj)
            elif kind in ("job", "pod"):
                self.run_cache.seen(kind, "MODIFIED", obj)

    def requests(self, name: str = "p") -> Counter[str]:
        """Reconcile with the caches current; the requests it made, by method."""
        self.watch()
        self.kube.calls.clear()
        self.reconcile(name)
        return Counter(self.kube.methods())


def chain(n: int) -> list[Obj]:
    return [
        {"id": f"s{i}", "shell": "true", **({"dependsOn": [f"s{i - 1}"]} if i else {})}
        for i in range(n)
    ]


def spent(n: int) -> tuple[Counter[str], Counter[str]]:
    """A chain of `n` steps run to its end: the requests of its first reconcile, and of all."""
    w = Watched()
    w.new_plan(steps=chain(n))
    started = w.requests()
    total = Counter(started)
    for i in range(n):
        w.finish(f"s{i}", ok=True)
        total += w.requests()
    assert w.status()["phase"] == "Succeeded"
    return started, total


def test_a_one_step_run_costs_one_create_two_status_writes_four_events_and_its_log():
    started, total = spent(1)
    # the run starts: its Job, its status, plan_start and plan_step_start
    assert started == {"create_job": 1, "patch_plan_status": 1, "create_event": 2}, started
    # it settles and ends: its log (two streams), the status, plan_step and plan_end
    assert total == {
        "create_job": 1,
        "patch_plan_status": 2,
        "create_event": 4,
        "stream_log": 2,
    }, total


def test_each_further_step_of_a_chain_costs_a_create_a_status_write_two_events_and_its_log():
    _, total = spent(3)
    assert total == {
        "create_job": 3,
        "patch_plan_status": 4,
        "create_event": 8,
        "stream_log": 6,
    }, total


def test_a_run_whose_start_was_not_written_is_retried_without_creating_its_jobs_again():
    # the start's status write of a 20,000-step run timed out at a busy API server (504); the
    # retry created every Job again and read each one back (AlreadyExists): 40,000 requests
    # before the status write was tried again. The watches already show them as this Plan's.
    w = Watched()
    w.new_plan(steps=[{"id": f"s{i}", "shell": "true"} for i in range(5)])
    w.kube.refuse("patch_plan_status", 504, "Timeout: request did not complete")
    with pytest.raises(ApiError):
        w.reconcile()
    assert w.kube.methods().count("create_job") == 5
    again = w.requests()
    assert "create_job" not in again and "get_job" not in again, again
    assert again["patch_plan_status"] == 1 and w.status()["phase"] == "Running"
    assert len(w.jobs("p")) == 5


def test_a_job_of_the_same_name_that_is_not_the_plans_is_not_adopted_from_the_cache():
    w = Watched()
    w.new_plan(steps=chain(1))
    name = w.job_name("s0")
    labels = {names.LABEL_PLAN: "p", names.LABEL_RUN: w.run()}  # anyone may copy our labels
    squat = {"metadata": {"name": name, "namespace": "ns", "labels": labels}, "spec": {}}
    w.kube.put("job", squat)  # someone else's Job under the attempt's name
    assert w.requests()["create_job"] == 1  # not taken from the cache: created, refused, read
    (refused,) = w.status()["report"]["steps"]
    assert "not this Plan's" in refused["error"], refused
