"""The two executors of the engine come to the same report: random plans with failing and
retrying steps, top-level and in `map`, `decide` and `reduce` bodies, run by the local runner
(real `true`, `false`, `echo` and `sh` processes) and by the reconciler on the in-memory API
(tests/unit/fakekube.py: its Jobs finished as those same commands would end), never raise, and
report the same steps, statuses, outputs, errors and attempts.

Which of two parallel attempts ends first is up to the machine locally and up to the test in the
cluster, and a failure stops what has not started yet, so the report of a run that both stops and
runs things in parallel depends on timing. Hence two kinds of plans:
- sequential ones (`parallelism: 1`, a map's `concurrency: 1`), where any step may fail and stop
  the plan: one report, in the same order;
- parallel ones (any parallelism, maps 1-3 at a time), where no failure stops anything (every
  step's onError is continue or skip): the same records, each after what the rules put before it
  (its dependencies; a control step after its body steps).
"""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planops.api import CapsuleSpec
from planops.engine import capsules, validate
from planops.runners.local import LocalRunner

from .helpers import plan
from .test_retry_reconcile import world

#: a tool that fails its first attempt and succeeds from its second on
FLAKY = ["sh", "-c", 'test "$PLANOPS_ATTEMPT" -ge 2']
CAPSULE: dict[str, Any] = {
    "image": "busybox:1",
    "shell": {"allow": ["true", "false", "echo"]},
    "tools": [{"name": "flaky", "command": FLAKY}],
}


# -- the plans ------------------------------------------------------------------------------------

#: a step's onError: in a plan that may stop (fail twice as likely), and in one that may not
STOPS = ["fail", "fail", "continue", "skip"]
GOES_ON = ["continue", "skip"]


def calls(draw: st.DrawFn, in_items: bool, stops: bool) -> dict[str, Any]:
    """One call: a command that succeeds, fails, prints, or fails once; when it `stops` not,
    its failure is continued past or skipped."""
    what = draw(st.sampled_from(["true", "false", "false", "echo", "flaky"]))
    if what == "flaky":
        call: dict[str, Any] = {"tool": "flaky"}
    elif what == "echo":
        call = {"shell": "echo {{item}} of {{length}}" if in_items else "echo hi"}
    else:
        call = {"shell": what}
    call["retries"] = draw(st.integers(0, 2))
    call["onError"] = draw(st.sampled_from(STOPS if stops else GOES_ON))
    return call


def body(draw: st.DrawFn, owner: str, in_items: bool, stops: bool) -> Any:
    """A single call, or a list of 1-2 steps (run in order; ids are unique across the plan)."""
    if draw(st.booleans()):
        return calls(draw, in_items, stops)
    n = draw(st.integers(1, 2))
    return [{"id": f"{owner}b{k}", **calls(draw, in_items, stops)} for k in range(n)]


@st.composite
def plans(draw: st.DrawFn, parallel: bool = False) -> dict[str, Any]:
    """A sequential plan whose failures may stop it, or a parallel one whose failures do not."""
    stops = not parallel
    steps: list[dict[str, Any]] = []
    for i in range(draw(st.integers(1, 5))):
        step: dict[str, Any] = {"id": f"s{i}"}
        if i:
            prior = [f"s{j}" for j in range(i)]
            step["dependsOn"] = sorted(draw(st.sets(st.sampled_from(prior), max_size=2)))
        kind = draw(st.sampled_from(["call", "call", "map", "decide", "reduce"]))
        if kind == "call":
            step.update(calls(draw, False, stops))
        elif kind == "decide":
            gate = {"value": 1, "op": "eq", "to": draw(st.integers(1, 2))}
            step["decide"] = {"if": gate, "then": body(draw, f"{step['id']}t", False, stops)}
            if draw(st.booleans()):
                step["decide"]["else"] = body(draw, f"{step['id']}e", False, stops)
        else:
            items = list(range(draw(st.integers(0, 3))))
            step[kind] = {"over": items, "do": body(draw, step["id"], True, stops)}
            if kind == "map":
                step[kind]["concurrency"] = draw(st.integers(1, 3)) if parallel else 1
        if kind != "call":
            step["onError"] = draw(st.sampled_from(STOPS[1:] if stops else GOES_ON))
        steps.append(step)
    if parallel:
        return {"steps": steps} | ({"parallelism": 2} if draw(st.booleans()) else {})
    return {"parallelism": 1, "steps": steps}


