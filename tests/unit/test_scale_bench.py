"""bench/scale.py's own logic (and its workloads' and watches' modules), without a cluster: the
workload sizes (a tenth with --quick, K times with --scale K), a workload past the cluster's
limit skipped saying so (never a crash), dispatch latency taken from the right moment for each
shape, the goals judged against the same run's bare-Jobs ceiling. And what tests/cluster/kwok.py
tells kwok: which pods fail, which succeed, which nodes are its."""

from __future__ import annotations

from bench import scale, scale_loads, scale_watch

from tests.cluster import kwok


def test_quick_is_a_tenth_and_scale_multiplies():
    loads = scale_loads.loads
    full, quick, double = loads(False, 1), loads(True, 1), loads(False, 2)
    assert [len(full["one_step"].plans), full["concurrent"].total] == [5000, 10000]
    assert (full["large"].size, full["map"].size) == (20000, 10000)
    assert (full["one_step"].over_s, quick["one_step"].over_s) == (60, 6)
    assert [len(quick["one_step"].plans), quick["concurrent"].total] == [500, 1000]
    assert (quick["large"].size, quick["map"].size) == (2000, 1000)
    assert [len(double["one_step"].plans), double["concurrent"].total] == [10000, 20000]
    assert double["one_step"].over_s == 60  # twice the rate, not twice the time
    # each one-step plan stays in flight until the submission minute is over
    assert full["one_step"].plans[0]["spec"]["steps"] == [{"id": "only", "shell": "sleep 60"}]


def test_a_workload_past_the_limit_is_skipped_naming_the_limit():
    out = scale.run(None, None, "large", scale_loads.large(20000), 2000, 1)  # type: ignore[arg-type]
    assert out["total"] == 20000 and out["succeeded"] == 0
    assert out["skipped"].startswith("limit 2000: 20000 steps in one plan")
    out = scale.run(None, None, "map", scale_loads.mapped(10000), 2000, 1)  # type: ignore[arg-type]
    assert out["skipped"].startswith("limit 2000: 10000 items of one map")
    assert "skipped" in scale.table({"map": out})


def test_dispatch_is_measured_from_when_a_step_could_start():
    seen = scale_watch.Seen()
    seen.job_added = {("c", "s0"): 10.5, ("c", "s1"): 13.0, ("c", "s2"): 20.0}
    seen.pod_done = {("c", "s0"): 12.0, ("c", "s1"): 19.25}
    lat = scale_watch.dispatch_latencies(scale_loads.chains(1, 3), seen, {"c": 10.0})
    assert sorted(lat) == [0.5, 0.75, 1.0]  # s0 from its plan, s1 and s2 from their dependency
    # map items beyond the concurrency start when an earlier item's pod is done
    m = scale_loads.mapped(3)
    m.map_concurrency = 2
    seen.job_added = {("map", "a"): 1.0, ("map", "b"): 1.5, ("map", "c"): 4.0}
    seen.pod_done = {("map", "a"): 3.0, ("map", "b"): 3.5}
    assert sorted(scale_watch.dispatch_latencies(m, seen, {"map": 0.5})) == [0.5, 1.0, 1.0]


def test_kwok_fails_false_succeeds_the_rest_and_manages_only_its_own_nodes():
    by_name = {s["metadata"]["name"]: s["spec"] for s in kwok.stages(0, 700)}
    fail, succeed = by_name["planops-pod-fail"], by_name["planops-pod-succeed"]
    first_word = [e for e in fail["selector"]["matchExpressions"] if "command" in e["key"]]
    assert first_word == [{"key": kwok._FIRST_WORD, "operator": "In", "values": ["false"]}]
    assert {"key": kwok._FIRST_WORD, "operator": "NotIn", "values": ["false"]} in succeed[
        "selector"
    ]["matchExpressions"]
    assert "exitCode: 1" in fail["next"]["statusTemplate"]
    assert "phase: Failed" in fail["next"]["statusTemplate"]
    assert succeed["delay"]["durationMilliseconds"] == 700
    node = kwok.node("sim-x", "sim-x-3", 110)
    assert node["metadata"]["labels"][kwok.INSTANCE_LABEL] == "sim-x"
    assert node["spec"]["taints"] == [kwok.TAINT]
    assert kwok.PLACEMENT["nodeSelector"].items() <= node["metadata"]["labels"].items()


def test_the_no_operator_baseline_is_jobs_shaped_like_steps_on_simulated_nodes():
    quick = scale_loads.loads(True, 1)["jobs"]
    assert quick.total == len(quick.jobs) == 2000 and not quick.plans
    job = quick.jobs[7]
    assert job["metadata"]["labels"] == {"planops.dev/plan": "bare", "planops.dev/step": "s7"}
    pod = job["spec"]["template"]["spec"]
    assert job["spec"]["backoffLimit"] == 0 and pod["restartPolicy"] == "Never"
    # it lands on simulated nodes only, and kwok's success stage takes it (not `false`)
    assert pod["nodeSelector"] == kwok.PLACEMENT["nodeSelector"]
    assert pod["tolerations"] == kwok.PLACEMENT["tolerations"]
    assert pod["containers"][0]["command"][0] != "false"
    assert "jobs" not in scale_loads.DEFAULT_WORKLOADS  # the operator's workloads run by default


def test_goals_are_judged_against_the_same_runs_ceiling():
    result = {
        "jobs": {"total": 2000, "succeeded": 2000, "settled_steps_per_s": 50.0},
        "large": {
            "total": 2000,
            "succeeded": 2000,
            "settled_steps_per_s": 39.0,
            "operator_rss_mib": 180.0,
        },
        "concurrent": {
            "total": 1000,
            "succeeded": 999,
            "dispatch_p99_s": 0.95,
            "operator_rss_mib": 310.0,
        },
        "map": {"total": 1001, "succeeded": 0, "skipped": "limit"},
    }
    judged = scale.goals(result)
    assert judged["large_share_of_jobs_ceiling"] == {"value": 0.78, "goal": ">= 0.8", "met": False}
    assert judged["concurrent_dispatch_p99_s"]["met"] is True
    assert judged["large_all_succeeded"]["met"] and not judged["concurrent_all_succeeded"]["met"]
    assert (
        judged["large_operator_rss_mib"]["met"] and not judged["concurrent_operator_rss_mib"]["met"]
    )
    assert not any(k.startswith("map") for k in judged)  # a skipped workload is not judged
    result["large"]["settled_steps_per_s"] = 40.0
    assert scale.goals(result)["large_share_of_jobs_ceiling"]["met"] is True
    result["large"]["timed_out"] = "not done within 900s"
    assert scale.goals(result)["large_all_succeeded"]["met"] is False
    assert "| large_share_of_jobs_ceiling | 0.8 | >= 0.8 | yes |" in scale.table(
        {**result, "goals": scale.goals(result)}
    )


def test_a_bursts_job_create_rate_is_first_to_last_added():
    seen = scale_watch.Seen()
    assert seen.job_create_rate() is None
    seen.job_added = {("p", f"s{i}"): 10.0 + i * 0.5 for i in range(5)}
    assert seen.job_create_rate() == 5 / 2.0
