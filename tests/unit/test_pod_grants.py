"""A step's pod grants (security profiles, services) are its Capsule owner's, within the
operator's cap, and a plan's author only chooses among them: the validator (CLI, webhook,
reconciler) and dispatch (both executors) refuse the same steps with the same words, before
anything runs; `run --local` refuses a step's services and notes its profile.

An attacker with a plan author's rights can name any profile or service, on any step kind: every
such refusal is kept here."""

from __future__ import annotations

import asyncio
import os
from typing import Any

import pytest
from pydantic import ValidationError

from planops.api import CapsuleSpec
from planops.engine import Policy, Run, pod_grants, validate
from planops.engine import dispatch as rules
from planops.engine.policy import ProfileCaps
from planops.kube.manifests import PlanRef
from planops.reconciler.run import attempt_objects as dispatching
from planops.runners.local import LocalRunner

from .helpers import capsule, plan, resolver

BUSYBOX = "busybox:1.36"
PROFILES = [
    {"name": "root", "runAsUser": 0},
    {"name": "builder", "runAsUser": 0, "capabilities": ["CHOWN", "SETUID", "SETGID"]},
    {"name": "netadmin", "capabilities": ["NET_ADMIN"]},
    {"name": "priv", "privileged": True},
    {"name": "hostnet", "hostNetwork": True, "hostPID": True},
    {"name": "docker", "hostPaths": [{"path": "/var/run/docker.sock", "mountPath": "/run/d"}]},
    {"name": "sudo", "runAsUser": 1000, "allowPrivilegeEscalation": True},
]
PG = {
    "name": "pg",
    "image": "postgres:16",
    "ports": [{"containerPort": 5432}],
    "readinessProbe": {"exec": {"command": ["pg_isready"]}},
}
REDIS = {"name": "redis", "image": "redis:7", "ports": [{"containerPort": 6379}]}


def grants(**kw: Any) -> CapsuleSpec:
    base: dict[str, Any] = {
        "image": BUSYBOX,
        "securityProfiles": PROFILES,
        "services": [PG, REDIS],
    }
    return capsule(**(base | kw))


def refusals(step: dict[str, Any], c: CapsuleSpec, policy: Policy | None = None) -> list[Any]:
    return [
        (e.code, e.path, e.message)
        for e in validate(plan(step), resolver(default=c), policy or Policy())
    ]


def admitted(step: dict[str, Any], c: CapsuleSpec, policy: Policy | None = None) -> str | None:
    """What dispatch says of the step's first attempt, as the reconciler asks it (its Job made
    when admitted)."""
    spec = plan(step)
    (d,) = Run("p", spec).decide(0.0).dispatch
    ref = PlanRef("ns", "p", "uid", "run")
    refusal = dispatching.admit(ref, d, c, spec, policy or Policy())
    if refusal is None and d.kind != "capsule":
        assert not isinstance(dispatching.job(ref, d, c, spec, policy or Policy(), None), str)
    return refusal


# -- what a step may pick --------------------------------------------------------------------


def test_a_step_picks_a_profile_and_services_the_capsule_declares():
    step = {"id": "b", "shell": "echo hi", "securityProfile": "builder", "services": ["pg"]}
    assert refusals(step, grants()) == []
    assert admitted(step, grants()) is None


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        (
            {"id": "b", "shell": "echo", "securityProfile": "admin"},
            (
                "security-profile",
                "steps[0].securityProfile",
                "security profile 'admin' is not one of the Capsule's securityProfiles "
                "(declared: root, builder, netadmin, priv, hostnet, docker, sudo)",
            ),
        ),
        (
            {"id": "b", "shell": "echo", "services": ["pg", "mysql"]},
            (
                "service",
                "steps[0].services[1]",
                "service 'mysql' is not one of the Capsule's services (declared: pg, redis)",
            ),
        ),
        (
            {"id": "b", "shell": "echo", "services": ["pg", "pg"]},
            ("service", "steps[0].services[1]", "service 'pg' is listed twice"),
        ),
        (
            {"id": "b", "tool": "notes", "securityProfile": "root"},
            (
                "step-kind",
                "steps[0].securityProfile",
                "securityProfile is a shell step's field: a tool step runs as its Capsule's "
                "owner made it (a tool's profile and services are not a plan's to choose)",
            ),
        ),
        (
            {"id": "b", "capsule": "other", "input": "x", "services": ["pg"]},
            (
                "step-kind",
                "steps[0].services",
                "services is a shell step's field: a capsule step runs no container of its own",
            ),
        ),
    ],
)
def test_what_the_capsule_does_not_grant_is_refused_before_anything_runs_and_at_dispatch(
    step: dict[str, Any], expected: tuple[str, str, str]
):
    c = grants(spawn={"allow": ["other"]})
    found = refusals(step, c)
    assert expected in found, found
    # dispatch refuses it too, with the same words (a Capsule may change after validation)
    assert admitted(step, c) is not None
    assert expected[2] in (admitted(step, c) or "")


