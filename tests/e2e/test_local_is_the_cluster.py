"""The same plan in a step pod and in `kubectl-plan run --local` sees the same world where a laptop
can give it (docs/operator.md, "The local runner is the cluster"): planops' PLANOPS_* variables,
its tool's env and command with the kubelet's `$(VAR)` references expanded as the kubelet expands
them, nothing of the environment it was started from, a clock that reads UTC."""

from __future__ import annotations

import asyncio

import pytest

from planops.api import CapsuleSpec, PlanSpec
from planops.runners.local import LocalRunner
from tests.conftest import Kube
from tests.e2e.conftest import capsule, plan, steps, wait_plan

pytestmark = [pytest.mark.cluster, pytest.mark.node]

#: what the tool prints: planops' variables, its own env (one value naming another and one
#: undefined), its command's references, the host's secret (if it leaked), the clock's zone
PROBE = (
    'echo "plan=$PLANOPS_PLAN step=$PLANOPS_STEP attempt=$PLANOPS_ATTEMPT '
    'input=$PLANOPS_INPUT url=$URL mode=$(MODE) arg=$0" '
    "'$(PATH) $$(MODE)' \"secret=${AWS_SECRET_ACCESS_KEY-none}\"; date +%Z"
)
TOOL = {
    "name": "probe",
    "command": ["sh", "-c", PROBE, "$(PLANOPS_STEP)"],
    "env": [
        {"name": "URL", "value": "https://$(HOST)/$(MODE)/$(PLANOPS_ATTEMPT)"},
        {"name": "MODE", "value": "fast"},
    ],
}


def test_a_tool_sees_the_same_world_in_a_pod_and_in_a_local_run(
    kube: Kube, ns: str, busybox: str, monkeypatch: pytest.MonkeyPatch
):
    doc = capsule(busybox)
    doc["spec"]["tools"].append({**TOOL, "image": busybox})
    kube.apply(doc, "-n", ns)
    manifest = plan("parity", {"id": "t", "tool": "probe", "input": {"n": 1}})
    kube.apply(manifest, "-n", ns)
    obj = wait_plan(kube, ns, "parity", timeout=180)
    in_a_pod = steps(obj)["t"]
    assert in_a_pod["status"] == "success", in_a_pod
    assert in_a_pod["output"] == (
        'plan=parity step=t attempt=1 input={"n": 1} url=https://$(HOST)/$(MODE)/1 mode=fast '
        "arg=t $(PATH) $(MODE) secret=none\nUTC"
    )

    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "the user's own")
    runner = LocalRunner({"default": CapsuleSpec.model_validate(doc["spec"])})
    report = asyncio.run(runner.run("parity", PlanSpec.model_validate(manifest["spec"])))
    (here,) = report.steps
    assert (here.status, here.output) == (in_a_pod["status"], in_a_pod["output"])
