"""`kubectl plan delete NAME... | -l SELECTOR | --all`: delete Plans as `kubectl delete plans`
does, and says so in its words (`plan.planops.dev "x" deleted`).

A Plan owns its Jobs, pods, PlanReports and child Plans, so the garbage collector removes them
after it (background propagation, as `kubectl delete` asks). `--wait` (the default, as kubectl's)
returns once each Plan is gone from the API, on a watch of it (no polling): at once, unless a
finalizer holds it (planops' own only on a Plan that stored objects in an artifact repository,
until they are deleted: reconciler.history.deletion). A name that does
not exist is an error (exit 2, the others are still deleted) unless `--ignore-not-found`; a
selector that matches nothing, or `--all` in an empty namespace, says `No resources found` and
is no error, as kubectl's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys

from planops.cli import get, history
from planops.cli.exit_codes import EXIT_FAILED, EXIT_INPUT, EXIT_OK
from planops.kube.api import CliApi
from planops.kube.client import ApiError

RESOURCE = "plan.planops.dev"


def refused(args: argparse.Namespace) -> str | None:
    """Why these arguments name no set of Plans to delete (and what to write), or None."""
    picks = bool(args.names) + bool(args.selector) + bool(args.all)
    if picks == 0:
        return (
            "delete needs the Plans to delete: NAME..., -l SELECTOR or --all "
            "(kubectl plan get lists them)"
        )
    if picks > 1:
        return "give NAME..., -l SELECTOR or --all, only one of them"
    if timeout(args.timeout) is None:
        return f"--timeout {args.timeout!r}: a duration (30s, 2m, 1h; 0s: no limit)"
    return None


def timeout(text: str) -> float | None:
    """Seconds of `--timeout` (0: no limit); None when it is no duration."""
    if text.strip() in ("0", ""):
        return 0.0
    return history.duration(text)


async def cmd_delete(kube: CliApi, args: argparse.Namespace, ns: str) -> int:
    if (problem := refused(args)) is not None:
        sys.stderr.write(f"error: {problem}\n")
        return EXIT_INPUT
    names = list(dict.fromkeys(args.names))
    if not names:
        try:
            plans, _ = await kube.list_plans_at(ns, args.selector or "")
        except ApiError as e:
            if e.status != 400 or not args.selector:
                raise
            sys.stderr.write(f"error: -l {args.selector!r}: {e.message}\n")
            return EXIT_INPUT
        names = [p["metadata"]["name"] for p in plans]
        if not names:
            sys.stderr.write(f"No resources found in {ns} namespace.\n")  # as kubectl: no error
            return EXIT_OK
    code, deleted = EXIT_OK, []
    for name in names:
        if await kube.delete_plan_found(ns, name):
            deleted.append(name)
            print(f'{RESOURCE} "{name}" deleted')
        elif not args.ignore_not_found:
            sys.stderr.write(
                f'error: {RESOURCE} "{name}" not found in namespace {ns} '
                f"(kubectl plan get -n {ns} lists its Plans)\n"
            )
            code = EXIT_INPUT
    sys.stdout.flush()
    if args.wait and deleted:
        limit = timeout(args.timeout) or None
        try:
            await asyncio.wait_for(_all_gone(kube, ns, deleted), limit)
        except TimeoutError:
            sys.stderr.write(
                f"error: timed out after {args.timeout} waiting for the Plans to be gone: a "
                "finalizer holds them (kubectl plan get NAME -o yaml shows "
                "metadata.finalizers); wait longer with --timeout, or --wait=false\n"
            )
            return EXIT_FAILED
    return code


async def _all_gone(kube: CliApi, ns: str, names: list[str]) -> None:
    await asyncio.gather(*(_gone(kube, ns, name) for name in names))


async def _gone(kube: CliApi, ns: str, name: str) -> None:
    """Return once the Plan `name` is gone (a Plan of that name created since is another:
    compared by uid)."""
    plan = await kube.get_plan(ns, name)
    if plan is None:
        return
    uid, version = plan["metadata"].get("uid"), plan["metadata"].get("resourceVersion")
    while True:
        seen = 0
        try:
            async with contextlib.aclosing(kube.watch_plan(ns, name, version)) as events:
                async for kind, obj in events:
                    seen += 1
                    if kind == "DELETED" and obj["metadata"].get("uid") == uid:
                        return
                    version = obj["metadata"].get("resourceVersion") or version
        except ApiError as e:
            if e.status != 410:  # too old to resume: read it again below
                raise
        if not seen:  # a watch that ended at once: not again at once
            await asyncio.sleep(get.REWATCH_SECONDS)
        plan = await kube.get_plan(ns, name)
        if plan is None or plan["metadata"].get("uid") != uid:
            return
        version = plan["metadata"].get("resourceVersion")
