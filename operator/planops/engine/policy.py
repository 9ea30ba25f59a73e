"""What a validation is given besides the plan: the Capsule it runs under (through a resolver,
so the CLI's files, the admission webhook and the reconciler all fit), the operator's bounds no
Capsule can widen, and the time it may take. Types only: the executors build these, the
validator reads them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from planops.api.capsule_models import CapsuleSpec
from planops.api.models import PlanSpec
from planops.api.pod_models import BASELINE_CAPABILITIES

DEFAULT_CAPSULE = "default"
#: plans nest at most this deep (a top-level plan and seven levels of capsule or template steps)
MAX_DEPTH = 8


class CapsuleResolver(Protocol):
    """Finds a Capsule by name (in the plan's namespace, for the operator)."""

    def __call__(self, name: str) -> CapsuleSpec | None: ...


def capsules(mapping: Mapping[str, CapsuleSpec]) -> CapsuleResolver:
    """A resolver over a fixed set of capsules (the CLI's `--capsule` files, tests)."""

    def resolve(name: str) -> CapsuleSpec | None:
        return mapping.get(name)

    return resolve


def capsule_name(spec: PlanSpec) -> str:
    return spec.capsule or DEFAULT_CAPSULE


@dataclass(frozen=True)
class ProfileCaps:
    """What any Capsule's security profiles may ask for (api.pod_models.SecurityProfile): the
    chart's `policy.securityProfiles`, the operator's --allow-* flags. The defaults are the
    chart's: root and Pod Security baseline's capabilities may be granted by a Capsule's owner;
    privileged containers, the node's namespaces, its paths and other capabilities only once the
    cluster's admin allows them here."""

    allow_privileged: bool = False
    allow_host_namespaces: bool = False
    allow_run_as_root: bool = True
    allowed_capabilities: tuple[str, ...] = BASELINE_CAPABILITIES
    #: directories of the node a profile may mount (each path equal to one or under it)
    allowed_host_paths: tuple[str, ...] = ()


@dataclass(frozen=True)
class Policy:
    """Operator-wide bounds that no Capsule can widen (Helm values in the cluster)."""

    images: tuple[str, ...] = ("*",)
    #: kubectl-plan (validate, run --local) holds no object; the operator passes --max-steps
    max_steps: int = 1_000_000
    max_timeout_seconds: int = 7 * 24 * 3600
    #: ceilings of any step's effective limits (quantities, e.g. "4", "8Gi"); None: no ceiling
    max_cpu: str | None = None
    max_memory: str | None = None
    #: steps run in images (the operator: each attempt is a Job), so a tool or shell step that
    #: names no image anywhere is refused; kubectl-plan (validate, run --local) runs processes
    needs_image: bool = False
    #: what any Capsule's security profiles may ask for
    profiles: ProfileCaps = ProfileCaps()


@dataclass(frozen=True)
class Budget:
    """How long one validation may take, by an injected clock (the engine never reads the time
    itself). The validator runs in the operator (the admission webhook, every reconcile): a huge
    plan must cost it a bounded time and come back with one clear refusal."""

    seconds: float
    clock: Callable[[], float]


#: the clock is read once per this many checks (steps, body steps, schema keywords)
BUDGET_EVERY = 256
#: what the operator gives one validation (reconcile, admission): well under the admission
#: webhook's default timeout (10 s), which also covers reading the Capsule. A 10,000-step plan
#: validates in ~0.1 s (docs/performance.md).
OPERATOR_BUDGET_SECONDS = 4.0
