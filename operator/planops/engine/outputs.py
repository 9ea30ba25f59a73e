"""A step's output value, made once where an executor reads the step's streams, and the one rule
that cuts a text too long to keep.

Both executors read a step's two streams apart (the local runner from two pipes, the operator
from the pod's log, one stream at a time where the cluster can select one: docs/operator.md) into
a Capture each: bounded, it holds a stream's first and last bytes and counts the rest, however
much the step writes. From them:

- the **output** (`output_value`) is stdout, decoded as UTF-8 (invalid bytes replaced), without
  one trailing line end ("\\n", or "\\r\\n" as one), within the output limit. This is the value
  every reader sees: the report, `{{id.output}}`, `$id.output`, `if`, a body step's result and
  the archive. (A program ends its last line; that end is not part of what it meant: `echo
  v1.2.3` gives `v1.2.3`. Only one is removed: blank lines a program printed on purpose stay.)
- **stderr** (`stderr_value`) is never part of the value: the record keeps its last
  STDERR_LIMIT bytes (where a failure is said), under the same rule, without one trailing line
  end.

A text over its limit is cut by `cut`, the only place planops shortens a text (the output limit
at capture, the run's budget as records settle, the report's share in the cluster): it keeps
the **head and the tail** (the failing line is usually the last) with a mark between them saying
how many bytes were left out, of how many, and why:

    first lines ...
    [planops: 9000 of 12000 bytes cut here (outputLimitBytes)]
    ... last lines

A text cut again keeps the first mark's total and its head and tail (never a mark inside a
mark), and `cut_size` reads the total back (engine.budget counts cut records from it, so a
count is the same live and restored). Marks of earlier planops versions (at the end of the
text) are still read.
"""

from __future__ import annotations

import re
from collections.abc import Callable

#: the most bytes of a step's stderr a record keeps (its tail)
STDERR_LIMIT = 4096

#: why a text was cut, as its mark says
OUTPUT_LIMIT = "outputLimitBytes"
STDERR_TAIL = "stderr keeps its tail"
RUN_BUDGET = "the run's result budget"
REPORT_SHARE = "the report's share"
STATUS_SUMMARY = "the status's summary"
REASONS = (OUTPUT_LIMIT, STDERR_TAIL, RUN_BUDGET, REPORT_SHARE, STATUS_SUMMARY)

_OPEN = "[planops: "
_MARK = "[planops: {omitted} of {total} bytes cut here ({why})]"
_MARK_BODY = re.compile(
    rb"\[planops: (\d{1,20}) of (\d{1,20}) bytes cut here \(([^()\n]{1,80})\)\]"
)
#: the marks of earlier versions: the head only, the mark at the end
_OLD_MARK = re.compile(
    r"\n\[planops: (?:cut at|output truncated at|output truncated:) (\d+) of (\d+) bytes"
    r"(?:: the run's result budget| kept)?\]\Z"
)

#: how a text's size is measured against a limit: UTF-8 bytes unless told (the status measures
#: what the API server stores)
Measure = Callable[[str], int]


def size(text: str | None) -> int:
    """UTF-8 bytes of `text`."""
    return len(text.encode()) if text else 0


def _mark(omitted: int, total: int, why: str, head: bool, tail: bool) -> str:
    body = _MARK.format(omitted=omitted, total=total, why=why)
    return ("\n" if head else "") + body + ("\n" if tail else "")


def mark_room(measure: Measure | None = None) -> int:
    """The most a mark takes (numbers of 20 digits, the longest reason), as `measure` counts."""
    longest = max(REASONS, key=len)
    mark = _mark(10**19, 10**19, longest, True, True)
    return (measure or size)(mark)


#: a mark's UTF-8 bytes at most
MARK_ROOM = mark_room()


def drop_line_end(text: str) -> str:
    """`text` without one trailing line end: "\\r\\n" or "\\n"."""
    if text.endswith("\r\n"):
        return text[:-2]
    return text[:-1] if text.endswith("\n") else text


