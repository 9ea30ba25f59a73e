"""PlanTriggers on the real cluster: GitHub-shaped deliveries POSTed to the trigger receiver
(`planops-trigger-receiver`, run out of cluster as the operator is here) start Plans from a
template, as the trigger's recorded author, or are refused and say why.

The chart's admission policies and users' roles are applied (tests.e2e.test_tenancy): the
author `alice` writes the PlanTrigger (so the API server records her as its author), may use
the Capsule `default`, read the template and the trigger's Secret; the receiver impersonates her.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from planops.triggers.verify import sign
from tests.conftest import Kube
from tests.e2e.conftest import free_port, start_healthy, steps, wait_plan
from tests.e2e.test_tenancy import (  # noqa: F401 (policies: a fixture)
    AUTHOR,
    as_author,
    bind,
    grant,
    policies,
)

pytestmark = [pytest.mark.cluster, pytest.mark.node, pytest.mark.triggers]
SECRET = "e2e-hook-secret"
TEMPLATE = "build-and-test"


@contextlib.contextmanager
def running_receiver(kubeconfig: str, log: Path, *extra: str) -> Iterator[str]:
    """The receiver as a subprocess on a free loopback port: its base URL."""
    port, metrics_port = free_port(), free_port()
    args = [sys.executable, "-m", "planops.triggers.main", "--kubeconfig", kubeconfig]
    args += ["--port", str(port), "--address", "127.0.0.1", "--metrics-port", str(metrics_port)]
    url = f"http://127.0.0.1:{port}"
    proc = start_healthy([*args, *extra], log, url + "/healthz", "the receiver")
    try:
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def receiver(kubeconfig: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    log = tmp_path_factory.mktemp("receiver") / "receiver.log"
    with running_receiver(kubeconfig, log, "--body-bytes", "65536") as url:
        yield url


def template() -> dict[str, Any]:
    """A PlanTemplate `build-and-test` like the example's ClusterPlanTemplate, in the test's
    namespace (a cluster-scoped one would be shared with parallel sessions)."""
    return {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "PlanTemplate",
        "metadata": {"name": TEMPLATE},
        "spec": {
            "inputSchema": {
                "type": "object",
                "properties": {
                    "repo": {"type": "string", "maxLength": 200},
                    "revision": {"type": "string", "pattern": "^[0-9a-f]{40}$"},
                },
                "required": ["repo", "revision"],
                "additionalProperties": False,
            },
            "steps": [
                {"id": "build", "shell": "echo building {{input.repo}} at {{input.revision}}"},
                {"id": "test", "shell": "echo tested", "dependsOn": ["build"]},
            ],
            "output": {"built": "{{build.output}}"},
        },
    }


def trigger(name: str = "push") -> dict[str, Any]:
    return {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "PlanTrigger",
        "metadata": {"name": name},
        "spec": {
            "webhook": {"type": "github", "secretRef": {"name": "hook"}},
            "templateRef": {"kind": "PlanTemplate", "name": TEMPLATE},
            "filter": "headers['x-github-event'] == 'push' && body.ref == 'refs/heads/main'",
            "input": {"repo": "body.repository.full_name", "revision": "body.after"},
        },
    }


@pytest.fixture
def hooked(kube: Kube, ns: str, policies: None) -> str:  # noqa: F811 (the fixture)
    """`ns` with the template, the Secret, alice's grants and her PlanTrigger `push`."""
    grant(kube, ns, ["default"])
    kube.apply(template(), "-n", ns)
    kube.run("create", "secret", "generic", "hook", f"--from-literal=secret={SECRET}", "-n", ns)
    kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": "trigger-author", "namespace": ns},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["secrets"],
                    "resourceNames": ["hook"],
                    "verbs": ["get"],
                },
                {"apiGroups": ["planops.dev"], "resources": ["plantemplates"], "verbs": ["get"]},
            ],
        }
    )
    bind(kube, ns, "alice-trigger-author", AUTHOR, "trigger-author", kind="Role")
    done = as_author(kube, "apply", "-n", ns, "-f", "-", input=json.dumps(trigger()))
    assert done.returncode == 0, done.stderr
    author = kube.get("plantrigger", "push", "-n", ns)["metadata"]["annotations"]
    assert json.loads(author["planops.dev/author"])["username"] == AUTHOR
    return ns


def push(ref: str = "refs/heads/main", after: str = "a1" * 20, **extra: Any) -> bytes:
    body = {"ref": ref, "after": after, "repository": {"full_name": "team/app"}, **extra}
    return json.dumps(body).encode()


