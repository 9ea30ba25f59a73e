"""spec.workspace: one volume per run, shared by every step pod, their working directory, with the
Capsule's readOnlyPaths mounted read-only; the claim is owned by the Plan (removed with it).
Tested on a statically provisioned (hostPath) volume of the test cluster."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tests.conftest import Kube
from tests.e2e.conftest import capsule, plan, steps, wait_plan

pytestmark = [pytest.mark.cluster, pytest.mark.node]


def test_a_second_step_reads_what_the_first_wrote_in_the_workspace(
    kube: Kube, ns: str, busybox: str
):
    host = Path(tempfile.mkdtemp(prefix="planops-pv-"))
    host.chmod(0o777)  # step pods run as uid 65534
    sc = f"static-{ns}"
    kube.apply(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": sc},
            "spec": {
                "capacity": {"storage": "20Mi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": sc,
                "persistentVolumeReclaimPolicy": "Delete",
                "hostPath": {"path": str(host), "type": "Directory"},
            },
        }
    )
    try:
        kube.apply(
            capsule(busybox, readOnlyPaths=["ro"], workspace={"storageClassNames": [sc]}),
            "-n",
            ns,
        )
        kube.apply(
            plan(
                "ws",
                {"id": "write", "shell": "sh -c 'echo data > shared.txt; pwd'"},
                {"id": "read", "shell": "cat shared.txt", "dependsOn": ["write"]},
                {
                    "id": "protected",
                    "shell": "sh -c 'echo x > ro/f'",
                    "onError": "continue",
                    "dependsOn": ["read"],
                },
                workspace={"size": "10Mi", "storageClassName": sc},
            ),
            "-n",
            ns,
        )
        obj = wait_plan(kube, ns, "ws", timeout=180)
        rep = steps(obj)
        assert rep["write"]["output"] == "/workspace\n"
        assert rep["read"]["output"] == "data\n"
        assert rep["protected"]["status"] == "failed"
        assert "Read-only file system" in (rep["protected"]["output"] or "")
        (pvc,) = kube.get("pvc", "-n", ns, "-l", "planops.dev/plan=ws")["items"]
        assert pvc["metadata"]["ownerReferences"][0]["name"] == "ws"
        assert pvc["spec"]["storageClassName"] == sc
        assert (host / "shared.txt").read_text() == "data\n"
    finally:
        kube.run("delete", "namespace", ns, "--wait=true", "--timeout=60s", check=False)
        kube.run("delete", "pv", sc, "--wait=false", check=False)