# -- the two executors ----------------------------------------------------------------------------


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    """What a report says that no executor's timing or naming changes."""
    return {
        "completed": report["completed"],
        "failedStep": report["failedStep"],
        "steps": [
            (s["stepId"], s["status"], s["output"], s["error"], s["attempts"])
            for s in report["steps"]
        ],
    }


def locally(spec: dict[str, Any]) -> dict[str, Any]:
    runner = LocalRunner({"default": CapsuleSpec.model_validate(CAPSULE)})
    return asyncio.run(runner.run("p", plan(**spec))).to_json()


def ends(job: dict[str, Any]) -> tuple[bool, str]:
    """How the command of a step's Job ends (its exit status, its log), as the local runner's
    process of the same command does."""
    container = job["spec"]["template"]["spec"]["containers"][0]
    argv = [w.replace("$$", "$") for w in container["command"]]  # the kubelet's unescaping
    env = {e["name"]: e.get("value") for e in container["env"]}
    if argv == FLAKY:
        return int(env["PLANOPS_ATTEMPT"]) >= 2, ""
    if argv[0] == "echo":
        return True, " ".join(argv[1:]) + "\n"
    assert argv in (["true"], ["false"]), argv
    return argv == ["true"], ""


def in_the_cluster(spec: dict[str, Any]) -> dict[str, Any]:
    w = world(spec["steps"], status_records=100, **CAPSULE)
    w.kube.get("plan", "ns", "p")["spec"] = spec  # type: ignore[index]
    for _ in range(200):
        status = w.reconciled()
        if status.get("phase") in ("Succeeded", "Failed"):
            assert status["report"]["stepsOmitted"] == 0
            return status["report"]  # type: ignore[no-any-return]
        running = {step: job for step, job in w.step_jobs().items() if "status" not in job}
        assert running, status
        for step, job in running.items():
            ok, log = ends(job)
            w.finish(step, ok)
            w.kube.logs[f"{job['metadata']['name']}-pod"] = log
    raise AssertionError("the run did not finish")


def in_order(report: dict[str, Any], spec: dict[str, Any]) -> None:
    """Each record after those the rules put before it: its dependencies' records, and a
    control step's after its body steps'."""
    at = {s["stepId"]: n for n, s in enumerate(report["steps"])}
    for step in spec["steps"]:
        if step["id"] not in at:
            continue
        before = [at[d] for d in step.get("dependsOn", [])]
        before += [n for sid, n in at.items() if sid.startswith(f"{step['id']}.")]
        assert all(n < at[step["id"]] for n in before), (step["id"], report["steps"])


def valid(spec: dict[str, Any]) -> bool:
    return validate(plan(**spec), capsules({"default": CapsuleSpec.model_validate(CAPSULE)})) == []


SOME = settings(
    max_examples=30,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SOME
@given(plans())
def test_the_local_runner_and_the_reconciler_give_the_same_report(spec):
    assert valid(spec)
    assert comparable(locally(spec)) == comparable(in_the_cluster(spec))


@SOME
@given(plans(parallel=True))
def test_run_in_parallel_they_give_the_same_records_in_an_order_the_rules_allow(spec):
    assert valid(spec)
    here, there = locally(spec), in_the_cluster(spec)
    in_order(here, spec)
    in_order(there, spec)
    mine, theirs = comparable(here), comparable(there)
    assert mine | {"steps": sorted(mine["steps"])} == theirs | {"steps": sorted(theirs["steps"])}
