"""The pipelines docs/from-argo-and-tekton.md translates run in the cluster as they run locally:
the Argo CI fan-out (retried shards, the exit handler as a finally step) and Tekton's when +
matrix + finally, applied as written in examples/ under the namespace's example Capsule (the
node's image). The nightly release's Capsule and ScheduledPlan are taken by the API server as
written (its runs are the schedule's: tests/e2e/test_scheduled.py runs schedules; the release
itself runs locally in tests/unit/test_docs_examples.py).

The CI pipeline (examples/ci-pipeline.yaml: a checkout from a ConfigMap volume, a script that
builds and tests against a service, a root image build, a finally notification) runs its own
Capsule as written, but for what the test cluster lacks: the node's busybox image, and a
workspace on a static volume of the test's own storage class (the cluster has no provisioner).
It runs only where `run --local` cannot (volumes, services, a profile): in the cluster."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import Kube
from tests.e2e.conftest import EXAMPLE_IMAGE, steps, wait_plan
from tests.e2e.test_ci_profiles import _these_crds  # noqa: F401 - a fixture: this tree's CRDs
from tests.e2e.test_workspace import static_class as static_class  # noqa: PLC0414 - a fixture

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


def _ci_pipeline(busybox: str, storage_class: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """examples/ci-pipeline.yaml's Capsule and Plan, on the node's image and the test's static
    volume (what the test cluster lacks; nothing else changed)."""
    text = (EXAMPLES / "ci-pipeline.yaml").read_text().replace(EXAMPLE_IMAGE, busybox)
    cap, doc = yaml.safe_load_all(text)
    cap["spec"]["workspace"] = {"storageClassNames": [storage_class]}
    doc["spec"]["workspace"] = {"size": "20Mi", "storageClassName": storage_class}
    return cap, doc


@pytest.mark.cisteps
def test_the_ci_pipeline_checks_out_tests_with_its_database_builds_as_root_and_notifies(
    kube: Kube, ns: str, busybox: str, static_class: tuple[str, Path]
):
    sc, host = static_class
    # what the example's header says to run first, and the Pod Security level root needs
    source = f"--from-file={EXAMPLES / 'ci-source'}"  # examples/ci-source/
    kube.run("create", "configmap", "app-source", source, "-n", ns)
    kube.run("label", "namespace", ns, "pod-security.kubernetes.io/enforce=baseline")
    cap, doc = _ci_pipeline(busybox, sc)
    kube.apply(cap, "-n", ns)
    kube.apply(doc, "-n", ns)
    obj = wait_plan(kube, ns, "ci-pipeline", timeout=300)
    assert obj["status"]["phase"] == "Succeeded", obj["status"]
    rep = steps(obj)
    # checkout: the ConfigMap's files, copied from the read-only volume into the workspace
    assert rep["checkout"]["output"] == "app.sh\ntest.sh"
    # built, unit-tested, and the database service reached by its name from the script
    assert rep["test"]["output"] == (
        "built 1.4.2\nunit: ok\nintegration: ok (postgres:5432: accepting connections)"
    )
    # the image step ran as root: it wrote under / and gave its files to another user
    assert rep["image"]["output"] == (
        "building the image as uid 0\n10001:10001 /rootfs/app/app\npacked image.tar"
    )
    with tarfile.open(host / "image.tar") as image:
        owners = {m.name: (m.uid, m.gid) for m in image.getmembers()}
    assert owners["./app/app"] == owners["./app/VERSION"] == (10001, 10001), owners
    # finally: the outcome reported
    note = json.loads(rep["notify"]["output"].removeprefix("#ci: "))
    assert note == {"revision": "1.4.2", "status": "success", "failedStep": None}
    pods = kube.get("pods", "-n", ns, "-l", "planops.dev/plan=ci-pipeline")["items"]
    by_step = {p["metadata"]["labels"]["planops.dev/step"]: p["spec"] for p in pods}
    (db,) = by_step["test"]["initContainers"]  # the service, a native sidecar
    assert (db["name"], db["restartPolicy"]) == ("postgres", "Always")
    assert by_step["image"]["containers"][0]["securityContext"]["runAsUser"] == 0
    assert "initContainers" not in by_step["checkout"]  # no grant asked: today's pod
