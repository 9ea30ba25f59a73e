"""The `Examples:` section of each verb's `--help`, as kubectl prints its own: a comment saying
what a command does, then the command. A unit test parses every command here with the real
parser (so none names a flag that is gone) and checks that every verb has some."""

from __future__ import annotations

import argparse

EXAMPLES: dict[str, list[tuple[str, str]]] = {
    "validate": [
        (
            "Validate a plan against its Capsule, offline",
            "kubectl plan validate examples/fan-out-fan-in.yaml --capsule examples/capsule.yaml",
        ),
        (
            "The same, as JSON for a CI check (exit 1: invalid)",
            "kubectl plan validate examples/deploy.yaml --capsule examples/capsule.yaml "
            "--input env=prod -o json",
        ),
    ],
    "run": [
        (
            "Run a plan on this machine",
            "kubectl plan run --local examples/fan-out-fan-in.yaml --capsule examples/capsule.yaml",
        ),
        (
            "Run again what failed, keeping what succeeded",
            "kubectl plan run --local examples/retries.yaml --capsule examples/capsule.yaml "
            "--retry report.json",
        ),
    ],
    "submit": [
        (
            "Create a Capsule and a Plan, and wait for the Plan's result",
            "kubectl plan submit examples/capsule.yaml examples/fan-out-fan-in.yaml --wait",
        ),
        (
            "Create a Plan under a fresh name, with an input",
            "kubectl plan submit examples/deploy.yaml --generate-name --input env=prod",
        ),
        (
            "Run a ClusterPlanTemplate with an input, and wait for its result",
            "kubectl plan submit --from clustertemplate/build-and-test --input repo=acme/web "
            "--wait",
        ),
        ("Run a ScheduledPlan now, as a scheduled run", "kubectl plan submit --from spl/nightly"),
    ],
    "get": [
        ("List the Plans of the namespace", "kubectl plan get"),
        ("List every namespace's Plans, with more columns", "kubectl plan get -A -o wide"),
        ("List the Plans labelled team=web, as names", "kubectl plan get -l team=web -o name"),
        ("Print a Plan's phase", "kubectl plan get deploy -o jsonpath='{.status.phase}'"),
        (
            "Print each Plan's name and phase",
            'kubectl plan get -o jsonpath=\'{range .items[*]}{.metadata.name}{"\\t"}'
            '{.status.phase}{"\\n"}{end}\'',
        ),
        ("Print the Plans, then each one again as it changes", "kubectl plan get --watch"),
        ("Show an earlier run of a Plan", "kubectl plan get deploy --run 3f2a -o yaml"),
    ],
    "delete": [
        ("Delete a Plan (its Jobs, pods and reports go with it)", "kubectl plan delete deploy"),
        ("Delete the Plans labelled team=web", "kubectl plan delete -l team=web"),
        (
            "Delete every Plan of the namespace, without waiting",
            "kubectl plan delete --all --wait=false",
        ),
    ],
    "describe": [
        ("A Plan's phase, steps, errors and events", "kubectl plan describe deploy"),
        ("An earlier run of it", "kubectl plan describe deploy --run 3f2a"),
    ],
    "logs": [
        ("A step's log", "kubectl plan logs deploy build"),
        (
            "The last 20 lines of it, with their times",
            "kubectl plan logs deploy build --tail 20 --timestamps",
        ),
        ("What it wrote in the last hour", "kubectl plan logs deploy build --since 1h"),
        ("Every step's log, live, until the plan ends", "kubectl plan logs -f deploy"),
    ],
    "artifacts": [
        ("The artifacts of a Plan's run", "kubectl plan artifacts deploy"),
        ("Of an earlier run, as JSON", "kubectl plan artifacts deploy --run 3f2a -o json"),
        (
            "Download one (its sha256 checked)",
            "kubectl plan artifacts get deploy build bundle -o bundle.tgz",
        ),
    ],
    "trace": [("A Plan's events, in order", "kubectl plan trace deploy -o yaml")],
    "rerun": [("A fresh run of a Plan, same spec", "kubectl plan rerun deploy")],
    "retry": [
        ("Run again what failed, what it stopped and what never ran", "kubectl plan retry deploy"),
        (
            "Also run again the step test and what depends on it",
            "kubectl plan retry deploy --from test",
        ),
    ],
    "cancel": [
        ("Stop a running Plan", "kubectl plan cancel deploy"),
        ("Stop it, then run its finally steps", "kubectl plan cancel deploy --run-finally"),
    ],
    "answer": [
        ("Answer the ask step confirm", "kubectl plan answer deploy confirm --set ok=true"),
        ("Decline it (its whenUnanswered applies)", "kubectl plan answer deploy confirm --decline"),
    ],
    "history": [
        ("The finished runs of the last two days", "kubectl plan history --since 2d"),
        (
            "The failed runs of one Plan, as JSON",
            "kubectl plan history deploy --phase Failed -o json",
        ),
    ],
    "graph": [
        (
            "A plan file's DAG, as Graphviz",
            "kubectl plan graph examples/fan-out-fan-in.yaml --capsule examples/capsule.yaml "
            "-o dot",
        ),
        ("A running Plan's DAG, redrawn as it changes", "kubectl plan graph deploy --watch"),
    ],
    "ui": [
        ("A web page of the namespace's Plans, live", "kubectl plan ui -n team-a"),
        ("Open one Plan's page on a fixed port", "kubectl plan ui deploy --port 8080 --no-open"),
    ],
    "version": [
        ("The client's, the cluster's and the operator's versions", "kubectl plan version"),
        ("The client's only, as JSON", "kubectl plan version --client -o json"),
    ],
    "completion": [
        (
            "Complete kubectl-plan in bash (add it to ~/.bashrc)",
            "source <(kubectl-plan completion bash)",
        ),
        ("In zsh", 'kubectl-plan completion zsh > "${fpath[1]}/_kubectl-plan"'),
        ("In fish", "kubectl-plan completion fish > ~/.config/fish/completions/kubectl-plan.fish"),
    ],
}


def epilog(verb: str) -> str:
    lines = ["Examples:"]
    for i, (what, command) in enumerate(EXAMPLES.get(verb, [])):
        lines += ([""] if i else []) + [f"  # {what}", f"  {command}"]
    return "\n".join(lines)


def add(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Give each verb its examples (kept as written: RawDescriptionHelpFormatter)."""
    for verb, parser in sub.choices.items():
        parser.epilog = epilog(verb)
        parser.formatter_class = argparse.RawDescriptionHelpFormatter
