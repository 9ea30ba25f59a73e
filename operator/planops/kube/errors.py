"""What an error answer of the API server is, by kind: read from its status code, its reason and
the shape of its details, never from its message's text.

The API server answers every refusal with a `Status`: an HTTP code, a machine-readable `reason`
(AlreadyExists, Conflict, Forbidden, Invalid, ...) and `details.causes` (each a type and a field
for the field-level errors). A caller decides by kind: a Conflict means "read again and decide
again", AlreadyExists on a create of a deterministic name means "adopt it", a refusal of the
request itself (Forbidden, Invalid, refused by admission) will be refused again however often it
is sent, throttling and server errors pass. `permanent` says the same request will get the same
answer until something else changes; `retryable` the opposite.

Refused by admission is told apart by the shape of the answer, as the API server builds it:
- an admission webhook's denial carries the webhook's own status, which the API server passes on
  (with at least code 400): its reason is whatever the webhook set, usually none, where every
  refusal of the API server itself names one (BadRequest, Forbidden, Invalid, ...);
- a ValidatingAdmissionPolicy's denial (k8s.io/apiserver's policy dispatcher) has the reason of
  the validation (Invalid by default, or Forbidden, ...) and adds one cause that is only a
  message: no type, no field. The API server's own validation names the field of each cause,
  and its other admission plugins (quota, NamespaceLifecycle) name a type.
RBAC's Forbidden (no causes) is FORBIDDEN: the request is refused all the same, said otherwise.

`ApiError` is the error kube.client raises for an error answer (and kube.client names it too):
it lives here, with the kinds, so that what decides by kind needs no client.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum


class ErrorKind(Enum):
    """What an error answer means, and whether sending the same request again can help."""

    #: the object changed since it was read (a resourceVersion or uid precondition): read
    #: again, decide again
    CONFLICT = ("Conflict", False)
    NOT_FOUND = ("NotFound", True)
    #: a create of a name that exists
    ALREADY_EXISTS = ("AlreadyExists", True)
    #: not allowed (RBAC, an admission plugin such as a quota or NamespaceLifecycle)
    FORBIDDEN = ("Forbidden", True)
    #: refused by an admission webhook or a ValidatingAdmissionPolicy (the module's rule)
    REFUSED_BY_ADMISSION = ("RefusedByAdmission", True)
    #: the object or request is not valid (the API server's validation; a body too large)
    INVALID = ("Invalid", True)
    BAD_REQUEST = ("BadRequest", True)
    #: 429: the API server's priority and fairness, or a rate limit
    THROTTLED = ("Throttled", False)
    SERVER_ERROR = ("ServerError", False)
    TIMEOUT = ("Timeout", False)
    #: 410: a list's continue token or a watch's resourceVersion too old: list again
    EXPIRED = ("Expired", False)
    #: 401: the credentials were not accepted (a token expired: read them again)
    UNAUTHORIZED = ("Unauthorized", False)
    #: any other answer: taken as passing
    OTHER = ("Other", False)

    def __init__(self, label: str, permanent: bool) -> None:
        self.label = label
        self.permanent = permanent

    @property
    def retryable(self) -> bool:
        return not self.permanent


#: the refusals the API server itself always gives a reason (an answer in these codes without
#: one is a webhook's)
_REFUSALS = (400, 403, 422)


def kind_of(status: int, reason: str, causes: Iterable[tuple[str, str]] = ()) -> ErrorKind:
    """The kind of an error answer: its HTTP `status`, its `reason` and its `causes` (each
    cause's type and field, "" when absent)."""
    if status == 409:
        return ErrorKind.ALREADY_EXISTS if reason == "AlreadyExists" else ErrorKind.CONFLICT
    simple = {
        404: ErrorKind.NOT_FOUND,
        410: ErrorKind.EXPIRED,
        429: ErrorKind.THROTTLED,
        401: ErrorKind.UNAUTHORIZED,
        504: ErrorKind.TIMEOUT,
    }.get(status)
    if simple is not None:
        return simple
    if status >= 500:
        timeout = reason in ("Timeout", "ServerTimeout")
        return ErrorKind.TIMEOUT if timeout else ErrorKind.SERVER_ERROR
    if status in _REFUSALS and (not reason or any(c == ("", "") for c in causes)):
        return ErrorKind.REFUSED_BY_ADMISSION
    return {
        403: ErrorKind.FORBIDDEN,
        422: ErrorKind.INVALID,
        413: ErrorKind.INVALID,
        400: ErrorKind.BAD_REQUEST,
    }.get(status, ErrorKind.OTHER)


def causes_of(details: object) -> tuple[tuple[str, str], ...]:
    """The causes of a Status' `details` as (type, field) pairs; () for anything else."""
    found = details.get("causes") if isinstance(details, dict) else None
    if not isinstance(found, list):
        return ()
    return tuple(
        (str(c.get("reason") or ""), str(c.get("field") or ""))
        for c in found
        if isinstance(c, dict)
    )


class ApiError(Exception):
    """A non-2xx answer of the API server: its code (`status`), reason and message, and its
    kind (kube.errors: what it means, whether the same request can pass later), read from the
    code, the reason and its details' causes, never from the message."""

    def __init__(
        self, status: int, reason: str, message: str, causes: Iterable[tuple[str, str]] = ()
    ) -> None:
        super().__init__(f"{status} {reason}: {message}")
        self.status, self.reason, self.message = status, reason, message
        self.kind = kind_of(status, reason, causes)

    @property
    def permanent(self) -> bool:
        """The same request gets the same answer until something else changes."""
        return self.kind.permanent

    @property
    def retryable(self) -> bool:
        return self.kind.retryable

    @property
    def not_found(self) -> bool:
        return self.kind is ErrorKind.NOT_FOUND

    @property
    def already_exists(self) -> bool:
        return self.kind is ErrorKind.ALREADY_EXISTS

    @property
    def refused_by_admission(self) -> bool:
        """Refused by an admission webhook or a ValidatingAdmissionPolicy (kube.errors)."""
        return self.kind is ErrorKind.REFUSED_BY_ADMISSION


class ListExpired(ApiError):  # noqa: N818 - reads as the fact it is
    """410 Gone on a list's next page: etcd compacted the revision the list started at."""
