"""`kubectl plan completion bash|zsh|fish`: a shell's completion script for kubectl-plan.

Built on argcomplete (a maintained library for argparse programs; shtab was the other
candidate, but it writes no fish script and completes names from the cluster only through
shell functions written for each shell). The script argcomplete prints for each shell calls
kubectl-plan itself on TAB, with the words typed so far in its environment; kubectl-plan then
answers from its own parser (`_ARGCOMPLETE` set: main calls `complete` before parsing), so the
verbs, flags and choices completed are always the ones it takes, and a Plan's NAME is completed
from the cluster with the CLI's own client (what `kubectl plan get -o name` lists, in the
namespace, context and kubeconfig typed on the line so far), `-n` from the namespaces the user
may list. A cluster that cannot be reached in COMPLETE_SECONDS completes no name (and never
an error on the terminal).

    source <(kubectl-plan completion bash)      # in ~/.bashrc
    kubectl-plan completion zsh > "${fpath[1]}/_kubectl-plan"
    kubectl-plan completion fish > ~/.config/fish/completions/kubectl-plan.fish

`kubectl plan <TAB>` is kubectl's own completion (1.26 and later): it runs the executable
`kubectl_complete-plan` from PATH with the words after `plan` and reads cobra's answer (one
candidate a line, then `:DIRECTIVE`). That console script is `kubectl_complete` here: the same
answers, from the same parser.
"""

from __future__ import annotations

import argparse
import io
import os
import shlex
import sys
from typing import Any

#: the program the scripts complete
PROGRAM = "kubectl-plan"
#: seconds a completion waits for the cluster's answer
COMPLETE_SECONDS = 3.0
#: positional arguments that name a Plan in the cluster, by their dest
PLAN_ARGS = ("name", "names")


def script(shell: str) -> str:
    from argcomplete.shell_integration import shellcode  # noqa: PLC0415 - `completion` only

    return str(shellcode([PROGRAM], shell=shell))


def complete(parser: argparse.ArgumentParser, **how: Any) -> None:
    """Answer a shell's completion request and exit, when this is one (the scripts set
    `_ARGCOMPLETE`); otherwise return at once, importing nothing. `how`: argcomplete's
    options (a test's output_stream and exit_method)."""
    if "_ARGCOMPLETE" not in os.environ:
        return
    import argcomplete  # noqa: PLC0415 - completion requests only

    for verb in _verbs(parser):
        for action in verb._actions:
            if action.dest in PLAN_ARGS and not action.option_strings:
                action.completer = plan_names  # type: ignore[attr-defined]
            elif action.dest == "namespace":
                action.completer = namespaces  # type: ignore[attr-defined]
    argcomplete.autocomplete(parser, **how)


def _verbs(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return list(sub.choices.values())


def plan_names(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    """The Plans of the namespace the line names (else the context's), starting with `prefix`."""
    from planops.cli import cluster  # noqa: PLC0415 - the Kubernetes client

    async def listed(kube: Any, ns: str) -> list[str]:
        plans, _ = await kube.list_plans_at(ns, "")
        return [str(p["metadata"]["name"]) for p in plans]

    names = _ask(parsed_args, lambda kube: listed(kube, cluster.namespace_of(parsed_args)))
    return [n for n in names if n.startswith(prefix)]


def namespaces(prefix: str, parsed_args: argparse.Namespace, **_: Any) -> list[str]:
    async def listed(kube: Any) -> list[str]:
        return [str(n["metadata"]["name"]) for n in await kube.list_namespaces("")]

    return [n for n in _ask(parsed_args, listed) if n.startswith(prefix)]


def _ask(parsed_args: argparse.Namespace, question: Any) -> list[str]:
    """The cluster's answer to `question(kube)`, or none when it cannot be had in time."""
    import asyncio  # noqa: PLC0415 - completion requests only (validate starts without it)

    from planops.kube.cli_client import CliKube  # noqa: PLC0415

    async def main() -> list[str]:
        kube = await CliKube.connect(
            getattr(parsed_args, "kubeconfig", None), getattr(parsed_args, "context", None)
        )
        try:
            return list(await asyncio.wait_for(question(kube), COMPLETE_SECONDS))
        finally:
            await kube.close()

    try:
        return asyncio.run(main())
    except Exception:  # a completion shows nothing rather than an error
        return []


#: cobra's ShellCompDirectiveNoFileComp: complete no file names instead
NO_FILES = 4


def kubectl_complete(argv: list[str] | None = None) -> int:
    """`kubectl_complete-plan [__complete] WORD... PARTIAL`: what kubectl's completion asks a
    plugin (cobra's protocol): the candidates for PARTIAL, one a line, then `:4`."""
    from planops.cli import parser  # noqa: PLC0415 - every verb's module, for the parser only

    words = list(sys.argv[1:] if argv is None else argv)
    if words[:1] == ["__complete"]:
        words = words[1:]
    partial = words.pop() if words else ""
    line = " ".join([PROGRAM, *map(shlex.quote, words), partial])
    os.environ.update(
        _ARGCOMPLETE="1", _ARGCOMPLETE_IFS="\n", COMP_LINE=line, COMP_POINT=str(len(line))
    )
    out = io.StringIO()
    complete(parser.build(), output_stream=out, exit_method=lambda _code: None)
    for candidate in out.getvalue().split("\n"):
        if candidate.strip():
            print(candidate.strip())
    print(f":{NO_FILES}")
    return 0
