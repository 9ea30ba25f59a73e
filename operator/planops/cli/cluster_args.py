"""The command line of `kubectl-plan`'s cluster verbs, apart from the verbs themselves: parsing
them must not import the Kubernetes client (half a second), which the offline verbs (`validate`,
`run --local`) never need."""

from __future__ import annotations

import argparse
from typing import Any


def add_common(p: argparse.ArgumentParser, output: bool = True) -> None:
    p.add_argument("-n", "--namespace")
    p.add_argument("--context")
    p.add_argument("--kubeconfig")
    if output:
        p.add_argument("-o", "--output", choices=["table", "json", "yaml"], default="table")


def add_inputs(p: argparse.ArgumentParser) -> None:
    """`--input` and `--input-file`, the same on every verb that takes a plan file."""
    p.add_argument(
        "--input",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a value of {{input.KEY}} (JSON if it parses, else text); repeatable",
    )
    p.add_argument("--input-file", metavar="FILE", help="input values as a JSON/YAML object")


def add_run(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--run",
        metavar="ID",
        help="an earlier run the Plan keeps (status.history; kubectl plan history NAME lists "
        "them): its report instead of the current run's",
    )


def add_parsers(sub: Any) -> None:
    s = sub.add_parser("submit", help="create Plans in the cluster")
    s.add_argument("files", nargs="+", metavar="FILE")
    s.add_argument(
        "--wait", action="store_true", help="wait for the plan to finish, showing progress"
    )
    s.add_argument("--timeout", type=float, default=0, help="seconds to wait (0: no limit)")
    add_inputs(s)
    s.add_argument(
        "--generate-name",
        action="store_true",
        help="create each Plan under a fresh name: its name plus a suffix the cluster picks",
    )
    add_common(s)
    g = sub.add_parser("get", help="list Plans, or show one")
    g.add_argument("name", nargs="?")
    add_run(g)
    add_common(g)
    d = sub.add_parser("describe", help="a Plan's report as a table, its errors and events")
    d.add_argument("name")
    add_run(d)
    add_common(d, output=False)
    lg = sub.add_parser("logs", help="the log of a step's pod (its full output)")
    lg.add_argument("name")
    lg.add_argument("step", nargs="?", help="required without -f; with -f: only this step")
    lg.add_argument("--attempt", type=int, help="default: the latest")
    lg.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="every step's log as it is written, prefixed by the step; exit with the plan's result",
    )
    add_common(lg, output=False)
    t = sub.add_parser("trace", help="a Plan's events (its trace) as rows")
    t.add_argument("name")
    add_common(t)
    r = sub.add_parser("rerun", help="start a fresh run of a Plan (same spec)")
    r.add_argument("name")
    add_common(r, output=False)
    rt = sub.add_parser(
        "retry",
        help="a new run of a Plan that ended, keeping what succeeded: its failed steps, what "
        "they stopped and what never ran run again",
    )
    rt.add_argument("name")
    rt.add_argument(
        "--from",
        dest="from_step",
        metavar="STEP",
        help="also run again STEP (though it succeeded) and every step that depends on it",
    )
    add_common(rt, output=False)
    c = sub.add_parser("cancel", help="stop a running Plan")
    c.add_argument("name")
    c.add_argument(
        "--run-finally",
        action="store_true",
        help="run the Plan's finally steps after stopping its steps (within its "
        "finallyTimeoutSeconds); needs `use` on its Capsule. Without it, none runs",
    )
    add_common(c, output=False)
    a = sub.add_parser("answer", help="answer an ask step that is waiting")
    a.add_argument("name")
    a.add_argument("step", help="the ask step (a body step by its name: scan.0.confirm)")
    how = a.add_mutually_exclusive_group(required=True)
    how.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="an answer field, typed by the question's schema; repeatable",
    )
    how.add_argument("--decline", action="store_true", help="decline: whenUnanswered applies")
    add_common(a, output=False)
