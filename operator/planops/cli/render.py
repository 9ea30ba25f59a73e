"""Human output of the CLI: progress lines while a plan runs, tables, error lists."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from planops.engine import PlanError, Report, control
from planops.engine.report import NO_OUTPUT, OutputError

_MARK = {"success": "✔", "failed": "✘", "skipped": "↷"}


def table(rows: Sequence[Sequence[str]], out: TextIO, at_least: Sequence[int] = ()) -> list[int]:
    """The rows in columns two spaces apart, each column as wide as its widest cell (and at
    least `at_least`: a row printed later lines up with the table); the widths used."""
    widths = [
        max([len(r[i]) for r in rows] + list(at_least[i : i + 1])) for i in range(len(rows[0]))
    ]
    for row in rows:
        out.write("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() + "\n")
    return widths


def first_line(text: str | None, width: int = 60) -> str:
    if not text:
        return ""
    line = text.strip().splitlines()[0] if text.strip() else ""
    return line if len(line) <= width else line[: width - 1] + "…"


def last_line(text: str | None) -> str:
    """The last line with something on it: where a failing program says why."""
    lines = [line for line in (text or "").splitlines() if line.strip()]
    return lines[-1].strip() if lines else ""


def detail(
    error: str | None, output: str | None, width: int = 60, stderr: str | None = None
) -> str:
    """A step's DETAIL: its output's first line; for a failed one, the error and the last line
    of its stderr, else of its output (`exit code 2: ls: /nope: No such file or directory`),
    not just the code."""
    if not error:
        return first_line(output, width)
    why = first_line(error, 10**6)
    said = last_line(stderr) or last_line(output)
    text = f"{why}: {said}" if said and said not in why else why
    return text if len(text) <= width else text[: width - 1] + "…"


def errors(errs: Sequence[PlanError], out: TextIO | None = None, source: str = "") -> None:
    out = out or sys.stderr  # looked up now: the stream of the moment (cli/terminal.py)
    head = f"{source}: " if source else ""
    out.write(
        f"{head}plan refused, {len(errs)} error{'s' if len(errs) != 1 else ''} (nothing ran):\n"
    )
    for e in errs:
        where = f"step {e.step!r}, " if e.step else ""
        out.write(f"  - [{e.code}] {where}{e.path}: {e.message}\n")


class Progress:
    """Prints one line per trace record that matters to a person watching a run."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stderr
        self.started: dict[tuple[str, str], float] = {}

    def __call__(self, rec: dict[str, Any]) -> None:
        event = rec.get("event")
        indent = "  " * (int(rec.get("depth", 0)) + 1)
        key = (str(rec.get("planId")), str(rec.get("stepId")))
        if event == "plan_start":
            kept = f" ({rec['kept']} records kept from the earlier run)" if "kept" in rec else ""
            self.out.write(f"{indent[2:]}plan {rec['planId']}: {rec['steps']} steps{kept}\n")
        elif event == "plan_step_start":
            self.started.setdefault(key, rec["time"])
            attempt = f" (attempt {rec['attempt']})" if rec["attempt"] > 1 else ""
            self.out.write(f"{indent}▸ {rec['stepId']} started{attempt}\n")
        elif event == "plan_step_retry":
            self.out.write(
                f"{indent}↻ {rec['stepId']} attempt {rec['attempt']} failed: "
                f"{first_line(rec.get('error'))}; retrying\n"
            )
        elif event == "plan_step":
            start = self.started.pop(key, None)
            took = f" {rec['time'] - start:.2f}s" if start is not None else ""
            why = f": {first_line(rec.get('error'))}" if rec.get("error") else ""
            self.out.write(
                f"{indent}{_MARK.get(rec['status'], '?')} {rec['stepId']} "
                f"{rec['status']}{took}{why}\n"
            )
        elif event == "call_denied":
            self.out.write(f"{indent}⛔ {rec['stepId']} call denied: {rec['reason']}\n")
        elif event == "delegation_start":
            to = f"template {rec['template']}" if "template" in rec else f"capsule {rec['capsule']}"
            self.out.write(f"{indent}⇢ {rec['stepId']} delegates to {to}\n")
        elif event == "notice":
            self.out.write(f"note: {rec['message']}\n")
        self.out.flush()


def summary(report: Report, out: TextIO | None = None) -> None:
    out = out or sys.stdout
    rows = [["STEP", "STATUS", "ATTEMPTS", "DURATION", "DETAIL"]]
    for s in report.steps:
        took = f"{s.duration:.2f}s" if s.duration is not None else "-"
        said = detail(s.error, s.output, 80, s.stderr)
        rows.append([s.step_id, s.status, str(s.attempts), took, said])
    if len(rows) > 1:
        table(rows, out)
    if report.completed:
        verdict = "completed"
    elif report.failed_step:
        verdict = f"stopped: step {report.failed_step!r} failed"
    elif report.stopped:  # a deadline, the finally steps' budget (a cancel, in a cluster)
        verdict = "; ".join(f"{h.label}: {h.why}" for h in report.stopped)
    else:
        verdict = "did not complete"
    if report.exit is not None:
        message = f": {report.exit.message}" if report.exit.message else ""
        verdict = f"ended by exit step {report.exit.step_id!r} ({report.exit.status}){message}"
    settled = len(report.steps)
    out.write(
        f"plan {report.plan_id}: {verdict} ({settled} step{'s' if settled != 1 else ''} settled)\n"
    )
    if isinstance(report.output, OutputError):
        out.write(f"output: cannot be rendered: {report.output.message}\n")
    elif report.output is not NO_OUTPUT:
        out.write(f"output: {json.dumps(report.output)}\n")


async def ask(step_id: str, spec: dict[str, Any]) -> dict[str, Any] | None:
    """The interactive prompt of an ask step (a terminal is attached): one line per answer field,
    typed and checked against the outputSchema, asked again until it conforms; Ctrl-D declines."""
    import asyncio  # noqa: PLC0415

    return await asyncio.to_thread(_ask_blocking, step_id, spec)


def _ask_blocking(step_id: str, spec: dict[str, Any]) -> dict[str, Any] | None:
    schema = spec["outputSchema"]
    props: dict[str, Any] = schema.get("properties") or {}
    sys.stderr.write(f"\n? {step_id}: {spec.get('prompt', '')}  (Ctrl-D declines)\n")
    while True:
        answer: dict[str, Any] = {}
        for key, prop in props.items():
            hint = "|".join(map(str, prop["enum"])) if "enum" in prop else prop.get("type", "")
            while True:
                sys.stderr.write(f"  {key} ({hint}): ")
                sys.stderr.flush()
                try:
                    line = input()
                except EOFError:
                    sys.stderr.write("\n  declined\n")
                    return None
                if not line and key not in (schema.get("required") or []):
                    break
                try:
                    answer[key] = control.coerce_answer(schema, key, line)
                    break
                except ValueError as e:
                    sys.stderr.write(f"  {e}\n")
        problem = control.answer_problem(schema, answer)
        if problem is None:
            return answer
        sys.stderr.write(f"  not a valid answer: {problem}; again\n")
