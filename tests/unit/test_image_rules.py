"""One image rule: whatever the validator accepts about a step's image, dispatch accepts, and
what dispatch refuses the validator refuses first, in the same words.

The table runs each case through both sides of each executor: the cluster's dispatch (the Job
it would create, reconciler.run.attempt_objects: a step needs an image) against the validator with
the operator's policy (`needs_image`), and the local runner's admit (no image needed) against the
validator as `kubectl-plan validate` / `run --local` call it. The two verdicts must agree."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import pytest

from planops.api import CapsuleSpec
from planops.engine import Policy, Run, validate
from planops.engine import dispatch as rules
from planops.kube.manifests import PlanRef
from planops.reconciler.run import attempt_objects as dispatching

from .helpers import capsule, plan, resolver

D = "sha256:" + "a" * 64
TOOLS = [
    {"name": "own", "image": "registry.example/own:1", "command": ["own"]},
    {"name": "plain", "command": ["plain"]},
]


def cap(**kw: Any) -> CapsuleSpec:
    return capsule(**({"image": "busybox:1", "images": [], "tools": TOOLS} | kw))


@dataclass
class Case:
    name: str
    step: dict[str, Any]
    capsule: CapsuleSpec
    #: the refusal in the cluster (None: it runs) and in a local run
    cluster: str | None
    local: str | None = "same"
    policy: Policy = field(default_factory=Policy)


OWN_NOT_OPERATORS = (
    "tool 'own''s image 'registry.example/own:1' is not allowed by the operator's allowlist "
    "(policy.allowedImages)"
)
CASES = [
    Case("a tool runs in the image its Capsule names for it", {"tool": "own"}, cap(), None),
    Case("a tool without an image runs in the Capsule's", {"tool": "plain"}, cap(), None),
    Case(
        "the operator's allowlist bounds a tool's own image",
        {"tool": "own"},
        cap(),
        OWN_NOT_OPERATORS,
        policy=Policy(images=("busybox:*",)),
    ),
    Case(
        "a shell step may not borrow a tool's image",
        {"shell": "true", "image": "registry.example/own:1"},
        cap(),
        "image 'registry.example/own:1' is not allowed by the Capsule (its images, or its image)",
    ),
    Case(
        "a shell step's image matching the Capsule's images",
        {"shell": "true", "image": "alpine:3"},
        cap(images=["alpine:*"]),
        None,
    ),
    Case(
        "a shell step's image outside the Capsule's images",
        {"shell": "true", "image": "evil/miner:1"},
        cap(images=["alpine:*"]),
        "image 'evil/miner:1' is not allowed by the Capsule (its images, or its image)",
    ),
    Case(
        "the Capsule's default image outside the operator's allowlist",
        {"shell": "true"},
        cap(),
        "the Capsule's image 'busybox:1' is not allowed by the operator's allowlist "
        "(policy.allowedImages)",
        policy=Policy(images=("registry.example/*",)),
    ),
    Case(
        "a digest behind an allowed tag",
        {"shell": "true", "image": f"alpine:3@{D}"},
        cap(images=["alpine:3*"]),
        f"image 'alpine:3@{D}' is not allowed by the Capsule (its images, or its image)",
    ),
    Case(
        "a tool image that is no image reference",
        {"tool": "bad"},
        cap(tools=[{"name": "bad", "image": "Bad:1", "command": ["x"]}]),
        "tool 'bad''s image 'Bad:1' is not an image reference ([host[:port]/]path[:tag][@digest], "
        "the path in lowercase)",
    ),
    Case(
        "no image anywhere: the cluster cannot run the step, a local process can",
        {"shell": "true"},
        cap(image=None),
        "no image for this step (set the Capsule's image or the step's image)",
        local=None,
    ),
    Case(
        "a tool's image in a map's body",
        {"map": {"over": [1], "do": {"tool": "own", "input": {"v": "{{item}}"}}}},
        cap(),
        None,
    ),
]


def dispatched(case: Case, *, in_cluster: bool) -> str | None:
    """The executor's verdict on the case's first job attempt (its text, no `call denied:`)."""
    spec = plan({"id": "s", **case.step})
    run = Run("p", spec)
    (d,) = run.decide(0.0).dispatch
    if in_cluster:
        made = dispatching.job(
            PlanRef("ns", "p", "uid", "run"), d, case.capsule, spec, case.policy, None
        )
        refusal = made if isinstance(made, str) else None
    else:
        refusal = rules.admit(
            d, case.capsule, case.policy, lineage=("default",), depth=0, needs_image=False
        )
    return None if refusal is None else refusal.removeprefix(rules.DENIED)


def judged(case: Case, *, in_cluster: bool) -> str | None:
    """The validator's verdict on the same plan: the image refusal's words, or None."""
    policy = replace(case.policy, needs_image=in_cluster)
    spec = plan({"id": "s", **case.step})
    errors = validate(spec, resolver(default=case.capsule), policy)
    assert all(e.code == "image-not-allowed" for e in errors), errors
    if not errors:
        return None
    (error,) = errors
    return error.message


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_validator_and_dispatch_give_the_same_verdict_on_every_image(case: Case):
    local = case.cluster if case.local == "same" else case.local
    assert dispatched(case, in_cluster=True) == judged(case, in_cluster=True) == case.cluster
    assert dispatched(case, in_cluster=False) == judged(case, in_cluster=False) == local


def test_the_refusal_points_at_the_field_that_names_the_image():
    policy = Policy(images=("alpine:*",))

    def path(step: dict[str, Any]) -> str:
        (error,) = validate(plan({"id": "s", **step}), resolver(default=cap()), policy)
        return error.path

    assert path({"tool": "own"}) == "steps[0].tool"
    assert path({"shell": "true"}) == "steps[0]"  # the Capsule's default image
    assert path({"shell": "true", "image": "evil/x:1"}) == "steps[0].image"


@pytest.mark.parametrize("kind", [{"tool": "own"}, {"capsule": "c", "input": "x"}])
def test_an_image_on_a_step_that_does_not_run_in_it_is_refused(kind: dict[str, Any]):
    """A tool step runs in its tool's image, a capsule step in none: an `image` there would be
    ignored at dispatch (it was judged, and then silently not used)."""
    spec = plan({"id": "s", "image": "busybox:1", **kind})
    (error,) = validate(spec, resolver(default=cap(spawn={"allow": ["c"]})))
    assert (error.code, error.path) == ("step-kind", "steps[0].image")
    assert "image is a shell or script step's field" in error.message
