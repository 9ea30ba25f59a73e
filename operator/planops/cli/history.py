"""`kubectl plan history [NAME] [--phase P] [--since DURATION|TIME] [--capsule C] [-o ...]`:
the finished runs of a namespace's Plans.

With a DSN (`--archive-dsn`, else env PLANOPS_ARCHIVE_DSN) it reads the archive (PostgreSQL,
planops.archive), which keeps every run the operator archived, also of Plans deleted since.
Without one it reads the cluster: each Plan of the namespace, its current run and the earlier
runs its status keeps (status.history, up to the Plan's spec.historyLimit). Both answer with
the same rows, newest first.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from planops.cli import cluster_args, render
from planops.engine.report import parse_rfc3339

DSN_ENV = "PLANOPS_ARCHIVE_DSN"
PHASES = ("Succeeded", "Failed", "Running", "Pending", "Invalid")
EXIT_OK, EXIT_INPUT, EXIT_CLUSTER = 0, 2, 3
_SPAN = re.compile(r"(\d+(?:\.\d+)?)(d|h|m|s)")
_UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}


def add_parser(sub: Any) -> None:
    h = sub.add_parser(
        "history",
        help="finished runs: from the archive (PostgreSQL) with a DSN, else the cluster's Plans",
    )
    h.add_argument("name", nargs="?", help="one Plan's runs (default: every Plan's)")
    h.add_argument("--phase", choices=PHASES)
    h.add_argument(
        "--since", help="runs finished since: a duration back from now (90m, 2d, 1h30m) or a time"
    )
    h.add_argument("--capsule", help="runs that ran under this Capsule")
    h.add_argument(
        "--archive-dsn",
        help=f"the archive's PostgreSQL DSN (default: env {DSN_ENV}; none: read the cluster)",
    )
    cluster_args.add_common(h)


def duration(text: str) -> float | None:
    """Seconds of a duration (`90m`, `2d`, `1h30m`, `5s`), or None when `text` is none."""
    value = text.strip()
    pos, seconds = 0, 0.0
    for m in _SPAN.finditer(value):
        if m.start() != pos:
            break
        seconds += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    return seconds if value and pos == len(value) else None


def since(text: str, now: float) -> float:
    """Seconds since the epoch from a duration back from `now` or an RFC 3339 time; ValueError
    otherwise."""
    value = text.strip()
    seconds = duration(value)
    if seconds is not None:
        return now - seconds
    at = parse_rfc3339(value)
    if at is None or "T" not in value:
        try:  # a date alone (2026-12-01) is its midnight, local time
            at = datetime.fromisoformat(value).timestamp()
        except ValueError:
            raise ValueError(
                f"--since {text!r}: a duration (90m, 2d, 1h30m) or a time "
                "(2026-12-01T08:00:00Z, 2026-12-01)"
            ) from None
    return at


def in_cluster_row(plan: dict[str, Any]) -> dict[str, Any]:
    """A Plan's current run as a history row (the archive's columns, from its status)."""
    from planops.archive.row import capsule_ran, created_by, run_of, spec_digest  # noqa: PLC0415

    meta = plan.get("metadata") or {}
    status = plan.get("status") or {}
    spec = plan.get("spec") if isinstance(plan.get("spec"), dict) else {}
    started, finished = (
        parse_rfc3339(status.get("startedAt")),
        parse_rfc3339(status.get("finishedAt")),
    )
    return {
        "namespace": meta.get("namespace"),
        "name": meta.get("name"),
        "uid": meta.get("uid"),
        "runId": run_of(plan),
        "generation": (status.get("run") or {}).get("generation"),
        "phase": status.get("phase"),
        "completed": (status.get("report") or {}).get("completed"),
        "capsule": capsule_ran(status.get("run") or {}, plan),
        "createdBy": created_by(meta),
        "labels": meta.get("labels") or {},
        "specDigest": spec_digest(spec or {}),
        "failedStep": status.get("failedStep"),
        "startedAt": status.get("startedAt"),
        "finishedAt": status.get("finishedAt"),
        "durationSeconds": finished - started
        if started is not None and finished is not None
        else None,
    }


def in_cluster_rows(plan: dict[str, Any]) -> list[dict[str, Any]]:
    """A Plan's runs as history rows: its current run, then the earlier runs its status keeps
    (status.history, newest first)."""
    from planops.archive.row import capsule_ran  # noqa: PLC0415
    from planops.reconciler import history_entries  # noqa: PLC0415

    current = in_cluster_row(plan)
    generation = (plan.get("metadata") or {}).get("generation")
    rows = [current]
    for e in history_entries(plan.get("status") or {}):
        started, finished = parse_rfc3339(e.get("startedAt")), parse_rfc3339(e.get("finishedAt"))
        rows.append(
            {
                **current,
                "runId": e["id"],
                "generation": e.get("generation"),
                "phase": e.get("phase"),
                "capsule": capsule_ran(e, plan),
                "completed": e.get("completed"),
                # the spec it ran is the Plan's only while the generation is the same
                "specDigest": current["specDigest"] if e.get("generation") == generation else None,
                "failedStep": e.get("failedStep"),
                "startedAt": e.get("startedAt"),
                "finishedAt": e.get("finishedAt"),
                "durationSeconds": finished - started
                if started is not None and finished is not None
                else None,
            }
        )
    return rows


def select(
    rows: Iterable[dict[str, Any]],
    *,
    name: str | None = None,
    phase: str | None = None,
    capsule: str | None = None,
    since_: float | None = None,
) -> list[dict[str, Any]]:
    """The rows the filters keep, newest first (by finish, then start): the cluster's rows
    filtered as the archive's query filters them."""
    kept = [
        r
        for r in rows
        if (name is None or r["name"] == name)
        and (phase is None or r["phase"] == phase)
        and (capsule is None or r["capsule"] == capsule)
        and (since_ is None or (parse_rfc3339(r["finishedAt"]) or float("-inf")) >= since_)
    ]

    def newest(r: dict[str, Any]) -> tuple[float, float]:
        return (
            parse_rfc3339(r["finishedAt"]) or float("inf"),  # unfinished runs first
            parse_rfc3339(r["startedAt"]) or 0.0,
        )

    return sorted(kept, key=newest, reverse=True)


