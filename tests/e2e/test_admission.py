"""A cluster admission policy that refuses a step's Job settles the step failed with the policy's
message and a CallDenied Event, exactly like a planops refusal (seed 1's deny hooks, mapped to the
cluster's own policies). Tested with a real ValidatingAdmissionPolicy."""

from __future__ import annotations

import json
import time

import pytest

from tests.conftest import Kube
from tests.e2e.conftest import events, namespace_policy, plan, steps, wait_plan

pytestmark = [pytest.mark.cluster, pytest.mark.node]
MESSAGE = "steps named forbidden may not run in this namespace"


def test_a_validating_admission_policy_refusal_fails_the_step_with_its_message(
    kube: Kube, ns: str, busybox: str
):
    name = f"planops-test-{ns}"
    rule = {
        "apiGroups": ["batch"],
        "apiVersions": ["v1"],
        "operations": ["CREATE"],
        "resources": ["jobs"],
    }
    validation = {
        "expression": "!has(object.metadata.labels) || "
        "object.metadata.labels[?'planops.dev/step'].orValue('') != 'forbidden'",
        "message": MESSAGE,
    }
    for doc in namespace_policy(name, ns, rule, validation):
        kube.apply(doc)
    try:
        probe = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": "probe",
                "namespace": ns,
                "labels": {"planops.dev/step": "forbidden"},
            },
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": busybox, "command": ["true"]}],
                    }
                }
            },
        }
        deadline = time.monotonic() + 30  # the policy becomes active once the API server loaded it
        while (
            kube.run(
                "create", "--dry-run=server", "-f", "-", input=json.dumps(probe), check=False
            ).returncode
            == 0
        ):
            assert time.monotonic() < deadline, "the admission policy never became active"
            time.sleep(0.5)

        kube.apply(
            plan(
                "vap",
                {"id": "forbidden", "shell": "echo no", "onError": "continue"},
                {"id": "allowed", "shell": "echo yes"},
            ),
            "-n",
            ns,
        )
        obj = wait_plan(kube, ns, "vap")
        rep = steps(obj)
        assert rep["forbidden"]["status"] == "failed"
        assert rep["forbidden"]["error"].startswith("refused by the cluster's admission policy:")
        assert MESSAGE in rep["forbidden"]["error"]
        assert rep["allowed"]["status"] == "success"
        assert "CallDenied" in events(kube, ns, "vap")
        jobs = kube.get("jobs", "-n", ns, "-l", "planops.dev/plan=vap")["items"]
        assert [j["metadata"]["labels"]["planops.dev/step"] for j in jobs] == ["allowed"]
    finally:
        kube.run("delete", "validatingadmissionpolicybinding", name, check=False)
        kube.run("delete", "validatingadmissionpolicy", name, check=False)
