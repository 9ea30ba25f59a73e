"""Pure: what a presigned URL says of itself (when it was signed, how long it lives), so the
operator can re-sign the URLs it hands out (a step's pod, a settled step's record) before they
expire, and a reader can tell an expired URL from a missing object. SigV4 query signing:
X-Amz-Date (YYYYMMDDTHHMMSSZ) and X-Amz-Expires (seconds) are in the URL itself.
"""

from __future__ import annotations

import calendar
import time
from urllib.parse import parse_qs, urlsplit

#: a presigned URL longer than this is not kept in a record (a record's text is budgeted)
MAX_URL_BYTES = 2048
#: re-sign a URL this long before it expires
RESIGN_MARGIN_SECONDS = 3600.0


def expires_at(url: str) -> float | None:
    """When the URL stops working (epoch seconds); None when it carries no SigV4 expiry."""
    query = parse_qs(urlsplit(url).query)
    signed, lives = query.get("X-Amz-Date"), query.get("X-Amz-Expires")
    if not signed or not lives:
        return None
    try:
        at = calendar.timegm(time.strptime(signed[0], "%Y%m%dT%H%M%SZ"))
        return float(at + int(lives[0]))
    except ValueError:
        return None


def needs_resign(url: str | None, now: float, margin: float = RESIGN_MARGIN_SECONDS) -> bool:
    """A URL missing, unreadable, or expiring within `margin` seconds is signed again."""
    if not url:
        return True
    at = expires_at(url)
    return at is None or at - now <= margin


def fits(url: str) -> bool:
    """Short enough for a record (MAX_URL_BYTES)."""
    return len(url.encode()) <= MAX_URL_BYTES