def deliver(
    url: str, ns: str, body: bytes, delivery: str, secret: str = SECRET, name: str = "push"
) -> tuple[int, dict[str, Any]]:
    headers = {
        "Content-Type": "application/json",
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": "sha256=" + sign(secret.encode(), body),
    }
    req = urllib.request.Request(f"{url}/hooks/{ns}/{name}", data=body, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def accepted(kube: Kube, url: str, ns: str, body: bytes, delivery: str) -> dict[str, Any]:
    """The answer to a delivery that must start a Plan (else: why not, from the status)."""
    status, answer = deliver(url, ns, body, delivery)
    if status != 202:
        why = (kube.get("plantrigger", "push", "-n", ns).get("status") or {}).get("lastRefused")
        raise AssertionError(f"{status} {answer}: {why}")
    return answer


def plans(kube: Kube, ns: str) -> list[str]:
    return [p["metadata"]["name"] for p in kube.get("plans", "-n", ns)["items"]]


def last(kube: Kube, ns: str, which: str) -> dict[str, Any]:
    return dict(kube.get("plantrigger", "push", "-n", ns)["status"][which])


def test_a_signed_push_starts_a_plan_from_the_payload_that_runs_on_the_node(
    kube: Kube, hooked: str, receiver: str
):
    name = accepted(kube, receiver, hooked, push(), f"d-{uuid.uuid4()}")["plan"]
    plan = kube.get("plan", name, "-n", hooked)
    assert plan["spec"]["input"] == {"repo": "team/app", "revision": "a1" * 20}
    assert json.loads(plan["metadata"]["annotations"]["planops.dev/author"])["username"] == AUTHOR
    done = wait_plan(kube, hooked, name, timeout=600)
    assert done["status"]["phase"] == "Succeeded", done["status"]
    assert "building team/app at " + "a1" * 20 in steps(done)["build"]["output"]
    assert last(kube, hooked, "lastAccepted")["plan"] == name
    assert kube.get("plantrigger", "push", "-n", hooked)["status"]["accepted"] == 1


def test_a_bad_signature_a_replay_an_oversized_body_and_a_filter_miss_start_nothing(
    kube: Kube, hooked: str, receiver: str
):
    status, answer = deliver(receiver, hooked, push(), "forged", secret="guess")
    assert (status, answer["reason"]) == (401, "BadSignature")
    assert last(kube, hooked, "lastRefused")["reason"] == "BadSignature"
    big = push(pad="x" * 70000)
    status, answer = deliver(receiver, hooked, big, "big")
    assert (status, answer["reason"]) == (413, "TooLarge")
    status, answer = deliver(receiver, hooked, push(ref="refs/tags/v1"), "tag")
    assert (status, answer["result"], answer["reason"]) == (200, "filtered", "FilteredOut")
    assert last(kube, hooked, "lastFiltered")["reason"] == "FilteredOut"
    assert plans(kube, hooked) == []
    # a replay: the first starts a Plan, the second (same delivery id) nothing
    delivery = f"d-{uuid.uuid4()}"
    accepted(kube, receiver, hooked, push(), delivery)
    status, answer = deliver(receiver, hooked, push(), delivery)
    assert (status, answer["reason"]) == (409, "Replay")
    assert len(plans(kube, hooked)) == 1
    reasons = kube.run("get", "events", "-n", hooked, "-o", "json").stdout
    missing = [r for r in ("BadSignature", "TooLarge", "FilteredOut", "Replay") if r not in reasons]
    assert missing == [], reasons[-3000:]


def test_a_replay_to_another_replica_is_refused_by_the_plans_name(
    kube: Kube, kubeconfig: str, hooked: str, receiver: str, tmp_path: Path
):
    delivery = f"d-{uuid.uuid4()}"
    accepted(kube, receiver, hooked, push(), delivery)
    with running_receiver(kubeconfig, tmp_path / "second.log") as second:
        status, answer = deliver(second, hooked, push(), delivery)
    assert (status, answer["reason"]) == (409, "Replay")
    assert len(plans(kube, hooked)) == 1


def test_payload_text_that_the_template_refuses_runs_nothing(
    kube: Kube, hooked: str, receiver: str
):
    # the revision is data judged by the template's inputSchema, never rendered twice
    status, answer = deliver(receiver, hooked, push(after="{{input.repo}}; id"), "inj")
    if status == 202:  # admitted by the API server: the reconciler refuses it (Invalid)
        done = wait_plan(kube, hooked, answer["plan"], timeout=600)
        assert done["status"]["phase"] == "Invalid", done["status"]
    else:
        assert (status, answer["reason"]) == (422, "PlanInvalid")


def test_revoked_use_stops_the_triggers_next_run(kube: Kube, hooked: str, receiver: str):
    accepted(kube, receiver, hooked, push(), f"d-{uuid.uuid4()}")
    kube.run("delete", "rolebinding", "alice-use-capsules", "-n", hooked)
    deadline = time.monotonic() + 30
    while True:  # RBAC's cache catches up within a moment
        status, answer = deliver(receiver, hooked, push(after="b2" * 20), f"d-{uuid.uuid4()}")
        if status != 202 or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert (status, answer["reason"]) == (403, "Forbidden"), answer
    assert "may not use Capsule" in last(kube, hooked, "lastRefused")["message"]
    assert len(plans(kube, hooked)) <= 2


def test_forged_deliveries_do_not_starve_a_signed_one(kube: Kube, hooked: str, receiver: str):
    """More forged deliveries than the trigger's burst (20): its rate is charged only once a
    signature is checked, so the signed delivery after them still starts a Plan."""
    for i in range(25):
        status, answer = deliver(receiver, hooked, push(), f"forged-{i}", secret=f"guess-{i}")
        assert (status, answer["reason"]) == (401, "BadSignature")
    accepted(kube, receiver, hooked, push(), f"d-{uuid.uuid4()}")
    assert len(plans(kube, hooked)) == 1
