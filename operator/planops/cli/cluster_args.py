"""The command line of `kubectl-plan`'s cluster verbs, apart from the verbs themselves: parsing
them must not import the Kubernetes client (half a second), which the offline verbs (`validate`,
`run --local`) never need."""

from __future__ import annotations

import argparse
from typing import Any

#: what `get -o` takes besides jsonpath=TEMPLATE
GET_OUTPUTS = ("table", "wide", "name", "json", "yaml")


def add_common(p: argparse.ArgumentParser, output: bool = True) -> None:
    p.add_argument("-n", "--namespace", help="the namespace (default: the context's, else default)")
    p.add_argument("--context", help="the kubeconfig context to use")
    p.add_argument(
        "--kubeconfig", help="the kubeconfig file (default: $KUBECONFIG, ~/.kube/config)"
    )
    if output:
        p.add_argument("-o", "--output", choices=["table", "json", "yaml"], default="table")


#: kubectl's boolean flags that kubectl-plan takes: `--flag`, `--flag=true`, `--flag=false`
BOOL_FLAGS = ("--wait", "--timestamps")


def kube_bools(argv: list[str]) -> list[str]:
    """`--wait=false` as argparse reads it (`--no-wait`), `--wait=true` as `--wait`: kubectl
    writes a boolean flag's value after `=`, and `--wait NAME` must not take NAME as one."""
    out = []
    for word in argv:
        flag, eq, value = word.partition("=")
        if eq and flag in BOOL_FLAGS and value.lower() in ("true", "false"):
            word = flag if value.lower() == "true" else "--no-" + flag[2:]
        out.append(word)
    return out


def add_bool(p: argparse.ArgumentParser, flag: str, default: bool, help: str) -> None:
    """A boolean flag as kubectl spells it (`--flag`, `--flag=true|false`: kube_bools), and
    `--no-flag`."""
    p.add_argument(flag, action=argparse.BooleanOptionalAction, default=default, help=help)


def get_output(text: str) -> str:
    """`get -o`: table, wide, name, json, yaml or jsonpath=TEMPLATE (its template is read by
    cli/jsonpath.py, after the command line)."""
    if text in GET_OUTPUTS or (text.startswith("jsonpath=") and len(text) > len("jsonpath=")):
        return text
    if text.startswith("jsonpath"):
        raise argparse.ArgumentTypeError(
            f"{text!r}: jsonpath needs a template: -o jsonpath='{{.items[*].metadata.name}}'"
        )
    raise argparse.ArgumentTypeError(
        f"{text!r} is not an output format: {', '.join(GET_OUTPUTS)} or jsonpath=TEMPLATE"
    )


