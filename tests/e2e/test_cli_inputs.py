"""`kubectl plan submit --input` on the real cluster: a generateName'd Plan whose inputSchema
requires a field runs with the value given on the command line, keeps the file's labels and
annotations, and a mistyped input is refused before anything is created."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tests.conftest import Kube
from tests.e2e.conftest import cli, plan, steps, wait_plan

pytestmark = [pytest.mark.cluster, pytest.mark.node]


def test_submit_input_runs_a_generated_plan_and_refuses_a_typo_with_nothing_created(
    kube: Kube, kubeconfig: str, ns: str, tmp_path: Path
):
    doc = plan(
        "",
        {"id": "say", "shell": "echo deploying to {{input.env}}"},
        inputSchema={
            "type": "object",
            "required": ["env"],
            "properties": {"env": {"enum": ["dev", "prod"]}},
        },
    )
    doc["metadata"] = {
        "generateName": "deploy-",
        "labels": {"team": "web"},
        "annotations": {"planops.example/owner": "ana"},
    }
    f = tmp_path / "deploy.yaml"
    f.write_text(yaml.safe_dump(doc))

    typo = cli(kubeconfig, "submit", str(f), "--input", "evn=prod", "-n", ns)
    assert typo.returncode == 2, typo.stderr
    assert "--input evn" in typo.stderr and "no such input" in typo.stderr
    wrong = cli(kubeconfig, "submit", str(f), "--input", "env=staging", "-n", ns)
    assert wrong.returncode == 2 and "input.env" in wrong.stderr, wrong.stderr
    assert kube.get("plans", "-n", ns)["items"] == []  # nothing was created

    r = cli(kubeconfig, "submit", str(f), "--input", "env=prod", "-n", ns)
    assert r.returncode == 0, r.stderr
    (line,) = r.stdout.strip().splitlines()
    assert line.startswith("plan.planops.dev/deploy-") and line.endswith(" created")
    name = line.split("/", 1)[1].removesuffix(" created")
    obj = wait_plan(kube, ns, name)
    assert obj["status"]["phase"] == "Succeeded", obj["status"]
    assert steps(obj)["say"]["output"] == "deploying to prod"
    assert obj["metadata"]["labels"]["team"] == "web"
    assert obj["metadata"]["annotations"]["planops.example/owner"] == "ana"
