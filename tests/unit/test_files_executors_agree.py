"""Results between steps, one verdict and one report from every executor: derandomized plans
whose steps write results (a value, one with line ends, one past the bound, none, then fail)
and read them (`{{a.results.NAME}}`, a declared name or not, from a step waited for or not)
are judged by `validate`, and the valid ones run by the local runner (real `sh` processes, its
results directory) and by the reconciler on the in-memory API (tests/unit/fakekube.py), whose
step pods are played faithfully: the init container `step`'s command run as a process with its
own results directory, then the collector's own `collect` (planops.collector) on what it left,
its message the `collect` container's termination message (kube.files_pod's shape).

An invalid plan: the reconciler's Invalid errors are `validate`'s. A valid one: the same steps,
statuses, outputs, errors, attempts and results in both reports. (Artifacts need a store in the
cluster: tests/e2e/test_artifacts.py and tests/store/test_collector_store.py run them.)"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from planops import collector
from planops.api import CapsuleSpec
from planops.engine import capsules, step_files, validate
from planops.reconciler.effects.files import FileMover
from planops.reconciler.run.status import rfc3339
from planops.runners.local import LocalRunner

from .harness import Cluster
from .helpers import plan
from .test_executors_agree import SOME
from .test_executors_agree import comparable as same_report

CAPSULE: dict[str, Any] = {"image": "busybox:1", "shell": {"allow": ["sh", "echo", "true"]}}
#: printf formats of the values written: plain, spaces, one and two line ends, empty, UTF-8,
#: and one past the bound
VALUES = [
    "1.2.3",
    "two words",
    "ends\\n",
    "two\\n\\n",
    "",
    "é",
    "x" * (step_files.RESULTS_BOUND + 8),
]


@st.composite
def plans(draw: st.DrawFn) -> dict[str, Any]:
    """A producer or two, and consumers reading their results (or a name they do not declare,
    or without waiting for them: the validator's refusals)."""
    steps: list[dict[str, Any]] = []
    producers = draw(st.integers(1, 2))
    for i in range(producers):
        what = draw(st.sampled_from(["write", "write", "write", "none", "fail"]))
        value = draw(st.sampled_from(VALUES))
        shell = {
            "write": f"sh -c 'printf \"{value}\" > $PLANOPS_RESULTS/v'",
            "none": "true",
            "fail": f"sh -c 'printf \"{value}\" > $PLANOPS_RESULTS/v; exit 3'",
        }[what]
        step: dict[str, Any] = {"id": f"p{i}", "shell": shell, "results": [{"name": "v"}]}
        if draw(st.booleans()):
            step["onError"] = "continue"
        steps.append(step)
    for j in range(draw(st.integers(1, 2))):
        source = f"p{draw(st.integers(0, producers - 1))}"
        name = draw(st.sampled_from(["v", "v", "v", "w"]))
        consumer: dict[str, Any] = {"id": f"c{j}", "shell": f"echo {{{{{source}.results.{name}}}}}"}
        if draw(st.integers(0, 5)):
            consumer["dependsOn"] = [source]
        steps.append(consumer)
    return {"parallelism": 1, "steps": steps}


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    """What tests.unit.test_executors_agree compares, and each step's results."""
    return {**same_report(report), "results": [s.get("results") for s in report["steps"]]}


def locally(spec: dict[str, Any]) -> dict[str, Any]:
    runner = LocalRunner({"default": CapsuleSpec.model_validate(CAPSULE)})
    return asyncio.run(runner.run("p", plan(**spec))).to_json()


def _container(job: dict[str, Any], name: str) -> dict[str, Any]:
    pod = job["spec"]["template"]["spec"]
    found = [c for c in pod.get("initContainers", []) + pod["containers"] if c["name"] == name]
    return found[0] if found else pod["containers"][0]


def play(kube: Any, job: dict[str, Any], at: str) -> None:
    """The Job's pod, played: its step's command run as a process; for a pod that moves files,
    the collector's `collect` on the results directory it left (what the kubelet would show)."""
    step = _container(job, "step")
    argv = [w.replace("$$", "$") for w in step["command"]]  # the kubelet's unescaping
    with tempfile.TemporaryDirectory() as tmp:
        results = Path(tmp, "results")
        results.mkdir()
        env = {e["name"]: e.get("value") or "" for e in step.get("env", [])}
        env = {**env, "PATH": os.environ["PATH"], step_files.RESULTS_ENV: str(results)}
        done = subprocess.run(argv, env=env, cwd=tmp, capture_output=True, check=False)
        moves = any(c["name"] == "collect" for c in job["spec"]["template"]["spec"]["containers"])
        said = None
        if moves and done.returncode == 0:
            config = json.loads(_container(job, "collect")["env"][0]["value"])
            config["workdir"], config["results"]["dir"] = tmp, str(results)
            said = collector.collect(config)
    ok = done.returncode == 0 and (said is None or "error" not in said)
    kube.finish_job(job, ok, at, done.stdout.decode())
    pod = kube.get("pod", "ns", f"{job['metadata']['name']}-pod")
    if moves:
        ended = {"exitCode": done.returncode, "finishedAt": at}
        collect: dict[str, Any] = {"waiting": {"reason": "PodInitializing"}}
        if said is not None:
            message = json.dumps(said, ensure_ascii=False, separators=(",", ":"))
            collect = {"terminated": {"exitCode": 0 if ok else 1, "message": message}}
        pod["status"]["initContainerStatuses"] = [{"name": "step", "state": {"terminated": ended}}]
        pod["status"]["containerStatuses"] = [{"name": "collect", "state": collect}]
    else:
        pod["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] = done.returncode


def cluster() -> Cluster:
    return Cluster({"default": CAPSULE}, tick=1, status_records=100, files=FileMover("img:1"))


def in_the_cluster(spec: dict[str, Any]) -> dict[str, Any]:
    w = cluster()
    w.new_plan("p", steps=spec["steps"], parallelism=1, uid="5eed")  # an API server uid: hex
    for _ in range(50):
        status = w.reconciled()
        if status.get("phase") in ("Succeeded", "Failed", "Invalid"):
            return status
        running = {step: job for step, job in w.step_jobs().items() if "status" not in job}
        assert running, status
        for job in running.values():
            play(w.kube, job, rfc3339(w.now) or "")
    raise AssertionError("the run did not finish")


def verdict(spec: dict[str, Any]) -> list[tuple[str, str | None, str]]:
    found = validate(plan(**spec), capsules({"default": CapsuleSpec.model_validate(CAPSULE)}))
    return [(e.code, e.step, e.path) for e in found]


@SOME
@given(plans())
def test_validate_the_local_runner_and_the_reconciler_agree_on_results(spec):
    judged = verdict(spec)
    status = in_the_cluster(spec)
    if judged:
        assert status["phase"] == "Invalid"
        assert [(e["code"], e.get("step"), e.get("path")) for e in status["errors"]] == judged
        return
    assert comparable(locally(spec)) == comparable(status["report"])
