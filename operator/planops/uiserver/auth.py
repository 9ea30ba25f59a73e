"""Who a request to the UI server is, decided without trusting the server's own judgement:
the cluster authenticates (a TokenReview of the user's bearer token) or an authenticating proxy
in front does (its X-Remote-User/X-Remote-Group headers, believed only on a request that carries
the proxy's shared secret). Everything here but the review itself is pure, so unit-tested.

The browser's credential is its bearer token kept in one cookie (HttpOnly: no script reads it;
SameSite=Strict: no other site's page sends it; Secure when the page is served over TLS); an API
client sends it as `Authorization: Bearer`. Nothing is kept on the server but a short cache of
the reviews (by the token's hash), so replicas need no shared session store and a revoked or
expired token stops working within REVIEW_TTL.

Cross-site request forgery: an action is a POST, and a POST that rides on an ambient credential
(the cookie, or the proxy's login) must come from a page of this server: its Origin is this
server's own host, and it carries the session's CSRF token (an HMAC of the credential, which the
page reads from /api/session: another origin cannot read that answer). A request with an
Authorization header is an API client's (a browser never adds one by itself): no CSRF check.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import time
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from multidict import MultiMapping

from planops.kube.ui_client import Reviewed

COOKIE = "planops-ui-session"
CSRF_HEADER = "X-CSRF-Token"
#: seconds a TokenReview's yes is believed again without asking (a revoked token: this long)
REVIEW_TTL = 30.0
#: tokens whose review is cached at once (the oldest forgotten first)
REVIEW_CACHE = 4096
#: the longest bearer token taken (a JWT with many groups is a few KiB; a cookie holds 4 KiB)
MAX_TOKEN = 4000


@dataclass(frozen=True)
class Identity:
    """A request's user, as the cluster (or the trusted proxy) said, and how it came.

    `ambient`: the browser sends the credential by itself (the cookie, the proxy's session),
    so a POST needs the CSRF checks; `csrf`: the token the page must send back."""

    user: str
    groups: tuple[str, ...]
    via: str  # "token" (TokenReview) or "proxy"
    ambient: bool
    csrf: str


@dataclass(frozen=True)
class ProxyTrust:
    """An authenticating proxy in front of the server: its shared secret (the header
    `secret_header` must carry it) and the headers naming the user and their groups."""

    secret: str
    secret_header: str = "X-Planops-Proxy-Secret"
    user_header: str = "X-Remote-User"
    group_header: str = "X-Remote-Group"


def same(given: str | None, expected: str) -> bool:
    """Constant-time equality of two secrets (a missing one is never equal)."""
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def csrf_token(credential: str, purpose: str = "csrf") -> str:
    """The CSRF token of a session: an HMAC of its credential (which another site never has)."""
    digest = hmac.new(credential.encode(), purpose.encode(), hashlib.sha256).digest()
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def bearer(headers: Mapping[str, str], cookies: Mapping[str, str]) -> tuple[str, bool] | None:
    """The request's bearer token and whether it came ambiently (the cookie), or None. The
    Authorization header wins: it is what an API client (or a login-less script) meant."""
    auth = headers.get("Authorization", "")
    scheme, _, token = auth.partition(" ")
    if scheme.lower() == "bearer" and token.strip():
        return token.strip(), False
    token = cookies.get(COOKIE, "")
    return (token, True) if token else None


def token_problem(token: str) -> str | None:
    """Why a token cannot be one (sent to no review), or None."""
    if len(token) > MAX_TOKEN:
        return f"the token is longer than {MAX_TOKEN} characters"
    if not token.isascii() or not token.isprintable() or " " in token:
        return "the token holds characters no token has"
    return None


def proxied(headers: MultiMapping[str], trust: ProxyTrust) -> Identity | None:
    """The proxy's user, when the request carries the proxy's secret; else None (the headers
    of anyone else who reached the server are never believed)."""
    if not same(headers.get(trust.secret_header), trust.secret):
        return None
    user = headers.get(trust.user_header, "")
    if not user:
        return None
    groups = tuple(
        g.strip() for value in headers.getall(trust.group_header, []) for g in value.split(",")
    )
    csrf = csrf_token(trust.secret, f"csrf:{user}")
    return Identity(user, tuple(g for g in groups if g), "proxy", True, csrf)


def from_review(token: str, ambient: bool, reviewed: Reviewed) -> Identity | None:
    if reviewed.user is None:
        return None
    return Identity(reviewed.user, reviewed.groups, "token", ambient, csrf_token(token))


def same_origin(headers: Mapping[str, str], host: str) -> bool:
    """The request comes from a page of this server: its Origin (else its Referer) names the
    host it was sent to. A request with neither is refused (a browser sends Origin on a POST)."""
    source = headers.get("Origin") or headers.get("Referer")
    if not source or source == "null":
        return False
    return urlsplit(source).netloc.lower() == host.lower()


def forged(identity: Identity, headers: Mapping[str, str], host: str) -> str | None:
    """Why an action (a POST) is refused as possibly forged by another site, or None."""
    if not identity.ambient:
        return None
    if not same_origin(headers, host):
        return "the request does not come from this server's page (Origin)"
    if not same(headers.get(CSRF_HEADER), identity.csrf):
        return f"the request lacks this session's {CSRF_HEADER}"
    return None


def safe_next(target: str | None) -> str:
    """Where to go after login: a path of this server only (never `//other` or a URL)."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    return target


class ReviewCache:
    """The TokenReviews' yeses of the last REVIEW_TTL seconds, by the token's SHA-256 (the
    tokens themselves are not kept)."""

    def __init__(self, ttl: float = REVIEW_TTL, size: int = REVIEW_CACHE) -> None:
        self.ttl, self.size = ttl, size
        self._seen: OrderedDict[bytes, tuple[float, Reviewed]] = OrderedDict()

    @staticmethod
    def _key(token: str) -> bytes:
        return hashlib.sha256(token.encode()).digest()

    def get(self, token: str, now: float | None = None) -> Reviewed | None:
        key = self._key(token)
        found = self._seen.get(key)
        if found is None:
            return None
        if (time.monotonic() if now is None else now) - found[0] > self.ttl:
            del self._seen[key]
            return None
        return found[1]

    def put(self, token: str, reviewed: Reviewed, now: float | None = None) -> None:
        if reviewed.user is None:
            return  # a no is asked again: the token may be valid in a moment (clock skew)
        self._seen[self._key(token)] = (time.monotonic() if now is None else now, reviewed)
        while len(self._seen) > self.size:
            self._seen.popitem(last=False)
