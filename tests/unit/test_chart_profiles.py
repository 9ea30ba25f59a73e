"""The chart's cap on security profiles (policy.securityProfiles), rendered by the real helm:
each value becomes the operator's flag, the flags the Policy the validator and dispatch judge
with; the defaults are the operator's own (root and baseline's capabilities, nothing more), and
the schema refuses values the operator would not start with."""

from __future__ import annotations

import subprocess

import pytest

from planops.api.pod_models import BASELINE_CAPABILITIES
from planops.engine.policy import ProfileCaps
from planops.main import _parser, profile_caps

from .test_chart import CHART, kinds, render

pytestmark = [pytest.mark.cluster, pytest.mark.helm]


def caps(helm: str, *args: str) -> ProfileCaps:
    (dep,) = kinds(render(helm, *args), "Deployment")
    (c,) = dep["spec"]["template"]["spec"]["containers"]
    return profile_caps(_parser().parse_args(c["args"]))


def test_by_default_a_capsule_may_grant_root_and_baselines_capabilities_and_nothing_more(
    helm: str,
):
    assert caps(helm) == ProfileCaps()
    assert caps(helm).allowed_capabilities == BASELINE_CAPABILITIES


def test_the_cluster_admin_turns_each_power_on_in_the_values(helm: str):
    got = caps(
        helm,
        "--set",
        "policy.securityProfiles.allowPrivileged=true,"
        "policy.securityProfiles.allowHostNamespaces=true,"
        "policy.securityProfiles.allowRunAsRoot=false",
        "--set",
        "policy.securityProfiles.allowedCapabilities={baseline,NET_ADMIN}",
        "--set",
        "policy.securityProfiles.allowedHostPaths={/var/cache/ci,/opt/tools}",
    )
    assert got == ProfileCaps(
        allow_privileged=True,
        allow_host_namespaces=True,
        allow_run_as_root=False,
        allowed_capabilities=(*BASELINE_CAPABILITIES, "NET_ADMIN"),
        allowed_host_paths=("/var/cache/ci", "/opt/tools"),
    )
    assert caps(helm, "--set-json", "policy.securityProfiles.allowedCapabilities=[]") == (
        ProfileCaps(allowed_capabilities=())
    )


@pytest.mark.parametrize(
    "bad",
    [
        ["--set", "policy.securityProfiles.allowedCapabilities={CAP_NET_ADMIN}"],
        ["--set", "policy.securityProfiles.allowedCapabilities={net_admin}"],
        ["--set", "policy.securityProfiles.allowedHostPaths={var/cache}"],
        ["--set", "policy.securityProfiles.allowedHostPaths={/var/../etc}"],
        ["--set", "policy.securityProfiles.allowPrivileged=yes"],
        ["--set", "policy.securityProfiles.allowEverything=true"],
    ],
)
def test_the_schema_refuses_what_the_operator_would_not_start_with(helm: str, bad: list[str]):
    done = subprocess.run(
        [helm, "template", "po", str(CHART), *bad], capture_output=True, text=True
    )
    assert done.returncode != 0 and "values don't meet the specifications" in done.stderr
