"""Pure: reading stored logs and artifacts without credentials (docs/artifacts.md, "Reading").

The operator signs a presigned GET URL for each stored object of a run (each attempt's log,
each artifact) and writes them into the Plan's `status.stored`, so whoever may `get` the Plan
may read its logs and artifacts, and nobody else: no client holds a credential, no Secret is
read by a user. The URLs live SIGN_LIFETIME (SigV4's bound is 7 days) and are signed again
RESIGN_MARGIN before they expire, at a reconcile or a resync (`due` decides; the operator's
effect `reconciler.effects.signing` signs and writes).

One entry per run the Plan keeps (its current run first, then its status.history's), compact:
the URLs of one signing share everything but their key and signature, so an entry holds the
common `base` (the run's prefix as a URL) and `query`, and per object only its key relative to
the run and its signature (~100 bytes instead of ~600). A URL that does not split so (a store
that signs differently) is kept whole under `urls`. `url` puts one back together.
"""

from __future__ import annotations

import calendar
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from planops.store import urls as urls_
from planops.store.keys import BadKeyError, RunKeys, plan_prefix

#: the status field
FIELD = "stored"
#: how long a reading URL lives (SigV4's bound: 7 days)
SIGN_LIFETIME_SECONDS = 7 * 24 * 3600
#: signed again this long before it expires (a resync is a minute; a day leaves room for an
#: operator that was down a while)
RESIGN_MARGIN_SECONDS = 24 * 3600.0
#: the bytes `status.stored` may take (an entry past it is left out, oldest runs first)
BUDGET_BYTES = 64 * 1024
#: the bytes one run's entry may take: the current run's is kept whatever BUDGET_BYTES says, and
#: a run of thousands of steps would otherwise outgrow the Plan object (etcd takes 1.5 MiB, and
#: the spec and the status summary may take 1.2 MiB of it: tests/unit/test_status_bound.py);
#: past it a run's later objects get no URL (the entry counts them: `unsigned`)
ENTRY_BUDGET_BYTES = 96 * 1024
#: what a signed key costs its entry besides its own text: the signature (64 hex digits), the
#: quotes and separators around both
KEY_COST = 72
_SIG = "&X-Amz-Signature="


@dataclass(frozen=True)
class Signing:
    """What to sign for one run: the keys relative to the run's prefix."""

    run: str
    keys: tuple[str, ...]
    records: int | None  # the record count it was signed for (the current run), else None


def entries(status: Mapping[str, Any]) -> list[dict[str, Any]]:
    found = status.get(FIELD)
    if not isinstance(found, list):
        return []
    return [e for e in found if isinstance(e, dict) and isinstance(e.get("run"), str)]


def entry(status: Mapping[str, Any], run: str) -> dict[str, Any] | None:
    return next((e for e in entries(status) if e["run"] == run), None)


def kept_runs(status: Mapping[str, Any]) -> list[str]:
    """The runs the Plan keeps, current first: what `status.stored` may hold entries of."""
    current = (status.get("run") or {}).get("id")
    found = status.get("history")
    history: list[Any] = found if isinstance(found, list) else []
    ids = [current] + [e.get("id") for e in history if isinstance(e, dict)]
    return list(dict.fromkeys(i for i in ids if isinstance(i, str) and i))


def records_of(status: Mapping[str, Any]) -> int:
    count = (status.get("report") or {}).get("records")
    return count if isinstance(count, int) else len((status.get("report") or {}).get("steps") or [])


def _expires(e: Mapping[str, Any]) -> float | None:
    at = e.get("expiresAt")
    if not isinstance(at, str):
        return None
    try:
        return float(calendar.timegm(time.strptime(at, "%Y-%m-%dT%H:%M:%SZ")))
    except ValueError:
        return None


def due(status: Mapping[str, Any], now: float, margin: float = RESIGN_MARGIN_SECONDS) -> list[str]:
    """The runs to sign now: the current run when it has no entry or settled records since
    (its record count moved) and its entry is not full, and every kept run whose URLs expire
    within `margin`."""
    runs = kept_runs(status)
    if not runs:
        return []
    out = []
    current = runs[0]
    mine = entry(status, current)
    if mine is None or (mine.get("records") != records_of(status) and not mine.get("unsigned")):
        out.append(current)  # (a full entry takes no more: signed again only as it expires)
    for e in entries(status):
        at = _expires(e)
        if e["run"] in runs and e["run"] not in out and (at is None or at - now <= margin):
            out.append(e["run"])
    return out


def keys_of_records(records: Iterable[Mapping[str, Any]], run_keys: RunKeys) -> tuple[str, ...]:
    """Each record's logs (one per attempt) and artifacts, as keys relative to the run's
    prefix; an artifact record whose key is not this run's (a status edited by hand) and a step
    id no key can hold are left out."""
    out: list[str] = []
    run_prefix = run_keys.run_prefix
    for r in records:
        step, attempts = r.get("stepId"), r.get("attempts")
        if not isinstance(step, str):
            continue
        try:
            for n in range(1, attempts + 1 if isinstance(attempts, int) else 1):
                out.append(run_keys.log(step, n)[len(run_prefix) :])
        except BadKeyError:
            continue
        for a in r.get("artifacts") or []:
            key = a.get("key") if isinstance(a, dict) else None
            if isinstance(key, str) and key.startswith(run_prefix) and ".." not in key:
                out.append(key[len(run_prefix) :])
    return tuple(dict.fromkeys(out))


