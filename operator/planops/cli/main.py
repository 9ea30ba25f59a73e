"""`kubectl-plan`: validate plans offline and run them with the local runner.

Installed as a console script, so `kubectl plan ...` works when it is on PATH. The exit codes
(cli/exit_codes.py) and `-o json` shapes are a contract (docs/cli.md).

Like any Unix tool, it stops quietly when its reader goes away (`kubectl plan validate ... | head
-1`): exit 141, as if killed by SIGPIPE, and no traceback. Restoring SIGPIPE's default action
would do the same, but `run --local` writes step inputs to pipes of its own and must not die
when a step exits without reading its stdin; so the BrokenPipeError is caught instead.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from planops.api import PlanSpec
from planops.cli import cluster_args, completion, history, parser, render, terminal
from planops.cli.exit_codes import (
    EXIT_BROKEN_PIPE,
    EXIT_ERROR_EXIT,
    EXIT_FAILED,
    EXIT_INPUT,
    EXIT_INTERRUPTED,
    EXIT_NO_CAPSULE,
    EXIT_OK,
)
from planops.cli.inputs import (
    InputError,
    Loaded,
    given_inputs,
    load,
    position,
    unknown_inputs,
    with_default_capsule,
    with_inputs,
)
from planops.engine import (
    CapsuleResolver,
    Facts,
    PlanError,
    Policy,
    capsules,
    plan_templates,
    validate,
)

# Imported where a verb needs them, so `validate` starts fast (docs/performance.md): the local
# runner and asyncio (run), croniter (a ScheduledPlan's schedule), the graph drawing (graph),
# the Kubernetes client (the cluster verbs).

#: Refusals that mean "the input needed to judge the plan is missing", not "the plan is wrong".
INPUT_CODES = {"no-capsule"}


def _load(args: argparse.Namespace, lenient: bool = False) -> Loaded | None:
    try:
        loaded = load(args.files, args.capsule, lenient, getattr(args, "template", []))
    except InputError as e:
        for line in e.lines:
            sys.stderr.write(f"error: {line}\n")
        return None
    loaded.plans = [(f, with_default_capsule(p, loaded.capsules)) for f, p in loaded.plans]
    try:
        given = given_inputs(getattr(args, "input_file", None), getattr(args, "input", None) or [])
    except InputError as e:
        for line in e.lines:
            sys.stderr.write(f"error: {line}\n")
        return None
    unknown = [line for _, p in loaded.plans for line in unknown_inputs(p, given)]
    for line in unknown:
        sys.stderr.write(f"error: {line}\n")
    if unknown:
        return None
    loaded.plans = [(f, with_inputs(p, given)) for f, p in loaded.plans]
    return loaded


def _answers(given: list[str]) -> dict[str, dict[str, str]] | None:
    """--answer STEP.KEY=VALUE (a body step's STEP is its qualified name, e.g. scan.0.ok)."""
    out: dict[str, dict[str, str]] = {}
    for item in given:
        target, sep, value = item.partition("=")
        step, dot, key = target.rpartition(".")
        if not sep or not dot or not step or not key:
            sys.stderr.write(f"error: --answer {item!r}: expected STEP.KEY=VALUE\n")
            return None
        out.setdefault(step, {})[key] = value
    return out


def _errors(loaded: Loaded, local: bool = False) -> list[tuple[str, int, str, PlanError]]:
    """Every plan's refusals (file, the plan's index, its name, the error); a ScheduledPlan's
    schedule is judged too (code `schedule`). `local`: for run --local, whose artifacts
    directory is a repository every Capsule has (`validate` knows of no operator's default
    repository: a Capsule must declare its own)."""
    resolver, known = capsules(loaded.capsules), plan_templates.templates(loaded.templates)
    policy = Policy(artifact_repository=local)
    found = []
    for index, (f, p) in enumerate(loaded.plans):
        if p.schedule is not None:
            from planops.engine import schedule  # noqa: PLC0415 - croniter, for schedules only

            s = p.schedule
            spec = schedule.ScheduleSpec(
                s.schedule,
                s.time_zone,
                s.starting_deadline_seconds,
                s.concurrency_policy,
                s.suspend,
            )
            found += [
                (f, index, p.plan_id, PlanError("schedule", None, f"spec.{field}", m))
                for field, m in schedule.check(spec)
            ]
        found += [
            (f, index, p.plan_id, e) for e in validate(p.spec, resolver, policy, templates=known)
        ]
    return found


def cmd_validate(args: argparse.Namespace) -> int:
    """Every error at once: the files' and the schema's (exit 2), and the validator's of every
    plan that can still be read (its refused fields dropped), each with its line and column."""
    loaded = _load(args, lenient=True)
    if loaded is None:  # --input values: no file to point at
        if args.output == "json":
            print(json.dumps({"valid": False, "errors": []}))
        return EXIT_INPUT
    found = _errors(loaded)
    warned = _warnings(loaded)
    if args.output == "json":
        errors = [p.to_json() for p in loaded.problems]
        for f, index, plan, e in found:
            line, column = position(loaded, index, e.path) or (None, None)
            errors.append({**e.to_json(), "plan": plan, "file": f, "line": line, "column": column})
        valid = not found and not loaded.problems
        warnings = [{**w.to_json(), "plan": plan, "file": f} for f, plan, w in warned]
        print(json.dumps({"valid": valid, "errors": errors, "warnings": warnings}, indent=2))
    else:
        for p in loaded.problems:
            sys.stderr.write(f"error: {p.text()}\n")
        _warn(warned)
        schema_refused = {(p.file, p.plan) for p in loaded.problems}
        for f, plan in dict.fromkeys((f, p.plan_id) for f, p in loaded.plans):  # as given
            errs = [e for ff, _, pp, e in found if (ff, pp) == (f, plan)]
            if errs:
                render.errors(errs, sys.stdout, f"{f}: plan {plan}")
            elif (f, plan) not in schema_refused:
                print(f"{f}: plan {plan} is valid")
    if loaded.problems:
        return EXIT_INPUT
    return _verdict(found)


def _warnings(loaded: Loaded) -> list[tuple[str, str, PlanError]]:
    """What runs otherwise than it reads (engine.shell_hints): said, never refused."""
    from planops.engine.shell_hints import shell_warnings  # noqa: PLC0415 - shlex: validate, run

    return [(f, p.plan_id, w) for f, p in loaded.plans for w in shell_warnings(p.spec)]


def _warn(warned: list[tuple[str, str, PlanError]]) -> None:
    for f, plan, w in warned:
        sys.stderr.write(f"warning: {f}: plan {plan}: step {w.step!r}, {w.path}: {w.message}\n")


def _verdict(found: list[tuple[str, int, str, PlanError]]) -> int:
    """1 for refusals; 5 when a plan's Capsule was not given (nothing else could be judged)."""
    if any(e.code in INPUT_CODES for *_, e in found):
        return EXIT_NO_CAPSULE
    return EXIT_FAILED if found else EXIT_OK


def cmd_run(args: argparse.Namespace) -> int:
    if not args.local:
        files = " ".join(args.files)
        sys.stderr.write(
            "error: run executes a plan on this machine and needs --local "
            f"(kubectl plan run --local {files}); to run it in the cluster: "
            f"kubectl plan submit {files} --wait\n"
        )
        return EXIT_INPUT
    loaded = _load(args)
    if loaded is None:
        return EXIT_INPUT
    if (problem := _one_plan(loaded, args.plan, " ".join(args.files))) is not None:
        sys.stderr.write(f"error: {problem}\n")
        return EXIT_INPUT
    found = _errors(loaded, local=True)
    if found:
        if args.output == "json":
            errs = [e.to_json() for *_, e in found]
            print(json.dumps({"valid": False, "errors": errs}, indent=2))
        else:
            render.errors([e for *_, e in found], sys.stderr, found[0][0])
        return EXIT_NO_CAPSULE if _verdict(found) == EXIT_NO_CAPSULE else EXIT_INPUT
    _warn(_warnings(loaded))
    ((_, plan),) = loaded.plans
    ok, seed = _retry_seed(args, plan.plan_id, plan.spec, capsules(loaded.capsules))
    if not ok:
        return EXIT_INPUT
    answers = _answers(args.answer)
    if answers is None:
        return EXIT_INPUT
    if args.workdir is not None and plan.spec.workspace is None:
        sys.stderr.write(
            f"error: --workdir {args.workdir}: plan {plan.plan_id} declares no workspace "
            "(spec.workspace), so its steps share no directory (each starts in one of its own, "
            "as in a pod); declare one for steps to share files\n"
        )
        return EXIT_INPUT
    if args.workdir is not None and (problem := _workdir(args.workdir)) is not None:
        sys.stderr.write(f"error: --workdir {args.workdir}: {problem}\n")
        return EXIT_INPUT
    if args.artifacts is not None and (problem := _workdir(args.artifacts)) is not None:
        sys.stderr.write(f"error: --artifacts {args.artifacts}: {problem}\n")
        return EXIT_INPUT
    quiet = args.quiet or args.output == "json"
    import asyncio  # noqa: PLC0415 - the local runner: `run` only

    from planops.runners.local import LocalRunner  # noqa: PLC0415

    runner = LocalRunner(
        loaded.capsules,
        templates=loaded.templates,
        workdir=args.workdir,
        artifacts=args.artifacts,
        observer=(lambda _r: None) if quiet else render.Progress(sys.stderr),
        answers=answers,
        asker=render.ask if sys.stdin.isatty() else None,
    )
    try:
        report = asyncio.run(runner.run(plan.plan_id, plan.spec, seed=seed))
    except KeyboardInterrupt:
        sys.stderr.write("interrupted: every step process was stopped\n")
        return EXIT_INTERRUPTED
    if args.output == "json":
        print(json.dumps(report.to_json(), indent=2))
    else:
        render.summary(report, sys.stdout)
    if report.exit is not None and report.exit.status == "error":
        return EXIT_ERROR_EXIT  # seed 2: an exit step with status error
    return EXIT_OK if report.completed else EXIT_FAILED


def _one_plan(loaded: Loaded, name: str | None, source: str) -> str | None:
    """Keep only the plan `run` runs: the one the files hold, or the one `--plan NAME` picks
    (the others are neither judged nor run). Why there is no such one plan, or None."""
    names = ", ".join(p.plan_id for _, p in loaded.plans)
    picked = [i for i, (_, p) in enumerate(loaded.plans) if name in (None, p.plan_id)]
    if not picked:
        return f"{source} holds no plan {name!r} (it holds {names})"
    if len(picked) > 1 and name is None:
        return f"{source} holds {len(picked)} plans ({names}): pick one with --plan NAME"
    if len(picked) > 1:
        files = ", ".join(dict.fromkeys(loaded.plans[i][0] for i in picked))
        return f"{source} holds {len(picked)} plans named {name!r} (in {files}): give one file"
    (i,) = picked
    loaded.plans, loaded.origins = [loaded.plans[i]], [loaded.origins[i]]
    return None


def _retry_seed(
    args: argparse.Namespace, plan_id: str, spec: PlanSpec, resolve: CapsuleResolver
) -> tuple[bool, Facts | None]:
    """--retry REPORT [--from STEP]: (usable, the records the retried run keeps: None, no
    retry). Not usable: refused, the reason written."""
    if args.retry is None:
        if args.from_step is not None:
            sys.stderr.write("error: --from STEP goes with --retry REPORT.json\n")
            return False, None
        return True, None
    from planops.cli import retry_report  # noqa: PLC0415 - run --retry only
    from planops.engine.retry import RetryRefused  # noqa: PLC0415

    try:
        retry = retry_report.read(args.retry, plan_id, spec, args.from_step, resolve)
    except RetryRefused as e:
        sys.stderr.write(f"error: --retry {args.retry}: {e}\n")
        return False, None
    if args.output != "json" and not args.quiet:
        again = ", ".join(retry.rerun) or "none of the main steps"
        sys.stderr.write(f"retry: {len(retry.kept)} steps kept; running again: {again}\n")
    return True, retry.facts


def is_file(target: str) -> bool:
    """`graph NAME|FILE`: a file when it exists, is `-`, or looks like a path (a Plan's name
    has no `/`, and no Plan is called plan.yaml by accident)."""
    return (
        target == "-"
        or "/" in target
        or target.endswith((".yaml", ".yml", ".json"))
        or Path(target).exists()
    )


def colour_wanted() -> bool:
    """Colour only on a terminal, and never when NO_COLOR is set (no-color.org)."""
    return sys.stdout.isatty() and not os.environ.get("NO_COLOR")


def cmd_graph(args: argparse.Namespace) -> int:
    """`graph FILE`: validated first by the one validator, with validate's errors and exit code
    (on stderr: stdout may be piped to `dot`)."""
    if args.watch:
        sys.stderr.write("error: --watch follows a Plan in the cluster; a file does not run\n")
        return EXIT_INPUT
    args.files = [args.target]
    loaded = _load(args)
    if loaded is None:
        return EXIT_INPUT
    found = _errors(loaded)
    if found:
        for f, plan in dict.fromkeys((f, plan) for f, _, plan, _ in found):
            errs = [e for ff, _, pp, e in found if (ff, pp) == (f, plan)]
            render.errors(errs, sys.stderr, f"{f}: plan {plan}")
        return _verdict(found)
    plans = [p for _, p in loaded.plans if args.plan in (None, p.plan_id)]
    names = ", ".join(p.plan_id for _, p in loaded.plans)
    if not plans:
        sys.stderr.write(f"error: {args.target} holds no plan {args.plan!r} (it holds {names})\n")
        return EXIT_INPUT
    if len(plans) > 1 and args.output != "text":
        sys.stderr.write(
            f"error: {args.target} holds {len(plans)} plans ({names}): pick one with --plan NAME\n"
        )
        return EXIT_INPUT
    colour = args.output == "text" and colour_wanted()
    from planops.cli import graph  # noqa: PLC0415 - `graph` only

    drawn = [
        graph.render(graph.from_spec(p.plan_id, _ran(p.spec, loaded)), args.output, colour)
        for p in plans
    ]
    terminal.trusted(sys.stdout).write("\n".join(drawn))  # its colours; its text is cleaned
    return EXIT_OK


def _ran(spec: PlanSpec, loaded: Loaded) -> PlanSpec:
    """What a validated plan runs: a plan from a template, the template's plan."""
    ref = spec.template_ref
    if ref is None:
        return spec
    return plan_templates.expand(spec, loaded.templates[(ref.kind, ref.name)])


def _workdir(path: Path) -> str | None:
    """Make `--workdir DIR` if it is missing (not its parents: a mistyped path should not grow a
    tree of directories); why it cannot be used, or None."""
    if path.is_dir():
        return None
    if not path.parent.exists():
        return f"its parent directory {path.parent} does not exist"
    if not path.parent.is_dir():
        return f"{path.parent} is not a directory"
    try:
        path.mkdir()
    except FileExistsError:
        return "exists and is not a directory"
    except OSError as e:
        return f"cannot create it: {e.strerror or e}"
    return None


def main(argv: list[str] | None = None) -> int:
    try:
        code = _main(argv)
        sys.stdout.flush()  # here, not at exit, so a closed pipe is caught below
        return code
    except BrokenPipeError:
        # the reader is gone: nothing more can be said to it, nor should the interpreter try
        # again when it flushes at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.dup2(devnull, sys.stderr.fileno())
        return EXIT_BROKEN_PIPE


def _main(argv: list[str] | None) -> int:
    verbs = parser.build()  # cli/parser.py
    completion.complete(verbs)  # a shell's TAB (cli/completion.py): answers and exits
    args = verbs.parse_args(cluster_args.kube_bools(sys.argv[1:] if argv is None else argv))
    with terminal.guarded(args.raw):  # a terminal gets text, never escape sequences
        return _verb(args)


def _verb(args: argparse.Namespace) -> int:
    if args.command == "validate":
        return cmd_validate(args)
    if args.command == "run":
        return cmd_run(args)
    if args.command == "graph" and args.watch and args.output != "text":
        sys.stderr.write("error: --watch redraws the terminal graph; -o dot|mermaid print once\n")
        return EXIT_INPUT
    if args.command == "graph" and is_file(args.target):
        return cmd_graph(args)
    if args.command == "ui":
        from planops.cli.ui import server  # noqa: PLC0415 - aiohttp's server: this verb only

        return server.run(args)
    if args.command == "history":
        return history.run(args, time.time())
    if args.command == "completion":
        sys.stdout.write(completion.script(args.shell))
        return EXIT_OK
    if args.command == "version":
        from planops.cli import version  # noqa: PLC0415 - yaml and the client: this verb only

        if args.client:
            return version.client(args)
        version.client_line(args)  # before the cluster is asked, as kubectl's
    from planops.cli import cluster  # noqa: PLC0415 - the Kubernetes client: cluster verbs only

    return cluster.run(args)


if __name__ == "__main__":
    sys.exit(main())
