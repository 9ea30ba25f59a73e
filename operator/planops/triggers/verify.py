"""Who sent a delivery, and which one it is: the source's signature checked in constant time
(hmac.compare_digest), and the delivery's id (its replays are refused by the receiver).

Pure: the receiver hands in the headers (lower-case names), the raw body and the shared secret.
A refusal names what is wrong without echoing anything secret or computed (never the expected
signature).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from planops.api.trigger_models import WebhookSource

#: the longest delivery id kept (GitHub's are UUIDs; a longer one is refused)
DELIVERY_ID_MAX = 128


class Refused(Exception):  # noqa: N818 (a delivery is refused, not an error of ours)
    """A delivery refused: `reason` (a CamelCase word for status, Events and metrics), `status`
    (the HTTP answer), a message safe to send back, and what the trigger's status and Event
    say (`detail`, default: the message), which its namespace's users read."""

    def __init__(self, reason: str, message: str, status: int = 401, detail: str = "") -> None:
        super().__init__(message)
        self.reason, self.message, self.status = reason, message, status
        self.detail = detail or message


@dataclass(frozen=True)
class Delivery:
    """An authenticated delivery: its id and event type (as the source names them), and the
    key its replays are refused by: what the signature covers. An HMAC covers the body, not the
    id header beside it, so a captured delivery sent again under a made-up id is the same
    delivery: its key is the body's SHA-256 (GitLab signs nothing: its token names no body, and
    its key is the id)."""

    id: str
    event: str
    key: str = ""

    def __post_init__(self) -> None:
        if not self.key:
            object.__setattr__(self, "key", self.id)


def _hmac_ok(secret: bytes, body: bytes, given: str, prefix: str, algorithm: str) -> bool:
    expected = prefix + hmac.new(secret, body, algorithm).hexdigest()
    # both sides as bytes: compare_digest refuses non-ASCII str (a TypeError would be a 500)
    return hmac.compare_digest(expected.encode(), given.encode("utf-8", "surrogateescape"))


def _one(headers: Mapping[str, str], name: str, what: str) -> str:
    value = headers.get(name)
    if value is None or value == "":
        raise Refused("Unsigned", f"the delivery has no {name} header ({what})")
    return value


def _delivery_id(value: str) -> str:
    if len(value) > DELIVERY_ID_MAX or not value.isprintable() or not value.isascii():
        raise Refused("BadDeliveryId", "the delivery id is not printable ASCII of at most 128", 400)
    return value


def verify(
    source: WebhookSource, secret: bytes, headers: Mapping[str, str], body: bytes
) -> Delivery:
    """The delivery if its signature (or token) is the source's; Refused otherwise."""
    if not secret:
        raise Refused("NoSecret", "the trigger's secret is empty", 503)
    if source.type == "github":
        given = _one(headers, "x-hub-signature-256", "GitHub's HMAC-SHA256 of the body")
        if not _hmac_ok(secret, body, given, "sha256=", "sha256"):
            raise Refused("BadSignature", "the signature (X-Hub-Signature-256) does not match")
        delivery = _one(headers, "x-github-delivery", "GitHub's delivery id")
        event = headers.get("x-github-event", "")
        return Delivery(_delivery_id(delivery), event, hashlib.sha256(body).hexdigest())
    if source.type == "gitlab":
        token = _one(headers, "x-gitlab-token", "GitLab's secret token")
        if not hmac.compare_digest(secret, token.encode("utf-8", "surrogateescape")):
            raise Refused("BadSignature", "the token (X-Gitlab-Token) does not match")
        delivery = _one(headers, "x-gitlab-event-uuid", "GitLab's delivery id")
        return Delivery(_delivery_id(delivery), headers.get("x-gitlab-event", ""))
    generic = source.generic
    assert generic is not None  # the model requires it for type generic
    header = generic.signature_header.lower()
    given = _one(headers, header, f"the HMAC-{generic.algorithm.upper()} of the body")
    if not _hmac_ok(secret, body, given, generic.prefix, generic.algorithm):
        raise Refused("BadSignature", f"the signature ({generic.signature_header}) does not match")
    if generic.delivery_header:
        delivery = _one(headers, generic.delivery_header.lower(), "the delivery id")
        return Delivery(_delivery_id(delivery), "", hashlib.sha256(body).hexdigest())
    return Delivery(hashlib.sha256(body).hexdigest(), "")


def sign(secret: bytes, body: bytes, algorithm: str = "sha256") -> str:
    """The hex HMAC of `body` (what a sender puts in its signature header; tests and docs)."""
    return hmac.new(secret, body, algorithm).hexdigest()
