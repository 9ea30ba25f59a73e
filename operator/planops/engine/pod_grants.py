"""What a step's pod may have beyond today's restricted one, only as its Capsule grants it and
within the operator's cap: a security profile (`securityProfile`, one of the Capsule's
securityProfiles, capped by policy.securityProfiles) and services (`services`, the Capsule's, as
sidecars of the step's pod).

One rule for every executor: the validator refuses a step on these before anything runs
(validation.pod_checks: each refusal with its code and field), and dispatch asks again right
before an attempt starts (engine.dispatch.admit: the Capsule or the operator's cap may have
changed since), with the same words. A step that asks for neither costs one test here and keeps
today's single-container pod.

Only steps that run their author's own command take them (shell steps, and script steps): a
tool is its Capsule owner's program, with its credentials, and runs as its owner made it; a
capsule or control step runs no container of its own.
"""

from __future__ import annotations

from collections.abc import Iterator

from planops.api import quantity
from planops.api.capsule_models import CapsuleSpec
from planops.api.models import Step
from planops.api.pod_models import SecurityProfile
from planops.api.resources import resources
from planops.api.service_models import Service
from planops.engine.allowlists import named_image_refusal
from planops.engine.policy import Policy, ProfileCaps
from planops.engine.step_grants import OWN_COMMAND, Refusal

#: where the operator's cap is set (the chart's values; the operator's flags)
CAP = "policy.securityProfiles"


def asks(step: Step) -> bool:
    """The step asks for a pod grant (else it keeps today's pod, and nothing here applies)."""
    return step.security_profile is not None or bool(step.services)


def refusals(step: Step, kind: str, capsule: CapsuleSpec | None, policy: Policy) -> list[Refusal]:
    """Every grant the step asks for that its Capsule does not give, or the operator's cap does
    not allow ([]: none). `capsule` None: only what needs no Capsule (the step's kind)."""
    if not asks(step):
        return []  # today's step: nothing to judge
    if kind not in OWN_COMMAND:
        field = "securityProfile" if step.security_profile is not None else "services"
        runs = (
            "runs as its Capsule's owner made it (a tool's profile and services are not a "
            "plan's to choose)"
            if kind == "tool"
            else "runs no container of its own"
        )
        return [
            Refusal("step-kind", field, f"{field} is a shell step's field: a {kind} step {runs}")
        ]
    if capsule is None:
        return []
    return [*_profile(step, capsule, policy), *_services(step, capsule, policy)]


def _profile(step: Step, capsule: CapsuleSpec, policy: Policy) -> Iterator[Refusal]:
    name = step.security_profile
    if name is None:
        return
    profile = capsule.security_profile(name)
    if profile is None:
        known = ", ".join(p.name for p in capsule.security_profiles) or "none"
        yield Refusal(
            "security-profile",
            "securityProfile",
            f"security profile {name!r} is not one of the Capsule's securityProfiles "
            f"(declared: {known})",
        )
        return
    past = beyond_cap(profile, policy.profiles)
    if past:
        yield Refusal(
            "security-profile",
            "securityProfile",
            f"the Capsule's security profile {name!r} asks for {'; '.join(past)}, beyond what "
            f"the operator allows any Capsule ({CAP})",
        )


def beyond_cap(profile: SecurityProfile, caps: ProfileCaps) -> list[str]:
    """What `profile` asks for that the operator's cap does not allow, each with the cap that
    says so ([]: it is within it)."""
    out = []
    if profile.privileged and not caps.allow_privileged:
        out.append("a privileged container (allowPrivileged is false)")
    shared = profile.host_namespaces()
    if shared and not caps.allow_host_namespaces:
        out.append(f"the node's namespaces: {', '.join(shared)} (allowHostNamespaces is false)")
    if profile.uid() == 0 and not caps.allow_run_as_root:
        out.append("root (runAsUser 0; allowRunAsRoot is false)")
    elif profile.allow_privilege_escalation and not caps.allow_run_as_root:
        # a setuid-root program of the image (su, sudo, ping) makes any uid root once it may
        # escalate: why Pod Security's restricted level forbids both
        out.append(
            "privilege escalation, by which a setuid-root program of the image makes its uid "
            "root (allowPrivilegeEscalation; allowRunAsRoot is false)"
        )
    extra = [c for c in profile.capabilities if c not in caps.allowed_capabilities]
    if extra:
        allowed = ", ".join(caps.allowed_capabilities) or "none"
        out.append(f"capabilities {', '.join(extra)} (allowedCapabilities: {allowed})")
    outside = [h.path for h in profile.host_paths if not _under(h.path, caps.allowed_host_paths)]
    if outside:
        allowed = ", ".join(caps.allowed_host_paths) or "none"
        out.append(f"host paths {', '.join(outside)} (allowedHostPaths: {allowed})")
    return out


