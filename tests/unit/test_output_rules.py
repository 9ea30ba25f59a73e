"""The rules of a step's output, through both executors: the local runner (real processes, their
two pipes) and the reconciler on the in-memory API (tests/unit/fakekube.py), whose Jobs run here
as the same real processes, their stdout and stderr served as the pod's log streams. Each case is
a small plan; both executors must give the same records, and the records the case expects:

- the output is stdout, never stderr: a warning on stderr leaves `{{a.json.tag}}` readable, and
  the record keeps stderr's tail apart (`{{a.stderr}}` reads it);
- one trailing line end is not part of the value, wherever the value is read: the report,
  `{{a.output}}` inside a word, `if`, `$a.output` in an input;
- a text over its limit keeps its head and its tail, the mark between them (the failing line,
  the last one, survives);
- `{{a.json}}` on text fails the step that reads it, saying so.

Where the cluster cannot select a log stream (the feature gate PodLogsQuerySplitStreams off, or
an older cluster), the output is the log as one and the run's report says so
(`stderrInOutput`): the fallback's own tests, further down.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from argparse import Namespace
from dataclasses import dataclass, field
from typing import Any

import pytest

from planops.api import CapsuleSpec
from planops.api.status_model import PlanStatus
from planops.engine import outputs
from planops.kube import manifests
from planops.reconciler.run import status as status_
from planops.reconciler.run import step_logs
from planops.runners.local import LocalRunner

from .harness import Cluster
from .helpers import plan
from .test_retry_reconcile import world

PY = sys.executable
CAPSULE: dict[str, Any] = {
    "image": "busybox:1",
    "shell": {"allow": ["echo", PY]},
    "tools": [{"name": "notes", "command": ["cat"]}],  # echoes its JSON input (stdin locally)
}


def py(code: str) -> str:
    """A shell step running Python `code` (quoted for shlex)."""
    return f"{PY} -c {json.dumps(code)}"


WARN_THEN_JSON = py(
    "import sys; print('warning: the v1 API is deprecated', file=sys.stderr); "
    'print(chr(123) + \'"tag": "v1.2.3"\' + chr(125))'
)
LINES = py("print('\\n'.join(f'line {i}' for i in range(1000)))")
FAILS_AT_THE_END = py(
    "import sys; print('\\n'.join(f'step {i} ok' for i in range(500))); "
    "print('error: disk full at step 500'); sys.exit(1)"
)
CHATTY_STDERR = py(
    "import sys; [print(f'debug {i}', file=sys.stderr) for i in range(2000)]; "
    "print('fatal: no such tag', file=sys.stderr); sys.exit(1)"
)


@dataclass
class Case:
    name: str
    steps: list[dict[str, Any]]
    #: step -> {record field: expected value}; a callable checks the value instead
    expected: dict[str, dict[str, Any]]
    capsule: dict[str, Any] = field(default_factory=dict)


def mark(text: str) -> bool:
    return outputs.cut_size(text) is not None


CASES = [
    Case(
        "a warning on stderr leaves the JSON on stdout readable",
        [
            {"id": "a", "shell": WARN_THEN_JSON},
            {"id": "b", "shell": "echo image:{{a.json.tag}}", "dependsOn": ["a"]},
            {"id": "c", "shell": "echo said: {{a.stderr}}", "dependsOn": ["a"]},
        ],
        {
            "a": {
                "status": "success",
                "output": '{"tag": "v1.2.3"}',
                "stderr": "warning: the v1 API is deprecated",
            },
            "b": {"status": "success", "output": "image:v1.2.3", "stderr": None},
            "c": {"output": "said: warning: the v1 API is deprecated"},
        },
    ),
    Case(
        "one trailing newline is not part of the value, wherever it is read",
        [
            {"id": "a", "shell": "echo v1.2.3"},
            {"id": "b", "shell": "echo image:{{a.output}}-suffix", "dependsOn": ["a"]},
            {"id": "c", "shell": "echo same", "dependsOn": ["a"], "if": "$a.output == 'v1.2.3'"},
            {"id": "d", "tool": "notes", "dependsOn": ["c"], "input": {"v": "$a.output"}},
        ],
        {
            "a": {"output": "v1.2.3"},
            "b": {"output": "image:v1.2.3-suffix"},
            "c": {"status": "success", "output": "same"},
            "d": {"output": '{"v": "v1.2.3"}'},
        },
    ),
    Case(
        "only one line end is removed, a CRLF counting as one",
        [
            {"id": "a", "shell": py("print('x', end='\\r\\n')")},
            {"id": "b", "shell": py("print('x', end='\\n\\n')")},
        ],
        {"a": {"output": "x"}, "b": {"output": "x\n"}},
    ),
    Case(
        "an output over the limit keeps its head and its tail",
        [{"id": "a", "shell": LINES}],
        {
            "a": {
                "output": lambda o: (
                    o.startswith("line 0\nline 1\n")
                    and o.endswith("line 998\nline 999")
                    and "bytes cut here (outputLimitBytes)]\n" in o
                    and outputs.cut_size(o) == 8889
                    and len(o.encode()) <= 300
                )
            }
        },
        {"outputLimitBytes": 300},
    ),
    Case(
        "the failing line, the last one, survives the cut",
        [{"id": "a", "shell": FAILS_AT_THE_END}],
        {
            "a": {
                "status": "failed",
                "error": "exit code 1",
                "output": lambda o: o.endswith("error: disk full at step 500") and mark(o),
            }
        },
        {"outputLimitBytes": 400},
    ),
    Case(
        "stderr keeps its tail, bounded",
        [{"id": "a", "shell": CHATTY_STDERR}],
        {
            "a": {
                "status": "failed",
                "output": None,
                "stderr": lambda e: (
                    e.startswith("[planops: ")
                    and e.endswith("debug 1999\nfatal: no such tag")
                    and len(e.encode()) <= outputs.STDERR_LIMIT
                ),
            }
        },
    ),
    Case(
        "{{a.json}} on text fails the step that reads it, saying so",
        [
            {"id": "a", "shell": "echo hello"},
            {"id": "b", "shell": "echo {{a.json}}", "dependsOn": ["a"]},
        ],
        {
            "a": {"status": "success", "output": "hello"},
            "b": {
                "status": "failed",
                "error": lambda e: (
                    "the output of step 'a' is not JSON" in e and "{{a.output}}" in e
                ),
            },
        },
    ),
]


# -- the two executors ----------------------------------------------------------------------------


def capsule_of(case: Case) -> dict[str, Any]:
    return {**CAPSULE, **case.capsule}


def steps_of(case: Case) -> list[dict[str, Any]]:
    """The case's steps, each continued past when it fails (every record is looked at)."""
    return [{**s, "onError": "continue"} for s in case.steps]