def test_a_capsule_without_grants_grants_nothing():
    step = {"id": "b", "shell": "echo", "securityProfile": "root", "services": ["pg"]}
    found = refusals(step, capsule(image=BUSYBOX))
    assert [(code, path) for code, path, _ in found] == [
        ("security-profile", "steps[0].securityProfile"),
        ("service", "steps[0].services[0]"),
    ]
    assert "(declared: none)" in found[0][2] and "(declared: none)" in found[1][2]


def test_body_and_finally_steps_are_judged_alike():
    body = {"id": "m", "map": {"over": "{{input.xs}}", "do": {"shell": "echo", "services": ["x"]}}}
    final = {"id": "f", "shell": "echo", "securityProfile": "nope"}
    spec = plan(body, finally_=[final], inputSchema={"type": "object"}, input={"xs": [1]})
    found = {(e.code, e.path) for e in validate(spec, resolver(default=grants()))}
    assert ("service", "steps[0].map.do.services[0]") in found, found
    assert ("security-profile", "finally[0].securityProfile") in found, found


# -- the operator's cap ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("profile", "caps", "past"),
    [
        ("priv", ProfileCaps(), "a privileged container (allowPrivileged is false)"),
        (
            "hostnet",
            ProfileCaps(),
            "the node's namespaces: hostNetwork, hostPID (allowHostNamespaces is false)",
        ),
        ("netadmin", ProfileCaps(), "capabilities NET_ADMIN (allowedCapabilities: AUDIT_WRITE"),
        ("docker", ProfileCaps(), "host paths /var/run/docker.sock (allowedHostPaths: none)"),
        (
            "docker",
            ProfileCaps(allowed_host_paths=("/var/run/docker",)),  # a prefix of the text only
            "host paths /var/run/docker.sock (allowedHostPaths: /var/run/docker)",
        ),
        ("root", ProfileCaps(allow_run_as_root=False), "root (runAsUser 0; allowRunAsRoot is "),
        # uid 1000 that may escalate: `sudo`, `su` or any setuid-root program of the image
        # made it root under a cap that forbids root
        ("sudo", ProfileCaps(allow_run_as_root=False), "privilege escalation, by which a setuid"),
        ("builder", ProfileCaps(allowed_capabilities=("CHOWN",)), "capabilities SETUID, SETGID"),
    ],
)
def test_a_profile_past_the_operators_cap_is_refused_by_validate_and_dispatch(
    profile: str, caps: ProfileCaps, past: str
):
    step = {"id": "b", "shell": "echo", "securityProfile": profile}
    policy = Policy(profiles=caps)
    ((code, path, message),) = refusals(step, grants(), policy)
    assert (code, path) == ("security-profile", "steps[0].securityProfile")
    assert message.startswith(f"the Capsule's security profile {profile!r} asks for ")
    assert past in message and message.endswith(
        "beyond what the operator allows any Capsule (policy.securityProfiles)"
    )
    assert admitted(step, grants(), policy) == rules.DENIED + message


