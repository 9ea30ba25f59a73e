"""Scheduled plans on the real cluster: a real scheduled run (one minute boundary is waited for,
once, for everything in this file); the rules themselves are tested without waiting in
tests/unit/test_schedule.py."""

from __future__ import annotations

import time
import uuid
from datetime import datetime
from typing import Any

import pytest

from tests.conftest import Kube
from tests.e2e.conftest import NS_PREFIX, capsule

# pytest -n: one worker runs it, with the other cluster-wide tests (tests/xdist_groups.py)
pytestmark = [pytest.mark.cluster, pytest.mark.node]


def scheduled(
    name: str, schedule: str, *, kind: str = "ScheduledPlan", **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": {
            "schedule": schedule,
            "planTemplate": {
                "metadata": {"labels": {"team": "a"}},
                "spec": {"steps": [{"id": "tick", "shell": "echo tick"}]},
            },
            **spec,
        },
    }


def events_of(kube: Kube, ns: str, name: str) -> list[str]:
    items = kube.get("events", "-n", ns, "--field-selector", f"involvedObject.name={name}")["items"]
    return [e["reason"] for e in items]


def wait(fn: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = fn()
        if got:
            return got
        time.sleep(1)
    raise AssertionError(f"not within {timeout}s")


def test_scheduled_and_cluster_scheduled_plans_start_real_runs(kube: Kube, ns: str, busybox: str):
    tag = uuid.uuid4().hex[:8]
    tenants = [f"{NS_PREFIX}{tag}-a", f"{NS_PREFIX}{tag}-b"]
    for t in tenants:
        kube.run("create", "namespace", t)
        kube.run("label", "namespace", t, f"planops-test={tag}")
        kube.apply(capsule(busybox), "-n", t)
    cluster_name = f"every-tenant-{tag}"
    try:
        kube.apply(scheduled("minutely", "* * * * *", concurrencyPolicy="Forbid"), "-n", ns)
        kube.apply(scheduled("paused", "* * * * *", suspend=True), "-n", ns)
        kube.apply(scheduled("broken", "61 * * * *"), "-n", ns)
        kube.apply(scheduled("pruned", "* * * * *", successfulRunsHistoryLimit=0), "-n", ns)
        kube.apply(
            scheduled(
                cluster_name,
                "* * * * *",
                kind="ClusterScheduledPlan",
                namespaceSelector={"matchLabels": {"planops-test": tag}},
            )
        )

        # invalid schedules are refused with a clear message, nothing scheduled
        broken = wait(
            lambda: (kube.get("scheduledplan", "broken", "-n", ns).get("status") or {}).get(
                "errors"
            ),
            30,
        )
        assert "not a cron expression" in broken[0]

        runs = wait(
            lambda: [
                p
                for p in kube.get("plans", "-n", ns, "-l", "planops.dev/scheduled-by=minutely")[
                    "items"
                ]
                if (p.get("status") or {}).get("phase") == "Succeeded"
            ],
            150,
        )
        run = runs[0]
        at = datetime.fromisoformat(
            run["metadata"]["annotations"]["planops.dev/scheduled-time"].replace("Z", "+00:00")
        )
        assert at.second == 0 and run["metadata"]["name"] == f"minutely-{int(at.timestamp()) // 60}"
        assert run["metadata"]["labels"]["team"] == "a"
        assert run["metadata"]["ownerReferences"][0]["kind"] == "ScheduledPlan"
        sp = wait(
            lambda: (
                (kube.get("scheduledplan", "minutely", "-n", ns).get("status") or {}).get(
                    "lastSuccessfulTime"
                )
                and kube.get("scheduledplan", "minutely", "-n", ns)
            ),
            60,
        )
        st = sp["status"]
        assert st["lastScheduleTime"] and st["nextScheduleTime"] > st["lastScheduleTime"]
        assert "RunStarted" in events_of(kube, ns, "minutely")

        # history limits: a succeeded run beyond successfulRunsHistoryLimit (0) is deleted
        wait(lambda: "RunStarted" in events_of(kube, ns, "pruned"), 60)
        wait(
            lambda: (
                kube.get("plans", "-n", ns, "-l", "planops.dev/scheduled-by=pruned")["items"] == []
                and (kube.get("scheduledplan", "pruned", "-n", ns).get("status") or {}).get(
                    "lastSuccessfulTime"
                )
            ),
            90,
        )

        # suspended: nothing runs, the passing time is reported missed (never silent)
        assert kube.get("plans", "-n", ns, "-l", "planops.dev/scheduled-by=paused")["items"] == []
        wait(lambda: "MissedSchedule" in events_of(kube, ns, "paused"), 30)

        # cluster-wide: one run in each matching namespace, each under its namespace's Capsule
        for t in tenants:
            done = wait(
                lambda t=t: [
                    p
                    for p in kube.get(
                        "plans", "-n", t, "-l", f"planops.dev/cluster-scheduled-by={cluster_name}"
                    )["items"]
                    if (p.get("status") or {}).get("phase") == "Succeeded"
                ],
                150,
            )
            assert done[0]["spec"]["steps"][0]["id"] == "tick"
        csp = kube.get("clusterscheduledplan", cluster_name)
        assert sorted(csp["status"]["namespaces"]) == sorted(tenants)
        row = kube.run("get", "spl", "minutely", "-n", ns, "--no-headers").stdout.split()
        assert row[:3] == ["minutely", ["*", "*", "*", "*", "*"][0], "*"] or row[0] == "minutely"
    finally:
        kube.run("delete", "clusterscheduledplan", cluster_name, "--wait=false", check=False)
        for t in tenants:
            kube.run("delete", "namespace", t, "--wait=false", check=False)
