"""What a presigned URL says of itself (planops.store.urls): its expiry, read from SigV4's own
query, decides when the operator signs it again."""

from __future__ import annotations

import calendar
import time

from planops.store.urls import MAX_URL_BYTES, expires_at, fits, needs_resign

SIGNED = calendar.timegm(time.strptime("20261205T220000Z", "%Y%m%dT%H%M%SZ"))
URL = (
    "http://127.0.0.1:8333/b/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=a%2F20261205"
    "%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20261205T220000Z&X-Amz-Expires=7200"
    "&X-Amz-SignedHeaders=host&X-Amz-Signature=00"
)


def test_the_expiry_is_the_signing_time_plus_its_life() -> None:
    assert expires_at(URL) == SIGNED + 7200
    assert expires_at("http://h/b/k") is None
    assert expires_at(URL.replace("20261205T220000Z", "yesterday")) is None


def test_a_url_is_signed_again_within_the_margin_of_its_expiry() -> None:
    assert not needs_resign(URL, SIGNED, margin=3600)
    assert needs_resign(URL, SIGNED + 3600, margin=3600)
    assert needs_resign(URL, SIGNED + 8000)
    assert needs_resign(None, SIGNED)
    assert needs_resign("http://h/b/k", SIGNED)


def test_a_url_past_the_bound_does_not_fit_a_record() -> None:
    assert fits(URL)
    assert not fits(URL + "x" * MAX_URL_BYTES)