@pytest.mark.parametrize(
    ("profile", "caps"),
    [
        ("priv", ProfileCaps(allow_privileged=True)),
        ("hostnet", ProfileCaps(allow_host_namespaces=True)),
        ("netadmin", ProfileCaps(allowed_capabilities=("NET_ADMIN",))),
        ("docker", ProfileCaps(allowed_host_paths=("/var/run",))),
        ("docker", ProfileCaps(allowed_host_paths=("/var/run/docker.sock",))),
        ("root", ProfileCaps()),  # root is the Capsule owner's to grant, by default
        ("builder", ProfileCaps()),  # Pod Security baseline's capabilities too
        ("sudo", ProfileCaps()),  # escalation, where root may be granted anyway
    ],
)
def test_what_the_cluster_admin_allows_a_capsule_may_grant(profile: str, caps: ProfileCaps):
    step = {"id": "b", "shell": "echo", "securityProfile": profile}
    assert refusals(step, grants(), Policy(profiles=caps)) == []
    assert admitted(step, grants(), Policy(profiles=caps)) is None


def test_the_operators_default_cap_is_the_charts():
    caps = Policy().profiles
    assert (caps.allow_privileged, caps.allow_host_namespaces, caps.allowed_host_paths) == (
        False,
        False,
        (),
    )
    assert caps.allow_run_as_root and "SYS_ADMIN" not in caps.allowed_capabilities


def test_a_services_own_profile_image_and_limits_are_held_to_the_operators_bounds():
    c = grants(
        services=[
            {**PG, "securityProfile": "netadmin"},
            {**REDIS, "image": "evil.example/redis:7", "resources": {"limits": {"memory": "8Gi"}}},
        ]
    )
    step = {"id": "b", "shell": "echo", "services": ["pg", "redis"]}
    policy = Policy(images=("docker.io/library/*",), max_memory="1Gi")
    found = refusals(step, c, policy)
    assert found == [
        (
            "service",
            "steps[0].services[0]",
            "service 'pg' runs under the Capsule's security profile 'netadmin', which asks for "
            "capabilities NET_ADMIN (allowedCapabilities: AUDIT_WRITE, CHOWN, DAC_OVERRIDE, "
            "FOWNER, FSETID, KILL, MKNOD, NET_BIND_SERVICE, SETFCAP, SETGID, SETPCAP, SETUID, "
            "SYS_CHROOT), beyond what the operator allows any Capsule (policy.securityProfiles)",
        ),
        (
            "service",
            "steps[0].services[1]",
            "service 'redis''s image 'evil.example/redis:7' is not allowed by the operator's "
            "allowlist (policy.allowedImages)",
        ),
        (
            "limits",
            "steps[0].services[1]",
            "service 'redis''s memory limit 8Gi exceeds the operator's maximum of 1Gi",
        ),
    ]
    assert admitted(step, c, policy) == rules.DENIED + "; ".join(m for _, _, m in found)


def test_two_services_of_one_step_may_not_listen_on_one_port():
    c = grants(services=[PG, {**REDIS, "ports": [{"containerPort": 5432}]}])
    step = {"id": "b", "shell": "echo", "services": ["pg", "redis"]}
    assert refusals(step, c) == [
        (
            "service",
            "steps[0].services",
            "services 'pg' and 'redis' both listen on port 5432/TCP: a step's services share its "
            "pod's network",
        )
    ]


def test_a_step_that_asks_for_nothing_costs_nothing_here(monkeypatch: pytest.MonkeyPatch):
    def never(*_: Any) -> Any:
        raise AssertionError("judged a step that asks for no pod grant")

    monkeypatch.setattr(pod_grants, "_profile", never)
    monkeypatch.setattr(pod_grants, "_services", never)
    assert refusals({"id": "a", "shell": "echo"}, grants()) == []
    assert admitted({"id": "a", "shell": "echo"}, grants()) is None


