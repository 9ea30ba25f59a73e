"""`kubectl plan logs -f NAME [STEP]`: a run's logs as they are written, the way `argo logs -f`
and `tkn pr logs -f` show them, and the plan's result as the exit code (as `submit --wait`).

Every step's pod of the Plan's current run is followed from its start (the API's pod log with
`follow=true`), each line prefixed by the step's id (`[build] ...`, like `kubectl logs -f
--prefix`); a step that starts later is picked up by the next look (one list of the run's pods
a second). A step that settled with no pod left to read (deleted, never started) shows the
output recorded in the report instead (and its stderr's recorded tail, on stderr), so a run
followed late still shows every step once.

The decisions (which pods to follow, which records to print, the prefix, the exit code) are
pure functions here; the loop that applies them reads the cluster through planops.kube only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from planops.api.names import LABEL_ATTEMPT, LABEL_STEP
from planops.cli import logwindow, steppods
from planops.cli.exit_codes import EXIT_FAILED, EXIT_INPUT, EXIT_OK
from planops.cli.plan_report import full_report
from planops.kube.api import CliApi, LogWindow
from planops.kube.client import UNREACHABLE, ApiError
from planops.kube.manifests import CONTAINER, PlanRef, full_value

FINISHED = ("Succeeded", "Failed", "Invalid")
#: a pod whose container has started (or ended): its log can be read
STARTED = ("Running", "Succeeded", "Failed")
POLL_SECONDS = 1.0

Obj = dict[str, Any]


def prefix(step: str, attempt: int) -> str:
    """What opens each line of a step's log: its id, and the attempt after the first."""
    return f"[{step}] " if attempt <= 1 else f"[{step} #{attempt}] "


def prefixed(head: str, text: str) -> str:
    """`text` with `head` before every line, each ending in a newline (a last line the
    container did not end is ended here, so the next step's line starts on its own line).
    Lines end at newlines only: a CR or another separator inside one stays in it (shown
    escaped on a terminal: cli/terminal.py), never a line of its own without the prefix."""
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return "".join(f"{head}{line}\n" for line in lines)


def pod_step(pod: Obj) -> tuple[str, int] | None:
    """The step id (its full value, not the possibly shortened label) and attempt of a pod."""
    meta = pod.get("metadata") or {}
    step = full_value(meta, LABEL_STEP)
    if step is None:
        return None
    attempt = str((meta.get("labels") or {}).get(LABEL_ATTEMPT, ""))
    return step, int(attempt) if attempt.isascii() and attempt.isdigit() else 1


@dataclass
class Followed:
    """What has been shown so far: pods followed (by name), steps shown (by either way)."""

    pods: set[str] = field(default_factory=set)
    steps: set[str] = field(default_factory=set)


def to_follow(pods: Iterable[Obj], seen: Followed, only: str | None) -> list[tuple[Obj, str, int]]:
    """The pods to start following now: started, of a step (the one asked for, if any), and not
    followed yet; oldest attempt first, so a step's attempts show in order."""
    found = []
    for pod in pods:
        which = pod_step(pod)
        name = str((pod.get("metadata") or {}).get("name", ""))
        if which is None or name in seen.pods or (only is not None and which[0] != only):
            continue
        if (pod.get("status") or {}).get("phase") in STARTED:
            found.append((pod, *which))
    return sorted(found, key=lambda f: (f[2], str(f[0]["metadata"].get("creationTimestamp"))))


def to_print(
    records: Iterable[Obj], pods: Iterable[Obj], seen: Followed, only: str | None
) -> list[Obj]:
    """The settled steps whose recorded output stands in for their log: not shown yet, and with
    no started pod to follow (the pod is gone or never ran)."""
    readable = {
        which[0]
        for pod in pods
        if (which := pod_step(pod)) and (pod.get("status") or {}).get("phase") in STARTED
    }
    return [
        r
        for r in records
        if r.get("stepId") not in seen.steps
        and r.get("stepId") not in readable
        and (only is None or r.get("stepId") == only)
    ]


