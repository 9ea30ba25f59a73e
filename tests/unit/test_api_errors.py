"""Errors by kind (kube.errors): what an API server's error answer means is read from its code,
its reason and the shape of its details, never from the message, and each kind says whether the
same request can pass later. The bodies here are shaped as the API server writes them."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from planops.kube.client import ApiError
from planops.kube.errors import ErrorKind, causes_of, kind_of

PACKAGE = Path(__file__).resolve().parents[2] / "operator" / "planops"


def error(body: dict[str, Any]) -> ApiError:
    """The ApiError kube.client raises for this Status body."""
    return ApiError(
        int(body["code"]), body.get("reason", ""), body["message"], causes_of(body.get("details"))
    )


# what the API server answers, shaped as it writes each one (k8s.io/apimachinery's StatusError)
EXISTS = {"code": 409, "reason": "AlreadyExists", "message": 'jobs.batch "a" already exists'}
MODIFIED = {
    "code": 409,
    "reason": "Conflict",
    "message": 'Operation cannot be fulfilled on plans.planops.dev "p": the object has been '
    "modified; please apply your changes to the latest version and try again",
}
RBAC = {
    "code": 403,
    "reason": "Forbidden",
    "message": 'jobs.batch is forbidden: User "u" cannot create resource "jobs"',
    "details": {"group": "batch", "kind": "jobs"},
}
QUOTA = {
    "code": 403,
    "reason": "Forbidden",
    "message": 'jobs.batch "a" is forbidden: exceeded quota: q',
    "details": {"name": "a", "group": "batch", "kind": "jobs"},
}
TERMINATING = {
    "code": 403,
    "reason": "Forbidden",
    "message": "unable to create new content in namespace ns because it is being terminated",
    "details": {
        "causes": [
            {
                "reason": "NamespaceTerminating",
                "message": "namespace ns is being terminated",
                "field": "metadata.namespace",
            }
        ]
    },
}
SCHEMA = {
    "code": 422,
    "reason": "Invalid",
    "message": 'Job.batch "a" is invalid: spec.template...limits[memory]: Invalid value',
    "details": {
        "causes": [
            {
                "reason": "FieldValueInvalid",
                "message": "Invalid value: quantities must match the regular expression",
                "field": "spec.template.spec.containers[0].resources.limits[memory]",
            }
        ]
    },
}
# a ValidatingAdmissionPolicy's denial: the validation's reason (Invalid unless it sets one), and
# one cause that is only its message
POLICY = {
    "code": 422,
    "reason": "Invalid",
    "message": "jobs.batch \"a\" is invalid: ValidatingAdmissionPolicy 'p' with binding 'b' "
    "denied request: steps named forbidden may not run",
    "details": {
        "name": "a",
        "group": "batch",
        "kind": "jobs",
        "causes": [{"message": "ValidatingAdmissionPolicy 'p' denied request"}],
    },
}
POLICY_FORBIDDEN = {**POLICY, "code": 403, "reason": "Forbidden"}
# an admission webhook's denial: its own status, passed on with at least code 400, no reason
WEBHOOK = {"code": 400, "message": 'admission webhook "w" denied the request: no'}
WEBHOOK_403 = {"code": 403, "message": 'admission webhook "w" denied the request'}
BAD = {"code": 400, "reason": "BadRequest", "message": "container c is waiting to start"}
THROTTLED = {"code": 429, "reason": "TooManyRequests", "message": "too many requests"}
DOWN = {"code": 500, "reason": "InternalError", "message": "etcdserver: leader changed"}
SERVER_TIMEOUT = {"code": 500, "reason": "ServerTimeout", "message": "the server timed out"}
TIMEOUT = {"code": 504, "reason": "Timeout", "message": "request timed out"}
UNAVAILABLE = {"code": 503, "reason": "ServiceUnavailable", "message": "apiserver shutting down"}
GONE = {"code": 404, "reason": "NotFound", "message": 'plans.planops.dev "p" not found'}
EXPIRED = {"code": 410, "reason": "Expired", "message": "too old resource version: 1 (2)"}
TOO_LARGE = {"code": 413, "reason": "RequestEntityTooLarge", "message": "too large"}
UNAUTHORIZED = {"code": 401, "reason": "Unauthorized", "message": "Unauthorized"}


@pytest.mark.parametrize(
    ("body", "kind"),
    [
        (EXISTS, ErrorKind.ALREADY_EXISTS),
        (MODIFIED, ErrorKind.CONFLICT),
        (RBAC, ErrorKind.FORBIDDEN),
        (QUOTA, ErrorKind.FORBIDDEN),
        (TERMINATING, ErrorKind.FORBIDDEN),
        (SCHEMA, ErrorKind.INVALID),
        (POLICY, ErrorKind.REFUSED_BY_ADMISSION),
        (POLICY_FORBIDDEN, ErrorKind.REFUSED_BY_ADMISSION),
        (WEBHOOK, ErrorKind.REFUSED_BY_ADMISSION),
        (WEBHOOK_403, ErrorKind.REFUSED_BY_ADMISSION),
        (BAD, ErrorKind.BAD_REQUEST),
        (THROTTLED, ErrorKind.THROTTLED),
        (DOWN, ErrorKind.SERVER_ERROR),
        (UNAVAILABLE, ErrorKind.SERVER_ERROR),
        (SERVER_TIMEOUT, ErrorKind.TIMEOUT),
        (TIMEOUT, ErrorKind.TIMEOUT),
        (GONE, ErrorKind.NOT_FOUND),
        (EXPIRED, ErrorKind.EXPIRED),
        (TOO_LARGE, ErrorKind.INVALID),
        (UNAUTHORIZED, ErrorKind.UNAUTHORIZED),
    ],
)
def test_an_answer_is_known_by_its_code_reason_and_details(body: dict[str, Any], kind: ErrorKind):
    assert error(body).kind is kind


def test_the_message_says_nothing_of_the_kind():
    """Words in a message (which a webhook or a user's object may put there) change no kind."""
    for body in (RBAC, SCHEMA, BAD, DOWN):
        worded = {**body, "message": "admission webhook denied the request by policy: Conflict"}
        assert error(worded).kind is error(body).kind


def test_each_kind_is_permanent_or_retryable():
    permanent = {k for k in ErrorKind if k.permanent}
    assert permanent == {
        ErrorKind.NOT_FOUND,
        ErrorKind.ALREADY_EXISTS,
        ErrorKind.FORBIDDEN,
        ErrorKind.REFUSED_BY_ADMISSION,
        ErrorKind.INVALID,
        ErrorKind.BAD_REQUEST,
    }
    for k in ErrorKind:
        assert k.retryable is not k.permanent
    e = error(MODIFIED)
    assert (e.status, e.reason, e.retryable, e.permanent) == (409, "Conflict", True, False)
    assert error(POLICY).refused_by_admission and error(GONE).not_found
    assert error(EXISTS).already_exists and not error(MODIFIED).already_exists


def test_causes_are_read_whatever_the_details_hold():
    assert causes_of(None) == () and causes_of({"causes": "x"}) == ()
    assert causes_of({"causes": [{"field": "a"}, 3, {"reason": "R"}]}) == (("", "a"), ("R", ""))
    assert kind_of(422, "Invalid", [("FieldValueInvalid", "spec")]) is ErrorKind.INVALID


def test_no_code_decides_by_an_error_messages_text():
    """The reconciler and the archive decide by kind: no `in str(e)`, no `... in e.message`, no
    lower-cased message searched (texts are shown to people, never read back)."""
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Compare):
                continue
            for op, right in zip(node.ops, node.comparators, strict=True):
                text = ast.unparse(right)
                if isinstance(op, ast.In | ast.NotIn) and (
                    text in ("str(e)", "str(err)", "str(error)")
                    or ".message" in text
                    or "lower()" in text
                ):
                    offenders.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: {text}")
    assert offenders == []