# -- what a Capsule may declare --------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ({"securityProfiles": [PROFILES[0], PROFILES[0]]}, "securityProfiles name declared twice"),
        ({"services": [PG, PG]}, "services name declared twice: pg"),
        ({"services": [{**PG, "name": "step"}]}, "a service is not named 'step'"),
        ({"services": [{**PG, "name": "collect"}]}, "a service is not named 'collect'"),
        ({"services": [{**PG, "name": "fetch"}]}, "a service is not named 'fetch'"),
        (
            {"services": [{**PG, "securityProfile": "ghost"}]},
            "service 'pg': securityProfile 'ghost' is not one of the Capsule's securityProfiles",
        ),
        (
            {"securityProfiles": [PROFILES[4]], "services": [{**PG, "securityProfile": "hostnet"}]},
            "shares the node's namespaces (hostNetwork, hostPID), which are the whole pod's",
        ),
        ({"services": [{**PG, "env": [{"name": "PLANOPS_X", "value": "1"}]}]}, "PLANOPS_"),
        (
            {"services": [{**PG, "ports": [{"containerPort": 1}, {"containerPort": 1}]}]},
            "port declared twice: 1/TCP",
        ),
        (
            {
                "services": [
                    {**PG, "readinessProbe": {"exec": {"command": ["x"]}, "tcpSocket": {"port": 1}}}
                ]
            },
            "a probe is exactly one of exec, tcpSocket, httpGet",
        ),
        ({"services": [{**PG, "resources": {"limits": {"memory": "lots"}}}]}, "'lots' is not"),
        ({"securityProfiles": [{"name": "x", "capabilities": ["CAP_NET_ADMIN"]}]}, "CAP_ prefix"),
        (
            {
                "securityProfiles": [
                    {"name": "x", "hostPaths": [{"path": "/a/../etc", "mountPath": "/m"}]}
                ]
            },
            "without empty parts, '.' or '..'",
        ),
        (
            {
                "securityProfiles": [
                    {"name": "x", "hostPaths": [{"path": "/a", "mountPath": "/planops/x"}]}
                ]
            },
            "not / nor under /workspace, /planops",
        ),
    ],
)
def test_a_capsule_declaring_grants_badly_is_refused_saying_why(spec: dict[str, Any], why: str):
    with pytest.raises(ValidationError) as e:
        capsule(**spec)
    assert why in str(e.value), str(e.value)


# -- run --local -----------------------------------------------------------------------------


def local(step: dict[str, Any], c: CapsuleSpec) -> tuple[Any, list[dict[str, Any]]]:
    records: list[dict[str, Any]] = []
    runner = LocalRunner({"default": c}, observer=records.append)
    report = asyncio.run(runner.run("p", plan(step)))
    (record,) = report.steps
    return record, records


def test_run_local_refuses_a_steps_services_before_it_starts(tmp_path: Any):
    marker = tmp_path / "ran"
    step = {"id": "t", "shell": f"touch {marker}", "services": ["pg", "redis"]}
    record, _ = local(step, grants(shell={"allow": ["touch"]}))
    assert (record.status, record.error) == (
        "failed",
        "services pg, redis run beside the step in its pod, which a local run cannot start (run "
        "the plan in a cluster)",
    )
    assert not marker.exists()


def test_run_local_notes_that_a_profile_applies_in_a_pod_only():
    step = {"id": "t", "shell": "echo hi", "securityProfile": "builder"}
    record, records = local(step, grants())
    assert (record.status, record.output) == ("success", "hi")
    notices = [r["message"] for r in records if r["event"] == "notice" and r.get("stepId") == "t"]
    assert notices == [
        "security profile 'builder' (uid 0, capabilities CHOWN, SETUID, SETGID) applies in a pod "
        f"only: here the step runs as you (uid {os.getuid()}), with your privileges"
    ]


def test_run_local_refuses_a_profile_past_the_cap_as_the_cluster_does():
    step = {"id": "t", "shell": "echo hi", "securityProfile": "priv"}
    found = refusals(step, grants())
    assert [code for code, _, _ in found] == ["security-profile"]  # validate, before it runs
    record, _ = local(step, grants())
    assert record.status == "failed" and record.error.startswith(rules.DENIED)
