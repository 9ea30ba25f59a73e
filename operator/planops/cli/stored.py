"""Reading a run's stored logs and artifacts through the URLs the operator signed into the
Plan's `status.stored` (store.signed; docs/artifacts.md, "Reading logs and artifacts"): what
`kubectl plan logs` shows once a step's pod is gone, what the UI's log shows, and what `kubectl
plan artifacts` lists and downloads. The reader holds no credential: whoever could read the
Plan has its URLs, and each URL reads one object.

The requests use the standard library (urllib): bounded (a timeout, a size limit), and each
failure said plainly: an expired URL says how a fresh one comes, a missing object that it was
not stored.
"""

from __future__ import annotations

import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from typing import Any

from planops.store import signed
from planops.store.urls import expires_at

#: seconds a read waits for the store
TIMEOUT = 30.0
CHUNK = 1 << 16
#: a URL this close to its expiry that the store refuses counts as expired (the clocks differ)
CLOCK_SKEW = 300.0


class ReadError(Exception):
    """A stored object could not be read; the message says why and what to do."""


def entry_of(plan: Mapping[str, Any], run: str) -> dict[str, Any] | str:
    """The run's entry of `status.stored`, or why there is none."""
    status = plan.get("status") or {}
    found = signed.entry(status, run)
    if found is not None:
        return found
    name = (plan.get("metadata") or {}).get("name")
    if signed.entries(status) or status.get("stored") is not None:
        return f"plan {name}: the operator has signed no reading URLs for run {run} yet"
    return (
        f"plan {name}: no stored logs or artifacts to read (no artifact repository is "
        "configured for its Capsule or the operator, or the operator has not signed their "
        "URLs yet: docs/artifacts.md)"
    )


def unsigned_note(entry: Mapping[str, Any]) -> str:
    """Why an object of a run has no URL when the run's entry is full, else ''."""
    left = entry.get("unsigned")
    if not isinstance(left, int) or left <= 0:
        return ""
    return (
        f"the run stores more objects than its status has room to sign URLs for ({left} left "
        "unsigned, the latest to settle); one who holds the repository's credentials reads "
        "them from the store: docs/artifacts.md"
    )


def log_url(entry: Mapping[str, Any], step: str, attempt: int) -> str | None:
    return signed.url(entry, signed.log_key(step, attempt))


def artifact_url(entry: Mapping[str, Any], step: str, name: str) -> str | None:
    return signed.url(entry, signed.artifact_key(step, name))


def _expired_message(what: str, url: str) -> str:
    at = expires_at(url)
    when = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at)) if at is not None else "?"
    return (
        f"{what}: its reading URL expired at {when}. The operator signs fresh ones a day before "
        "they expire, at its resync (every minute) while it runs: run this again in a minute; "
        "if it stays expired, the operator is not running or cannot use the artifact "
        "repository's credentials (its log says why)"
    )


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A signed URL names one object of the store; a redirect would lead the reader (the UI
    server too, inside the cluster) to wherever the endpoint's answer points: refused."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        raise urllib.error.HTTPError(req.full_url, code, f"redirected to {newurl}", headers, fp)


_OPENER = urllib.request.build_opener(_NoRedirects)


def read(
    url: str,
    what: str,
    sink: Callable[[bytes], None],
    limit: int | None = None,
    now: float | None = None,
) -> int:
    """GETs `url` into `sink` (at most `limit` bytes); the bytes read. Raises ReadError."""
    if not url.startswith(("https://", "http://")):
        raise ReadError(f"{what}: the URL in the Plan's status is not http(s)")
    if signed.expired(url, time.time() if now is None else now):
        raise ReadError(_expired_message(what, url))
    got = 0
    try:
        with _OPENER.open(url, timeout=TIMEOUT) as resp:
            while chunk := resp.read(CHUNK):
                if limit is not None and got + len(chunk) > limit:
                    sink(chunk[: limit - got])
                    return limit
                sink(chunk)
                got += len(chunk)
    except urllib.error.HTTPError as e:
        body = e.read(4096).decode(errors="replace")
        at = expires_at(url)
        if e.code == 403 and at is not None and at - time.time() < CLOCK_SKEW:
            raise ReadError(_expired_message(what, url)) from None  # the store's clock ahead
        if e.code == 404:
            raise ReadError(
                f"{what}: the store does not hold it (never stored, or deleted)"
            ) from None
        code = _s3_code(body)
        raise ReadError(f"{what}: the store answered {e.code}{code}") from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        host = url.split("/")[2]
        raise ReadError(
            f"{what}: the artifact repository {host} cannot be reached: {reason}"
        ) from e
    return got