def locally(case: Case) -> dict[str, dict[str, Any]]:
    runner = LocalRunner({"default": CapsuleSpec.model_validate(capsule_of(case))})
    report = asyncio.run(runner.run("p", plan(*steps_of(case)))).to_json()
    return {s["stepId"]: s for s in report["steps"]}


def run_job(job: dict[str, Any]) -> tuple[int, str, str]:
    """The Job's container command, run here as the kubelet would run it: (exit code, stdout,
    stderr)."""
    container = job["spec"]["template"]["spec"]["containers"][0]
    argv = [w.replace("$$", "$") for w in container["command"]]  # the kubelet's unescaping
    env = {e["name"]: e.get("value") or "" for e in container.get("env") or []}
    stdin = env.get("PLANOPS_INPUT") if argv == ["cat"] else None  # the notes tool
    done = subprocess.run(
        argv,
        input=stdin,
        capture_output=True,
        text=True,
        env={"PATH": os.environ["PATH"], **env},
        timeout=60,
        check=False,
    )
    return done.returncode, done.stdout, done.stderr


def in_the_cluster(case: Case, log_streams: str = "split") -> Cluster:
    w = world(steps_of(case), status_records=100, **capsule_of(case))
    w.kube.log_streams = log_streams
    for _ in range(50):
        status = w.reconciled()
        if status.get("phase") in ("Succeeded", "Failed"):
            return w
        running = {step: job for step, job in w.step_jobs().items() if "status" not in job}
        assert running, status
        for step, job in running.items():
            code, out, err = run_job(job)
            w.finish(step, code == 0)
            pod = f"{job['metadata']['name']}-pod"
            w.kube.logs[pod], w.kube.stderr[pod] = out, err
    raise AssertionError("the run did not finish")


