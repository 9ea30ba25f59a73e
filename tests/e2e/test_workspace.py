"""spec.workspace: one volume per run, shared by every step pod, the working directory of shell
steps, with the Capsule's readOnlyPaths mounted read-only; the claim is owned by the Plan (removed
with it). A tool works in an empty directory of its own (the workspace is written by earlier
steps) and finds the workspace at /workspace. Tested on a statically provisioned (hostPath)
volume of the test cluster."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Kube
from tests.e2e.conftest import capsule, plan, steps, wait_plan

pytestmark = [pytest.mark.cluster, pytest.mark.node]


@pytest.fixture
def static_class(kube: Kube, ns: str) -> Iterator[tuple[str, Path]]:
    """A storage class name with one hostPath volume of it, and the volume's directory."""
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
        yield sc, host
    finally:
        kube.run("delete", "namespace", ns, "--wait=true", "--timeout=60s", check=False)
        kube.run("delete", "pv", sc, "--wait=false", check=False)


def test_a_second_step_reads_what_the_first_wrote_in_the_workspace(
    kube: Kube, ns: str, busybox: str, static_class: tuple[str, Path]
):
    sc, host = static_class
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
    assert rep["write"]["output"] == "/workspace"
    assert rep["read"]["output"] == "data"
    assert rep["protected"]["status"] == "failed"
    said = rep["protected"].get("stderr") or rep["protected"]["output"] or ""  # split, or not
    assert "Read-only file system" in said
    (pvc,) = kube.get("pvc", "-n", ns, "-l", "planops.dev/plan=ws")["items"]
    assert pvc["metadata"]["ownerReferences"][0]["name"] == "ws"
    assert pvc["spec"]["storageClassName"] == sc
    assert (host / "shared.txt").read_text() == "data\n"


def test_a_tool_does_not_start_in_what_earlier_steps_wrote(
    kube: Kube, ns: str, busybox: str, static_class: tuple[str, Path]
):
    """A shell step plants `config.txt` in the workspace; a tool that reads `config.txt`
    relative to its working directory (with its Capsule's credentials) finds none: it starts in
    an empty directory of its own, and reads the workspace only where it names it (/workspace,
    which PLANOPS_WORKSPACE names: a local run's tool finds its workspace by it too)."""
    sc, _ = static_class
    cap = capsule(busybox, workspace={"storageClassNames": [sc]})
    reader = (
        "pwd; ls -A; cat config.txt 2>/dev/null || echo no-config; cat /workspace/config.txt; "
        'echo "$PLANOPS_WORKSPACE"'
    )
    cap["spec"]["tools"].append(
        {"name": "reader", "image": busybox, "command": ["sh", "-c", reader]}
    )
    kube.apply(cap, "-n", ns)
    kube.apply(
        plan(
            "planted",
            {"id": "plant", "shell": "sh -c 'echo planted > config.txt'"},
            {"id": "tool", "tool": "reader", "dependsOn": ["plant"]},
            workspace={"size": "10Mi", "storageClassName": sc},
        ),
        "-n",
        ns,
    )
    rep = steps(wait_plan(kube, ns, "planted", timeout=180))
    assert rep["tool"]["status"] == "success", rep["tool"]
    assert rep["tool"]["output"] == "/planops/tool\nno-config\nplanted\n/workspace"
