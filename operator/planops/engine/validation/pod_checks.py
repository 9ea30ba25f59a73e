"""A step's pod grants, judged as dispatch judges them (engine.pod_grants): its securityProfile
one of its Capsule's, within the operator's cap; its services the Capsule's, their images and
profiles allowed. Every refusal at once, at the step's field (`steps[2].services[0]`)."""

from __future__ import annotations

from planops.api.models import Step
from planops.engine import pod_grants
from planops.engine.facts import step_kind
from planops.engine.validation.checker import Checker


def check_pod_grants(c: Checker, step: Step, path: str) -> None:
    if not pod_grants.asks(step):  # today's step: nothing more to judge
        return
    for r in pod_grants.refusals(step, step_kind(step), c.capsule, c.policy):
        c.add(r.code, step.id, f"{path}.{r.field}", r.message)
