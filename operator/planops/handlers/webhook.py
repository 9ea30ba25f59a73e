"""The validating admission webhook for Plans: `kubectl apply` of a Plan that cannot run is
refused at once, with every reason (code, step, field path, message), instead of being stored and
reported Invalid in its status.

It is the same judgement the reconciler makes (`Reconciler.judge`): one validator for the CLI,
the webhook and the reconciler. Two choices:
- A missing Capsule is admitted (GitOps tools apply Plans and Capsules in any order); the
  reconciler reports the plan Invalid until the Capsule exists.
- An UPDATE that leaves the spec unchanged (an annotation: rerun, cancel, an answer) is always
  admitted, so a Plan stored before a policy change can still be cancelled.

Served by kopf's webhook server on `--webhook-port` with the chart's certificate; the chart owns
the ValidatingWebhookConfiguration (failurePolicy Ignore by default: the reconciler still judges
every plan when the operator is down). Registered by `register()`, called from `main` once the
flags are known (importing this package registers the watch handlers only).
"""

from __future__ import annotations

from typing import Any

import kopf

from planops.api import names
from planops.handlers.config import CONFIG

GROUP, VERSION = names.GROUP, names.VERSION
#: the webhook's path is /<handler id>
PATH_ID = "plans"


def unchanged(old: Any, new: Any) -> bool:
    """An UPDATE that leaves the spec as it was. Comparing recurses once per level: a spec too
    deep to compare is judged instead (and the validator refuses it, code `limits`)."""
    try:
        return old is not None and bool(old.get("spec") == new.get("spec"))
    except RecursionError:
        return False


def register() -> None:
    @kopf.on.startup()
    async def serve(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.admission.server = kopf.WebhookServer(
            addr="0.0.0.0",  # the API server calls the pod's address
            port=CONFIG.webhook_port,
            certfile=CONFIG.webhook_cert,
            pkeyfile=CONFIG.webhook_key,
        )
        settings.admission.managed = None  # the chart owns the ValidatingWebhookConfiguration

    @kopf.on.validate(GROUP, VERSION, "plans", id=PATH_ID)
    async def validate_plan(*, body: kopf.Body, memo: Any, **kwargs: Any) -> None:
        if kwargs.get("operation") == "UPDATE" and unchanged(kwargs.get("old"), body):
            return
        _, _, errors = await memo.reconciler.judge(dict(body))
        errors = [e for e in errors if e.code != "no-capsule"]
        if errors:
            lines = "; ".join(str(e) for e in errors[:50])
            more = f" (and {len(errors) - 50} more)" if len(errors) > 50 else ""
            raise kopf.AdmissionError(
                f"plan refused, {len(errors)} error(s): {lines}{more} -- check it offline with "
                "kubectl plan validate FILE --capsule CAPSULE.yaml",
                code=422,
            )
