"""`kubectl plan artifacts NAME [--run ID]` lists a run's artifacts (step, name, size, sha256,
whether a directory) and `kubectl plan artifacts get NAME STEP ARTIFACT -o PATH` downloads one,
through the reading URL the operator signed into the Plan's status (cli/stored.py): written to
a temporary file beside PATH, its sha256 and size checked against the step's record, then
renamed into place; nothing half-written or altered is left at PATH. A directory artifact is
its tar archive (`tar -xf PATH`)."""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from planops.cli import render, stored
from planops.cli.exit_codes import EXIT_CLUSTER, EXIT_INPUT, EXIT_OK
from planops.cli.get import emit
from planops.cli.plan_report import run_report
from planops.kube.api import CliApi

FORMATS = ("table", "json", "yaml")


def refused(args: argparse.Namespace) -> str | None:
    """What is wrong with the words and flags, before the cluster is asked; None: nothing."""
    words = args.words
    if _getting(words):
        if len(words) != 4:
            return (
                "artifacts get NAME STEP ARTIFACT -o PATH (kubectl plan artifacts NAME lists them)"
            )
        if args.output in (None, *FORMATS):
            return "artifacts get: -o PATH, the file to write the artifact to"
        return None
    if len(words) != 1:
        return (
            "artifacts NAME [--run ID] lists a run's artifacts; "
            "artifacts get NAME STEP ARTIFACT -o PATH downloads one"
        )
    if args.output not in (None, *FORMATS):
        return f"artifacts NAME: -o {args.output}: one of {', '.join(FORMATS)}"
    return None


def _getting(words: list[str]) -> bool:
    """`artifacts get NAME ...` (`artifacts get` alone lists a Plan named get)."""
    return words[0] == "get" and len(words) > 1


async def cmd_artifacts(kube: CliApi, args: argparse.Namespace, ns: str) -> int:
    words = args.words
    name = words[1] if _getting(words) else words[0]
    plan = await kube.get_plan(ns, name)
    if plan is None:
        sys.stderr.write(f"error: plan {name!r} not found in namespace {ns}\n")
        return EXIT_INPUT
    run = args.run or ((plan.get("status") or {}).get("run") or {}).get("id")
    if not run:
        sys.stderr.write(f"error: plan {name} has not run yet\n")
        return EXIT_INPUT
    shown = await run_report(kube, plan, run)
    if isinstance(shown, str):
        sys.stderr.write(f"error: {shown}\n")
        return EXIT_INPUT
    records = ((shown.get("status") or {}).get("report") or {}).get("steps") or []
    rows = stored.artifact_rows(records)
    if not _getting(words):
        return _list(rows, args.output or "table")
    return _get(plan, run, records, words[2], words[3], Path(args.output))


def _list(rows: list[dict[str, Any]], fmt: str) -> int:
    if fmt != "table":
        emit({"artifacts": rows}, fmt)
        return EXIT_OK
    table = [["STEP", "NAME", "SIZE", "SHA256", "DIRECTORY"]]
    table += [
        [
            str(r["step"]),
            r["name"],
            str(r["size"]),
            str(r["sha256"]),
            "yes" if r["directory"] else "no",
        ]
        for r in rows
    ]
    if len(table) == 1:
        sys.stderr.write("no artifacts in this run\n")
        return EXIT_OK
    render.table(table, sys.stdout)
    return EXIT_OK


def _get(
    plan: dict[str, Any], run: str, records: list[dict[str, Any]], step: str, name: str, to: Path
) -> int:
    plan_name = plan["metadata"]["name"]
    record = next((r for r in records if r.get("stepId") == step), None)
    if record is None:
        known = [str(r.get("stepId")) for r in records if r.get("artifacts")]
        sys.stderr.write(
            f"error: plan {plan_name} run {run} has no step {step!r} with artifacts"
            f"{stored.did_you_mean(step, known)}\n"
        )
        return EXIT_INPUT
    artifacts = {a["name"]: a for a in record.get("artifacts") or [] if isinstance(a, dict)}
    if name not in artifacts:
        sys.stderr.write(
            f"error: step {step} of plan {plan_name} has no artifact {name!r}"
            f"{stored.did_you_mean(name, sorted(artifacts))}\n"
        )
        return EXIT_INPUT
    entry = stored.entry_of(plan, run)
    if isinstance(entry, str):
        sys.stderr.write(f"error: {entry}\n")
        return EXIT_INPUT
    url = stored.artifact_url(entry, step, name)
    if url is None:
        why = stored.unsigned_note(entry) or "signed for fewer objects than the run holds"
        sys.stderr.write(
            f"error: plan {plan_name}: no reading URL for artifact {step}/{name} of run {run} "
            f"({why})\n"
        )
        return EXIT_INPUT
    if not to.parent.is_dir():
        sys.stderr.write(f"error: -o {to}: the directory {to.parent} does not exist\n")
        return EXIT_INPUT
    want = artifacts[name]
    try:
        size = _download(url, f"artifact {step}/{name}", to, want.get("sha256"), want.get("size"))
    except stored.ReadError as e:
        sys.stderr.write(f"error: {e}\n")
        return EXIT_CLUSTER
    what = "a directory's tar archive" if want.get("directory") else "a file"
    sys.stderr.write(f"{to}: {size} bytes, sha256 checked ({what})\n")
    return EXIT_OK


def _download(url: str, what: str, to: Path, sha256: Any, size: Any) -> int:
    """`url` into `to` through a temporary file beside it, renamed only when its sha256 and size
    are the record's; raises ReadError (the temporary file removed)."""
    digest = hashlib.sha256()
    fd, tmp = tempfile.mkstemp(prefix=f".{to.name}.", dir=to.parent)
    try:
        with os.fdopen(fd, "wb") as out:

            def sink(chunk: bytes) -> None:
                digest.update(chunk)
                out.write(chunk)

            limit = size + 1 if isinstance(size, int) else None
            got = stored.read(url, what, sink, limit)
        if isinstance(size, int) and got != size:
            raise stored.ReadError(f"{what}: {got} bytes read, the record says {size}")
        if digest.hexdigest() != sha256:
            raise stored.ReadError(
                f"{what}: sha256 {digest.hexdigest()} is not the record's {sha256}: the stored "
                "object is not the one the step wrote; nothing was written"
            )
        os.replace(tmp, to)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return got