def _under(path: str, prefixes: tuple[str, ...]) -> bool:
    """`path` is one of `prefixes` or inside one, component by component (`/var/cache` is not
    inside `/var/ca`)."""
    return any(path == p or path.startswith(p.rstrip("/") + "/") or p == "/" for p in prefixes)


def _services(step: Step, capsule: CapsuleSpec, policy: Policy) -> Iterator[Refusal]:
    seen: dict[str, Service] = {}
    for n, name in enumerate(step.services):
        field = f"services[{n}]"
        service = capsule.service(name)
        if name in seen:
            yield Refusal("service", field, f"service {name!r} is listed twice")
        elif service is None:
            known = ", ".join(s.name for s in capsule.services) or "none"
            yield Refusal(
                "service",
                field,
                f"service {name!r} is not one of the Capsule's services (declared: {known})",
            )
        else:
            seen[name] = service
            yield from _service(field, service, capsule, policy)
    yield from _ports(list(seen.values()))


def _service(field: str, s: Service, capsule: CapsuleSpec, policy: Policy) -> Iterator[Refusal]:
    refused = named_image_refusal(
        s.image, f"service {s.name!r}'s image", capsule, policy, own=s.image
    )
    if refused is not None:
        yield Refusal("service", field, refused)
    profile = capsule.security_profile(s.security_profile) if s.security_profile else None
    past = beyond_cap(profile, policy.profiles) if profile is not None else []
    if past:
        yield Refusal(
            "service",
            field,
            f"service {s.name!r} runs under the Capsule's security profile "
            f"{s.security_profile!r}, which asks for {'; '.join(past)}, beyond what the "
            f"operator allows any Capsule ({CAP})",
        )
    for key, value, ceiling, whose in _over_ceilings(s, capsule, policy):
        yield Refusal(
            "limits",
            field,
            f"service {s.name!r}'s {key} limit {value} exceeds {whose}'s maximum of {ceiling}",
        )


def _over_ceilings(
    s: Service, capsule: CapsuleSpec, policy: Policy
) -> Iterator[tuple[str, str, str, str]]:
    """A service container's limits (its own, else planops' defaults) above the Capsule's
    maxResources or the operator's ceilings, as (resource, limit, ceiling, whose)."""
    limits = resources(s.resources, None)["limits"]
    maxima = capsule.max_resources
    for key in ("cpu", "memory"):
        value = limits.get(key)
        for ceiling, whose in (
            (getattr(maxima, key) if maxima is not None else None, "the Capsule"),
            (getattr(policy, f"max_{key}"), "the operator"),
        ):
            if value is not None and ceiling is not None and _above(value, ceiling):
                yield key, value, str(ceiling), whose


def _above(value: str | int, ceiling: str | int) -> bool:
    try:
        return quantity.parse(value) > quantity.parse(ceiling)
    except ValueError:  # the Capsule's bad quantity: refused where the Capsule is read
        return False


def _ports(services: list[Service]) -> Iterator[Refusal]:
    """Two services of one step listening on one port: they share the pod's network."""
    owner: dict[str, str] = {}
    for s in services:
        for p in s.ports:
            port = f"{p.container_port}/{p.protocol}"
            if port in owner:
                yield Refusal(
                    "service",
                    "services",
                    f"services {owner[port]!r} and {s.name!r} both listen on port {port}: a "
                    "step's services share its pod's network",
                )
            owner.setdefault(port, s.name)