def exit_code(phase: str | None) -> int:
    """The plan's result as `submit --wait` says it: 0 Succeeded, 1 Failed, 2 Invalid."""
    return {"Succeeded": EXIT_OK, "Invalid": EXIT_INPUT}.get(phase or "", EXIT_FAILED)


async def step_pods(kube: CliApi, ns: str, plan: Obj) -> list[Obj]:
    """The pods of the Plan's current run, as `logs` finds a step's (cli/steppods.py): labels
    find candidates, only a pod whose controller is a Job whose controller is the Plan (by UID)
    is shown, so a pod that copies a step's labels never speaks under the step's name."""
    meta, run = plan["metadata"], ((plan.get("status") or {}).get("run") or {}).get("id")
    if not run:
        return []
    selector = PlanRef(ns, meta["name"], meta["uid"], str(run)).selector()
    jobs = await kube.list_jobs(ns, selector)
    return steppods.owned_pods(plan, jobs, await kube.list_pods(ns, selector))


async def _stream(
    kube: CliApi, ns: str, pod: str, head: str, window: LogWindow | None = None
) -> None:
    try:
        async with contextlib.aclosing(kube.follow_log(ns, pod, CONTAINER, window)) as lines:
            async for line in lines:
                sys.stdout.write(prefixed(head, line))
                sys.stdout.flush()
    except ApiError as e:  # the pod went, or its container never ran: say so, go on
        sys.stderr.write(f"note: {head.strip()} pod {pod}: {e.status} {e.message}\n")
    except UNREACHABLE as e:  # the stream broke (connection reset, cut short): say so, go on
        sys.stderr.write(f"note: {head.strip()} pod {pod}: the log stream broke: {e!r}\n")


def _print_record(r: Obj, window: LogWindow) -> None:
    """A settled step's recorded output (and its stderr's recorded tail, on stderr as it was),
    the part the window shows of it (cli/logwindow.py)."""
    now, head = time.time(), prefix(r["stepId"], 1)
    sys.stdout.write(
        prefixed(head, logwindow.recorded(r.get("output"), window, r.get("finishedAt"), now))
    )
    sys.stdout.flush()
    stderr = logwindow.recorded(r.get("stderr"), window, r.get("finishedAt"), now)
    if stderr:
        sys.stderr.write(prefixed(head, stderr))


async def cmd_follow(
    kube: CliApi, args: argparse.Namespace, ns: str, window: LogWindow | None = None
) -> int:
    """Follow the run (the part of each log `window` picks: --tail, --since, --timestamps)."""
    seen, tasks = Followed(), set[asyncio.Task[None]]()
    window = window or LogWindow()
    try:
        while True:
            plan = await kube.get_plan(ns, args.name)
            if plan is None:
                sys.stderr.write(f"error: plan {args.name!r} not found in namespace {ns}\n")
                return EXIT_INPUT
            st = plan.get("status") or {}
            phase = st.get("phase")
            pods = await step_pods(kube, ns, plan)
            for pod, step, attempt in to_follow(pods, seen, args.step):
                seen.pods.add(pod["metadata"]["name"])
                seen.steps.add(step)
                tasks.add(
                    asyncio.create_task(
                        _stream(kube, ns, pod["metadata"]["name"], prefix(step, attempt), window)
                    )
                )
            summary = (st.get("report") or {}).get("steps") or []
            if to_print(summary, pods, seen, args.step) or (
                phase in FINISHED and (st.get("report") or {}).get("stepsOmitted")
            ):
                records = (await full_report(kube, plan))["status"]["report"]["steps"]
                for r in to_print(records, pods, seen, args.step):
                    seen.steps.add(r["stepId"])
                    _print_record(r, window)
            if phase in FINISHED:
                await asyncio.gather(*tasks)
                for e in st.get("errors") or []:
                    sys.stderr.write(f"  - [{e['code']}] {e['path']}: {e['message']}\n")
                sys.stderr.write(
                    f"plan {args.name}: {phase} ({st.get('progress')} steps, "
                    f"{st.get('duration')})\n"
                )
                return exit_code(phase)
            await asyncio.sleep(POLL_SECONDS)
    finally:
        for t in tasks:
            t.cancel()
