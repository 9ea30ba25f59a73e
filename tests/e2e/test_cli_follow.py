"""`kubectl plan logs -f` on the real test cluster: a plan of three sequential steps that each
print a line, sleep, print another; the follower, started before the first pod, shows each line
as it is written (seconds before the next), prefixed by its step, picks up each step as it
starts, and exits with the plan's result; followed after the end with the pods gone, it shows
the recorded output instead, and only the step asked for."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from tests.conftest import Kube
from tests.e2e.conftest import cli, plan, wait_plan
from tests.e2e.own_operator import namespace_with_operator

# pytest -n: one worker runs this module (tests/xdist_groups.py)
pytestmark = [pytest.mark.cluster, pytest.mark.node]


@pytest.fixture(scope="module")
def follow_ns(
    kube: Kube, kubeconfig: str, crds: None, busybox: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    with namespace_with_operator(
        kube, kubeconfig, busybox, tmp_path_factory.mktemp("follow-operator"), "follow"
    ) as name:
        yield name


def _chatty(step: str, after: str | None = None) -> dict[str, object]:
    body: dict[str, object] = {
        "id": step,
        "shell": f"sh -c 'echo {step}1; sleep 3; echo {step}2'",
    }
    if after:
        body["dependsOn"] = [after]
    return body


def test_logs_follow_streams_each_step_as_it_runs_and_exits_with_the_plans_result(
    kube: Kube, kubeconfig: str, follow_ns: str
):
    kube.apply(plan("chatty", _chatty("a"), _chatty("b", "a"), _chatty("c", "b")), "-n", follow_ns)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "planops.cli.main",
            "logs",
            "-f",
            "chatty",
            "-n",
            follow_ns,
            "--kubeconfig",
            kubeconfig,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    arrived: list[tuple[float, str]] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        arrived.append((time.monotonic(), line.rstrip("\n")))
    rc, err = proc.wait(timeout=180), proc.stderr.read() if proc.stderr else ""
    lines = [text for _, text in arrived]
    assert rc == 0, (lines, err)
    assert lines == ["[a] a1", "[a] a2", "[b] b1", "[b] b2", "[c] c1", "[c] c2"], (lines, err)
    when = dict((text, t) for t, text in arrived)
    # each line is shown as it is written: a step's second line a sleep after its first (b and c
    # start after the follower is surely there; the first step may be over before it starts,
    # and a step is picked up up to a second late, so its first lines come as one)
    for step in "bc":
        assert when[f"[{step}] {step}2"] - when[f"[{step}] {step}1"] > 1, arrived
    assert "plan chatty: Succeeded" in err
    print(*lines, err, sep="\n")  # the example in docs/cli.md

    kube.apply(
        plan("sour", _chatty("a"), {"id": "b", "shell": "false", "dependsOn": ["a"]}),
        "-n",
        follow_ns,
    )
    r = cli(kubeconfig, "logs", "-f", "sour", "-n", follow_ns)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stdout.startswith("[a] a1\n[a] a2\n"), r.stdout


def test_logs_follow_after_the_pods_are_gone_shows_the_recorded_output_of_the_step_asked(
    kube: Kube, kubeconfig: str, follow_ns: str
):
    kube.apply(plan("late", _chatty("a"), _chatty("b", "a")), "-n", follow_ns)
    wait_plan(kube, follow_ns, "late")
    kube.run("delete", "pods", "-n", follow_ns, "-l", "planops.dev/plan=late", "--wait=true")
    r = cli(kubeconfig, "logs", "-f", "late", "b", "-n", follow_ns)
    assert r.returncode == 0, r.stdout + r.stderr
    shown = r.stdout.splitlines()
    assert shown and all(line.startswith("[b] ") for line in shown), r.stdout + r.stderr
    assert "[b] b1" in shown and "[b] b2" in shown, r.stdout
