"""Every example the docs give runs in the suite, as a new user would run it: each
`kubectl-plan validate|run --local|graph` command written in README.md, docs/ and examples/ whose
files are in the repository exits 0 (or the code written right after it), a graph shown after
its command is its real output byte for byte, and every planops manifest in a docs code block
(a Plan, a Capsule, a ScheduledPlan; not the fragments that elide with `...`) is read without a
schema error."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from planops.api.documents import parse_leniently
from planops.cli.cluster_args import kube_bools
from planops.cli.parser import build as _parser

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
SOURCES = [*DOCS, *sorted((ROOT / "examples").glob("*.yaml"))]
COMMAND = re.compile(
    r"(?:\.venv/bin/)?kubectl-plan ((?:validate|run --local|graph) [^`\n#|;]*?\.ya?ml[^`\n#|;]*)"
)


#: options whose value is no file (`--plan NAME`, `--input K=V`, `--answer STEP.KEY=V`, `-o json`)
VALUE_OPTIONS = {"--plan", "--input", "--answer", "-o", "--output"}


def _operands(words: list[str]) -> list[str]:
    """The words of a command that name files: not options, nor the values of VALUE_OPTIONS."""
    found, skip = [], False
    for word in words:
        if skip:
            skip = False
        elif word in VALUE_OPTIONS:
            skip = True
        elif not word.startswith("-"):
            found.append(word)
    return found


def commands() -> list[tuple[str, str, int]]:
    """(where, the arguments, the exit code) of every offline command whose files exist here:
    0, unless the text right after it says otherwise (`(exit code 1: ...)`)."""
    found: dict[str, tuple[str, int]] = {}
    for source in SOURCES:
        for match in COMMAND.finditer(source.read_text()):
            args = match.group(1).strip()
            words = args.split()[2 if args.startswith("run ") else 1 :]
            operands = _operands(words)
            if operands and all((ROOT / w).is_file() for w in operands):
                said = re.match(r"\s*\n?[#\s]*\(exit code (\d+)", source.read_text()[match.end() :])
                found.setdefault(args, (source.name, int(said.group(1)) if said else 0))
    return [(where, args, code) for args, (where, code) in found.items()]


def cli(args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "planops.cli.main", *args.split()],
        capture_output=True,
        text=True,
        cwd=ROOT,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def test_the_readmes_two_commands_are_among_them():
    found = {args for _, args, _ in commands()}
    assert "run --local examples/fan-out-fan-in.yaml --capsule examples/capsule.yaml" in found
    assert "graph examples/fan-out-fan-in.yaml --capsule examples/capsule.yaml" in found


@pytest.mark.parametrize(("where", "args", "code"), commands(), ids=[a for _, a, _ in commands()])
def test_every_documented_command_runs_and_exits_as_documented(where, args, code):
    done = cli(args)
    assert done.returncode == code, (where, done.stdout, done.stderr)


def _shown_after(text: str, command: str) -> str | None:
    """The output block that follows the first mention of `command` (a ``` fence or lines
    indented by four spaces), as a terminal shows it."""
    at = text.find(command)
    if at < 0:
        return None
    rest = text[at:].split("\n\n", 1)[1]  # after the paragraph that gives the command
    fenced = re.match(r"```[a-z]*\n(.*?)\n```", rest, re.S)
    if fenced:
        return fenced.group(1) + "\n"
    indented = re.match(r"((?:    .*\n|\n)+)", rest)
    if indented:
        return "".join(line[4:] + "\n" for line in indented.group(1).rstrip("\n").split("\n"))
    return None


@pytest.mark.parametrize("doc", ["README.md", "docs/cli.md"])
def test_a_graph_shown_after_its_command_is_its_real_output(doc):
    args = "graph examples/fan-out-fan-in.yaml --capsule examples/capsule.yaml"
    shown = _shown_after((ROOT / doc).read_text(), f"kubectl-plan {args}`")
    assert shown is not None
    assert cli(args).stdout == shown


def manifests() -> list[tuple[str, dict]]:
    found = []
    for doc in DOCS:
        for block in re.findall(r"```yaml\n(.*?)```", doc.read_text(), re.S):
            if "..." in block or "…" in block:
                continue  # a fragment
            for n, item in enumerate(yaml.safe_load_all(block)):
                if not isinstance(item, dict):
                    continue
                if "kind" not in item and "spec" in item and "steps" in item["spec"]:
                    item = {"apiVersion": "planops.dev/v1alpha1", "kind": "Plan",
                            "metadata": {"name": "doc"}, **item}  # fmt: skip
                if item.get("apiVersion", "").startswith("planops.dev/"):
                    found.append((f"{doc.name} #{n}: {item.get('kind')}", item))
    return found


def test_the_docs_show_manifests_of_every_kind_a_user_writes():
    kinds = {item["kind"] for _, item in manifests()}
    assert {"Plan", "ScheduledPlan", "ClusterScheduledPlan"} <= kinds


@pytest.mark.parametrize(("where", "item"), manifests(), ids=[w for w, _ in manifests()])
def test_every_manifest_in_the_docs_reads_without_a_schema_error(where, item):
    _, problems = parse_leniently(item)
    assert problems == [], where


def test_the_ci_pipeline_runs_locally_as_far_as_its_header_says():
    """examples/ci-pipeline.yaml locally: checkout fails before it starts, naming the volume a
    laptop cannot mount; test (its service) and image never start; notify reports the failure."""
    done = cli("run --local examples/ci-pipeline.yaml --plan ci-pipeline -o json")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    rec = {s["stepId"]: s for s in report["steps"]}
    assert (report["failedStep"], list(rec)) == ("checkout", ["checkout", "notify"])
    assert rec["checkout"]["error"].startswith(
        "step 'checkout' mounts configMap volume 'source' at /source, which a local run cannot"
    )
    note = json.loads(rec["notify"]["output"].removeprefix("#ci: "))
    assert note == {"revision": "1.4.2", "status": "failed", "failedStep": "checkout"}


#: a command line of the docs (indented or in a shell session): `kubectl-plan ...`, `kubectl
#: plan ...`, `$ kubectl plan ...`, up to a comment
DOC_LINE = re.compile(r"^(?:    |\s*\$ )+(?:\.venv/bin/)?kubectl(?:-| )plan ([^#\n]+)", re.M)


def cluster_commands() -> list[tuple[str, str]]:
    """(where, the arguments) of every whole command line the docs give, for any verb (the
    cluster's too): not the synopses (`[...]`, `|`, `...`), not what a shell adds (`<(`, `>`)."""
    found: dict[str, str] = {}
    for source in DOCS:
        for match in DOC_LINE.finditer(source.read_text()):
            args = match.group(1).strip().rstrip(";")
            if not re.search(r"[\[\]|…<>]|\.\.\.|\bNAME\b|\bFILE\b|\bSTEP\b", args):
                for one in args.split("; "):  # `kubectl-plan get; kubectl-plan describe x`
                    one = re.sub(r"^kubectl(?:-| )plan ", "", one.strip())
                    found.setdefault(one.strip(), source.name)
    return [(where, args) for args, where in found.items()]


def test_the_cluster_verbs_documented_are_among_them():
    found = {args for _, args in cluster_commands()}
    assert {"get -A -l team=web -o wide", "delete fan-out-fan-in", "version"} <= found


@pytest.mark.parametrize(
    ("where", "args"), cluster_commands(), ids=[a for _, a in cluster_commands()]
)
def test_every_documented_command_line_is_one_kubectl_plan_takes(where, args):
    """Its verb and flags as the parser takes them (a cluster verb is not run here: its flags
    are checked; tests/e2e runs them)."""
    try:
        _parser().parse_args(kube_bools(shlex.split(args)))
    except SystemExit as e:
        pytest.fail(f"{where}: kubectl-plan {args}: refused by the parser (exit {e.code})")
