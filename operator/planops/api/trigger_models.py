"""Typed model of a PlanTrigger: a webhook source (GitHub, GitLab, generic HMAC) whose deliveries
start Plans from a template, filtered and mapped to the template's input by CEL expressions.

Apart from the plan models because the engine never reads a trigger: the CRD (api.crd) and the
trigger receiver (planops.triggers) do. The receiver's bounds (body size, rate, CEL cost) are
its own: what a trigger may ask is capped there (planops.triggers.limits).
"""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field, field_validator, model_validator

from planops.api.base import NAME_PATTERN, Model
from planops.api.template_ref import TemplateRef

#: a header's name (RFC 9110 token)
HEADER_PATTERN = r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,128}$"
#: a key of `input`: an identifier, as a template's inputSchema property names are
INPUT_KEY_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,62}$"
#: the longest CEL expression a trigger may hold (planops.triggers.cel bounds its cost)
CEL_MAX_CHARS = 2048
#: one CEL expression
Cel = Annotated[str, Field(min_length=1, max_length=CEL_MAX_CHARS)]


class SecretKeyRef(Model):
    """The Secret (in the trigger's namespace) holding the webhook's shared secret."""

    name: str = Field(pattern=NAME_PATTERN, description="The Secret's name.")
    key: str = Field(
        default="secret",
        pattern=r"^[-._a-zA-Z0-9]{1,253}$",
        description="The key of the Secret's data holding the shared secret. Default: secret.",
    )


class GenericSource(Model):
    """How a generic webhook signs its deliveries: an HMAC of the body in a header."""

    signature_header: str = Field(
        pattern=HEADER_PATTERN,
        description="The header carrying the HMAC of the body, in hex (X-Signature).",
    )
    algorithm: Literal["sha256", "sha512"] = Field(
        default="sha256", description="The HMAC's hash: sha256 or sha512."
    )
    prefix: str = Field(
        default="",
        max_length=32,
        description="Text before the hex digest in the header (sha256=). Default: none.",
    )
    delivery_header: str | None = Field(
        default=None,
        pattern=HEADER_PATTERN,
        description="The header naming each delivery for people (the status, the Plan's "
        "delivery annotation); it is not signed, so replays are refused by the "
        "body's SHA-256 (the same body is started once: put a nonce in the body to start the "
        "same thing twice).",
    )


class WebhookSource(Model):
    """Where deliveries come from and how they are authenticated."""

    type: Literal["github", "gitlab", "generic"] = Field(
        description="github (X-Hub-Signature-256, X-GitHub-Delivery, X-GitHub-Event), gitlab "
        "(X-Gitlab-Token, X-Gitlab-Event-UUID, X-Gitlab-Event) or generic (an HMAC in a "
        "header: webhook.generic)."
    )
    secret_ref: SecretKeyRef = Field(
        description="The shared secret: an HMAC key (github, generic) or the token (gitlab). The "
        "trigger's author must be allowed to read it (RBAC get on that Secret): the receiver "
        "reads it as them."
    )
    generic: GenericSource | None = Field(
        default=None, description="How a generic source signs (type: generic only)."
    )

    @model_validator(mode="after")
    def _generic_given(self) -> WebhookSource:
        if (self.type == "generic") != (self.generic is not None):
            raise ValueError("webhook.generic is given when, and only when, type is generic")
        return self


class PlanTriggerSpec(Model):
    """A PlanTrigger: starts a Plan from a template for each accepted webhook delivery."""

    webhook: WebhookSource
    template_ref: TemplateRef = Field(
        description="The template each accepted delivery starts a Plan from (a PlanTemplate in "
        "the trigger's namespace, or a ClusterPlanTemplate); the trigger's author needs get on it."
    )
    capsule: str | None = Field(
        default=None,
        pattern=NAME_PATTERN,
        description="The Capsule the Plans run under (default: default). Writing the trigger "
        "needs use on it, and its author's use is checked again at each delivery.",
    )
    filter: str | None = Field(
        default=None,
        min_length=1,
        max_length=CEL_MAX_CHARS,
        description="A CEL expression over `body` (the JSON payload) and `headers` (lower-case "
        "names); a delivery is started only when it is true (body.ref == 'refs/heads/main').",
    )
    input: dict[str, Cel] = Field(
        default_factory=dict,
        max_length=64,
        description="The template's input: key -> CEL expression over `body` and `headers` "
        "(repo: body.repository.clone_url). The values are data, judged by the template's "
        "inputSchema; never rendered as templates.",
    )
    suspend: bool = Field(
        default=False, description="Refuse every delivery (reason Suspended); nothing starts."
    )

    @field_validator("input")
    @classmethod
    def _input_keys(cls, value: dict[str, str]) -> dict[str, str]:
        bad = [k for k in value if not re.fullmatch(INPUT_KEY_PATTERN, k)]
        if bad:
            raise ValueError(f"input keys must be identifiers ({INPUT_KEY_PATTERN}): {bad}")
        return value
