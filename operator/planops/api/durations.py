"""Durations as Kubernetes and Argo users write them: `10s`, `1m30s`, `500ms`, `2h`, or a plain
number of seconds. Hand-written because it is a dozen lines of Go's time.ParseDuration grammar
(restricted to h, m, s, ms) and the pure layers take no dependency for it."""

from __future__ import annotations

import re

_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")
_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
#: a wait longer than this is a typo (a day): refused rather than honoured
MAX_SECONDS = 86400.0


def parse(value: str | int | float) -> float:
    """Seconds; raises ValueError with the accepted forms when `value` is not a duration."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        text = value.strip()
        if len(text) > 64 or not text:
            raise ValueError(f"{value!r} is not a duration (e.g. 10s, 1m30s, 500ms)")
        pos, seconds = 0, 0.0
        for m in _PART.finditer(text):
            if m.start() != pos:
                break
            seconds += float(m.group(1)) * _UNITS[m.group(2)]
            pos = m.end()
        if pos != len(text):
            try:
                seconds, pos = float(text), len(text)
            except ValueError:
                raise ValueError(f"{value!r} is not a duration (e.g. 10s, 1m30s, 500ms)") from None
    if not 0 <= seconds <= MAX_SECONDS:
        raise ValueError(f"{value!r}: a duration from 0 to 24h")
    return seconds
