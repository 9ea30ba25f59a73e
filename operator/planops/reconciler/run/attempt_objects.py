"""Pure: what the cluster must be asked to start one attempt, and what its answers mean.

The reconciler's side of engine.dispatch: the rules themselves (admit, the timeout, resources)
live there, shared with the local runner; this module turns an admitted attempt into the object
to create (a Job, or a child Plan from the target Capsule's `plan`), and reads the API server's
answer to that create (adopt our own object, fail the attempt on a refusal, or retry later).
No I/O: the reconciler's actuator (reconciler.effects.actuator) makes the requests.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from typing import Any, Literal

from pydantic import ValidationError

from planops.api import CapsuleSpec, PlanSpec
from planops.api.template_models import PlanTemplateSpec
from planops.engine import Dispatch, Policy, capsule_name, plan_templates
from planops.engine import dispatch as rules
from planops.engine.facts import CHILD_PLAN_KINDS
from planops.kube import manifests
from planops.kube.errors import ErrorKind
from planops.reconciler.run import templating
from planops.reconciler.run.observe import controller_uid

Obj = dict[str, Any]


def lineage(ref: manifests.PlanRef, spec: PlanSpec) -> tuple[str, ...]:
    """The capsules of the plans above this one and this plan's own, outermost first."""
    return (*ref.lineage, capsule_name(spec))


def admit(
    ref: manifests.PlanRef, d: Dispatch, capsule: CapsuleSpec, spec: PlanSpec, policy: Policy
) -> str | None:
    """engine.dispatch.admit for a Plan in the cluster: its depth and lineage come from its
    labels, and a step needs an image (a Job runs in one)."""
    return rules.admit(
        d, capsule, policy, lineage=lineage(ref, spec), depth=ref.depth, needs_image=True
    )


def job(
    ref: manifests.PlanRef,
    d: Dispatch,
    capsule: CapsuleSpec,
    spec: PlanSpec,
    policy: Policy,
    claim: str | None,
    now: float = 0.0,
) -> Obj | str:
    """The attempt's Job, or why it may not start (`now`: when it is sent, for a deadline)."""
    build = job_later(ref, d, capsule, spec, policy, claim, now)
    return build if isinstance(build, str) else build()


def job_later(
    ref: manifests.PlanRef,
    d: Dispatch,
    capsule: CapsuleSpec,
    spec: PlanSpec,
    policy: Policy,
    claim: str | None,
    now: float,
) -> Callable[[], Obj] | str:
    """Why the attempt may not start, or what builds its Job when it is sent: a decision that
    starts 20,000 attempts holds no 20,000 Job bodies at once (92 MiB as dicts), only those
    the actuator is sending (docs/performance.md, "At scale")."""
    refusal = admit(ref, d, capsule, spec, policy)
    if refusal is not None:
        return refusal
    image = rules.image_of(d, capsule)
    assert image is not None  # admitted
    timeout = rules.attempt_timeout(d, capsule, policy, now)  # a finally step: its budget's end
    return partial(
        manifests.job, ref, d, capsule, image, timeout_seconds=timeout, workspace_claim=claim
    )


def child(
    ref: manifests.PlanRef,
    d: Dispatch,
    spec: PlanSpec,
    target_capsule: Obj | None,
) -> Obj | str:
    """The child Plan of an admitted capsule step, from its target Capsule's object (None: not
    found), or why there is none."""
    target = d.step.capsule or ""
    plan_spec = ((target_capsule or {}).get("spec") or {}).get("plan")
    if plan_spec is None:
        return rules.no_plan(target)
    parent = replace(ref, lineage=lineage(ref, spec))  # the child keeps its parent's author
    return manifests.child_plan(parent, d, target, plan_spec)


def recorded_child(ref: manifests.PlanRef, d: Dispatch, spec: PlanSpec, status: Obj) -> Obj | str:
    """The child Plan of an admitted template step, from the template as the run recorded it
    when it started (`status`: run.templating), or why there is none: an edit of the template
    since never changes what the run runs."""
    named = plan_templates.template_of(d.step)
    if isinstance(named, str):
        return named
    found = templating.template_object(status, ref.run, (named.kind, named.name))
    return template_child(ref, d, spec, found)


def template_child(
    ref: manifests.PlanRef,
    d: Dispatch,
    spec: PlanSpec,
    template: Obj | None,
) -> Obj | str:
    """The child Plan of an admitted template step, from the template's object (None: not
    found), or why there is none: the template's plan under this plan's Capsule,
    given the step's rendered input (engine.plan_templates). The child is judged as any Plan
    is: the template grants nothing."""
    ref_ = plan_templates.template_of(d.step)
    if isinstance(ref_, str):
        return ref_
    if template is None:
        return plan_templates.missing(ref_)
    try:
        found = PlanTemplateSpec.model_validate(template.get("spec") or {})
    except ValidationError as e:
        return f"{ref_.kind} {ref_.name!r} cannot be used: {e.error_count()} schema error(s)"
    cname = capsule_name(spec)
    body = plan_templates.child_spec(found, cname, d.input if d.input is not None else {})
    meta = template.get("metadata") or {}
    ran: Obj = {"kind": ref_.kind, "name": ref_.name}
    ran |= {k: meta.get(k) for k in ("uid", "generation")}
    parent = replace(ref, lineage=lineage(ref, spec))  # the child keeps its parent's author
    return manifests.template_child(parent, d, cname, body, ran)


#: what an error answer to a create means: adopt the object, retry the reconcile, or the
#: attempt's failure (why)
ErrorMeaning = Literal["adopt", "retry"] | str


def create_refused(kind: str, error: ErrorKind, message: str) -> ErrorMeaning:
    """What an error answer to creating an attempt's object means, by its kind (kube.errors):
    "adopt" (the name exists: made before a restart, if it is ours), the attempt's failure (the
    request itself is refused: refused by admission, forbidden, invalid; sending it again cannot
    help), or "retry" (anything that may pass: a conflict, throttling, a server error, a timeout;
    the queue retries the reconcile)."""
    if error is ErrorKind.ALREADY_EXISTS:
        return "adopt"
    if error is ErrorKind.REFUSED_BY_ADMISSION:
        return f"refused by the cluster's admission policy: {message}"
    if error in (ErrorKind.FORBIDDEN, ErrorKind.INVALID, ErrorKind.BAD_REQUEST):
        what = "child Plan" if kind in CHILD_PLAN_KINDS else "Job"
        return f"the cluster refused the step's {what}: {message}"
    return "retry"


def squatter(ref: manifests.PlanRef, kind: str, name: str, existing: Obj | None) -> str | None:
    """An object with the attempt's name exists: ours (made before a restart) when this Plan is
    its controller, or gone again (None: the next reconcile sees which); anything else squats
    the name, and the attempt fails saying so (never adopted: anyone may copy our labels)."""
    if existing is None or controller_uid(existing) == ref.uid:
        return None
    what = "Plan" if kind in CHILD_PLAN_KINDS else "Job"
    return (
        f"a {what} named {name} already exists and is not this Plan's (its controller is "
        "another object): planops does not adopt it; delete it and re-run the plan"
    )
