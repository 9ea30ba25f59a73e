"""A Plan whose `spec.input` nests 1,200 levels (7 KB: the API server takes up to 10,000, Python's
json stops near 1,000) beside a normal one: the normal one runs to Succeeded, the deep one is
marked Invalid with an Event, and `kubectl plan get` lists both. Before kube.jsontext, that one
object made every list and watch of the namespace's Plans raise RecursionError (the operator's,
the CLI's, the UI's)."""

from __future__ import annotations

import json
import time

import pytest

from tests.conftest import Kube
from tests.e2e.conftest import Operator, cli, events, plan, wait_plan
from tests.unit.test_deep_json import deep_text

pytestmark = pytest.mark.cluster

EVERY = {"value": 1, "op": "eq", "to": 1}


def test_a_1200_level_plan_beside_a_normal_one_is_invalid_and_the_normal_one_succeeds(
    kube: Kube, kubeconfig: str, ns: str, operator: Operator
):
    deep = deep_text(1200).replace('"name":"deep","namespace":"ns"', '"name":"deep"')
    kube.run("create", "-n", ns, "-f", "-", input=deep)  # the API server takes it
    kube.apply(plan("normal", {"id": "f", "filter": {"over": [1, 2], "where": EVERY}}), "-n", ns)

    normal = wait_plan(kube, ns, "normal")
    assert normal["status"]["phase"] == "Succeeded", json.dumps(normal["status"])[:2000]

    assert wait_phase(kube, ns, "deep") == "Invalid"
    assert "ValidationFailed" in events(kube, ns, "deep")

    listed = cli(kubeconfig, "get", "-n", ns)
    assert listed.returncode == 0, listed.stderr[-2000:]
    names = [line.split()[0] for line in listed.stdout.splitlines()[1:]]
    assert sorted(names) == ["deep", "normal"]


def wait_phase(kube: Kube, ns: str, name: str, timeout: float = 60) -> str:
    """The Plan's phase as kubectl (Go, any depth) reads it, once it has one."""
    deadline = time.monotonic() + timeout
    phase = ""
    while time.monotonic() < deadline:
        phase = kube.run(
            "get", "plan", name, "-n", ns, "-o", "jsonpath={.status.phase}"
        ).stdout.strip()
        if phase:
            return phase
        time.sleep(0.5)
    return phase
