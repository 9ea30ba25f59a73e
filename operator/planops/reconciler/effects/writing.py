"""A Plan's status write: one patch per reconcile, none when nothing changed, and the watch's
echo of it recognised (a reconcile on the echo would only read again what was just decided).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from planops import metrics
from planops.api import names
from planops.kube.api import KubeApi
from planops.kube.cache import WatchCache

#: Plans whose last write is remembered (the oldest forgotten first)
WRITES_KEPT = 20_000


@dataclass
class StatusWriter:
    kube: KubeApi
    #: Plans as the watch shows them: what is written goes there (the next reconcile reads it)
    plans: WatchCache | None = None
    #: the resourceVersion of each Plan's last status write (own_write)
    _written: dict[tuple[str, str], str] = field(default_factory=dict)

    async def write(self, plan: dict[str, Any], new: dict[str, Any]) -> str | None:
        """One status patch per reconcile, and none when nothing changed. A running plan's
        `duration` alone is no change: it is refreshed with the next real one and final when the
        plan ends (a Job's Complete after its pod's success already settled the step would
        otherwise cost a patch that only says one second later). Returns the Plan's
        resourceVersion as it stands after (the one written, or the one read when nothing was)."""
        new = {k: v for k, v in new.items() if v is not None}
        old = plan.get("status") or {}
        meta = plan["metadata"]
        if old == new or (
            not names.ended(new.get("phase"))
            and {**old, "duration": None} == {**new, "duration": None}
        ):
            version = meta.get("resourceVersion")
            return str(version) if version else None
        written = await self.kube.patch_plan_status(meta["namespace"], meta["name"], new)
        metrics.status_patches.inc()
        if self.plans is not None:  # the next reconcile starts from what was written
            self.plans.seen("MODIFIED", written)
        version = (written.get("metadata") or {}).get("resourceVersion")
        if version:
            self._written[(meta["namespace"], meta["name"])] = str(version)
            while len(self._written) > WRITES_KEPT:
                del self._written[next(iter(self._written))]  # the oldest
        return str(version) if version else None

    def own_write(self, namespace: str, name: str, version: str | None) -> bool:
        """Whether a Plan event shows exactly the object this reconciler last wrote (the same
        resourceVersion): its watch echoes every status write, and reconciling on the echo would
        only read again what was just decided."""
        key = (namespace, name)
        if version is None or self._written.get(key) != str(version):
            return False
        del self._written[key]
        return True

    def forget(self, namespace: str, name: str) -> None:
        self._written.pop((namespace, name), None)
