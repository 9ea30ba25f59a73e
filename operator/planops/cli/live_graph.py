"""`kubectl plan graph NAME [--watch]`: a cluster Plan's DAG with its status, redrawn on each
change the API server's watch sends (the drawing itself is planops.cli.graph, pure)."""

from __future__ import annotations

import argparse
import os
import sys
from contextlib import aclosing
from typing import Any, TextIO

from planops.api import PlanDocument, parse_document
from planops.cli import graph, terminal
from planops.cli.exit_codes import EXIT_FAILED, EXIT_INPUT, EXIT_OK
from planops.cli.plan_report import full_report
from planops.kube.api import CliApi
from planops.kube.client import ApiError


def _plan_graph(plan: dict[str, Any], name: str) -> graph.PlanGraph | str:
    """A cluster Plan's graph with its status, or why its spec cannot be read."""
    doc, problems = parse_document(plan)
    if not isinstance(doc, PlanDocument):
        where = "; ".join(f"{p.path}: {p.message}" for p in problems[:3]) or "not a Plan"
        return f"plan {name!r}: its spec cannot be read: {where}"
    return graph.with_status(graph.from_spec(name, doc.spec), plan.get("status") or {})


class Screen:
    """Where frames go: on a terminal each one replaces the last; elsewhere (a pipe, a log)
    each changed frame follows the one before, after a blank line."""

    def __init__(self, out: TextIO, output: str) -> None:
        # its own redraw and colours reach the terminal; the text in them is cleaned
        self.out, self.output = terminal.trusted(out), output
        self.tty = out.isatty()
        self.colour = output == "text" and self.tty and not os.environ.get("NO_COLOR")
        self.last: str | None = None

    def show(self, drawn: graph.PlanGraph) -> None:
        frame = graph.render(drawn, self.output, self.colour)
        if frame == self.last:
            return
        if self.tty and self.last is not None:
            self.out.write("\x1b[H\x1b[2J")
        elif self.last is not None:
            self.out.write("\n")
        self.out.write(frame)
        self.out.flush()
        self.last = frame


def _phase_exit(plan: dict[str, Any]) -> int | None:
    """`graph --watch` ends as `submit --wait` does: 0 Succeeded, 1 Failed, 2 Invalid."""
    phase = (plan.get("status") or {}).get("phase")
    return {"Succeeded": EXIT_OK, "Failed": EXIT_FAILED, "Invalid": EXIT_INPUT}.get(phase or "")


async def cmd_graph(kube: CliApi, args: argparse.Namespace, ns: str) -> int:
    """The Plan's DAG with its status; --watch redraws on each change the API server sends
    (a watch on this one Plan, resumed from the last resourceVersion when the server ends it)."""
    name = args.target
    plan = await kube.get_plan(ns, name)
    if plan is None:
        sys.stderr.write(f"error: plan {name!r} not found in namespace {ns}\n")
        return EXIT_INPUT
    screen = Screen(sys.stdout, args.output)
    while True:
        omitted = ((plan.get("status") or {}).get("report") or {}).get("stepsOmitted")
        drawn = _plan_graph(await full_report(kube, plan) if omitted else plan, name)
        if isinstance(drawn, str):
            sys.stderr.write(f"error: {drawn}\n")
            return EXIT_INPUT
        screen.show(drawn)
        done = _phase_exit(plan)
        if not args.watch:
            return EXIT_OK
        if done is not None:
            return done
        changed = await next_version(kube, ns, name, plan)
        if changed is None:
            sys.stderr.write(f"plan {name}: deleted\n")
            return EXIT_FAILED
        plan = changed


async def next_version(
    kube: CliApi, ns: str, name: str, plan: dict[str, Any]
) -> dict[str, Any] | None:
    """The Plan's next version (None: it was deleted): the watch's next ADDED or MODIFIED
    event; a watch the server ended is started again from the last version seen, and one
    whose version is too old (410 Gone) from a fresh read."""
    version = (plan.get("metadata") or {}).get("resourceVersion")
    while True:
        try:
            async with aclosing(kube.watch_plan(ns, name, version)) as events:
                async for kind, obj in events:
                    meta = obj.get("metadata") or {}
                    if kind == "DELETED":
                        return None
                    if kind in ("ADDED", "MODIFIED") and meta.get("name") == name:
                        return obj
                    version = meta.get("resourceVersion") or version  # BOOKMARK
        except ApiError as e:
            if e.status != 410:
                raise
            fresh = await kube.get_plan(ns, name)
            if fresh is None or fresh != plan:
                return fresh
            version = (fresh.get("metadata") or {}).get("resourceVersion")