def budgeted(rels: tuple[str, ...]) -> tuple[tuple[str, ...], int]:
    """The keys one entry signs, in their order, within ENTRY_BUDGET_BYTES; and how many are
    left out (chosen before signing: a big run's keys past the bound cost no signature)."""
    size = 0
    for n, rel in enumerate(rels):
        size += len(rel) + KEY_COST
        if size > ENTRY_BUDGET_BYTES:
            return rels[:n], len(rels) - n
    return rels, 0


def relative_run_keys(namespace: str, uid: str, run: str) -> RunKeys:
    """A run's keys without a repository's prefix (what records hold)."""
    return RunKeys("", namespace, uid, run)


def compact(
    run: str,
    signed: Mapping[str, str],
    *,
    repository: str,
    key_prefix: str,
    records: int | None,
    expires_at: float,
    unsigned: int = 0,
) -> dict[str, Any]:
    """The entry of one run's signing: `signed` maps each key (relative to the run) to its URL;
    `unsigned`: how many of the run's keys budgeted left out. A URL kept whole (~600 bytes) counts
    against ENTRY_BUDGET_BYTES too: past it, the rest are unsigned as well."""
    base, query = None, None
    sigs: dict[str, str] = {}
    whole: dict[str, str] = {}
    size = 0
    for n, (rel, url) in enumerate(signed.items()):
        head, _, rest = url.partition("?")
        common, sep, sig = rest.rpartition(_SIG[1:])
        if base is None and head.endswith("/" + rel) and sep and common.endswith("&"):
            base, query = head[: -len(rel)], common[:-1]
        split = base is not None and url == f"{base}{rel}?{query}{_SIG}{sig}" and sep
        size += len(rel) + (KEY_COST if split else len(url) + 8)
        if size > ENTRY_BUDGET_BYTES:
            unsigned += len(signed) - n
            break
        if split:
            sigs[rel] = sig
        else:
            whole[rel] = url
    out: dict[str, Any] = {
        "run": run,
        "repository": repository,
        "keyPrefix": key_prefix,
        "expiresAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(expires_at)),
    }
    if records is not None:
        out["records"] = records
    if sigs:
        out |= {"base": base, "query": query, "signatures": sigs}
    if whole:
        out["urls"] = whole
    if unsigned:
        out["unsigned"] = unsigned
    return out


def signed_keys(e: Mapping[str, Any]) -> tuple[str, ...]:
    """The keys (relative to the run) an entry holds URLs of."""
    sigs, whole = e.get("signatures"), e.get("urls")
    keys = [*(sigs if isinstance(sigs, dict) else {}), *(whole if isinstance(whole, dict) else {})]
    return tuple(k for k in keys if isinstance(k, str))


def url(e: Mapping[str, Any], rel: str) -> str | None:
    """The URL of `rel` (a key relative to the run) in the entry, or None."""
    whole = e.get("urls")
    if isinstance(whole, dict) and isinstance(whole.get(rel), str):
        return str(whole[rel])
    sigs = e.get("signatures")
    sig = sigs.get(rel) if isinstance(sigs, dict) else None
    base, query = e.get("base"), e.get("query")
    if not (isinstance(sig, str) and isinstance(base, str) and isinstance(query, str)):
        return None
    return f"{base}{rel}?{query}{_SIG}{sig}"


def log_key(step: str, attempt: int) -> str:
    return f"{step}/logs/{attempt}.log"


def artifact_key(step: str, name: str) -> str:
    return f"{step}/artifacts/{name}"


def written(status: Mapping[str, Any], new: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The status with the entries `new` in place (a run's entry replaces its old one), only the
    kept runs' entries, current first, within BUDGET_BYTES (older runs' left out); None when
    nothing changes."""
    runs = kept_runs(status)
    by_run = {e["run"]: e for e in entries(status)} | {e["run"]: e for e in new}
    kept: list[dict[str, Any]] = []
    size = 0
    for run in runs:
        e = by_run.get(run)
        if e is None:
            continue
        size += len(repr(e))
        if size > BUDGET_BYTES and kept:
            break
        kept.append(e)
    if kept == entries(status):
        return None
    return {**status, FIELD: kept or None}


def object_key(e: Mapping[str, Any], namespace: str, uid: str, rel: str) -> str:
    """The object's key in its repository (with the repository's key prefix)."""
    prefix = e.get("keyPrefix") if isinstance(e.get("keyPrefix"), str) else ""
    return f"{plan_prefix(str(prefix), namespace, uid)}{e['run']}/{rel}"


def expired(u: str, now: float) -> bool:
    at = urls_.expires_at(u)
    return at is not None and at <= now
