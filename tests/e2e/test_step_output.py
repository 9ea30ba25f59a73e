"""A step's output through the operator, with real pods: its stdout, stderr kept apart, one
trailing line end dropped, a long output's head and tail.

Whether a cluster can read a pod log's stdout and stderr apart depends on the feature gate
PodLogsQuerySplitStreams (alpha, off by default; tests/cluster/up turns it on). Each test here
runs on the clusters it is about: the split where the API server allows a stream selection, the
documented fallback (the log as one, the report's `stderrInOutput`) where it does not."""

from __future__ import annotations

import json

import pytest

from tests.conftest import Kube
from tests.e2e.conftest import capsule, cli, plan, steps, wait_plan

pytestmark = [pytest.mark.cluster, pytest.mark.node]

#: a step that warns on stderr, then prints JSON on stdout (busybox's sh and printf)
WARN_THEN_JSON = (
    "sh -c 'echo warning: the v1 API is deprecated >&2; "
    'printf "%s\\n" "{\\"tag\\": \\"v1.2.3\\"}"\''
)
#: 2,000 lines, then the line that says why it failed
LONG_THEN_FAILS = (
    "sh -c 'i=0; while [ $i -lt 2000 ]; do echo step $i ok; i=$((i+1)); done; "
    "echo error: disk full at the end; exit 1'"
)


def splits(kube: Kube, ns: str) -> bool:
    """Whether the API server lets a pod log's stream be selected: a log request for a pod that
    does not exist is refused for its `stream` (422) before the pod is looked up (404)."""
    got = kube.run(
        "get", "--raw", f"/api/v1/namespaces/{ns}/pods/nope/log?stream=Stdout", check=False
    )
    return "may not be specified" not in got.stderr


def run_warned(kube: Kube, ns: str) -> dict[str, dict[str, object]]:
    kube.apply(
        plan(
            "warned",
            {"id": "a", "shell": WARN_THEN_JSON},
            {
                "id": "b",
                "shell": "echo image:{{a.json.tag}}-suffix",
                "dependsOn": ["a"],
                "onError": "continue",
            },
            {"id": "c", "shell": "echo v1.2.3", "dependsOn": ["a"]},
            {"id": "d", "shell": "echo same", "dependsOn": ["c"], "if": "$c.output == 'v1.2.3'"},
            {"id": "e", "shell": "echo {{c.output}}-suffix", "dependsOn": ["c"]},
        ),
        "-n",
        ns,
    )
    obj = wait_plan(kube, ns, "warned", timeout=180)
    assert obj["status"]["phase"] == "Succeeded", json.dumps(obj["status"])[:3000]
    return steps(obj)


def test_a_warning_on_stderr_leaves_the_json_on_stdout_readable(
    kube: Kube, ns: str, kubeconfig: str
):
    if not splits(kube, ns):
        pytest.skip("this cluster's API server cannot select a log stream (the fallback's test)")
    rep = run_warned(kube, ns)
    assert rep["a"]["output"] == '{"tag": "v1.2.3"}'  # stdout only, its line end dropped
    assert rep["a"]["stderr"] == "warning: the v1 API is deprecated"
    assert (rep["b"]["status"], rep["b"]["output"]) == ("success", "image:v1.2.3-suffix")
    # one trailing newline is not part of the value: `if` and a word read the same value
    assert rep["c"]["output"] == "v1.2.3"
    assert (rep["d"]["status"], rep["d"]["output"]) == ("success", "same")
    assert rep["e"]["output"] == "v1.2.3-suffix"
    assert "stderrInOutput" not in kube.get("plan", "warned", "-n", ns)["status"]["report"]
    described = cli(kubeconfig, "describe", "warned", "-n", ns)
    assert "    warning: the v1 API is deprecated" in described.stdout, described.stderr


def test_a_cluster_that_cannot_split_gives_the_log_as_one_and_says_so(kube: Kube, ns: str):
    if splits(kube, ns):
        pytest.skip("this cluster selects log streams (the split's test)")
    rep = run_warned(kube, ns)
    # both streams, in the order the runtime read its two pipes (either may come first)
    lines = str(rep["a"]["output"]).split("\n")
    assert sorted(lines) == ["warning: the v1 API is deprecated", '{"tag": "v1.2.3"}']
    assert "stderr" not in rep["a"]
    assert rep["b"]["status"] == "failed"
    assert "the output of step 'a' is not JSON" in str(rep["b"]["error"])
    assert (rep["c"]["output"], rep["d"]["status"], rep["e"]["output"]) == (
        "v1.2.3",
        "success",
        "v1.2.3-suffix",
    )
    obj = kube.get("plan", "warned", "-n", ns)
    assert obj["status"]["report"]["stderrInOutput"] is True  # the run says so


def test_a_long_output_keeps_its_head_and_the_failing_line_at_its_end(
    kube: Kube, ns: str, busybox: str
):
    kube.apply(capsule(busybox, outputLimitBytes=1024), "-n", ns)
    kube.apply(plan("long", {"id": "a", "shell": LONG_THEN_FAILS}), "-n", ns)
    obj = wait_plan(kube, ns, "long", timeout=180)
    (a,) = obj["status"]["report"]["steps"]
    assert (a["status"], a["error"]) == ("failed", "exit code 1")
    out = a["output"]
    assert len(out.encode()) <= 1024, out
    assert out.startswith("step 0 ok\nstep 1 ok\n")
    assert out.endswith("step 1999 ok\nerror: disk full at the end")
    assert " bytes cut here (outputLimitBytes)]\n" in out
