"""The pipelines docs/from-argo-and-tekton.md translates run in the cluster as they run locally:
the Argo CI fan-out (retried shards, the exit handler as a finally step) and Tekton's when +
matrix + finally, applied as written in examples/ under the namespace's example Capsule (the
node's image). The nightly release's Capsule and ScheduledPlan are taken by the API server as
written (its runs are the schedule's: tests/e2e/test_scheduled.py runs schedules; the release
itself runs locally in tests/unit/test_docs_examples.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import Kube
from tests.e2e.conftest import steps, wait_plan

pytestmark = [pytest.mark.cluster, pytest.mark.node]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _plan(name: str, file: str) -> dict:
    doc = yaml.safe_load((EXAMPLES / file).read_text())
    doc["metadata"] = {"name": name}  # generateName in the example: a name to wait for here
    return doc


def test_the_argo_ci_fan_out_retries_each_shard_and_reports_through_its_exit_handler(
    kube: Kube, ns: str
):
    kube.apply(_plan("ci", "from-argo-ci.yaml"), "-n", ns)
    obj = wait_plan(kube, ns, "ci", timeout=240)
    assert obj["status"]["phase"] == "Succeeded", obj["status"]
    rep = steps(obj)
    shards = [rep[f"test.{i}.call"] for i in range(3)]
    assert [(s["status"], s["attempts"]) for s in shards] == [("success", 2)] * 3
    assert rep["package"]["output"] == "packaged main"
    note = json.loads(rep["notify"]["output"].removeprefix("note - "))
    assert note == {"status": "success", "failures": None}


def test_tektons_when_matrix_and_finally_run_each_pair_and_skip_the_cleanup(kube: Kube, ns: str):
    kube.apply(_plan("matrix", "from-tekton-matrix.yaml"), "-n", ns)
    obj = wait_plan(kube, ns, "matrix", timeout=240)
    assert obj["status"]["phase"] == "Succeeded", obj["status"]
    rep = steps(obj)
    pairs = [json.loads(rep[f"browser.{i}.call"]["output"]) for i in range(4)]
    assert [(p["platform"], p["browser"]) for p in pairs] == [
        ("linux", "chrome"),
        ("linux", "firefox"),
        ("mac", "safari"),
        ("windows", "chrome"),
    ]
    assert rep["cleanup"]["status"] == "skipped"
    assert json.loads(rep["report"]["output"].removeprefix("note - ")) == {
        "status": "success",
        "browser": "success",
    }


def test_the_nightly_release_is_taken_by_the_api_server_as_written(kube: Kube, ns: str):
    docs = list(yaml.safe_load_all((EXAMPLES / "from-argo-release.yaml").read_text()))
    for doc in docs:
        kube.apply(doc, "-n", ns)
    spl = kube.get("scheduledplan", "nightly-release", "-n", ns)
    assert spl["spec"]["planTemplate"]["spec"]["capsule"] == "release"
    cap = kube.get("capsule", "release", "-n", ns)
    assert cap["spec"]["concurrency"] == {"maxRunningPlans": 1}