def records(w: Cluster) -> dict[str, dict[str, Any]]:
    return {s["stepId"]: s for s in w.status()["report"]["steps"]}


def meets(record: dict[str, Any], expected: dict[str, Any]) -> None:
    for key, want in expected.items():
        got = record.get(key)
        if callable(want):
            assert got is not None and want(got), (record["stepId"], key, got)
        else:
            assert got == want, (record["stepId"], key, got)


COMPARED = ("status", "output", "error", "stderr")


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_both_executors_keep_the_rules_of_a_steps_output(case: Case):
    here, there = locally(case), records(in_the_cluster(case))
    for step, expected in case.expected.items():
        meets(here[step], expected)
        meets(there[step], expected)
    assert {k: [r.get(f) for f in COMPARED] for k, r in here.items()} == {
        k: [r.get(f) for f in COMPARED] for k, r in there.items()
    }


# -- where the cluster cannot select a log stream -------------------------------------------------

WARNED = CASES[0]


@pytest.mark.parametrize(
    "streams",
    [
        "api",  # the API server refuses the parameter: 422 (the gate off there)
        "kubelet",  # the node refuses it: 400 (the gate off on that kubelet)
        "ignored",  # an API server or kubelet older than 1.32: both streams, twice
    ],
)
def test_a_cluster_that_cannot_split_gives_the_log_as_one_and_says_so(streams: str):
    w = in_the_cluster(WARNED, streams)
    got = records(w)
    a = got["a"]
    assert a["output"] == 'warning: the v1 API is deprecated\n{"tag": "v1.2.3"}'
    assert "stderr" not in a  # nothing is kept apart: the output holds it
    assert got["b"]["status"] == "failed"
    assert "the output of step 'a' is not JSON" in got["b"]["error"]
    # the run says so, in its report (one field: no request, no Event, nothing per record)
    assert w.status()["report"]["stderrInOutput"] is True
    assert not w.events("OutputMerged")


def test_once_refused_the_log_is_read_as_one_request_until_the_cluster_is_asked_again():
    w = in_the_cluster(WARNED, "api")
    reads = [c for c in w.kube.calls if c[0] == "stream_log"]
    # a: its Stdout and Stderr reads (at once) refused, then read as one; c: read as one at
    # once (b failed at dispatch: {{a.json.tag}} is not JSON, it has no Job)
    assert [pod[:4] for _, _, pod in reads] == ["p-a-", "p-a-", "p-a-", "p-c-"]
    streams = w.reconciler._reads.logs
    assert not streams.splits and "422" in streams.why
    w.now += step_logs.RECHECK_SECONDS
    assert streams.splits  # a gate turned on since is used


def test_split_reads_cost_one_more_request_per_attempt_and_nothing_more():
    w = in_the_cluster(WARNED, "split")
    reads = [c for c in w.kube.calls if c[0] == "stream_log"]
    assert len(reads) == 2 * 3  # stdout and stderr of a, b and c
    assert "stderrInOutput" not in w.status()["report"]


def test_a_log_that_cannot_be_read_says_nothing_about_stream_selection():
    """A 400 that the read without a stream gets too (a container that never started) is the
    log's, not the cluster's: the next attempt still reads the streams apart."""
    w = world([{"id": "a", "shell": "echo hi"}], status_records=100, **CAPSULE)
    w.reconciled()
    w.finish("a", True)
    pod = f"{w.step_jobs()['a']['metadata']['name']}-pod"
    w.kube.logs[pod] = "hi\n"
    w.kube.refuse("stream_log", 400, "container is waiting to start", times=3)
    w.reconciled()
    assert w.reconciler._reads.logs.splits