# -- reading a stream, bounded ---------------------------------------------------------------------


class Capture:
    """A stream's bytes as they arrive, held bounded: its first `head` bytes, its last `tail`
    bytes, and how many it had. Feed it every chunk; nothing else is kept."""

    __slots__ = ("_head", "_tail", "_trimmed", "head_room", "tail_room", "total")

    def __init__(self, head: int, tail: int) -> None:
        self.head_room, self.tail_room = max(0, head), max(0, tail)
        self._head, self._tail = bytearray(), bytearray()
        self._trimmed = False
        self.total = 0

    @classmethod
    def for_limit(cls, limit: int, head: bool = True) -> Capture:
        """Room for a value of `limit` bytes (a few more: a line end, a character's bytes)."""
        return cls(limit + 8 if head else 0, limit + 8)

    @classmethod
    def of(cls, text: str | None, limit: int, head: bool = True) -> Capture:
        """A text read whole (a termination message), as if streamed."""
        capture = cls.for_limit(limit, head)
        capture.feed(text.encode() if text else b"")
        return capture

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_room - len(self._head)
        if room > 0:
            self._head += chunk[:room]
            chunk = chunk[room:]
        if not chunk:
            return
        self._tail += chunk
        if len(self._tail) > 2 * self.tail_room:  # trimmed now and then: amortized
            del self._tail[: len(self._tail) - self.tail_room]
            self._trimmed = True

    def last(self, n: int) -> bytes:
        """The last `n` bytes held (at most what the capture keeps)."""
        held = self._tail if self._trimmed else self._head + self._tail
        return bytes(held[-n:]) if n > 0 else b""

    def parts(self) -> tuple[str, str, int, bool]:
        """(head, tail, total bytes, whole): `whole` when nothing was left out (then head is
        the whole text and tail is empty)."""
        if not self._trimmed and len(self._tail) <= self.tail_room:
            return (self._head + self._tail).decode(errors="replace"), "", self.total, True
        tail = bytes(self._tail[-self.tail_room :]) if self.tail_room else b""
        return self._head.decode(errors="replace"), tail.decode(errors="replace"), self.total, False


def stderr_capture() -> Capture:
    """A Capture for a step's stderr: its tail only."""
    return Capture.for_limit(STDERR_LIMIT, head=False)


def value(capture: Capture, limit: int, why: str = OUTPUT_LIMIT) -> str | None:
    """The value of a captured stream: without one trailing line end, cut to `limit` bytes
    (head and tail; only the tail when the capture kept no head); None when empty."""
    head, tail, total, whole = capture.parts()
    share = 0.5 if capture.head_room else 0.0
    if whole:
        return cut(drop_line_end(head), limit, why, head_share=share) or None
    kept = drop_line_end(tail)
    return _shorten(head, kept, total - (size(tail) - size(kept)), limit, why, None, share)


def output_value(capture: Capture, limit: int, why: str = OUTPUT_LIMIT) -> str | None:
    """A step's output: its stdout's value (see the module's text)."""
    return value(capture, limit, why)


def stderr_value(capture: Capture) -> str | None:
    """What a record keeps of a step's stderr: its last STDERR_LIMIT bytes."""
    return value(capture, STDERR_LIMIT, STDERR_TAIL)


# -- cutting a text --------------------------------------------------------------------------------


def cut(
    text: str | None,
    limit: int,
    why: str,
    measure: Measure | None = None,
    head_share: float = 0.5,
) -> str | None:
    """`text` within `limit` (UTF-8 bytes, or as `measure` counts), the mark included, when it
    is longer: its head (`head_share` of the room) and its tail around a mark; unchanged when
    it fits. A text cut before keeps its first mark's total, and its own head and tail."""
    if not text or (measure or size)(text) <= limit:
        return text
    head, tail, total = parts(text)
    return _shorten(head, tail, total, limit, why, measure, head_share)


