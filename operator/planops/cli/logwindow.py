"""`kubectl plan logs --tail N --since DURATION --since-time TIME --timestamps`: which part of a
step's log to show, as `kubectl logs` takes it.

While the step's pod exists they go to the pod log API as they are (tailLines, sinceSeconds,
sinceTime, timestamps): the kubelet cuts the log, each stream apart where the cluster reads
stdout and stderr apart (the last N lines of each). Once the pod is gone, what is left is the
step's record in the report: its output and the tail of its stderr, with no time per line. So
there `--tail N` is the record's last N lines (of each), `--since`/`--since-time` show the
record when the step's attempt finished inside the window (some of its lines may be older) and
nothing when it finished before (every line is older), and `--timestamps` cannot be honoured: a
note on stderr says so, and the lines are shown without times.
"""

from __future__ import annotations

import argparse
import math

from planops.cli import history
from planops.engine.report import parse_rfc3339
from planops.kube.api import LogWindow


def of(args: argparse.Namespace) -> LogWindow | str:
    """The window the flags ask for, or why they cannot be used (and what to write)."""
    tail = getattr(args, "tail", -1)
    since, since_time = getattr(args, "since", None), getattr(args, "since_time", None)
    if since and since_time:
        return "give --since DURATION or --since-time TIME, not both"
    seconds = None
    if since:
        value = history.duration(since)
        if value is None or value <= 0:
            return f"--since {since!r}: a duration such as 5s, 2m, 3h (for a time: --since-time)"
        seconds = max(1, math.ceil(value))
    if since_time and (parse_rfc3339(since_time) is None or "T" not in since_time):
        return f"--since-time {since_time!r}: an RFC 3339 time such as 2026-12-05T10:00:00Z"
    return LogWindow(
        tail_lines=None if tail is None or tail < 0 else tail,
        since_seconds=seconds,
        since_time=since_time or None,
        timestamps=bool(getattr(args, "timestamps", False)),
    )


def recorded(text: str | None, window: LogWindow, finished_at: str | None, now: float) -> str:
    """What of a recorded text (a step's output or stderr tail, as its record keeps it) the
    window shows: "" when the step finished before the window opened, else its last
    `tail_lines` lines."""
    if not text:
        return ""
    opened = _opened(window, now)
    finished = parse_rfc3339(finished_at)
    if opened is not None and finished is not None and finished < opened:
        return ""
    if window.tail_lines is None:
        return text
    lines = text.split("\n")
    return "\n".join(lines[len(lines) - window.tail_lines :]) if window.tail_lines else ""


def note(window: LogWindow) -> str | None:
    """What a reader of a record must know about the window (None: nothing)."""
    said = []
    if window.timestamps:
        said.append("--timestamps: a record keeps no time per line, so none is shown")
    if window.since_seconds is not None or window.since_time is not None:
        said.append("--since: the record is shown when the step finished inside the window, whole")
    return "; ".join(said) or None


def _opened(window: LogWindow, now: float) -> float | None:
    if window.since_seconds is not None:
        return now - window.since_seconds
    return parse_rfc3339(window.since_time)
