"""The cluster verbs that show a Plan: describe, trace, logs (reads only, never a write); get is
cli/get.py."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any, TextIO

from planops.api import PlanDocument, PlanSpec, parse_document
from planops.cli import follow, logwindow, render, steppods, stored, timeline
from planops.cli.exit_codes import EXIT_INPUT, EXIT_OK
from planops.cli.get import emit
from planops.cli.plan_report import full_report, run_report
from planops.kube.api import CliApi, LogWindow
from planops.kube.client import ApiError
from planops.kube.manifests import CONTAINER
from planops.reconciler import history_entries


async def _of_run(kube: CliApi, plan: dict[str, Any], run: str | None) -> dict[str, Any] | str:
    """The Plan with the whole report of its run `run` (None: its current run)."""
    return await (full_report(kube, plan) if run is None else run_report(kube, plan, run))


def _records_dropped(plan: dict[str, Any], out: TextIO) -> None:
    """An earlier run that keeps only its summary says so (run_history.within_budget)."""
    dropped = (plan.get("status") or {}).get("recordsDropped")
    if dropped:
        out.write(f"Records:    none shown: {dropped}\n")


def template_line(plan: dict[str, Any]) -> str | None:
    """What a Plan from a template ran (status.template: the run's snapshot), or the template it
    names before a run recorded one; None for a plan of its own steps."""
    found = (plan.get("status") or {}).get("template")
    if isinstance(found, dict):
        return _snapshot_line(found)
    ref = (plan.get("spec") or {}).get("templateRef")
    if isinstance(ref, dict):
        return f"{ref.get('kind', 'PlanTemplate')} {ref.get('name')} (no run recorded it yet)"
    return None


def _snapshot_line(found: dict[str, Any]) -> str:
    return (
        f"{found.get('kind')} {found.get('name')} (uid {found.get('uid')}, generation "
        f"{found.get('generation')}; snapshot of run {found.get('run')})"
    )


def step_template_lines(plan: dict[str, Any]) -> list[str]:
    """The templates the run's template steps run (status.templates: the run's snapshot)."""
    found = (plan.get("status") or {}).get("templates")
    return (
        [_snapshot_line(t) for t in found if isinstance(t, dict)] if isinstance(found, list) else []
    )


async def cmd_describe(kube: CliApi, args: argparse.Namespace, ns: str) -> int:
    plan = await kube.get_plan(ns, args.name)
    if plan is None:
        sys.stderr.write(f"error: plan {args.name!r} not found in namespace {ns}\n")
        return EXIT_INPUT
    found = await _of_run(kube, plan, getattr(args, "run", None))
    if isinstance(found, str):
        sys.stderr.write(f"error: {found}\n")
        return EXIT_INPUT
    plan = found
    st = plan.get("status") or {}
    cond = (st.get("conditions") or [{}])[0]
    print(
        f"Name:       {args.name}\nNamespace:  {ns}\n"
        f"Capsule:    {plan['spec'].get('capsule', 'default')}"
    )
    print(
        f"Phase:      {st.get('phase', '(not reconciled yet)')}  ({cond.get('reason', '')}: "
        f"{cond.get('message', '')})"
    )
    run = st.get("run") or {}
    print(
        f"Run:        {run.get('id', '-')} (generation {run.get('generation', '-')})  "
        f"started {st.get('startedAt', '-')}  duration {st.get('duration', '-')}"
    )
    if (ran := template_line(plan)) is not None:
        print(f"Template:   {ran}")
    for line in step_template_lines(plan):
        print(f"Step template: {line}")
    if st.get("errors"):
        print(f"\nValidation errors ({st.get('errorCount', len(st['errors']))}):")
        for e in st["errors"]:
            where = f"step {e['step']!r}, " if e.get("step") else ""
            print(f"  - [{e['code']}] {where}{e['path']}: {e['message']}")
    for ask in st.get("asks") or []:
        fields = ", ".join((ask.get("outputSchema") or {}).get("properties") or {})
        print(
            f"\nWaiting for an answer: step {ask['stepId']}: {ask.get('prompt')}\n"
            f"  kubectl plan answer {args.name} {ask['stepId']} --set KEY=VALUE  (fields: "
            f"{fields}) or --decline; until {ask.get('deadline')}, then whenUnanswered: "
            f"{ask.get('whenUnanswered', 'fail')}"
        )
    _records_dropped(plan, sys.stdout)
    report = st.get("report") or {}
    if report.get("steps"):
        print("\nSteps (in the order they settled):")
        rows = [["STEP", "STATUS", "ATTEMPTS", "STARTED", "FINISHED", "DETAIL"]]
        for s in report["steps"]:
            detail = render.detail(s.get("error"), s.get("output"), 80, s.get("stderr"))
            rows.append(
                [
                    s["stepId"],
                    s["status"],
                    str(s.get("attempts", "")),
                    s.get("startedAt") or "-",
                    s.get("finishedAt") or "-",
                    detail,
                ]
            )
        render.table(rows, sys.stdout)
        _stderr_tails(args.name, report["steps"])
    if report.get("stderrInOutput"):
        print(f"\nNote: {STDERR_IN_OUTPUT}")
    _earlier_runs(args.name, st)
    events = timeline.order(await kube.list_events(ns, args.name), _spec(plan))[-10:]
    if events:
        print("\nRecent events:")
        render.table(
            [
                ["TYPE", "REASON", "MESSAGE"],
                *[
                    [
                        e.get("type", ""),
                        e.get("reason", ""),
                        render.first_line(e.get("message"), 90),
                    ]
                    for e in events
                ],
            ],
            sys.stdout,
        )
    return EXIT_OK


#: what `describe` says of a run whose outputs were read with their stderr
#: (reconciler.run.step_logs)
STDERR_IN_OUTPUT = (
    "the steps' outputs hold what they wrote on stderr too: this cluster cannot read a pod "
    'log\'s stdout and stderr apart (docs/operator.md, "Step output")'
)
#: steps whose stderr `describe` shows, and the lines of each
STDERR_STEPS, STDERR_LINES = 10, 3


def _stderr_tails(name: str, steps: list[dict[str, Any]]) -> None:
    """The last lines each step wrote on stderr, as its record keeps them (failed steps first)."""
    said = [s for s in steps if s.get("stderr")]
    if not said:
        return
    said.sort(key=lambda s: s.get("status") != "failed")  # stable: in settle order otherwise
    print(f"\nStderr, last lines (kubectl plan logs {name} STEP for the whole log):")
    for s in said[:STDERR_STEPS]:
        lines = str(s["stderr"]).splitlines()[-STDERR_LINES:]
        print(f"  {s['stepId']} ({s.get('status')}):")
        for line in lines:
            print(f"    {render.first_line(line, 110) if line.strip() else ''}")
    if len(said) > STDERR_STEPS:
        print(f"  ... and {len(said) - STDERR_STEPS} more steps (kubectl plan get {name} -o json)")


def _earlier_runs(name: str, st: dict[str, Any]) -> None:
    """The runs before the current one (status.history; an earlier run's status has none)."""
    history = history_entries(st)
    if not history:
        return
    print(f"\nEarlier runs, newest first (kubectl plan describe {name} --run ID):")
    rows = [["RUN", "GENERATION", "PHASE", "REASON", "FINISHED", "FAILED"]]
    rows += [
        [
            e["id"],
            str(e.get("generation", "-")),
            str(e.get("phase", "")),
            str(e.get("reason", "")),
            str(e.get("finishedAt", "-")),
            str(e.get("failedStep", "")),
        ]
        for e in history
    ]
    render.table(rows, sys.stdout)


def _spec(plan: dict[str, Any] | None) -> PlanSpec | None:
    """The Plan's spec, when it can be read (it orders the Plan's events: cli/timeline.py)."""
    doc, _ = parse_document(plan) if plan is not None else (None, [])
    return doc.spec if isinstance(doc, PlanDocument) else None


async def cmd_trace(kube: CliApi, args: argparse.Namespace, ns: str) -> int:
    plan = await kube.get_plan(ns, args.name)  # None: the Plan is gone, its events remain
    events = timeline.order(await kube.list_events(ns, args.name), _spec(plan))
    if args.output != "table":
        emit(
            [{k: e.get(k) for k in ("eventTime", "type", "reason", "message")} for e in events],
            args.output,
        )
        return EXIT_OK
    rows = [["TIME", "TYPE", "REASON", "MESSAGE"]]
    rows += [
        [timeline.shown_time(e), e.get("type", ""), e.get("reason", ""), e.get("message", "")]
        for e in events
    ]
    render.table(rows, sys.stdout)
    return EXIT_OK


#: the most of a pod's log `logs` prints (a stream)
LOG_LIMIT = 64 << 20


async def _pod_log(kube: CliApi, ns: str, pod: str, window: LogWindow) -> None:
    """A step pod's log (the part `window` picks): its stdout on stdout and its stderr on stderr
    where the cluster can select a log's stream (`logs NAME STEP > out.json` is then the step's
    output), else both as one on stdout, as `kubectl logs` (docs/operator.md, "Step output")."""
    out: list[bytes] = []
    err: list[bytes] = []
    try:
        await asyncio.gather(
            kube.stream_log(ns, pod, CONTAINER, out.append, "Stdout", LOG_LIMIT, window),
            kube.stream_log(ns, pod, CONTAINER, err.append, "Stderr", LOG_LIMIT, window),
        )
    except ApiError as e:
        if e.status not in (400, 422):  # anything but a refused stream selection
            raise
        sys.stdout.write(await kube.read_log(ns, pod, CONTAINER, LOG_LIMIT, window))
        return
    stdout, stderr = b"".join(out), b"".join(err)
    sys.stdout.write(stdout.decode(errors="replace"))
    if stderr != stdout:  # the same text twice: a cluster that ignores the selection
        sys.stderr.write(stderr.decode(errors="replace"))


async def _stored_log(
    plan: dict[str, Any], step: str, attempt: int | None, window: LogWindow
) -> bool:
    """The step's full log from the artifact repository, through the reading URL the operator
    signed into the Plan's status (cli/stored.py); False when there is none, or it cannot be
    read (said on stderr: the recorded output follows)."""
    got = await stored.read_log(plan, step, attempt, LOG_LIMIT)
    if got is None:
        return False
    if isinstance(got, str):
        sys.stderr.write(f"warning: {got}\n")
        return False
    text, n, cut = got
    said = logwindow.note(window)
    sys.stderr.write(
        f"note: the step's pod is gone; showing attempt {n}'s log from the artifact repository "
        "(stdout and stderr as one)" + (f" ({said})" if said else "") + "\n"
    )
    steps: list[dict[str, Any]] = plan["status"]["report"].get("steps", [])
    record = next((r for r in steps if r.get("stepId") == step), {})
    shown = logwindow.recorded(
        text.removesuffix("\n"), window, record.get("finishedAt"), time.time()
    )
    _recorded(shown, sys.stdout)
    if cut:
        sys.stderr.write(f"note: the first {LOG_LIMIT >> 20} MiB of it\n")
    return True


def _recorded(text: str | None, out: TextIO) -> None:
    """A recorded text as its step printed it (its last line end was dropped from the value)."""
    if text:
        out.write(text + "\n")


def refused_window(args: argparse.Namespace) -> str | None:
    """Why --tail/--since/--since-time cannot be used as given, or None."""
    window = logwindow.of(args)
    return window if isinstance(window, str) else None


async def cmd_logs(kube: CliApi, args: argparse.Namespace, ns: str) -> int:
    window = logwindow.of(args)
    if isinstance(window, str):
        sys.stderr.write(f"error: {window}\n")
        return EXIT_INPUT
    if getattr(args, "follow", False):  # a Namespace made by hand has no -f
        return await follow.cmd_follow(kube, args, ns, window)
    if args.step is None:
        sys.stderr.write(
            "error: logs NAME STEP (or logs -f NAME [STEP]: every step, live); "
            f"kubectl plan describe {args.name} lists the steps\n"
        )
        return EXIT_INPUT
    pods = await steppods.step_pods(kube, ns, args.name, args.step, args.attempt or None)
    if pods:  # the step's own (by UID, never by labels alone), newest last
        await _pod_log(kube, ns, pods[-1]["metadata"]["name"], window)
        return EXIT_OK
    plan = await kube.get_plan(ns, args.name)  # the pod is gone: the stored log, if any
    plan = await full_report(kube, plan) if plan is not None else None
    if plan is not None and await _stored_log(plan, args.step, args.attempt or None, window):
        return EXIT_OK
    for s in ((plan or {}).get("status") or {}).get("report", {}).get("steps", []):
        if s["stepId"] == args.step:
            said = logwindow.note(window)
            sys.stderr.write(
                "note: the step's pod is gone; showing the output recorded in the report (on "
                "stdout) and the tail of its stderr (on stderr)"
                + (f" ({said})" if said else "")
                + "\n"
            )
            now = time.time()
            for text, out in ((s.get("output"), sys.stdout), (s.get("stderr"), sys.stderr)):
                _recorded(logwindow.recorded(text, window, s.get("finishedAt"), now), out)
            return EXIT_OK
    sys.stderr.write(
        f"error: no pod and no recorded output for step {args.step!r} of plan {args.name!r} "
        f"(kubectl plan describe {args.name} -n {ns} lists its steps)\n"
    )
    return EXIT_INPUT
