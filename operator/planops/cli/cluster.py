"""The cluster verbs of `kubectl-plan`: how each one is run (a connected client, the namespace,
the cluster's refusals said plainly) and which module holds it: submit (submit.py), get (get.py),
delete (delete.py), describe, logs, trace (show.py; logs -f: follow.py), rerun, retry, cancel,
answer (steer.py), graph NAME (live_graph.py), version (version.py), artifacts (artifacts.py).

kubectl habits: -n/--namespace (default: the kubeconfig context's namespace, else `default`),
--context, --kubeconfig, -o table|json|yaml. Everything goes through planops.kube (the only code
that talks to the API). Exit codes: 0 success, 1 the plan failed, 2 bad input or invalid plan,
3 the cluster could not be reached or refused the request.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path

from planops.cli import artifacts, delete, get, live_graph, show, steer, submit, version
from planops.cli.exit_codes import EXIT_CLUSTER, EXIT_INPUT, EXIT_INTERRUPTED
from planops.kube import kubeconfig
from planops.kube.api import CliApi
from planops.kube.cli_client import CliKube
from planops.kube.client import UNREACHABLE, ApiError, ConfigError

Verb = Callable[[CliApi, argparse.Namespace, str], Awaitable[int]]


def namespace_of(args: argparse.Namespace) -> str:
    if args.namespace:
        return str(args.namespace)
    return kubeconfig.namespace(args.kubeconfig, args.context)


def run(args: argparse.Namespace, verb: Verb | None = None) -> int:
    """Run `verb` (default: the one named on the command line) with a connected client; the
    cluster's refusals, an unreachable server and an unusable kubeconfig as errors (exit 3)."""
    verb = verb or VERBS[args.command]

    async def main() -> int:
        kube = await CliKube.connect(args.kubeconfig, args.context)
        try:
            return await verb(kube, args, namespace_of(args))
        finally:
            await kube.close()

    check = CHECKS.get(args.command) if verb is VERBS.get(args.command) else None
    if check is not None and (problem := check(args)) is not None:  # before any connection
        sys.stderr.write(f"error: {problem}\n")
        return EXIT_INPUT
    if problem := _kubeconfig_problem(args):
        sys.stderr.write(f"error: {problem}\n")
        return EXIT_CLUSTER
    try:
        return asyncio.run(main())
    except BrokenPipeError:
        raise  # stdout was closed (`| head`): kubectl-plan's main stops quietly
    except KeyboardInterrupt:  # Ctrl-C: how `get --watch` and `logs -f` are ended
        return EXIT_INTERRUPTED
    except ApiError as e:
        hint = " (is the planops CRD installed? kubectl apply -f crds/)" if e.not_found else ""
        sys.stderr.write(f"error: the cluster answered {e.status} {e.reason}: {e.message}{hint}\n")
        return EXIT_CLUSTER
    except ConfigError as e:
        where = f"--kubeconfig {args.kubeconfig}" if args.kubeconfig else "the kubeconfig"
        if args.kubeconfig and str(e).startswith(f"{args.kubeconfig}:"):  # it names the file
            where = "--kubeconfig"
        sys.stderr.write(f"error: {where}: {e}\n")
        return EXIT_CLUSTER
    except UNREACHABLE as e:  # anything else is a bug: its traceback says where
        sys.stderr.write(f"error: cannot reach the cluster: {type(e).__name__}: {e}\n")
        return EXIT_CLUSTER


def _kubeconfig_problem(args: argparse.Namespace) -> str | None:
    """A kubeconfig that is named but missing: said plainly (the client library's message is
    "Expected key current-context", after it found no file)."""
    if args.kubeconfig:
        if not Path(args.kubeconfig).is_file():
            what = "is not a file" if Path(args.kubeconfig).exists() else "does not exist"
            return f"--kubeconfig {args.kubeconfig}: the file {what}"
        return None
    listed = kubeconfig.listed()
    in_cluster = "KUBERNETES_SERVICE_HOST" in os.environ  # a pod's own credentials come first
    if listed and not in_cluster and not any(Path(p).is_file() for p in listed):
        return f"KUBECONFIG={os.environ['KUBECONFIG']}: no such file"
    return None


VERBS: dict[str, Verb] = {
    "submit": submit.cmd_submit,
    "get": get.cmd_get,
    "delete": delete.cmd_delete,
    "version": version.cmd_version,
    "describe": show.cmd_describe,
    "logs": show.cmd_logs,
    "artifacts": artifacts.cmd_artifacts,
    "trace": show.cmd_trace,
    "rerun": steer.cmd_rerun,
    "retry": steer.cmd_retry,
    "cancel": steer.cmd_cancel,
    "answer": steer.cmd_answer,
    "graph": live_graph.cmd_graph,
}

#: what is wrong with a verb's arguments, judged before the cluster is asked (kubectl too says
#: a bad flag before it connects): why, or None
CHECKS: dict[str, Callable[[argparse.Namespace], str | None]] = {
    "get": get.refused,
    "delete": delete.refused,
    "logs": show.refused_window,
    "artifacts": artifacts.refused,
}