def test_a_merged_read_keeps_what_the_kubelet_says_when_the_log_is_gone():
    w = world([{"id": "a", "shell": "echo hi"}], status_records=100, **CAPSULE)
    w.reconciled()
    w.finish("a", True)
    pod = f"{w.step_jobs()['a']['metadata']['name']}-pod"
    w.kube.logs[pod] = step_logs.LOG_LOST + "containerd://abc"
    status = w.reconciled()
    (a,) = status["report"]["steps"]
    assert a["status"] == "failed" and "node lost the container's log" in a["error"]
    assert len([c for c in w.kube.calls if c[0] == "stream_log"]) == 2  # both, nothing after
    assert w.reconciler._reads.logs.splits  # a lost log says nothing of the cluster


def test_the_job_of_a_step_stays_one_container():
    """The split costs the step nothing: the pod is the same single container as before."""
    w = world([{"id": "a", "shell": WARN_THEN_JSON}], status_records=100, **CAPSULE)
    w.reconciled()
    pod = w.step_jobs()["a"]["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == [manifests.CONTAINER]
    assert not pod.get("initContainers")


def test_the_report_keeps_saying_so_for_the_rest_of_the_run():
    """Marked once a step's output was read as one, the run's report stays marked when later
    reconciles read nothing merged (a gate turned on mid-run, or nothing more to read)."""
    new = PlanStatus.model_construct(report={})
    status_.stderr_in_output(new, {"report": {"stderrInOutput": True}}, now=False)
    assert new.to_status()["report"]["stderrInOutput"] is True
    fresh = PlanStatus.model_construct(report={})
    status_.stderr_in_output(fresh, {"report": {}}, now=False)
    assert "stderrInOutput" not in fresh.to_status()["report"]


def test_a_step_printing_the_same_on_both_streams_changes_only_its_own_record():
    """What would look like a cluster ignoring the selection, a step can print: it must not make
    the operator read every other tenant's logs as one."""
    same = py("import sys; print('same'); print('same', file=sys.stderr)")
    case = Case("same", [{"id": "a", "shell": same}, {"id": "b", "shell": WARN_THEN_JSON}], {})
    w = in_the_cluster(case, "split")
    got = records(w)
    assert (got["a"]["output"], "stderr" in got["a"]) == ("same", False)  # its own: as one
    assert got["b"]["stderr"] == "warning: the v1 API is deprecated"  # the next: apart
    assert w.reconciler._reads.logs.splits


def test_an_old_cluster_costs_two_requests_a_read_and_gives_the_log_as_one():
    w = in_the_cluster(WARNED, "ignored")
    reads = [c for c in w.kube.calls if c[0] == "stream_log"]
    assert len(reads) == 2 * 2  # a and c (b never ran): both streams asked, the same text twice
    assert w.status()["report"]["stderrInOutput"] is True


@pytest.mark.parametrize(
    ("streams", "out", "err"),
    [
        ("split", "log of real-1\n", "warning: old\n"),  # `logs > out.json` is the output
        ("api", "warning: old\nlog of real-1\n", ""),  # as one, as kubectl logs shows it
        ("kubelet", "warning: old\nlog of real-1\n", ""),
        ("ignored", "warning: old\nlog of real-1\n", ""),  # the same text once, not twice
    ],
)
def test_kubectl_plan_logs_prints_stdout_and_stderr_apart_where_the_cluster_can(
    streams: str, out: str, err: str, capsys: pytest.CaptureFixture[str]
):
    from planops.cli.show import cmd_logs  # noqa: PLC0415

    from .test_step_pods import REAL_1, api  # noqa: PLC0415

    kube = api([REAL_1])
    kube.stderr["real-1"], kube.log_streams = "warning: old\n", streams
    args = Namespace(name="nightly", step="build", attempt=None)
    assert asyncio.run(cmd_logs(kube, args, "team")) == 0
    assert capsys.readouterr()[:2] == (out, err)


def test_the_archive_keeps_the_value_and_stderr_as_the_report_has_them():
    from planops.archive.row import row  # noqa: PLC0415

    split = row(in_the_cluster(WARNED, "split").plan).report
    a = next(s for s in split["steps"] if s["stepId"] == "a")
    assert (a["output"], a["stderr"]) == ('{"tag": "v1.2.3"}', "warning: the v1 API is deprecated")
    assert "stderrInOutput" not in split
    merged = row(in_the_cluster(WARNED, "api").plan).report
    assert merged["stderrInOutput"] is True  # a run read as one says so in the archive too
