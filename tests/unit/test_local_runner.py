"""The local runner executes the engine's decisions with real subprocesses.

Concurrency is judged from the steps' recorded start and finish times, not from wall-clock
thresholds: overlapping intervals prove parallelism, disjoint ones prove serialization.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import sys
import time
from pathlib import Path

import pytest

from planops.api import CapsuleSpec
from planops.runners import podlike
from planops.runners.local import MAX_DEPTH, LocalRunner

from .helpers import capsule, plan

PY = sys.executable


def cap(**kw) -> CapsuleSpec:
    base = {
        "shell": {"allow": ["echo", "sh", "sleep", "true", "false", "cat", PY]},
        "tools": [
            {"name": "echo-input", "command": ["cat"]},
            {"name": "env-input", "command": ["sh", "-c", 'printf %s "$PLANOPS_INPUT"']},
            {"name": "nap", "command": ["sleep", "0.3"]},
        ],
    }
    base.update(kw)
    return capsule(**base)


def run(spec, capsules=None, **kw):
    records: list[dict] = []
    runner = LocalRunner(capsules or {"default": cap()}, observer=records.append, **kw)
    report = asyncio.run(runner.run("p", spec))
    return report, records


def by_id(report):
    return {s.step_id: s for s in report.steps}


def overlap(a, b) -> bool:
    return a.started_at < b.finished_at and b.started_at < a.finished_at


def test_parallel_shell_steps_overlap_in_time():
    report, _ = run(plan(*[{"id": f"s{i}", "shell": "sleep 0.3"} for i in range(3)]))
    s = by_id(report)
    assert report.completed
    assert overlap(s["s0"], s["s1"]) and overlap(s["s1"], s["s2"]) and overlap(s["s0"], s["s2"])


def test_tool_steps_never_overlap_even_without_dependencies():
    report, _ = run(plan(*[{"id": f"t{i}", "tool": "nap"} for i in range(3)]))
    s = sorted(report.steps, key=lambda r: r.started_at)
    assert report.completed and len(s) == 3
    assert all(not overlap(a, b) for a in s for b in s if a is not b)


def test_a_dependent_starts_after_its_dependency_finished():
    report, _ = run(
        plan({"id": "a", "shell": "sleep 0.2"}, {"id": "b", "shell": "true", "dependsOn": ["a"]})
    )
    s = by_id(report)
    assert s["b"].started_at >= s["a"].finished_at


def test_tool_gets_json_input_on_stdin_and_in_env_with_references_resolved():
    report, _ = run(
        plan(
            {"id": "a", "shell": "echo hello"},
            {
                "id": "b",
                "tool": "echo-input",
                "dependsOn": ["a"],
                "input": {"x": "$a.output", "n": [1, "$a.status"]},
            },
            {"id": "c", "tool": "env-input", "dependsOn": ["a"], "input": {"y": "$a.status"}},
        )
    )
    s = by_id(report)
    assert s["b"].output == '{"x": "hello", "n": [1, "success"]}'
    assert s["c"].output == '{"y": "success"}'


WORKSPACE = {"workspace": {"size": "1Mi"}}
SHARING = (
    {"id": "w", "shell": "sh -c 'echo data > f.txt'"},
    {"id": "r", "shell": "cat f.txt", "dependsOn": ["w"]},
)


def test_the_steps_of_a_plan_with_a_workspace_share_it(tmp_path: Path):
    report, _ = run(plan(*SHARING, **WORKSPACE), workdir=tmp_path)
    assert by_id(report)["r"].output == "data"
    assert (tmp_path / "f.txt").read_text() == "data\n"


def test_the_steps_of_a_plan_without_a_workspace_share_no_files():
    """As pods without a volume: each attempt starts in a fresh directory of its own."""
    report, _ = run(plan(*SHARING))
    r = by_id(report)["r"]
    assert r.status == "failed" and "No such file" in (r.stderr or ""), r


def test_a_workdir_is_for_a_plan_with_a_workspace(tmp_path: Path):
    with pytest.raises(ValueError, match="declares no workspace"):
        run(plan({"id": "w", "shell": "true"}), workdir=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_fresh_temporary_workspace_per_run_is_removed_afterwards():
    report, records = run(plan({"id": "w", "shell": "sh -c 'pwd; touch x'"}, **WORKSPACE))
    workspace = by_id(report)["w"].output.strip()
    assert records[0]["workspace"] == workspace and not Path(workspace).exists()


def test_a_sub_plan_has_a_workspace_of_its_own_when_its_plan_declares_one(tmp_path: Path):
    child_plan = {"steps": [{"id": "c", "shell": "sh -c 'pwd; ls'"}], **WORKSPACE}
    caps = {"default": cap(spawn={"allow": ["child"]}), "child": cap(plan=child_plan)}
    spec = plan(
        {"id": "w", "shell": "sh -c 'touch mine'"},
        {"id": "d", "capsule": "child", "input": "go", "dependsOn": ["w"]},
        **WORKSPACE,
    )
    report, records = run(spec, caps, workdir=tmp_path)
    child_start = next(r for r in records if r["event"] == "plan_start" and r["depth"] == 1)
    assert child_start["workspace"] not in (None, str(tmp_path))
    assert (tmp_path / "mine").exists() and "mine" not in (by_id(report)["d"].output or "")


SECRET_TOOLS = [
    {
        "name": "needs-secrets",
        "command": ["sh", "-c", 'touch "$PLANOPS_WORKSPACE/ran"'],
        "env": [
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "t"}}},
            {"name": "MODE", "value": "fast"},
        ],
        "secretMounts": [{"secretName": "kube", "mountPath": "/etc/kube"}],
    },
    {
        "name": "may-use-secrets",
        "command": ["sh", "-c", 'echo "token=${TOKEN-unset} mode=${MODE-unset} $LEVEL"'],
        "env": [
            {
                "name": "TOKEN",
                "valueFrom": {"secretKeyRef": {"name": "creds", "key": "t", "optional": True}},
            },
            {
                "name": "MODE",
                "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "m", "optional": True}},
            },
            {"name": "LEVEL", "value": "high"},
        ],
    },
]


def test_a_tool_whose_env_needs_a_secret_is_refused_locally_saying_why(tmp_path: Path):
    """The kubelet reads a Secret for a pod; a local run has none to read: the attempt fails
    before anything starts, naming every value it cannot have (never an empty one)."""
    c = cap(tools=SECRET_TOOLS)
    spec = plan({"id": "t", "tool": "needs-secrets"}, **WORKSPACE)
    report, _ = run(spec, {"default": c}, workdir=tmp_path)
    t = by_id(report)["t"]
    assert t.status == "failed"
    assert t.error == (
        "tool 'needs-secrets': env TOKEN comes from Secret 'creds' (key 't'), which a local run "
        "cannot read (run the plan in a cluster, or give the tool a value in a Capsule file of "
        "your own for local runs); tool 'needs-secrets' mounts Secret 'kube' at /etc/kube, which "
        "a local run cannot (run the plan in a cluster)"
    )
    assert not (tmp_path / "ran").exists()


def test_an_optional_value_from_a_secret_or_config_map_is_left_unset_with_a_notice():
    c = cap(tools=SECRET_TOOLS)
    report, records = run(plan({"id": "t", "tool": "may-use-secrets"}), {"default": c})
    assert by_id(report)["t"].output == "token=unset mode=unset high"
    notices = [r["message"] for r in records if r["event"] == "notice" and r.get("stepId") == "t"]
    assert notices == [
        "tool 'may-use-secrets': env TOKEN is left unset: its value is optional, from Secret "
        "'creds' (key 't'), and a local run reads no Secret",
        "tool 'may-use-secrets': env MODE is left unset: its value is optional, from ConfigMap "
        "'cfg' (key 'm'), and a local run reads no ConfigMap",
    ]


def test_the_capsules_read_only_paths_are_noticed_as_not_enforced_locally():
    c = cap(readOnlyPaths=["inputs"])
    _, records = run(plan({"id": "a", "shell": "true"}, **WORKSPACE), {"default": c})
    (notice,) = [r["message"] for r in records if r["event"] == "notice"]
    assert notice.startswith("the Capsule's readOnlyPaths (inputs) are read-only in a pod only")


def test_exit_code_and_output_of_a_failing_command():
    report, _ = run(plan({"id": "x", "shell": "sh -c 'echo out; echo err >&2; exit 3'"}))
    s = by_id(report)["x"]
    assert (s.status, s.error, report.failed_step) == ("failed", "exit code 3", "x")
    assert (s.output, s.stderr) == ("out", "err")  # apart, each without its last line end


def test_a_binary_missing_on_path_fails_the_step_with_a_clear_error():
    c = cap(shell={"allow": ["no-such-binary-planops"]})
    report, _ = run(plan({"id": "x", "shell": "no-such-binary-planops"}), {"default": c})
    assert by_id(report)["x"].error == "'no-such-binary-planops': binary not found on PATH"


def test_the_step_timeout_is_enforced():
    report, _ = run(plan({"id": "slow", "shell": "sleep 30", "timeoutSeconds": 1}))
    s = by_id(report)["slow"]
    assert s.status == "failed" and s.error == "timed out after 1s"
    assert s.finished_at - s.started_at < 10


def test_the_memory_limit_is_enforced_on_the_process():
    hog = f"{PY} -c 'x = bytearray(512 * 1024 * 1024); print(len(x))'"
    # a Job's limit when none is set is planops' default (256Mi): the same locally
    ok = plan({"id": "m", "shell": hog, "resources": {"limits": {"memory": "1Gi"}}})
    limited = plan({"id": "m", "shell": hog, "resources": {"limits": {"memory": "128Mi"}}})
    assert run(ok)[0].completed
    report, _ = run(limited)
    s = by_id(report)["m"]
    assert s.status == "failed" and "MemoryError" in (s.stderr or "")


def test_output_is_capped_at_the_capsule_limit_keeping_its_head_and_tail():
    c = cap(outputLimitBytes=1000)
    report, _ = run(plan({"id": "big", "shell": f"{PY} -c 'print(\"x\" * 5000)'"}), {"default": c})
    out = by_id(report)["big"].output
    assert len(out.encode()) <= 1000  # the mark included
    mark = "\n[planops: 4098 of 5000 bytes cut here (outputLimitBytes)]\n"
    head, _, tail = out.partition(mark)
    assert (head, tail) == ("x" * 451, "x" * 451), out  # its head and its tail, half each


def test_empty_output_is_null():
    report, _ = run(plan({"id": "q", "shell": "true"}))
    assert by_id(report)["q"].output is None


def test_a_dispatch_time_refusal_fails_the_step_with_call_denied_and_runs_nothing(tmp_path: Path):
    # validation passed under an earlier capsule; at dispatch the binary is no longer allowed
    c = cap(shell={"allow": ["true"]})
    spec = plan({"id": "x", "shell": "sh -c 'touch ran'", "onError": "continue"}, **WORKSPACE)
    report, records = run(spec, {"default": c}, workdir=tmp_path)
    s = by_id(report)["x"]
    assert s.status == "failed" and s.error.startswith("call denied: binary 'sh'")
    assert [r["event"] for r in records if r["event"] == "call_denied"] == ["call_denied"]
    assert not (tmp_path / "ran").exists()


def test_trace_records_use_the_seed_names():
    _, records = run(plan({"id": "a", "shell": "true"}))
    assert [r["event"] for r in records] == [
        "plan_start",
        "plan_step_start",
        "plan_step",
        "plan_end",
    ]


def test_cancelling_a_run_kills_every_child_process(tmp_path: Path):
    pidfile = tmp_path / "pids"
    spec = plan(
        *[
            {
                "id": f"s{i}",
                "shell": f"sh -c 'echo $$ >> {pidfile}; sleep 60 & echo $! >> {pidfile}; wait'",
            }
            for i in range(3)
        ]
    )

    async def main():
        runner = LocalRunner({"default": cap()})
        task = asyncio.create_task(runner.run("p", spec))
        started = time.monotonic() + 30  # three shells and their sleeps: slow on a busy machine
        while time.monotonic() < started:
            await asyncio.sleep(0.05)
            if pidfile.exists() and len(pidfile.read_text().split()) == 6:
                break
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    pids = [int(p) for p in pidfile.read_text().split()]
    assert len(pids) == 6
    # killed at once, but gone much later on a loaded machine (seen: over 5 s at load 20)
    deadline = time.monotonic() + 30
    while (alive := [p for p in pids if _alive(p)]) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert alive == []


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie awaiting its reaper is not running
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split()[2] != "Z"


# -- capsule steps ------------------------------------------------------------------------


def test_a_capsule_step_runs_the_target_capsules_plan_as_a_sub_plan():
    child = cap(plan={"steps": [{"id": "inner", "shell": "echo from child"}]})
    parent = cap(spawn={"allow": ["child"]})
    report, records = run(
        plan({"id": "delegate", "capsule": "child", "input": "do it"}),
        {"default": parent, "child": child},
    )
    s = by_id(report)["delegate"]
    assert (s.status, s.output) == ("success", "from child")
    events = [r["event"] for r in records]
    assert "delegation_start" in events and "delegation" in events
    assert [r["depth"] for r in records if r["event"] == "plan_start"] == [0, 1]


def test_a_capsule_step_fails_when_its_sub_plan_does_not_complete():
    child = cap(plan={"steps": [{"id": "inner", "shell": "false"}]})
    parent = cap(spawn={"allow": ["child"]})
    report, _ = run(
        plan({"id": "d", "capsule": "child", "input": "x"}), {"default": parent, "child": child}
    )
    assert "did not complete" in by_id(report)["d"].error


def test_a_capsule_not_in_spawn_allow_is_denied_at_dispatch():
    child = cap(plan={"steps": [{"id": "inner", "shell": "true"}]})
    report, _ = run(
        plan({"id": "d", "capsule": "child", "input": "x"}), {"default": cap(), "child": child}
    )
    assert "not in the Capsule's spawn.allow" in by_id(report)["d"].error


def test_capsule_cycles_are_refused():
    a = cap(
        spawn={"allow": ["b"]},
        plan={"capsule": "a", "steps": [{"id": "to-b", "capsule": "b", "input": "x"}]},
    )
    b = cap(spawn={"allow": ["a"]}, plan={"steps": [{"id": "to-a", "capsule": "a", "input": "x"}]})
    report, _ = run(
        plan({"id": "start", "capsule": "b", "input": "x"}, capsule="a"), {"a": a, "b": b}
    )
    assert report.failed_step == "start"
    assert "cycle" in by_id(report)["start"].error


def test_nesting_is_capped():
    caps = {}
    for i in range(MAX_DEPTH + 2):
        caps[f"c{i}"] = cap(
            spawn={"allow": [f"c{i + 1}"]},
            plan={"steps": [{"id": f"to{i + 1}", "capsule": f"c{i + 1}", "input": "x"}]},
        )
    report, records = run(plan({"id": "go", "capsule": "c1", "input": "x"}, capsule="c0"), caps)
    assert not report.completed
    assert any("plans nest at most 8 deep" in (r.get("reason") or "") for r in records)
    assert max(r["depth"] for r in records) == MAX_DEPTH - 1


# -- maxRunningPlans: counted among this run's sub-plans ---------------------------------------


def _sub_plan_spans(records) -> dict[str, tuple[float, float]]:
    starts = {r["planId"]: r["time"] for r in records if r["event"] == "plan_start" and r["depth"]}
    ends = {r["planId"]: r["time"] for r in records if r["event"] == "plan_end" and r["depth"]}
    return {p: (starts[p], ends[p]) for p in starts}


def _three_deploys(parent_limit: int | None):
    deploy = cap(
        plan={"steps": [{"id": "nap", "shell": "sleep 0.3"}]}, concurrency={"maxRunningPlans": 1}
    )
    parent = cap(spawn={"allow": ["deploy"]})
    if parent_limit is not None:
        parent = cap(spawn={"allow": ["deploy"]}, concurrency={"maxRunningPlans": parent_limit})
    steps = [{"id": f"ship{i}", "capsule": "deploy", "input": "go"} for i in range(3)]
    return run(plan(*steps), {"default": parent, "deploy": deploy})


def test_sub_plans_on_a_one_slot_capsule_run_one_at_a_time_under_an_unlimited_parent():
    report, records = _three_deploys(parent_limit=None)
    assert report.completed
    spans = sorted(_sub_plan_spans(records).values())
    assert len(spans) == 3
    for (_, end), (start, _) in itertools.pairwise(spans):
        assert end <= start, spans
    waits = [r["message"] for r in records if r["event"] == "notice"]
    assert len(waits) == 2 and "waits for a slot of Capsule deploy" in waits[0], waits


def test_sub_plans_under_a_limited_parent_ride_its_slot():
    """The top plan holds its own Capsule's slot: its sub-plans are not counted (as in the
    cluster: a limited Capsule above them)."""
    report, records = _three_deploys(parent_limit=1)
    assert report.completed
    spans = list(_sub_plan_spans(records).values())
    assert len(spans) == 3 and all(a[0] < b[1] and b[0] < a[1] for a in spans for b in spans)
    assert not [r for r in records if r["event"] == "notice"]


@pytest.mark.parametrize(
    ("text", "expanded"),
    [
        ("$(A)-$(B)", "x-$(B)"),  # an undefined variable stays as written
        ("$$(A) $$ $", "$(A) $ $"),  # $$ is one $; a last $ stays
        ("$A $(A", "$A $(A"),  # no reference
        ("$()", "$()"),
        ("$($(A))", "$($(A))"),  # the name ends at the first `)`: `$(A` is undefined
    ],
)
def test_a_tools_references_are_expanded_as_the_kubelet_expands_them(text, expanded):
    assert podlike.expand(text, {"A": "x"}) == expanded


def test_a_tools_env_and_command_see_the_variables_declared_before_them():
    """The kubelet expands `$(VAR)` in a container's env values (by the variables declared
    before each) and in its command (by all of them); never by the image's or the host's."""
    tools = [
        {
            "name": "refs",
            "command": ["sh", "-c", "echo \"$URL $(MODE) $0\" '$(PATH)'", "$(PLANOPS_STEP)"],
            "env": [
                {"name": "URL", "value": "https://$(HOST)/$(MODE)/$(PLANOPS_ATTEMPT)"},
                {"name": "MODE", "value": "fast"},
            ],
        }
    ]
    report, _ = run(plan({"id": "t", "tool": "refs"}), {"default": cap(tools=tools)})
    assert by_id(report)["t"].output == "https://$(HOST)/$(MODE)/1 fast t $(PATH)"
