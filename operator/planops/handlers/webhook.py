"""The validating admission webhook for Plans, ScheduledPlans and ClusterScheduledPlans:
`kubectl apply` of one that cannot run is refused at once, with every reason (code, step, field
path, message), instead of being stored and reported Invalid in its status.

It is the same judgement the reconcilers make (`Reconciler.judge`, `ScheduleReconciler.judge`:
a schedule that cannot be used, a run template the validator refuses): one validator for the
CLI, the webhook and the reconcilers. An admitted Plan also gets the validator's warnings
(engine.shell_hints: a shell step written as if a shell ran it, several lines run as one
command), which `kubectl apply` prints. Two choices:
- A missing Capsule is admitted (GitOps tools apply Plans and Capsules in any order); the
  reconciler reports the plan Invalid until the Capsule exists.
- An UPDATE that leaves the spec unchanged (an annotation: rerun, cancel, an answer) is always
  admitted, so a Plan stored before a policy change can still be cancelled.

Served by kopf's webhook server on `--webhook-port` with the chart's certificate (registered by
handlers.kopf_adapter.register_webhook, which turns a `Refused` into kopf's AdmissionError); the
chart owns the ValidatingWebhookConfiguration (failurePolicy Ignore by default: the reconciler
still judges every plan when the operator is down).
"""

from __future__ import annotations

import asyncio
from typing import Any

from planops.engine import PlanError
from planops.engine.shell_hints import shell_warnings
from planops.reconciler import Reconciler, ScheduleReconciler

#: the webhook's paths are /<handler id>
PATH_ID = "plans"
SCHEDULED_PATH_IDS = {
    "scheduledplans": "scheduledplans",
    "clusterscheduledplans": "clusterscheduledplans",
}
#: reasons a refusal lists (the count says how many more)
SHOWN = 50
#: warnings an admission answer carries, and the length of each: the API server truncates a
#: warning past 256 characters and drops them past 4 KiB in all (k8s.io/apiserver's warning
#: recorder)
WARNINGS_SHOWN = 10
WARNING_CHARS = 250
#: the HTTP code of a refusal
REFUSED = 422


class Refused(Exception):  # noqa: N818 - reads as the answer it is
    """The object is refused; the message lists every reason."""


def refusal(what: str, reasons: list[str]) -> Refused:
    lines = "; ".join(reasons[:SHOWN])
    more = f" (and {len(reasons) - SHOWN} more)" if len(reasons) > SHOWN else ""
    return Refused(
        f"{what} refused, {len(reasons)} error(s): {lines}{more} -- check it offline with "
        "kubectl plan validate FILE --capsule CAPSULE.yaml"
    )


def admission_warnings(found: list[PlanError]) -> list[str]:
    """What `kubectl apply` shows of the validator's warnings (engine.shell_hints: never a
    refusal): the API server keeps each warning short and their sum small, so at most
    WARNINGS_SHOWN, each cut to WARNING_CHARS, then how many more `validate` prints."""
    shown = [_cut(str(w)) for w in found[:WARNINGS_SHOWN]]
    if len(found) > WARNINGS_SHOWN:
        shown.append(
            f"and {len(found) - WARNINGS_SHOWN} more warning(s): kubectl plan validate FILE "
            "--capsule CAPSULE.yaml lists them all"
        )
    return shown


def _cut(text: str) -> str:
    return text if len(text) <= WARNING_CHARS else text[: WARNING_CHARS - 3] + "..."


def unchanged(old: Any, new: Any) -> bool:
    """An UPDATE that leaves the spec as it was. Comparing recurses once per level: a spec too
    deep to compare is judged instead (and the validator refuses it, code `limits`)."""
    try:
        return old is not None and bool(old.get("spec") == new.get("spec"))
    except RecursionError:
        return False


async def judge_plan(
    reconciler: Reconciler, body: dict[str, Any], operation: str | None, old: Any
) -> list[str]:
    """A Plan's admission: its warnings, or Refused."""
    if operation == "UPDATE" and unchanged(old, body):
        return []
    spec, _, errors = await reconciler.judge(body)
    # GitOps applies in any order: a Capsule or template made later is judged by the reconcile
    errors = [e for e in errors if e.code not in ("no-capsule", "no-template")]
    if errors:
        raise refusal("plan", [str(e) for e in errors])
    if spec is None:
        return []
    return admission_warnings(await asyncio.to_thread(shell_warnings, spec))


async def judge_scheduled(
    judge: ScheduleReconciler, plural: str, body: dict[str, Any], operation: str | None, old: Any
) -> None:
    """A ScheduledPlan's or ClusterScheduledPlan's admission: Refused, or nothing."""
    if operation == "UPDATE" and unchanged(old, body):
        return
    errors = await judge.judge(plural, body)
    if errors:
        raise refusal(plural.removesuffix("s"), errors)
