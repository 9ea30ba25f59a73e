"""Pods really run on the test node: exit codes, logs, cgroup memory limits, deadlines, images.

Everything is judged from what the API reports (Job conditions, pod status, container logs);
the overlap test uses the containers' own start/finish times, not a wall clock.
"""

from __future__ import annotations

import json
import subprocess
import time
from datetime import datetime
from typing import Any

import pytest

from tests.conftest import CLUSTER, Kube

pytestmark = [pytest.mark.cluster, pytest.mark.node]


def job(
    name: str,
    namespace: str,
    image: str,
    command: list[str],
    *,
    memory: str = "64Mi",
    deadline: int | None = None,
    pull: str = "Never",
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "backoffLimit": 0,
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "automountServiceAccountToken": False,
                "containers": [
                    {
                        "name": "step",
                        "image": image,
                        "imagePullPolicy": pull,
                        "command": command,
                        "resources": {
                            "requests": {"cpu": "10m", "memory": memory},
                            "limits": {"cpu": "500m", "memory": memory},
                        },
                    }
                ],
            }
        },
    }
    if deadline is not None:
        spec["activeDeadlineSeconds"] = deadline
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def wait_job(kube: Kube, name: str, namespace: str, timeout: float = 90) -> dict[str, Any]:
    """The Job once it is Complete or Failed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        obj = kube.get("job", name, "-n", namespace)
        for cond in obj.get("status", {}).get("conditions", []):
            if cond["type"] in ("Complete", "Failed") and cond["status"] == "True":
                return obj
        time.sleep(0.25)
    raise AssertionError(
        f"job {name} did not finish within {timeout}s: {json.dumps(obj.get('status'))}"
    )


def pod_of(kube: Kube, name: str, namespace: str) -> dict[str, Any]:
    (pod,) = kube.get("pods", "-n", namespace, "-l", f"job-name={name}")["items"]
    return pod  # type: ignore[no-any-return]


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in obj["status"]["conditions"] if c["type"] == kind)


def test_a_job_running_echo_completes_and_its_log_reads_hello(
    kube: Kube, namespace: str, busybox: str
):
    kube.apply(job("hello", namespace, busybox, ["echo", "hello"]))
    assert condition(wait_job(kube, "hello", namespace), "Complete")["status"] == "True"
    assert kube.run("logs", "-n", namespace, "job/hello").stdout == "hello\n"
    term = pod_of(kube, "hello", namespace)["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 0


def test_a_container_over_its_memory_limit_is_oomkilled(kube: Kube, namespace: str, busybox: str):
    # dd fills a 256 MiB buffer from /dev/zero: far over the 32Mi cgroup limit
    kube.apply(
        job(
            "hog",
            namespace,
            busybox,
            ["dd", "if=/dev/zero", "of=/dev/null", "bs=256M", "count=1"],
            memory="32Mi",
        )
    )
    assert condition(wait_job(kube, "hog", namespace), "Failed")["status"] == "True"
    term = pod_of(kube, "hog", namespace)["status"]["containerStatuses"][0]["state"]["terminated"]
    # The kernel's kill is SIGKILL (128 + 9). containerd 1.6 names it OOMKilled when its cgroup
    # OOM event arrives before the task's exit, and Error when the exit wins the race; both have
    # been seen on this machine, so the reason is one of the two and the exit code is the proof.
    assert term["exitCode"] == 137
    assert term["reason"] in ("OOMKilled", "Error")


def test_active_deadline_seconds_fails_the_job_with_deadline_exceeded(
    kube: Kube, namespace: str, busybox: str
):
    kube.apply(job("slow", namespace, busybox, ["sleep", "60"], deadline=2))
    failed = condition(wait_job(kube, "slow", namespace), "Failed")
    assert failed["reason"] == "DeadlineExceeded"


def test_a_missing_image_fails_with_a_pull_error_that_never_left_loopback(
    kube: Kube, namespace: str, node
):
    kube.apply(job("ghost", namespace, "local/does-not-exist:0.0.1", ["true"], pull="IfNotPresent"))
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pods = kube.get("pods", "-n", namespace, "-l", "job-name=ghost")["items"]
        waiting = (
            pods[0]["status"].get("containerStatuses", [{}])[0].get("state", {}).get("waiting")
            if pods
            else None
        )
        if waiting and waiting.get("reason") in ("ErrImagePull", "ImagePullBackOff"):
            break
        time.sleep(0.25)
    else:
        raise AssertionError("no pull error reported")
    events = kube.get("events", "-n", namespace, "--field-selector", "reason=Failed")["items"]
    messages = " ".join(e["message"] for e in events)
    # the node's registry configuration and proxy send every pull to loopback (see node.sh)
    assert "127.0.0.1:9" in messages, messages


def _interval(pod: dict[str, Any]) -> tuple[datetime, datetime]:
    term = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    parse = lambda s: datetime.fromisoformat(s.replace("Z", "+00:00"))  # noqa: E731
    return parse(term["startedAt"]), parse(term["finishedAt"])


def test_two_pods_run_at_the_same_time(kube: Kube, namespace: str, busybox: str):
    for name in ("left", "right"):
        kube.apply(job(name, namespace, busybox, ["sleep", "4"]))
    for name in ("left", "right"):
        wait_job(kube, name, namespace)
    (a0, a1), (b0, b1) = (_interval(pod_of(kube, n, namespace)) for n in ("left", "right"))
    assert a0 < b1 and b0 < a1, f"runs did not overlap: {a0}-{a1} vs {b0}-{b1}"


def test_pods_reach_the_api_server_through_the_kubernetes_service_and_nothing_else(
    kube: Kube, namespace: str, busybox: str
):
    """The one kube-proxy rule the node emulates (DNAT 10.0.0.1:443 -> the API relay): a pod
    connects to the `kubernetes` Service; an address outside the Service range is unroutable."""
    script = (
        "nc -w 5 10.0.0.1 443 </dev/null && echo service-ok; "
        "nc -w 2 192.0.2.1 80 </dev/null || echo outside-unreachable"
    )
    kube.apply(job("net", namespace, busybox, ["sh", "-c", script]))
    wait_job(kube, "net", namespace)
    out = kube.run("logs", "-n", namespace, "job/net").stdout
    if "service-ok" not in out:  # what the path looked like when it failed (rules, relay, log)
        status = [str(CLUSTER / "status"), "--network"]
        path = subprocess.run(status, capture_output=True, text=True, check=False)
        out += "\n" + path.stdout + path.stderr
    assert "service-ok" in out and "outside-unreachable" in out, out
