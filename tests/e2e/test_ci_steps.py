"""Issue 43's CI steps through the running operator, on the test node: a script step run by an
interpreter its Capsule allows (one container: `sh -c SCRIPT`), a step's env from a Secret the
Capsule lists (and a Plan naming one it does not list refused before anything runs), volumes
the Capsule declares, mounted by name (a read-only one cannot be written).

The step's stdout is its output (one trailing newline dropped) and its stderr is apart in the
record's `stderr` (the test cluster splits a pod's log streams)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, Kube
from tests.e2e.conftest import capsule, plan, steps, wait_plan

pytestmark = [pytest.mark.cluster, pytest.mark.node, pytest.mark.cisteps]


def grants(busybox: str, **spec: Any) -> dict[str, Any]:
    """The test Capsule granting scripts run by busybox's sh, and what `spec` adds."""
    return capsule(busybox, scripts={"allow": ["sh"]}, **spec)


def jobs(kube: Kube, ns: str) -> list[dict[str, Any]]:
    return list(kube.get("jobs", "-n", ns)["items"])


#: a pipe under `set -e` and pipefail that fails on line 4: lines 1-3 ran, line 5 never does
FAILS_ON_LINE_4 = """set -eu
set -o pipefail
echo one | tr a-z A-Z
ls /no/such/dir | wc -l
echo never
"""


def test_a_script_with_a_pipe_and_set_e_fails_on_the_line_that_failed(
    kube: Kube, ns: str, busybox: str
):
    kube.apply(grants(busybox), "-n", ns)
    kube.apply(plan("script", {"id": "build", "script": FAILS_ON_LINE_4}), "-n", ns)
    obj = wait_plan(kube, ns, "script")
    rec = steps(obj)["build"]
    assert obj["status"]["phase"] == "Failed" and rec["status"] == "failed"
    assert rec["output"] == "ONE\n0"  # line 3 ran and line 4's wc printed; line 5 never ran
    assert "ls: /no/such/dir: No such file or directory" in rec["stderr"]  # line 4's command
    assert rec["error"].startswith("exit code 1"), rec["error"]
    (job,) = jobs(kube, ns)
    (container,) = job["spec"]["template"]["spec"]["containers"]  # one container, as a shell step
    assert container["command"][:2] == ["sh", "-c"]


def test_env_from_a_listed_secret_reaches_the_step_as_data(kube: Kube, ns: str, busybox: str):
    kube.run("create", "secret", "generic", "ci", "--from-literal=token=s3cret", "-n", ns)
    kube.apply(grants(busybox, env={"secrets": ["ci"]}), "-n", ns)
    kube.apply(
        plan(
            "env",
            {
                "id": "use",
                "script": '[ "$TOKEN" = s3cret ] && echo "token ok"\nprintf "%s" "$WHO"\n',
                "env": [
                    {
                        "name": "TOKEN",
                        "valueFrom": {"secretKeyRef": {"name": "ci", "key": "token"}},
                    },
                    {"name": "WHO", "value": "{{input.who}}"},
                ],
            },
            # data, never code: not run by the shell, not expanded by the kubelet
            input={"who": "$(TOKEN) `id` {{input.who}}"},
        ),
        "-n",
        ns,
    )
    obj = wait_plan(kube, ns, "env")
    assert obj["status"]["phase"] == "Succeeded", obj["status"]
    assert steps(obj)["use"]["output"] == "token ok\n$(TOKEN) `id` {{input.who}}"


def test_a_secret_the_capsule_does_not_list_is_refused_and_nothing_runs(
    kube: Kube, ns: str, busybox: str, tmp_path
):
    kube.run("create", "secret", "generic", "prod-db", "--from-literal=password=p", "-n", ns)
    cap = grants(busybox, env={"secrets": ["ci"]})
    kube.apply(cap, "-n", ns)
    stolen = plan(
        "steal",
        {
            "id": "leak",
            "script": 'echo "$P"',
            "env": [
                {"name": "P", "valueFrom": {"secretKeyRef": {"name": "prod-db", "key": "password"}}}
            ],
        },
    )
    # offline, as the author would check it
    f = tmp_path / "steal.yaml"
    f.write_text(yaml.safe_dump_all([cap, stolen]))
    out = subprocess.run(
        [sys.executable, "-m", "planops.cli.main", "validate", str(f)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert out.returncode == 1, out
    assert "[env-not-allowed] step 'leak'" in out.stdout
    # in the cluster: judged Invalid by the same validator, no Job made
    kube.apply(stolen, "-n", ns)
    obj = wait_plan(kube, ns, "steal")
    assert obj["status"]["phase"] == "Invalid"
    (error,) = obj["status"]["errors"]
    assert (error["code"], error["step"], error["path"]) == (
        "env-not-allowed",
        "leak",
        "steps[0].env[0].valueFrom.secretKeyRef.name",
    )
    assert error["message"] == (
        "env P reads Secret 'prod-db', which the Capsule does not list in env.secrets (listed: ci)"
    )
    assert jobs(kube, ns) == []


def test_a_volume_mounted_read_only_cannot_be_written(kube: Kube, ns: str, busybox: str):
    kube.run("create", "configmap", "settings", "--from-literal=mode=fast", "-n", ns)
    volumes = [
        {"name": "scratch", "emptyDir": {"sizeLimit": "10Mi"}},
        {"name": "frozen", "emptyDir": {}, "readOnly": True},
        {"name": "settings", "configMap": {"name": "settings"}},
    ]
    kube.apply(grants(busybox, volumes=volumes), "-n", ns)
    script = """set -e
echo hi > /scratch/f
cat /scratch/f
cat /etc/settings/mode
echo x > /frozen/f
echo never
"""
    mounts = [
        {"name": "scratch", "mountPath": "/scratch"},
        {"name": "frozen", "mountPath": "/frozen"},
        {"name": "settings", "mountPath": "/etc/settings"},
    ]
    kube.apply(plan("vols", {"id": "write", "script": script, "volumeMounts": mounts}), "-n", ns)
    obj = wait_plan(kube, ns, "vols")
    rec = steps(obj)["write"]
    assert rec["status"] == "failed"
    assert rec["output"] == "hi\nfast"  # the writable volume written, the ConfigMap read
    assert "Read-only file system" in rec["stderr"]
    # a writable mount of it is refused before anything runs
    writable = [{"name": "frozen", "mountPath": "/frozen", "readOnly": False}]
    kube.apply(plan("thaw", {"id": "w", "shell": "echo", "volumeMounts": writable}), "-n", ns)
    obj = wait_plan(kube, ns, "thaw")
    assert obj["status"]["phase"] == "Invalid"
    assert [e["code"] for e in obj["status"]["errors"]] == ["volume-not-allowed"]
    assert len(jobs(kube, ns)) == 1  # the first plan's only
