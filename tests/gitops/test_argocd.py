"""Plans synced from git by the real Argo CD (tests/gitops/conftest.py runs it): what a user of
Argo CD sees — health, drift, re-runs, validation errors, schedules and pruning, the resource
tree. One test per point of docs/gitops.md's promises."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from tests.e2e.conftest import plan, wait_plan
from tests.gitops.conftest import Env, health_status, sync_status, synced_at

# pytest -n: one worker runs this module (tests/xdist_groups.py)
pytestmark = [pytest.mark.cluster, pytest.mark.node, pytest.mark.gitops]


def get_plan(env: Env, name: str) -> dict[str, Any] | None:
    proc = env.kube.run("get", "plan", name, "-n", env.ns, "-o", "json", check=False)
    if proc.returncode != 0:
        return None
    return json.loads(proc.stdout)  # type: ignore[no-any-return]


def jobs(env: Env, plan_name: str) -> list[dict[str, Any]]:
    return env.kube.get("jobs", "-n", env.ns, "-l", f"planops.dev/plan={plan_name}")["items"]  # type: ignore[no-any-return]


def history(app: dict[str, Any]) -> list[dict[str, Any]]:
    return list((app.get("status") or {}).get("history") or [])


def hard_refresh(env: Env) -> dict[str, Any]:
    """A hard refresh (manifests generated again, everything compared again), waited for."""
    a = env.argocd
    before = a.app(env.ns)["status"].get("reconciledAt", "")
    a.refresh(env.ns, "hard")
    return a.wait(
        env.ns,
        lambda o: (
            "argocd.argoproj.io/refresh" not in (o["metadata"].get("annotations") or {})
            and o["status"].get("reconciledAt", "") > before
        ),
        what="refreshed",
    )


def healthy_at(rev: str) -> Any:
    return lambda o: synced_at(o, rev) and health_status(o) == "Healthy"


def test_a_plan_from_git_is_healthy_only_once_it_succeeded_and_degraded_when_it_fails(env: Env):
    a = env.argocd
    rev = env.repo.commit(
        "a capsule and a plan",
        {
            "capsule.yaml": env.capsule(),
            "plan.yaml": plan(
                "deploy",
                {"id": "warm", "shell": "sleep 8"},
                {"id": "done", "shell": "echo done", "dependsOn": ["warm"]},
            ),
        },
    )
    a.application(env.ns, env.repo, env.ns)
    # Judged only once the Application is Synced at the commit: the same reconciliation computes
    # sync and health, so the Plan was live when Argo CD judged it (before the sync, an
    # Application with nothing applied yet is Healthy whatever planops does).
    seen: list[str] = []
    deadline = time.monotonic() + 240
    while True:
        assert time.monotonic() < deadline, f"never Healthy; health seen: {seen}"
        a.alive()
        app = a.app(env.ns)
        obj = get_plan(env, "deploy")  # read after the Application: a phase only moves on
        phase = ((obj or {}).get("status") or {}).get("phase")
        health = health_status(app)
        if synced_at(app, rev):
            if not seen or seen[-1] != health:
                seen.append(health)
            if health == "Healthy":
                assert phase == "Succeeded", f"Healthy while the plan is {phase}"
                break
        assert phase not in ("Failed", "Invalid"), obj
        time.sleep(0.5)
    assert "Progressing" in seen, seen
    assert health_status(app) == "Healthy"
    # a failing plan makes the Application Degraded, with the plan's own message
    rev2 = env.repo.commit(
        "a plan that fails", {"broken.yaml": plan("broken", {"id": "nope", "shell": "false"})}
    )
    a.refresh(env.ns)
    app = a.wait(
        env.ns, lambda o: synced_at(o, rev2) and health_status(o) == "Degraded", what="Degraded"
    )
    assert wait_plan(env.kube, env.ns, "broken")["status"]["phase"] == "Failed"
    node = tree_node(env, "Plan", "broken", lambda n: (n.get("health") or {}).get("message"))
    assert node["health"]["status"] == "Degraded"
    assert node["health"]["message"].startswith("Failed (1/1 steps)"), node["health"]


def tree_node(env: Env, kind: str, name: str, ready: Any = bool) -> dict[str, Any]:
    """The node KIND/NAME of Argo CD's resource tree (its API server's view), once READY."""
    deadline = time.monotonic() + 60
    nodes: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        nodes = env.argocd.tree(env.ns).get("nodes") or []
        for n in nodes:
            if n["kind"] == kind and n["name"] == name and ready(n):
                return n
        time.sleep(1)
    raise AssertionError(f"{kind}/{name} not in Argo CD's tree: {[n['name'] for n in nodes]}")


def test_no_drift_after_the_run_across_hard_refreshes(env: Env):
    a = env.argocd
    steady = plan("steady", {"id": "a", "shell": "echo a"}, {"id": "b", "tool": "notes"})
    # a re-run asked for from git (docs/gitops.md): the operator reads it and must leave it be
    steady["metadata"]["annotations"] = {"planops.dev/rerun": "from-git"}
    rev = env.repo.commit(
        "a capsule and a plan",
        {
            "capsule.yaml": env.capsule(),
            "plan.yaml": steady,
        },
    )
    a.application(env.ns, env.repo, env.ns)
    app = a.wait(env.ns, healthy_at(rev), what="Synced and Healthy")
    run = wait_plan(env.kube, env.ns, "steady")["status"]["run"]
    syncs = len(history(app))
    time.sleep(8)  # the operator writes status again at each resync (every 3 s here)
    for _ in range(2):
        app = hard_refresh(env)
        assert sync_status(app) == "Synced", app["status"]
        for r in app["status"]["resources"]:
            assert r["status"] == "Synced", r
        assert health_status(app) == "Healthy"
    # nothing was applied again: self-heal is on, so drift at any time (even one the operator
    # keeps undoing, which self-heal's backoff would hide from a later look) is a second sync
    assert syncs == 1 and len(history(app)) == 1, history(app)
    assert app["status"]["operationState"]["syncResult"]["revision"] == rev
    obj = get_plan(env, "steady")
    assert obj is not None and obj["status"]["run"] == run
    assert obj["metadata"]["generation"] == 1 and run["rerun"] == "from-git"


def test_a_spec_change_in_git_starts_exactly_one_fresh_run(env: Env):
    a = env.argocd
    rev = env.repo.commit(
        "v1",
        {
            "capsule.yaml": env.capsule(),
            "plan.yaml": plan("release", {"id": "a", "shell": "echo one"}),
        },
    )
    a.application(env.ns, env.repo, env.ns)
    a.wait(env.ns, healthy_at(rev), what="Synced and Healthy")
    first = wait_plan(env.kube, env.ns, "release")
    old_jobs = {j["metadata"]["uid"] for j in jobs(env, "release")}
    assert len(old_jobs) == 1
    rev2 = env.repo.commit("v2", {"plan.yaml": plan("release", {"id": "a", "shell": "echo two"})})
    a.refresh(env.ns)
    a.wait(env.ns, healthy_at(rev2), what="Synced and Healthy at v2")
    second = wait_plan(
        env.kube, env.ns, "release", until=lambda o: o["status"]["report"]["generation"] == 2
    )
    assert second["status"]["run"]["id"] != first["status"]["run"]["id"]
    assert second["status"]["run"]["startedAt"] >= first["status"]["run"]["startedAt"]
    assert second["status"]["report"]["steps"][0]["output"] == "two"  # the report replaced
    # settle: resyncs and a hard refresh must not start the run again
    time.sleep(8)
    app = hard_refresh(env)
    assert synced_at(app, rev2) and health_status(app) == "Healthy"
    final = get_plan(env, "release")
    assert final is not None and final["status"]["run"] == second["status"]["run"]
    now = jobs(env, "release")
    new = [j for j in now if j["metadata"]["uid"] not in old_jobs]
    assert len(new) == 1, [j["metadata"]["name"] for j in now]  # one step, one Job: one run
    assert new[0]["metadata"]["labels"]["planops.dev/run"] == second["status"]["run"]["id"]
    for j in now:  # the old run's Job is gone or left as it was, never run again
        if j["metadata"]["uid"] in old_jobs:
            assert j["metadata"]["labels"]["planops.dev/run"] == first["status"]["run"]["id"]
    assert [h["revision"] for h in history(app)] == [rev, rev2]


def test_an_invalid_plan_from_git_is_degraded_with_the_validators_message_and_runs_nothing(
    env: Env,
):
    a = env.argocd
    rev = env.repo.commit(
        "an invalid plan",
        {
            "capsule.yaml": env.capsule(),
            "plan.yaml": plan(
                "wrong",
                {"id": "a", "shell": "echo a"},
                {"id": "b", "shell": "echo b", "dependsOn": ["ghost"]},
            ),
        },
    )
    a.application(env.ns, env.repo, env.ns)
    app = a.wait(
        env.ns, lambda o: synced_at(o, rev) and health_status(o) == "Degraded", what="Degraded"
    )
    obj = wait_plan(env.kube, env.ns, "wrong", phases=("Invalid",))
    (cond,) = [c for c in obj["status"]["conditions"] if c["type"] == "Succeeded"]
    assert "ghost" in cond["message"], cond
    node = tree_node(env, "Plan", "wrong", lambda n: (n.get("health") or {}).get("message"))
    assert node["health"]["status"] == "Degraded"
    assert node["health"]["message"] == f"Invalid, nothing runs: {cond['message']}"
    assert app["status"]["operationState"]["phase"] == "Succeeded"  # applied, then judged
    assert env.kube.get("jobs", "-n", env.ns)["items"] == []


def test_a_scheduled_plan_from_git_keeps_its_runs_and_prune_removes_them_with_it(env: Env):
    a = env.argocd
    spl = {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "ScheduledPlan",
        "metadata": {"name": "tick"},
        "spec": {
            "schedule": "* * * * *",
            "concurrencyPolicy": "Forbid",
            "planTemplate": {"spec": {"steps": [{"id": "tick", "shell": "echo tick"}]}},
        },
    }
    rev = env.repo.commit("a schedule", {"capsule.yaml": env.capsule(), "schedule.yaml": spl})
    a.application(env.ns, env.repo, env.ns)
    a.wait(env.ns, healthy_at(rev), what="Synced and Healthy")
    uid = env.kube.get("scheduledplan", "tick", "-n", env.ns)["metadata"]["uid"]

    def runs() -> list[dict[str, Any]]:
        items = env.kube.get("plans", "-n", env.ns)["items"]
        return [
            p
            for p in items
            if any(r["uid"] == uid for r in p["metadata"].get("ownerReferences") or [])
        ]

    deadline = time.monotonic() + 150  # the next minute boundary, and the run itself
    while not any((p.get("status") or {}).get("phase") == "Succeeded" for p in runs()):
        assert time.monotonic() < deadline, "no run of the schedule succeeded"
        time.sleep(2)
    names = {p["metadata"]["name"] for p in runs()}
    # a sync with prune (a new commit) and a hard refresh leave the runs alone and in sync
    rev2 = env.repo.commit(
        "unrelated",
        {"note.yaml": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "note"}}},
    )
    a.refresh(env.ns)
    a.wait(env.ns, lambda o: synced_at(o, rev2), what="Synced at the second commit")
    app = hard_refresh(env)
    assert synced_at(app, rev2), app["status"]["sync"]
    tracked = {(r["kind"], r["name"]) for r in app["status"]["resources"]}
    assert tracked == {("Capsule", "default"), ("ScheduledPlan", "tick"), ("ConfigMap", "note")}
    assert all(not r.get("requiresPruning") for r in app["status"]["resources"])
    assert names <= {p["metadata"]["name"] for p in runs()}, "a run was pruned"
    # runs show under the schedule in Argo CD's tree
    run = sorted(names)[0]
    node = tree_node(env, "Plan", run)
    assert any(p["kind"] == "ScheduledPlan" and p["name"] == "tick" for p in node["parentRefs"])
    # the file deleted: the sync prunes the schedule, and its runs go with it (ownership)
    rev3 = env.repo.commit("no more schedule", {"schedule.yaml": None})
    a.refresh(env.ns)
    a.wait(env.ns, lambda o: synced_at(o, rev3), what="Synced without the schedule")
    deadline = time.monotonic() + 120
    while True:
        left = env.kube.run("get", "scheduledplan", "tick", "-n", env.ns, check=False)
        remaining = [p["metadata"]["name"] for p in env.kube.get("plans", "-n", env.ns)["items"]]
        if left.returncode != 0 and not remaining:
            break
        assert time.monotonic() < deadline, (
            f"still there: schedule {left.returncode == 0}, {remaining}"
        )
        time.sleep(2)


def test_argocds_resource_tree_shows_jobs_pods_and_child_plans_under_the_plan(env: Env):
    a = env.argocd
    helper = env.capsule("helper", plan={"steps": [{"id": "work", "shell": "echo delegated"}]})
    rev = env.repo.commit(
        "a plan that delegates and fails",
        {
            "capsules.yaml": [helper, env.capsule(spawn={"allow": ["helper"]})],
            "plan.yaml": plan(
                "parent",
                {"id": "ask", "capsule": "helper", "input": "do the work"},
                {"id": "boom", "shell": "false", "dependsOn": ["ask"]},
            ),
        },
    )
    a.application(env.ns, env.repo, env.ns)
    a.wait(env.ns, lambda o: synced_at(o, rev) and health_status(o) == "Degraded", what="Degraded")
    parent = wait_plan(env.kube, env.ns, "parent", timeout=180)
    assert parent["status"]["phase"] == "Failed"
    (child,) = env.kube.get("plans", "-n", env.ns, "-l", "planops.dev/parent=parent")["items"]
    (boom_job,) = [
        j for j in jobs(env, "parent") if j["metadata"]["labels"].get("planops.dev/step") == "boom"
    ] or [None]
    assert boom_job is not None, [j["metadata"]["labels"] for j in jobs(env, "parent")]
    puid = parent["metadata"]["uid"]

    def under(uid: str) -> Any:
        return lambda n: any(p.get("uid") == uid for p in n.get("parentRefs") or [])

    child_node = tree_node(env, "Plan", child["metadata"]["name"], under(puid))
    job_node = tree_node(env, "Job", boom_job["metadata"]["name"], under(puid))
    pods = env.kube.get("pods", "-n", env.ns, "-l", f"job-name={boom_job['metadata']['name']}")
    pod = pods["items"][0]["metadata"]["name"]
    pod_node = tree_node(env, "Pod", pod, under(job_node["uid"]))
    assert pod_node["health"]["status"] == "Degraded", pod_node
    # the child plan's own Job hangs under the child
    (child_job,) = jobs(env, child["metadata"]["name"])
    tree_node(env, "Job", child_job["metadata"]["name"], under(child_node["uid"]))
