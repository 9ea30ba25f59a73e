"""Which Capsules a plan's capsule steps may reach, for the judge: a function of one callable.

Kept apart from effects.reads so that the Plan and the ScheduledPlan reconcilers read the same
targets the same way, and so that the rule (only the Capsules its Capsule's spawn.allow names)
is a function of what a read returns, testable without an API.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

Obj = dict[str, Any]


async def targets(
    capsule: Callable[[str, str], Awaitable[Obj | None]],
    namespace: str,
    plan: Obj,
    raw: Obj | None,
) -> dict[str, Obj | None]:
    """The Capsules a plan's capsule steps name that its Capsule (`raw`) lets it spawn (any other
    is refused at dispatch): the judge holds their plans' inputSchemas to the steps' task text.
    At most one read (`capsule`) per name in spawn.allow."""
    allow = ((raw or {}).get("spec") or {}).get("spawn", {}).get("allow")
    spec = plan.get("spec") or {}
    steps = [s for k in ("steps", "finally") if isinstance(spec.get(k), list) for s in spec[k]]
    if not isinstance(allow, list):
        return {}
    named = {s.get("capsule") for s in steps if isinstance(s, dict)}
    wanted = sorted(n for n in named if isinstance(n, str) and n in allow)
    return {name: await capsule(namespace, name) for name in wanted}