def tail_lines(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a number of lines (-1: all)") from None
    if value < -1:
        raise argparse.ArgumentTypeError(f"{text!r}: a number of lines, 0 or more (-1: all)")
    return value


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
    s.add_argument("files", nargs="*", metavar="FILE")
    s.add_argument(
        "--from",
        dest="from_template",
        metavar="KIND/NAME",
        help="create a Plan that runs a template: plantemplate/NAME (pt/NAME) or "
        "clustertemplate/NAME (clusterplantemplate/NAME, cpt/NAME), with --input; it runs under "
        "the Capsule --capsule-name names (default: default), named after the template plus a "
        "suffix. scheduledplan/NAME (spl/NAME): the schedule runs now, as a scheduled run",
    )
    s.add_argument(
        "--capsule-name", metavar="NAME", help="with --from: the Capsule the Plan runs under"
    )
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
    _add_get(sub)
    _add_delete(sub)
    d = sub.add_parser("describe", help="a Plan's report as a table, its errors and events")
    d.add_argument("name")
    add_run(d)
    add_common(d, output=False)
    _add_logs(sub)
    _add_artifacts(sub)
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
    _add_info(sub)


def _add_get(sub: Any) -> None:
    g = sub.add_parser("get", help="list Plans, or show one")
    g.add_argument("name", nargs="?", metavar="NAME")
    add_run(g)
    g.add_argument(
        "-A",
        "--all-namespaces",
        action="store_true",
        help="list the Plans of every namespace (a NAMESPACE column first)",
    )
    g.add_argument(
        "-l",
        "--selector",
        metavar="SELECTOR",
        help="only the Plans whose labels match (key=value, key!=value, key in (a,b), !key)",
    )
    g.add_argument(
        "-w",
        "--watch",
        action="store_true",
        help="after the list, print each Plan again when it changes, until Ctrl-C",
    )
    g.add_argument("--watch-only", action="store_true", help="as --watch, without the list first")
    add_common(g, output=False)
    g.add_argument(
        "-o",
        "--output",
        type=get_output,
        default="table",
        metavar="FORMAT",
        help="table (default), wide, name, json, yaml, or jsonpath=TEMPLATE (kubectl's: "
        "'{.items[*].metadata.name}', '{range .items[*]}{.metadata.name}{\"\\n\"}{end}')",
    )


def _add_delete(sub: Any) -> None:
    dl = sub.add_parser("delete", help="delete Plans (their Jobs, pods and reports go with them)")
    dl.add_argument("names", nargs="*", metavar="NAME")
    dl.add_argument(
        "-l", "--selector", metavar="SELECTOR", help="delete the Plans whose labels match"
    )
    dl.add_argument("--all", action="store_true", help="delete every Plan of the namespace")
    add_bool(
        dl,
        "--wait",
        default=True,
        help="wait until each Plan is gone (default true, as kubectl; --wait=false: return "
        "once the deletion is accepted)",
    )
    dl.add_argument(
        "--timeout",
        default="0s",
        metavar="DURATION",
        help="with --wait: give up after this long (30s, 2m; 0s: no limit), exit 1",
    )
    dl.add_argument(
        "--ignore-not-found",
        action="store_true",
        help="a Plan that does not exist is no error",
    )
    add_common(dl, output=False)


def _add_logs(sub: Any) -> None:
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
    lg.add_argument(
        "--tail",
        type=tail_lines,
        default=-1,
        metavar="N",
        help="the last N lines of the log (-1, the default: all)",
    )
    lg.add_argument(
        "--since",
        metavar="DURATION",
        help="only the lines written in the last DURATION (5s, 2m, 3h)",
    )
    lg.add_argument(
        "--since-time",
        metavar="TIME",
        help="only the lines written after TIME (RFC 3339: 2026-12-05T10:00:00Z)",
    )
    add_bool(lg, "--timestamps", default=False, help="open each line with the time it was written")
    add_common(lg, output=False)


def _add_artifacts(sub: Any) -> None:
    ar = sub.add_parser(
        "artifacts",
        help="a run's artifacts (artifacts NAME), or one downloaded (artifacts get NAME STEP "
        "ARTIFACT -o PATH), through the URLs the operator signs into the Plan's status",
    )
    ar.add_argument(
        "words",
        nargs="+",
        metavar="NAME | get NAME STEP ARTIFACT",
        help="a Plan's name: its run's artifacts; get NAME STEP ARTIFACT: download one",
    )
    add_run(ar)
    add_common(ar, output=False)
    ar.add_argument(
        "-o",
        "--output",
        metavar="FORMAT|PATH",
        help="the list: table (default), json or yaml; get: the file to write (its sha256 "
        "checked, then renamed into place)",
    )


def _add_info(sub: Any) -> None:
    """version and completion."""
    v = sub.add_parser(
        "version", help="the client's version, and the cluster's and the operator's when reachable"
    )
    v.add_argument("--client", action="store_true", help="the client's version only (no cluster)")
    add_common(v, output=False)
    v.add_argument("-o", "--output", choices=["text", "json", "yaml"], default="text")
    c = sub.add_parser("completion", help="a shell completion script: bash, zsh or fish")
    c.add_argument("shell", choices=["bash", "zsh", "fish"])
