"""The two requests only the UI server makes (planops.uiserver), beside kubectl-plan's: a
TokenReview (who is the bearer of this token, as the API server's own authenticators say: its
service-account tokens, its OIDC issuers, its webhooks), and a client that makes every request
AS a user (impersonation, kube.transport.Impersonating). A subclass, so neither the operator's
client nor the CLI's holds them."""

from __future__ import annotations

from dataclasses import dataclass

from planops.kube.cli_client import CliKube
from planops.kube.transport import Impersonating

TOKEN_REVIEWS = "/apis/authentication.k8s.io/v1/tokenreviews"


@dataclass(frozen=True)
class Reviewed:
    """A TokenReview's answer: the user and groups when authenticated, else why not."""

    user: str | None
    groups: tuple[str, ...]
    error: str


class UiKube(CliKube):
    async def review_token(self, token: str, audiences: tuple[str, ...] = ()) -> Reviewed:
        """Who the API server says bears `token` (nothing is stored: a review is answered, not
        created). `audiences`: those the token must be for (none: the API server's own)."""
        spec: dict[str, object] = {"token": token}
        if audiences:
            spec["audiences"] = list(audiences)
        body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenReview", "spec": spec}
        status = (await self._create(TOKEN_REVIEWS, body)).get("status") or {}
        user = status.get("user") or {}
        if status.get("authenticated") is not True or not user.get("username"):
            return Reviewed(None, (), str(status.get("error") or "the token is not accepted"))
        groups = tuple(str(g) for g in user.get("groups") or [])
        return Reviewed(str(user["username"]), groups, "")

    def as_user(self, user: str, groups: tuple[str, ...]) -> CliKube:
        """A client whose every request is `user`'s (in `groups`), on this one's connections."""
        return CliKube(Impersonating(self.api, user, groups))
