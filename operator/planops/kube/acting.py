"""Requests made as another user (Kubernetes impersonation): the trigger receiver reads a
PlanTrigger's Secret and creates its Plans as the trigger's recorded author, so the API server
authorizes and records that author, never the receiver (docs/triggers.md). Apart from the
client so that only the receiver, which holds `impersonate`, builds a client that can.
"""

from __future__ import annotations

import base64

from planops.kube.client import ApiError, Kube, Obj, _obj
from planops.kube.paths import core, custom


def impersonating(user: str, groups: list[str]) -> list[tuple[str, str]]:
    """The headers of a request made as `user` in `groups` (one Impersonate-Group each)."""
    return [("Impersonate-User", user), *(("Impersonate-Group", g) for g in groups)]


class ActingKube(Kube):
    """The client, plus the two requests the receiver makes as a trigger's author."""

    async def get_secret_value_as(
        self, namespace: str, name: str, key: str, user: str, groups: list[str]
    ) -> bytes | None:
        """The bytes under `key` of a Secret, read as `user`; None when the Secret or the key
        is missing (ApiError 403 when `user` may not read it)."""
        headers = impersonating(user, groups)
        try:
            resp = await self.api.request(
                "GET", core("secrets", namespace, name), extra_headers=headers
            )
            secret = await _obj(resp)
        except ApiError as e:
            if e.not_found:
                return None
            raise
        value = (secret.get("data") or {}).get(key)
        return base64.b64decode(value) if isinstance(value, str) else None

    async def create_plan_as(self, namespace: str, body: Obj, user: str, groups: list[str]) -> Obj:
        """Create a Plan as `user`: admission checks that user's grants and records them."""
        headers = impersonating(user, groups)
        path = custom("plans", namespace)
        return await _obj(await self.api.request("POST", path, body=body, extra_headers=headers))
