"""`kubectl-plan` cluster verbs against the running operator: submit --wait, get, describe, logs,
trace, rerun, cancel (kubectl habits: -n, --kubeconfig, -o table|json|yaml; exit codes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from tests.conftest import Kube
from tests.e2e.conftest import cli, plan, wait_plan

pytestmark = [pytest.mark.cluster, pytest.mark.node]


def test_submit_wait_get_describe_logs_trace(kube: Kube, kubeconfig: str, ns: str, tmp_path: Path):
    f = tmp_path / "p.yaml"
    f.write_text(
        yaml.safe_dump(
            {
                "id": "seeded",
                "steps": [
                    {"id": "hello", "shell": "echo hi from a pod"},
                    {
                        "id": "bye",
                        "shell": "sh -c 'echo bye; exit 1'",
                        "depends_on": ["hello"],
                        "on_error": "continue",
                    },
                ],
            }
        )
    )
    r = cli(kubeconfig, "submit", str(f), "--wait", "-n", ns)
    assert r.returncode == 0, r.stderr
    assert "plan.planops.dev/seeded created" in r.stdout and "Succeeded" in r.stdout
    assert "✔ hello success" in r.stderr and "✘ bye failed: exit code 1" in r.stderr

    r = cli(kubeconfig, "get", "-n", ns)
    assert r.stdout.split("\n")[0].split() == [
        "NAME",
        "PHASE",
        "STEPS",
        "FAILED",
        "DURATION",
        "AGE",
    ]
    assert r.stdout.split("\n")[1].split()[:3] == ["seeded", "Succeeded", "2/2"]
    got = json.loads(cli(kubeconfig, "get", "seeded", "-n", ns, "-o", "json").stdout)
    assert got["status"]["report"]["planId"] == "seeded"

    r = cli(kubeconfig, "describe", "seeded", "-n", ns)
    assert r.returncode == 0 and "Phase:      Succeeded" in r.stdout
    assert "hello  success" in r.stdout.replace("   ", "  ") or "hello" in r.stdout
    assert "StepSucceeded" in r.stdout

    r = cli(kubeconfig, "logs", "seeded", "hello", "-n", ns)
    assert (r.returncode, r.stdout) == (0, "hi from a pod\n")

    r = cli(kubeconfig, "trace", "seeded", "-n", ns)
    reasons = [line.split()[2] for line in r.stdout.strip().split("\n")[1:]]
    assert reasons[0] == "PlanStarted" and reasons[-1] == "PlanSucceeded"


def test_submit_wait_exit_codes_for_failed_and_invalid_plans(
    kube: Kube, kubeconfig: str, ns: str, tmp_path: Path
):
    f = tmp_path / "fail.json"
    f.write_text(json.dumps({"id": "stops", "steps": [{"id": "a", "shell": "false"}]}))
    assert cli(kubeconfig, "submit", str(f), "--wait", "-n", ns).returncode == 1
    g = tmp_path / "bad.json"
    g.write_text(json.dumps({"id": "refused", "steps": [{"id": "a", "shell": "rm -rf /"}]}))
    r = cli(kubeconfig, "submit", str(g), "--wait", "-n", ns)
    assert r.returncode == 2 and "[shell-not-allowed]" in r.stderr
    r = cli(kubeconfig, "submit", str(g), "-n", ns)
    assert r.returncode == 2 and "already exists" in r.stderr and "rerun" in r.stderr


def test_rerun_and_cancel(kube: Kube, kubeconfig: str, ns: str):
    kube.apply(plan("again", {"id": "a", "shell": "echo once"}), "-n", ns)
    first = wait_plan(kube, ns, "again")
    assert cli(kubeconfig, "rerun", "again", "-n", ns).returncode == 0
    second = wait_plan(
        kube,
        ns,
        "again",
        phases=("Succeeded",),
        until=lambda o: o["status"]["run"]["id"] != first["status"]["run"]["id"],
    )
    assert second["status"]["run"]["rerun"]

    kube.apply(
        plan(
            "long",
            {"id": "slow", "shell": "sleep 120"},
            {"id": "after", "shell": "echo x", "dependsOn": ["slow"]},
        ),
        "-n",
        ns,
    )
    wait_plan(
        kube,
        ns,
        "long",
        phases=("Running",),
        until=lambda o: bool(kube.get("jobs", "-n", ns, "-l", "planops.dev/plan=long")["items"]),
    )
    assert cli(kubeconfig, "cancel", "long", "-n", ns).returncode == 0
    obj = wait_plan(kube, ns, "long", phases=("Failed",), timeout=60)
    assert obj["status"]["conditions"][0]["reason"] == "Cancelled"
    (rec,) = obj["status"]["report"]["steps"]
    assert rec["stepId"] == "slow" and rec["error"].startswith("cancelled")
    assert kube.get("jobs", "-n", ns, "-l", "planops.dev/plan=long")["items"] == [] or all(
        j["metadata"].get("deletionTimestamp")
        for j in kube.get("jobs", "-n", ns, "-l", "planops.dev/plan=long")["items"]
    )


def test_cluster_errors_are_one_line_with_exit_3(tmp_path: Path):
    bad = tmp_path / "kc"
    bad.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": "x",
                "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
                "clusters": [{"name": "x", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "x", "user": {"token": "t"}}],
            }
        )
    )
    r = cli(str(bad), "get", timeout=60)
    assert r.returncode == 3 and r.stderr.startswith("error: cannot reach the cluster")