def _shorten(
    head: str,
    tail: str,
    total: int,
    limit: int,
    why: str,
    measure: Measure | None,
    head_share: float,
) -> str:
    """The prefix of `head` and the suffix of `tail` that fit `limit` with a mark between them
    (head and tail may be the same text: the text whole)."""
    room = max(0, limit - mark_room(measure))
    kept_head = _lines_of_head(_prefix(head, int(room * head_share), measure))
    kept_tail = _lines_of_tail(_suffix(tail, room - (measure or size)(kept_head), measure))
    omitted = max(0, total - size(kept_head) - size(kept_tail))
    return kept_head + _mark(omitted, total, why, bool(kept_head), bool(kept_tail)) + kept_tail


def _lines_of_head(kept: str) -> str:
    """A head ends with a whole line (the mark's own line end follows it) when that keeps at
    least half of it."""
    end = kept.rfind("\n")
    return kept[:end] if end >= len(kept) // 2 else kept


def _lines_of_tail(kept: str) -> str:
    """A tail starts with a whole line when that keeps at least half of it."""
    start = kept.find("\n")
    return kept[start + 1 :] if 0 <= start < len(kept) // 2 else kept


def _prefix(text: str, room: int, measure: Measure | None) -> str:
    if room <= 0:
        return ""
    if measure is None:
        data = text.encode()
        return text if len(data) <= room else data[:room].decode(errors="ignore")
    lo, hi = 0, min(len(text), room)  # every measure counts a character as 1 or more
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if measure(text[:mid]) <= room:
            lo = mid
        else:
            hi = mid - 1
    return text[:lo]


def _suffix(text: str, room: int, measure: Measure | None) -> str:
    if room <= 0:
        return ""
    if measure is None:
        data = text.encode()
        return text if len(data) <= room else data[len(data) - room :].decode(errors="ignore")
    lo, hi = 0, min(len(text), room)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if measure(text[len(text) - mid :]) <= room:
            lo = mid
        else:
            hi = mid - 1
    return text[len(text) - lo :] if lo else ""


# -- reading a mark back ---------------------------------------------------------------------------


def parts(text: str) -> tuple[str, str, int]:
    """(head, tail, total bytes) of a text cut before; of any other text (text, text, its
    size): what is kept of it, and how big it was."""
    found = _marked(text)
    return found if found is not None else (text, text, size(text))


def _marked(text: str) -> tuple[str, str, int] | None:
    """(head, tail, total) when `text` carries a mark (an earlier version's: no tail)."""
    if _OPEN not in text:
        return None
    found = _find_mark(text)
    if found is not None:
        return found
    old = _OLD_MARK.search(text[-160:]) if text.endswith("]") else None
    if old is not None:
        return text[: len(text) - len(old.group(0))], "", int(old.group(2))
    return None


def _find_mark(text: str) -> tuple[str, str, int] | None:
    """A mark of `cut` in `text`: its numbers agree with the text's size around it (so text
    that merely quotes a mark is not taken for one)."""
    data = text.encode()
    at = data.find(_OPEN.encode())
    while at >= 0:
        m = _MARK_BODY.match(data, at)
        if m is not None:
            start = at - 1 if at > 0 and data[at - 1 : at] == b"\n" else at
            end = m.end() + (1 if data[m.end() : m.end() + 1] == b"\n" else 0)
            omitted, total = int(m.group(1)), int(m.group(2))
            if len(data) - (end - start) == total - omitted:
                head = data[:start].decode(errors="replace")
                return head, data[end:].decode(errors="replace"), total
        at = data.find(_OPEN.encode(), at + 1)
    return None


def cut_size(text: str | None) -> int | None:
    """The size `text` had before it was cut (its mark's total), or None when it was not cut."""
    found = _marked(text) if text else None
    return found[2] if found is not None else None
