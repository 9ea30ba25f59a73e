"""Issue 41's tool rules through the running operator: a tool's inputSchema (a literal input
outside it: the Plan is Invalid; a rendered one: the step is call denied, a CallDenied Event, no
Job) and a tool's own image (allowed by the Capsule that names it: the step runs in it)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.conftest import Kube
from tests.e2e.conftest import capsule, events, plan, steps, wait_plan

pytestmark = [pytest.mark.cluster]

SCHEMA = {
    "type": "object",
    "required": ["replicas"],
    "properties": {"replicas": {"type": "integer", "minimum": 1}},
}


def _with_deploy(kube: Kube, ns: str, busybox: str, **spec: Any) -> None:
    doc = capsule(busybox, **spec)
    doc["spec"]["tools"].append(
        {"name": "deploy", "image": busybox, "command": ["echo", "deployed"], "inputSchema": SCHEMA}
    )
    kube.apply(doc, "-n", ns)


def _jobs(kube: Kube, ns: str, name: str) -> list[Any]:
    return list(kube.get("jobs", "-n", ns, "-l", f"planops.dev/plan={name}")["items"])


def test_a_tool_input_outside_its_schema_never_reaches_the_tool(kube: Kube, ns: str, busybox: str):
    _with_deploy(kube, ns, busybox)
    kube.apply(plan("literal", {"id": "d", "tool": "deploy", "input": {"replicas": 0}}), "-n", ns)
    rendered = plan(
        "rendered",
        {"id": "d", "tool": "deploy", "input": {"replicas": "{{input.n}}"}},
        inputSchema={"type": "object", "properties": {"n": {}}},
        input={"n": "three"},
    )
    kube.apply(rendered, "-n", ns)
    obj = wait_plan(kube, ns, "literal")
    assert obj["status"]["phase"] == "Invalid"
    ((error),) = obj["status"]["errors"]
    assert (error["code"], error["step"], error["path"]) == (
        "tool-input",
        "d",
        "steps[0].input.replicas",
    )
    obj = wait_plan(kube, ns, "rendered")
    assert obj["status"]["phase"] == "Failed"
    assert steps(obj)["d"]["error"] == (
        "call denied: the input does not satisfy tool 'deploy''s inputSchema: input.replicas: "
        "'three' is not of type 'integer'"
    )
    assert "CallDenied" in events(kube, ns, "rendered")
    assert _jobs(kube, ns, "literal") == _jobs(kube, ns, "rendered") == []


@pytest.mark.node
def test_a_tool_runs_in_the_image_its_capsule_names_for_it(kube: Kube, ns: str, busybox: str):
    """The Capsule's `images` does not list the tool's image: naming it for the tool allows it
    (before, validate said valid and dispatch said call denied)."""
    _with_deploy(kube, ns, busybox, image="local/other:1", images=["local/other:*"])
    kube.apply(plan("own", {"id": "d", "tool": "deploy", "input": {"replicas": 2}}), "-n", ns)
    obj = wait_plan(kube, ns, "own")
    assert obj["status"]["phase"] == "Succeeded", obj["status"]
    assert steps(obj)["d"]["output"].startswith("deployed")
