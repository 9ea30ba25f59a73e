"""Judging a Plan object: parse it, read its Capsule, validate; and the verdicts kept.

The one place a Plan object is judged in the cluster: the reconcile (reconciler.reconcile) and
the admission webhook (handlers.webhook, through Reconciler.judge) both ask the same `Judge`,
which holds the verdict cache they share (one verdict per Plan generation and Capsule version:
a plan is judged once per change, not on every reconcile).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from planops.api import CapsuleSpec, PlanSpec, parse_document
from planops.api.documents import problems_of
from planops.engine import OPERATOR_BUDGET_SECONDS, Budget, PlanError, Policy, validate
from planops.engine.validation import DEFAULT_CAPSULE
from planops.kube.api import KubeApi
from planops.kube.cache import WatchCache
from planops.reconciler.run import status as status_

#: verdicts kept (one per Plan generation; a few MB for this many plans)
VERDICTS_KEPT = 20_000
Verdict = tuple[PlanSpec | None, CapsuleSpec | None, list[PlanError]]


@dataclass
class Judge:
    kube: KubeApi
    policy: Policy = field(default_factory=Policy)
    #: one validation's time budget (a huge plan is refused, not judged without end)
    budget: Budget | None = field(
        default_factory=lambda: Budget(OPERATOR_BUDGET_SECONDS, time.monotonic)
    )
    #: Capsules as the watch shows them (handlers.capsule_event); None: always ask the API
    capsules: WatchCache | None = None
    #: verdicts of judge(reuse=True) by (uid, generation, Capsule name, Capsule version, and
    #: the capsule steps' target Capsules with their versions)
    _verdicts: dict[tuple[Any, ...], Verdict] = field(default_factory=dict)

    async def judge(self, plan: dict[str, Any], *, reuse: bool = False) -> Verdict:
        """The one place a Plan object is judged: the reconcile and the admission webhook
        (handlers.webhook) both call it; it reads the Plan's Capsule from the watch cache when it
        has it, else through the API.

        Parsing and validation run in a worker thread (a large plan never holds the event loop,
        which serves every other plan, the webhook and the health probe) under the validator's
        time budget. With `reuse` (the reconciler), a verdict is kept per Plan generation and
        Capsule version: a plan is judged once per change, not on every reconcile."""
        meta = plan["metadata"]
        cname = str((plan.get("spec") or {}).get("capsule") or DEFAULT_CAPSULE)
        raw = self.capsules.get(meta["namespace"], cname) if self.capsules else None
        if raw is None:
            raw = await self.kube.get_capsule(meta["namespace"], cname)
        targets = await self._targets(meta["namespace"], plan, raw)
        versions = [(n, _version(t)) for n, t in targets.items()]
        key = (
            str(meta.get("uid")),
            int(meta.get("generation") or 0),
            cname,
            (raw or {}).get("metadata", {}).get("resourceVersion"),
            tuple(versions),
        )
        if reuse and key in self._verdicts:
            return self._verdicts[key]
        verdict = await asyncio.to_thread(self._judge, plan, cname, raw, targets)
        if reuse:
            self._verdicts[key] = verdict
            while len(self._verdicts) > VERDICTS_KEPT:
                del self._verdicts[next(iter(self._verdicts))]  # the oldest
        return verdict

    async def _targets(
        self, namespace: str, plan: dict[str, Any], raw: dict[str, Any] | None
    ) -> dict[str, dict[str, Any] | None]:
        """The Capsules the plan's capsule steps name that its Capsule lets it spawn (any other
        is refused at dispatch): the validator holds their plans' inputSchemas to the steps'
        task text. From the watch cache, else through the API (at most one read per name in
        spawn.allow)."""
        allow = ((raw or {}).get("spec") or {}).get("spawn", {}).get("allow")
        spec = plan.get("spec") or {}
        steps = [s for k in ("steps", "finally") if isinstance(spec.get(k), list) for s in spec[k]]
        if not isinstance(allow, list):
            return {}
        named = {s.get("capsule") for s in steps if isinstance(s, dict)}
        out: dict[str, dict[str, Any] | None] = {}
        for name in sorted(n for n in named if isinstance(n, str) and n in allow):
            found = self.capsules.get(namespace, name) if self.capsules else None
            out[name] = found if found is not None else await self.kube.get_capsule(namespace, name)
        return out

    def _judge(
        self,
        plan: dict[str, Any],
        cname: str,
        raw: dict[str, Any] | None,
        targets: dict[str, dict[str, Any] | None] | None = None,
    ) -> Verdict:
        doc, problems = parse_document(
            {k: plan[k] for k in ("apiVersion", "kind", "metadata", "spec")}
        )
        if problems or doc is None:
            return None, None, [PlanError(p.code, None, p.path, p.message) for p in problems]
        spec = doc.spec
        assert isinstance(spec, PlanSpec)
        size = status_.json_size(plan.get("spec"))
        if size > status_.SPEC_BUDGET:  # the status must fit beside it, in one etcd object
            what_next = (
                "pass the items by reference to something smaller (an index per item), or split "
                "them across capsule steps, each a plan of its own"
                if any(s.map is not None for s in spec.steps)
                else "run a map over the items instead of one step each, or split the plan into "
                "capsule steps"
            )
            return (
                spec,
                None,
                [
                    PlanError(
                        "limits",
                        None,
                        "spec",
                        f"the spec is {size} bytes; a Plan's spec may be at most "
                        f"{status_.SPEC_BUDGET} bytes (its status shares the object, and etcd "
                        f"stores at most 1.5 MiB): {what_next}",
                    )
                ],
            )
        capsule: CapsuleSpec | None = None
        if raw is not None:
            try:
                capsule = CapsuleSpec.model_validate(raw.get("spec") or {})
            except ValidationError as e:
                why = "; ".join(f"{p.path}: {p.message}" for p in problems_of(e, "spec"))
                return (
                    spec,
                    None,
                    [
                        PlanError(
                            "no-capsule",
                            None,
                            "capsule",
                            f"Capsule {cname!r} cannot be used: {why}",
                        )
                    ],
                )
        children: dict[str, CapsuleSpec] = {}
        for n, t in (targets or {}).items():
            with contextlib.suppress(ValidationError):  # refused when its own plans run
                if t is not None:
                    children[n] = CapsuleSpec.model_validate(t.get("spec") or {})
        errors = validate(
            spec, lambda n: capsule if n == cname else children.get(n), self.policy, self.budget
        )
        return spec, capsule, errors


def _version(obj: dict[str, Any] | None) -> Any:
    return ((obj or {}).get("metadata") or {}).get("resourceVersion")
