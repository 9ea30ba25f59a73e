"""The pure decisions of `kubectl plan logs -f` (cli/follow.py): which pods to follow, which
settled steps show their recorded output instead, how lines are prefixed, and the exit code."""

from __future__ import annotations

import argparse
import asyncio
from typing import Any

import pytest

from planops.api.names import ANNOTATION_STEP_ID, LABEL_ATTEMPT, LABEL_STEP
from planops.cli import follow, show
from planops.cli.cluster_args import add_parsers
from planops.cli.exit_codes import EXIT_FAILED, EXIT_INPUT, EXIT_OK
from planops.kube.manifests import PlanRef, label_value

from .fakekube import FakeKube


def pod(name: str, step: str, phase: str = "Running", attempt: int = 1, **meta: Any) -> dict:
    return {
        "metadata": {
            "name": name,
            "labels": {LABEL_STEP: label_value(step), LABEL_ATTEMPT: str(attempt)},
            "annotations": {ANNOTATION_STEP_ID: step},
            "creationTimestamp": meta.get("created", "2026-12-03T10:00:00Z"),
        },
        "status": {"phase": phase},
    }


def test_a_started_pod_not_yet_followed_is_followed_by_its_full_step_id():
    seen = follow.Followed(pods={"p-old"})
    pods = [pod("p-old", "a"), pod("p-new", "a-step-with-a-name-too-long-for-a-label-" + "x" * 40)]
    assert [(p["metadata"]["name"], s, n) for p, s, n in follow.to_follow(pods, seen, None)] == [
        ("p-new", "a-step-with-a-name-too-long-for-a-label-" + "x" * 40, 1)
    ]


def test_a_pending_pod_waits_until_its_container_started():
    assert follow.to_follow([pod("p", "a", phase="Pending")], follow.Followed(), None) == []
    done = [pod("p", "a", phase="Succeeded"), pod("q", "b", phase="Failed")]
    assert len(follow.to_follow(done, follow.Followed(), None)) == 2


def test_only_the_step_asked_for_is_followed():
    pods = [pod("p", "a"), pod("q", "b")]
    assert [s for _, s, _ in follow.to_follow(pods, follow.Followed(), "b")] == ["b"]


def test_a_steps_attempts_are_followed_oldest_first():
    pods = [pod("p2", "a", attempt=2), pod("p1", "a", attempt=1)]
    assert [n for _, _, n in follow.to_follow(pods, follow.Followed(), None)] == [1, 2]


def test_a_settled_step_without_a_readable_pod_shows_its_recorded_output():
    records = [{"stepId": "a"}, {"stepId": "b"}, {"stepId": "c"}, {"stepId": "d"}]
    pods = [pod("pb", "b", phase="Succeeded"), pod("pc", "c", phase="Pending")]
    seen = follow.Followed(steps={"d"})  # d's pod was followed: shown once, not twice
    assert [r["stepId"] for r in follow.to_print(records, pods, seen, None)] == ["a", "c"]
    assert [r["stepId"] for r in follow.to_print(records, pods, seen, "c")] == ["c"]


def test_every_line_is_prefixed_and_ended():
    assert follow.prefixed("[a] ", "one\ntwo") == "[a] one\n[a] two\n"
    assert follow.prefixed("[a] ", "") == ""
    assert follow.prefix("build", 1) == "[build] "
    assert follow.prefix("build", 3) == "[build #3] "


def test_a_pod_without_a_step_is_not_followed():
    bare = {"metadata": {"name": "x", "labels": {}}, "status": {"phase": "Running"}}
    assert follow.pod_step(bare) is None
    assert follow.to_follow([bare], follow.Followed(), None) == []


@pytest.mark.parametrize(
    ("phase", "code"),
    [("Succeeded", EXIT_OK), ("Failed", EXIT_FAILED), ("Invalid", EXIT_INPUT)],
)
def test_the_exit_code_is_the_plans_result_as_submit_wait_says_it(phase: str, code: int):
    assert follow.exit_code(phase) == code


def test_logs_takes_follow_and_a_step_only_when_asked():
    parser = argparse.ArgumentParser()
    add_parsers(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["logs", "-f", "demo"])
    assert args.follow and args.name == "demo" and args.step is None
    args = parser.parse_args(["logs", "demo", "build"])
    assert not args.follow and args.step == "build"


def owner(uid: str, kind: str = "Job") -> list[dict]:
    api = "planops.dev/v1alpha1" if kind == "Plan" else "batch/v1"
    return [{"apiVersion": api, "kind": kind, "uid": uid, "controller": True}]


def test_a_pod_that_copies_a_steps_labels_is_never_followed_as_the_step():
    plan = {"metadata": {"name": "demo", "uid": "plan-uid"}, "status": {"run": {"id": "r1"}}}
    job = {
        "metadata": {"name": "j", "uid": "job-uid", "ownerReferences": owner("plan-uid", "Plan")}
    }
    real, forged = pod("real", "a"), pod("forged", "a", attempt=9)
    real["metadata"]["ownerReferences"] = owner("job-uid")
    forged["metadata"]["ownerReferences"] = owner("someone-elses-job")
    kube = FakeKube()
    run = PlanRef("ns", "demo", "plan-uid", "r1")
    for kind, obj in (("job", job), ("pod", real), ("pod", forged)):  # the run's labels, all
        obj["metadata"]["labels"] = {**run.labels("a", 1), **obj["metadata"].get("labels", {})}
        kube.put(kind, obj)
    found = asyncio.run(follow.step_pods(kube, "ns", plan))
    assert [p["metadata"]["name"] for p in found] == ["real"]
    unstarted = {"metadata": {"name": "demo", "uid": "plan-uid"}}
    assert asyncio.run(follow.step_pods(kube, "ns", unstarted)) == []


def test_logs_without_follow_still_needs_a_step(capsys: pytest.CaptureFixture[str]):
    args = argparse.Namespace(name="demo", step=None, follow=False, attempt=None)
    kube = FakeKube()
    assert asyncio.run(show.cmd_logs(kube, args, "ns")) == EXIT_INPUT
    assert kube.calls == []  # refused before anything is asked
    assert "logs -f NAME [STEP]" in capsys.readouterr().err
