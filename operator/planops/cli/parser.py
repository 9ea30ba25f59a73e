"""`kubectl-plan`'s argument parser: every verb, its arguments and its help.

Apart from cli/main.py, which runs the verbs, because the parser is read on its own too: a
shell's TAB (cli/completion.py) and kubectl's plugin completion walk it without running
anything. The cluster verbs' arguments are cli/cluster_args.py's, `history`'s cli/history.py's;
here the verbs that read files (validate, run --local, graph FILE) and `ui`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from planops import __version__
from planops.cli import cluster_args, examples, history, terminal

#: --template's help
TEMPLATE = (
    "a PlanTemplate or ClusterPlanTemplate file (repeatable): what a plan's templateRef and "
    "template steps name"
)


def build() -> argparse.ArgumentParser:
    """Every verb of kubectl-plan with its arguments, help and examples."""
    p = argparse.ArgumentParser(prog="kubectl-plan", description="Validate and run planops Plans.")
    p.add_argument("--version", action="version", version=f"kubectl-plan {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    v = sub.add_parser("validate", help="validate plan files offline")
    v.add_argument("files", nargs="+", metavar="FILE")
    v.add_argument("--capsule", action="append", default=[], metavar="FILE")
    v.add_argument("--template", action="append", default=[], metavar="FILE", help=TEMPLATE)
    v.add_argument("-o", "--output", choices=["text", "json"], default="text")
    cluster_args.add_inputs(v)

    r = sub.add_parser("run", help="run a plan")
    r.add_argument("files", nargs="+", metavar="FILE")
    r.add_argument(
        "--local",
        action="store_true",
        help="run on this machine with the embedded runner (in a cluster: submit --wait)",
    )
    r.add_argument("--capsule", action="append", default=[], metavar="FILE")
    r.add_argument("--template", action="append", default=[], metavar="FILE", help=TEMPLATE)
    r.add_argument("--plan", metavar="NAME", help="the plan to run, of files holding several")
    r.add_argument(
        "--workdir",
        type=Path,
        help="the plan's workspace (spec.workspace): the directory its shell steps share "
        "(default: a fresh temporary directory)",
    )
    r.add_argument(
        "--artifacts",
        type=Path,
        metavar="DIR",
        help="keep the steps' results and artifacts in DIR (DIR/PLAN/STEP/ATTEMPT/...), where "
        "a --retry of this run finds them again (default: a temporary directory, removed after "
        "the run)",
    )
    r.add_argument("-o", "--output", choices=["text", "json"], default="text")
    r.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    cluster_args.add_inputs(r)
    r.add_argument(
        "--answer",
        action="append",
        default=[],
        metavar="STEP.KEY=VALUE",
        help="answer an ask step in advance (typed by its outputSchema); repeatable. Without "
        "one, a terminal gets a prompt; otherwise whenUnanswered applies",
    )
    r.add_argument(
        "--retry",
        type=Path,
        metavar="REPORT.json",
        help="retry that earlier run of this plan (what `run --local -o json` or `get -o json` "
        "printed): keep what succeeded, run again what failed, what it stopped and what never ran",
    )
    r.add_argument(
        "--from",
        dest="from_step",
        metavar="STEP",
        help="with --retry: also run again STEP (though it succeeded) and every step after it",
    )
    cluster_args.add_parsers(sub)
    history.add_parser(sub)
    g = sub.add_parser(
        "graph", help="a plan's DAG: a file as validated, or a Plan in the cluster with its status"
    )
    g.add_argument(
        "target",
        metavar="NAME|FILE",
        help="a file (it exists, is -, has a / or ends in .yaml/.yml/.json), else a Plan's name",
    )
    g.add_argument("--capsule", action="append", default=[], metavar="FILE")
    g.add_argument("--template", action="append", default=[], metavar="FILE", help=TEMPLATE)
    g.add_argument("--plan", metavar="NAME", help="the plan to draw, of a file holding several")
    cluster_args.add_inputs(g)
    g.add_argument("-o", "--output", choices=["text", "dot", "mermaid"], default="text")
    g.add_argument(
        "-w",
        "--watch",
        action="store_true",
        help="a Plan in the cluster: redraw as it changes, until it finishes",
    )
    cluster_args.add_common(g, output=False)
    u = sub.add_parser(
        "ui", help="a read-only web page of the namespace's Plans, live, on 127.0.0.1"
    )
    u.add_argument("name", nargs="?", metavar="NAME", help="open this Plan's page first")
    u.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    u.add_argument("--no-open", action="store_true", help="print the address, open no browser")
    cluster_args.add_common(u, output=False)
    for verb in sub.choices.values():  # every verb writes through cli/terminal.py
        terminal.add_raw(verb)
    examples.add(sub)  # kubectl's `Examples:` under each verb's --help
    return p
