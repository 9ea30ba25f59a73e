"""`kubectl plan get`: Plans as `kubectl get` shows resources, in its spelling.

One Plan (NAME) or a list: of the namespace, of every namespace (`-A/--all-namespaces`, with a
NAMESPACE column first), picked by labels (`-l/--selector`, the API server's label selector);
printed as a table (`-o wide`: with its Capsule, run and what it waits for), `-o name`
(`plan.planops.dev/NAME`, for scripts and completion), json, yaml or `-o jsonpath=TEMPLATE`
(kubectl's templates: cli/jsonpath.py). `--watch/-w` prints the list, then a row (or an object)
again each time a Plan changes, is added or is deleted, on one watch of the API (no polling),
until Ctrl-C; `--watch-only` skips the list. A watch the server ends is taken up again from the
last resourceVersion seen; one too old to resume (410 Gone) lists again and prints every Plan
once more, as a fresh `get -w` would.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import time
from collections.abc import AsyncGenerator
from dataclasses import dataclass, field
from typing import Any, TextIO

import yaml

from planops.cli import jsonpath, render
from planops.cli.exit_codes import EXIT_CLUSTER, EXIT_INPUT, EXIT_OK
from planops.cli.plan_report import full_report, run_report
from planops.engine.report import parse_rfc3339
from planops.kube.api import CliApi
from planops.kube.client import ApiError

Obj = dict[str, Any]
COLUMNS = ["NAME", "PHASE", "STEPS", "FAILED", "DURATION", "AGE"]
#: what -o wide adds: the Plan's Capsule, its current run, what it waits for (a Capsule's slot)
WIDE = ["CAPSULE", "RUN", "WAITING"]
#: what `-o name` prints before a Plan's name (kubectl's resource.group/name)
RESOURCE = "plan.planops.dev"
#: seconds before watching again after a watch that ended at once, without an event
REWATCH_SECONDS = 1.0


def age(ts: str | None, now: float | None = None) -> str:
    t = parse_rfc3339(ts)
    if t is None:
        return "-"
    s = int((time.time() if now is None else now) - t)
    return f"{s}s" if s < 120 else f"{s // 60}m" if s < 7200 else f"{s // 3600}h"


def row(p: Obj, wide: bool = False, all_namespaces: bool = False) -> list[str]:
    meta, st = p.get("metadata") or {}, p.get("status") or {}
    cells = [
        str(meta.get("name", "")),
        str(st.get("phase", "")),
        str(st.get("progress", "")),
        str(st.get("failedStep") or ""),
        str(st.get("duration", "")),
        age(meta.get("creationTimestamp")),
    ]
    if wide:
        cells += [
            str((p.get("spec") or {}).get("capsule") or "default"),
            str((st.get("run") or {}).get("id") or "-"),
            str((st.get("queue") or {}).get("message") or ""),
        ]
    return [str(meta.get("namespace", "")), *cells] if all_namespaces else cells


def header(wide: bool = False, all_namespaces: bool = False) -> list[str]:
    return (["NAMESPACE"] if all_namespaces else []) + COLUMNS + (WIDE if wide else [])


def emit(obj: Any, fmt: str, out: TextIO | None = None) -> None:
    """json or yaml, as `-o json|yaml` prints an object."""
    out = out or sys.stdout  # looked up now: the stdout of the moment (redirected, captured)
    if fmt == "json":
        out.write(json.dumps(obj, indent=2) + "\n")
    else:
        out.write(yaml.safe_dump(obj, sort_keys=False))


@dataclass
class Printer:
    """Prints Plans in one `-o` format: first the list (or the one Plan), then, watching, each
    Plan that changed (a table row lined up under the table's columns)."""

    output: str
    all_namespaces: bool = False
    template: tuple[jsonpath.Node, ...] = ()
    widths: list[int] = field(default_factory=list)

    @classmethod
    def of(cls, output: str, all_namespaces: bool) -> Printer:
        template: tuple[jsonpath.Node, ...] = ()
        if output.startswith("jsonpath="):
            template = jsonpath.compile_template(output[len("jsonpath=") :])
        return cls(output, all_namespaces, template)

    def first(self, plans: list[Obj], one: bool, each: bool, empty: str) -> None:
        """The Plans as `get` prints them: one object (`one`), a List, or (`each`, watching)
        one object after another."""
        out = sys.stdout
        if self.output in ("table", "wide"):
            if not plans:
                sys.stderr.write(f"{empty}\n")  # kubectl: "No resources found in ns namespace."
                self.widths = [len(h) for h in self.columns()]
                if each:
                    render.table([self.columns()], out)
                return
            rows = [self.columns(), *(self._row(p) for p in plans)]
            self.widths = render.table(rows, out)
        elif one or each or self.output == "name":
            for p in plans:
                self.one(p)
        else:
            self._object({"apiVersion": "v1", "kind": "List", "items": plans})

    def one(self, plan: Obj) -> None:
        if self.output in ("table", "wide"):
            self.widths = render.table([self._row(plan)], sys.stdout, self.widths)
        elif self.output == "name":
            sys.stdout.write(f"{RESOURCE}/{(plan.get('metadata') or {}).get('name', '')}\n")
        else:
            self._object(plan)
        sys.stdout.flush()

    def _object(self, obj: Obj) -> None:
        if self.template:
            sys.stdout.write(jsonpath.render(self.template, obj))
        else:
            emit(obj, self.output)

    def columns(self) -> list[str]:
        return header(self.output == "wide", self.all_namespaces)

    def _row(self, plan: Obj) -> list[str]:
        return row(plan, self.output == "wide", self.all_namespaces)


def refused(args: argparse.Namespace) -> str | None:
    """Why these flags cannot go together (and what to write instead), or None."""
    run = getattr(args, "run", None)
    if run is not None and not args.name:
        return "--run ID shows one Plan's run: get NAME --run ID"
    if args.name and args.all_namespaces:
        return (
            "a Plan cannot be read by name across all namespaces: give its namespace "
            f"(get {args.name} -n NAMESPACE), or list them all (get -A)"
        )
    if args.name and args.selector:
        return (
            f"-l picks Plans from a list: give NAME or -l SELECTOR, not both "
            f"(get -l {args.selector})"
        )
    if run is not None and (args.watch or args.watch_only):
        return "--run ID shows an earlier run, which no longer changes: drop --watch"
    if args.output.startswith("jsonpath="):
        try:
            jsonpath.compile_template(args.output[len("jsonpath=") :])
        except jsonpath.TemplateError as e:
            return f"-o {args.output}: {e}"
    return None


async def cmd_get(kube: CliApi, args: argparse.Namespace, ns: str) -> int:
    if (problem := refused(args)) is not None:
        sys.stderr.write(f"error: {problem}\n")
        return EXIT_INPUT
    try:
        printer = Printer.of(args.output, args.all_namespaces)
    except jsonpath.TemplateError as e:
        sys.stderr.write(f"error: -o {args.output}: {e}\n")
        return EXIT_INPUT
    namespace = None if args.all_namespaces else ns
    try:
        found = await _read(kube, args, ns, namespace)
    except ApiError as e:
        if e.status != 403 or namespace is not None:
            raise
        sys.stderr.write(
            f"error: -A: you may not list Plans in every namespace ({e.message}): list one "
            "namespace's with -n NAMESPACE, or ask for `list` on plans cluster-wide\n"
        )
        return EXIT_CLUSTER
    if isinstance(found, str):
        sys.stderr.write(f"error: {found}\n")
        return EXIT_INPUT
    plans, version = found
    watching = args.watch or args.watch_only
    where = "in any namespace" if namespace is None else f"in {ns} namespace"
    if not args.watch_only:
        printer.first(plans, bool(args.name), watching, f"No resources found {where}.")
        if args.name and args.output == "table" and not watching:
            dropped = (plans[0].get("status") or {}).get("recordsDropped")
            if dropped:
                sys.stderr.write(f"Records:    none shown: {dropped}\n")
    elif args.output in ("table", "wide"):
        printer.widths = render.table([printer.columns()], sys.stdout)
    if not watching:
        return EXIT_OK
    sys.stdout.flush()
    await watch(kube, namespace, args.selector or "", args.name, version, printer)
    return EXIT_OK  # not reached: a watch ends with Ctrl-C (cluster.run: exit 130)


async def _read(
    kube: CliApi, args: argparse.Namespace, ns: str, namespace: str | None
) -> tuple[list[Obj], str] | str:
    """The Plans to print (one: with its whole report when printed as an object) and the
    resourceVersion a watch goes on from; or why not."""
    if not args.name:
        try:
            return await kube.list_plans_at(namespace, args.selector or "")
        except ApiError as e:
            if e.status != 400 or not args.selector:
                raise
            return (
                f"-l {args.selector!r}: the API server refused the selector: {e.message} "
                "(write key=value, key!=value, key, !key, key in (a,b), joined by commas)"
            )
    plan = await kube.get_plan(ns, args.name)
    if plan is None:
        return (
            f"plan {args.name!r} not found in namespace {ns} (kubectl plan get -n {ns} lists "
            "its Plans; -A lists every namespace's)"
        )
    version = str(plan["metadata"].get("resourceVersion") or "")
    run = getattr(args, "run", None)
    if run:
        found = await run_report(kube, plan, run)
    elif args.output not in ("table", "wide", "name"):
        found = await full_report(kube, plan)
    else:
        found = plan
    return found if isinstance(found, str) else ([found], version)


async def watch(
    kube: CliApi,
    namespace: str | None,
    selector: str,
    name: str | None,
    version: str,
    printer: Printer,
) -> None:
    """Print each Plan that changes after `version`, until interrupted."""
    while True:
        events: AsyncGenerator[tuple[str, Obj], None] = (
            kube.watch_plan(str(namespace), name, version or None)
            if name
            else kube.watch_plans(namespace, selector, version or None)
        )
        seen = 0
        try:
            async with contextlib.aclosing(events) as stream:
                async for kind, obj in stream:
                    seen += 1
                    version = str((obj.get("metadata") or {}).get("resourceVersion") or version)
                    if kind != "BOOKMARK":
                        printer.one(obj)
        except ApiError as e:
            if e.status != 410:  # only "too old to resume" is taken up again, from a new list
                raise
            version = await _relist(kube, namespace, selector, name, printer)
            continue
        if not seen:
            await asyncio.sleep(REWATCH_SECONDS)


async def _relist(
    kube: CliApi, namespace: str | None, selector: str, name: str | None, printer: Printer
) -> str:
    plans, version = await kube.list_plans_at(namespace, selector)
    for p in plans:
        if name is None or (p.get("metadata") or {}).get("name") == name:
            printer.one(p)
    return version