def _duration(seconds: Any) -> str:
    if not isinstance(seconds, int | float):
        return "-"
    s = round(seconds)
    return (
        f"{s}s"
        if s < 120
        else f"{s // 60}m{s % 60}s"
        if s < 7200
        else f"{s // 3600}h{s % 3600 // 60}m"
    )


def show(rows: list[dict[str, Any]], output: str, ns: str, source: str) -> None:
    if output == "json":
        sys.stdout.write(json.dumps({"source": source, "runs": rows}, indent=2) + "\n")
        return
    if output == "yaml":
        import yaml  # noqa: PLC0415

        sys.stdout.write(yaml.safe_dump({"source": source, "runs": rows}, sort_keys=False))
        return
    if not rows:
        print(f"No runs in namespace {ns} ({source}).")
        return
    render.table(
        [
            ["NAME", "RUN", "PHASE", "CAPSULE", "FINISHED", "DURATION", "FAILED"],
            *(
                [
                    r["name"] or "",
                    r["runId"] or "-",
                    r["phase"] or "",
                    r["capsule"] or "",
                    r["finishedAt"] or "-",
                    _duration(r["durationSeconds"]),
                    r["failedStep"] or "",
                ]
                for r in rows
            ),
        ],
        sys.stdout,
    )


async def _archived(dsn: str, args: argparse.Namespace, ns: str, at: float | None) -> list[Any]:
    from planops.archive.store import Query, Store  # noqa: PLC0415 - the driver: this verb only

    store = await Store.connect(dsn)  # (asyncio is running: this verb imported it)
    try:
        return await store.history(
            Query(namespace=ns, name=args.name, phase=args.phase, capsule=args.capsule, since=at)
        )
    finally:
        await store.close()


def run(args: argparse.Namespace, now: float) -> int:
    try:
        at = since(args.since, now) if args.since else None
    except ValueError as e:
        sys.stderr.write(f"error: {e}\n")
        return EXIT_INPUT
    dsn = args.archive_dsn or os.environ.get(DSN_ENV)
    from planops.cli import cluster  # noqa: PLC0415 - the Kubernetes client

    if not dsn:

        async def from_cluster(kube: Any, a: argparse.Namespace, ns: str) -> int:
            plans = await kube.list_plans(ns, "")
            rows = select(
                (row for plan in plans for row in in_cluster_rows(plan)),
                name=a.name,
                phase=a.phase,
                capsule=a.capsule,
                since_=at,
            )
            show(rows, a.output, ns, "cluster")
            return EXIT_OK

        return cluster.run(args, from_cluster)
    ns = cluster.namespace_of(args)
    import asyncio  # noqa: PLC0415 - not for the offline verbs (docs/performance.md)

    from planops.archive.dsn import redacted  # noqa: PLC0415
    from planops.archive.store import DatabaseError  # noqa: PLC0415

    try:
        rows = asyncio.run(_archived(dsn, args, ns, at))
    except DatabaseError as e:  # (its password kept out of a CI job's log)
        said = redacted(str(e), dsn)
        sys.stderr.write(f"error: cannot read the archive: {type(e).__name__}: {said}\n")
        return EXIT_CLUSTER
    show(rows, args.output, ns, "archive")
    return EXIT_OK