def _s3_code(body: str) -> str:
    start, end = body.find("<Code>"), body.find("</Code>")
    return f" {body[start + 6 : end]}" if 0 <= start < end else ""


def did_you_mean(word: str, known: list[str]) -> str:
    import difflib  # noqa: PLC0415 - errors only

    close = difflib.get_close_matches(word, known, n=1)
    listed = ", ".join(known) or "none"
    return (f" (did you mean {close[0]!r}?)" if close else "") + f"; known: {listed}"


def artifact_rows(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every artifact of a run's records: step, name, size, sha256, directory."""
    out = []
    for r in records:
        for a in r.get("artifacts") or []:
            if isinstance(a, dict) and isinstance(a.get("name"), str):
                out.append(
                    {
                        "step": r.get("stepId"),
                        "name": a["name"],
                        "size": a.get("size"),
                        "sha256": a.get("sha256"),
                        "directory": a.get("directory") is True,
                    }
                )
    return out


def log_of(plan: Mapping[str, Any], step: str, attempt: int | None) -> tuple[str, int] | None:
    """The reading URL of the step's log in the Plan's current run (of `attempt`, else the
    last its record counts) and the attempt; None when the status holds none (no repository,
    not signed yet, or a step without a stored log)."""
    status = plan.get("status") or {}
    run = (status.get("run") or {}).get("id")
    found = signed.entry(status, run) if isinstance(run, str) else None
    if found is None:
        return None
    if attempt is None:
        attempt = _recorded_attempts(status, step)
    if attempt is None:
        attempts_signed = [
            int(k.rsplit("/", 1)[1].split(".")[0])
            for k in signed.signed_keys(found)
            if k.startswith(f"{step}/logs/") and k.rsplit("/", 1)[1].split(".")[0].isdigit()
        ]
        attempt = max(attempts_signed, default=None)
    if attempt is None:
        return None
    url = log_url(found, step, attempt)
    return (url, attempt) if url is not None else None


def _recorded_attempts(status: Mapping[str, Any], step: str) -> int | None:
    """The attempts the step's record in the status counts; None without one."""
    steps = (status.get("report") or {}).get("steps") or []
    record = next((r for r in steps if r.get("stepId") == step), None)
    attempts = (record or {}).get("attempts")
    return attempts if isinstance(attempts, int) and attempts > 0 else None


async def read_log(
    plan: Mapping[str, Any], step: str, attempt: int | None, limit: int
) -> tuple[str, int, bool] | str | None:
    """The step's stored log (text, attempt, whether cut at `limit` bytes); why it cannot be
    read (str); None when there is none to read."""
    import asyncio  # noqa: PLC0415

    found = log_of(plan, step, attempt)
    if found is None:
        status = plan.get("status") or {}
        run = (status.get("run") or {}).get("id")
        held = signed.entry(status, run) if isinstance(run, str) else None
        note = unsigned_note(held) if held is not None else ""
        ran = attempt is not None or _recorded_attempts(status, step) is not None
        return f"no reading URL for the stored log of {step}: {note}" if note and ran else None
    url, n = found
    parts: list[bytes] = []
    try:
        what = f"the stored log of {step} attempt {n}"
        got = await asyncio.to_thread(read, url, what, parts.append, limit)
    except ReadError as e:
        return str(e)
    return b"".join(parts).decode(errors="replace"), n, got >= limit
