"""The chart's trigger receiver (docs/triggers.md): off by default; on, its own Deployment,
Service and ServiceAccount running the operator image's `planops-trigger-receiver`, with rights
that never include Plans, Secrets or Capsules of its own; never rendered where authors are not
recorded (it acts as each trigger's recorded author)."""

from __future__ import annotations

import subprocess

import pytest

from tests.unit.test_chart import CHART, kinds, render

pytestmark = [pytest.mark.cluster, pytest.mark.helm]
ON = ("--set", "triggers.enabled=true", "--kube-version", "1.36.0")


def receiver_docs(helm: str, *args: str):
    return [d for d in render(helm, *ON, *args) if "trigger-receiver" in d["metadata"]["name"]]


def test_the_receiver_is_off_by_default(helm: str):
    assert [d for d in render(helm) if "trigger-receiver" in d["metadata"]["name"]] == []


def test_the_receiver_runs_in_its_own_restricted_deployment_with_the_values(helm: str):
    docs = receiver_docs(helm, "--set", "triggers.replicas=3", "--set", "triggers.bodyBytes=65536")
    (dep,) = kinds(docs, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["python3", "-m", "planops.triggers.main"]
    assert "--body-bytes=65536" in container["args"]
    # the bounds of senders without the secret, and the cache, reach the receiver
    for flag in ("--requests-per-second=200", "--unverified-per-minute=30", "--cache-seconds=10"):
        assert flag in container["args"], container["args"]
    assert dep["spec"]["replicas"] == 3
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    assert pod["serviceAccountName"] == dep["metadata"]["name"]
    # its pods are not the operator's: the operator's selector does not match them
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert labels["app.kubernetes.io/name"] == "planops-trigger-receiver"
    (svc,) = kinds(docs, "Service")
    assert svc["spec"]["selector"] == dep["spec"]["selector"]["matchLabels"]
    assert {p["name"] for p in svc["spec"]["ports"]} >= {"http"}


def test_the_receivers_rights_are_exactly_these(helm: str):
    (role,) = kinds(receiver_docs(helm), "ClusterRole")
    rules = {
        (tuple(r["apiGroups"]), tuple(r["resources"]), tuple(r["verbs"])) for r in role["rules"]
    }
    assert rules == {
        (("planops.dev",), ("plantriggers",), ("get",)),
        (("planops.dev",), ("plantriggers/status",), ("patch",)),
        (("",), ("events",), ("create",)),
        (("",), ("users", "groups", "serviceaccounts"), ("impersonate",)),
    }


@pytest.mark.parametrize(
    "args",
    [
        ("--set", "admissionPolicy.recordAuthor=false"),
        ("--set", "admissionPolicy.enabled=false"),
        ("--kube-version", "1.33.0"),  # no MutatingAdmissionPolicy served
    ],
)
def test_the_receiver_is_refused_where_authors_are_not_recorded(helm: str, args):
    done = subprocess.run(
        [helm, "template", "po", str(CHART), "--set", "triggers.enabled=true",
         "--kube-version", "1.36.0", *args],
        capture_output=True,
        text=True,
    )  # fmt: skip
    assert done.returncode != 0
    assert "recordAuthor" in done.stderr


def test_plan_triggers_are_an_authors_act_in_the_policies(helm: str):
    docs = render(helm, "--kube-version", "1.36.0")
    policies = {d["metadata"]["name"]: d for d in docs if d["kind"].endswith("AdmissionPolicy")}
    for name in ("po-planops-capsule-use", "po-planops-record-author"):
        (rule,) = policies[name]["spec"]["matchConstraints"]["resourceRules"]
        assert "plantriggers" in rule["resources"], name
