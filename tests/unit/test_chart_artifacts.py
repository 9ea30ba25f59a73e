"""The chart's artifact repository (charts/planops): off by default (no flag, no Secret read);
on, the operator gets the repository as JSON (never a credential) and may `get` exactly the
listed Secrets, by name, in the release's namespace; the schema refuses an enabled repository
without its endpoint, bucket or credentials Secret. Rendered by the real helm."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from planops.main import _parser
from planops.store.repositories import default_from_flag
from tests.unit.test_chart import CHART, kinds, render

pytestmark = [pytest.mark.cluster, pytest.mark.helm]

ON = [
    "--set",
    "artifactRepository.enabled=true",
    "--set",
    "artifactRepository.endpoint=https://s3.example.com",
    "--set",
    "artifactRepository.bucket=arts",
    "--set",
    "artifactRepository.credentialsSecret.name=s3-creds",
]


def _args(docs: list[dict[str, Any]]) -> list[str]:
    (deploy,) = kinds(docs, "Deployment")
    return list(deploy["spec"]["template"]["spec"]["containers"][0]["args"])


def _secret_rules(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {**rule, "namespace": role["metadata"].get("namespace")}
        for role in kinds(docs, "Role") + kinds(docs, "ClusterRole")
        for rule in role.get("rules") or []
        if "secrets" in rule.get("resources", [])
    ]


def _plan_verbs(docs: list[dict[str, Any]]) -> set[str]:
    return {
        verb
        for role in kinds(docs, "Role") + kinds(docs, "ClusterRole")
        if role["metadata"]["name"].endswith("-operator")  # the operator's own
        for rule in role.get("rules") or []
        if "plans" in rule.get("resources", []) and "planops.dev" in rule.get("apiGroups", [])
        for verb in rule["verbs"]
    }


def test_off_by_default_no_flag_and_no_secret_read(helm: str) -> None:
    docs = render(helm)
    assert not [a for a in _args(docs) if a.startswith("--artifact")]
    assert _secret_rules(docs) == []
    assert "patch" not in _plan_verbs(docs)  # no finalizer to add: Plans are never patched


def test_on_the_operator_may_patch_plans_for_the_finalizer_and_has_its_timeout(helm: str) -> None:
    docs = render(helm, *ON, "--set", "artifactRepository.gcTimeoutSeconds=120")
    assert "patch" in _plan_verbs(docs)
    parsed = _parser().parse_args(_args(docs))
    assert parsed.artifact_gc_timeout == 120
    assert default_from_flag(parsed.artifact_repository) is not None  # not in the JSON
    watched = render(helm, *ON, "--set", "watchNamespaces={team-a}")
    assert "patch" in _plan_verbs(watched)


def test_on_the_operator_gets_the_repository_and_only_its_secrets(helm: str) -> None:
    docs = render(helm, *ON, "--set", "artifactRepository.capsuleSecrets={team-a-s3}")
    args = _args(docs)
    (flag,) = [a for a in args if a.startswith("--artifact-repository=")]
    parsed = _parser().parse_args(args)
    repo = default_from_flag(parsed.artifact_repository)
    assert repo is not None and repo.bucket == "arts" and repo.credentials_secret.name == "s3-creds"
    sent = json.loads(flag.split("=", 1)[1])  # where and which Secret: nothing secret
    assert set(sent["credentialsSecret"]) == {"name", "accessKeyIdKey", "secretAccessKeyKey"}
    assert parsed.artifact_secrets_namespace
    (rule,) = _secret_rules(docs)
    assert rule["verbs"] == ["get"]
    assert sorted(rule["resourceNames"]) == ["s3-creds", "team-a-s3"]
    assert rule["namespace"] == parsed.artifact_secrets_namespace


@pytest.mark.parametrize("missing", ["endpoint", "bucket", "credentialsSecret.name"])
def test_the_schema_refuses_an_enabled_repository_without(helm: str, missing: str) -> None:
    values = []
    for v in ON[1::2]:
        if not v.startswith(f"artifactRepository.{missing}="):
            values += ["--set", v]
    done = subprocess.run(
        [helm, "template", "po", str(CHART), *values], capture_output=True, text=True
    )
    assert done.returncode != 0, json.dumps(values)
    assert missing.split(".", maxsplit=1)[0] in done.stderr
