"""What one run may hold of its steps' results, and how much deciding one `decide()` may do.

A step's record keeps its output (a Job's log, or a result the decider made itself: a filter's
items, a map's results). Without a bound, one small plan can make the operator hold gigabytes: a
`map` over 2,000 items whose body is a `filter` over a 1,500-row input settles 2,000 records each
holding the whole input again, and the map's own result holds them all once more. So every run has
a **budget of record text** (output + error + stderr, body steps included), spent as records
settle:

- a record keeps at most RECORD_TEXT_LIMIT bytes (its error first, at most ERROR_TEXT_LIMIT;
  then its stderr, at most a quarter of what is left; its output in the rest);
- the run keeps at most RUN_TEXT_BUDGET bytes in all; once it is spent, a record keeps only a
  short mark saying what it had (an error its first ERROR_FLOOR bytes too: why a step failed);
- a record cut keeps its head and its tail around a mark saying how many bytes it had (the one
  rule of engine.outputs.cut): what later steps see of it (`{{x.output}}`, a map's `results`) is
  that cut text, exactly as a restored run sees it;
- the run counts what it cut (`cut`, `cut_bytes`); the report says so (Report.cut). A record
  counts as cut when one of its texts carries a planops mark (this budget's, the executors'
  outputLimitBytes mark, the operator's report share: `marked`), and its bytes
  are the size its text had in full, which every mark carries (a text cut twice keeps the first
  mark's total). So a count is the same whoever cut, live or restored: the operator counts the
  records as its PlanReports hold them (`tally`), exactly what a restarted operator restores.

Bytes of the report: text is not all a record writes. Each record also carries its step id, status,
attempts and two timestamps (about 200 bytes as JSON), and once the text budget is spent each
record still keeps a short mark. A `map` over 200,000 items whose body runs no Job (a filter, a
transform) would so write about 45 MiB of PlanReports per run, within every text budget. So a run
also counts its records' *frames* (`frame_bytes`: the record as JSON with its texts emptied, plus
MARK_ROOM for each text it has) against RUN_FRAME_BUDGET; with the text budget, what one run writes
to its report is at most RUN_REPORT_BYTES (16 MiB; JSON escaping of unusual text aside). A frame is
the same live and restored (cutting a text again never empties it, and ids, status, attempts and
times are written as they are), so a restored run counts exactly what the live one counted. Once
the frames are over their budget, a `map` or `reduce` starts no further item and fails with
FRAMES_SPENT (engine.bodyrun): what settled is kept, nothing more is written, and a restore, which
counts the same frames first, refuses the same item.

The cut happens as a record settles, never later, so nothing bigger than the budget is ever held,
written to a report or restored. A restored record is counted, not cut again (it was cut when it
settled; restoring in another order must not cut it differently).

Work per decide: a map of thousands of items whose bodies settle without a Job (filter, exit...)
would run to its end inside one `decide()`, holding the operator's event loop for every other
plan. A decide starts at most ITEMS_PER_DECIDE body items, or an eighth of the records the run
was restored from when that is more; when it stopped there, the Decision's `wake_at` is now
(decide again at once: the local runner goes on, the reconciler requeues). The reconciler restores
the run from its records on every reconcile, so a fixed cap would make a 100,000-item map cost
1,000 restores of up to 100,000 records; growing with what was restored, each reconcile's work
stays in proportion to the restore it paid for, and the reconciles of a map are logarithmic in its
length.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from planops.engine import outputs
from planops.engine.report import StepRecord

#: the most text (output + error, UTF-8 bytes) one record keeps: the most a Capsule's
#: outputLimitBytes may allow (a PlanReport keeps 256 KiB of it, reconciler.run.status)
RECORD_TEXT_LIMIT = 1 << 20
#: the most of that an error keeps (it is kept first: it says why a step failed; a PlanReport
#: keeps 2 KiB of it, reconciler.run.status)
ERROR_TEXT_LIMIT = 16 << 10
#: the most record text one run keeps, body steps included (what it holds in memory and writes
#: to its report)
RUN_TEXT_BUDGET = 4 << 20
#: the bytes of an error a record keeps even once the run's text budget is spent (why a step
#: failed: a map stopped by the report's budget says so within them); frame_bytes counts them
ERROR_FLOOR = 160
#: the most one run writes to its report (PlanReports): its record text and its records' frames
RUN_REPORT_BYTES = 16 << 20
#: the most its records' frames (everything but their text: `frame_bytes`) take
RUN_FRAME_BUDGET = RUN_REPORT_BYTES - RUN_TEXT_BUDGET
#: the error a map or reduce fails with when the frames are spent (engine.bodyrun)
FRAMES_SPENT = (
    "[ReportBytesExceeded] {kind} stopped before item {item} of {length}: the run's records "
    "would take more than {limit} bytes besides their text ({report} bytes of report with it, "
    "the most one run writes); split the list, or call a capsule step per chunk"
)
#: body items one decide() starts at most (the rest in the next decide, at once)
ITEMS_PER_DECIDE = 100
#: a record's text is cut by the one rule of engine.outputs (head and tail, a mark between)
WHY = outputs.RUN_BUDGET
#: the most bytes a mark takes
MARK_ROOM = outputs.MARK_ROOM


def frame_bytes(record: StepRecord) -> int:
    """What `record` writes besides its text: its JSON with each text emptied (compact, as the
    API server stores it) plus MARK_ROOM for each text it has (a text past the budget keeps a
    mark, an error its first ERROR_FLOOR bytes too). The same for a record live, cut again, or
    restored."""
    texts = int(bool(record.output)) + int(bool(record.error)) + int(bool(record.stderr))
    floor = ERROR_FLOOR if record.error else 0
    bare = record._replace(
        output="" if record.output else None,
        error="" if record.error else None,
        stderr="" if record.stderr else None,
    ).to_json()
    text = json.dumps(bare, ensure_ascii=False, separators=(",", ":"))
    return len(text.encode()) + texts * MARK_ROOM + floor


#: the smallest frame a record has (no text, a one-letter id): what an item started is reserved
#: at before any record was counted
FRAME_FLOOR = frame_bytes(StepRecord("a", "success", None, None, 0, None, None))


def _size(text: str | None) -> int:
    return len(text.encode()) if text else 0


def cut(text: str | None, limit: int) -> str | None:
    """`text` within `limit` UTF-8 bytes, mark included, when it is longer (its head and its
    tail around a mark: engine.outputs.cut); unchanged when it fits."""
    return outputs.cut(text, limit, WHY)


def full_size(text: str | None) -> int:
    """The bytes `text` had in full: its mark's total when it was cut before, else its size."""
    before = outputs.cut_size(text)
    return before if before is not None else _size(text)


def marked(output: str | None, error: str | None, stderr: str | None = None) -> int | None:
    """The bytes a record's texts had in full when one of them was cut (carries a mark), else
    None: what `cut`/`cut_bytes` count for it."""
    texts = (output, error, stderr)
    if all(outputs.cut_size(t) is None for t in texts):
        return None
    return sum(full_size(t) for t in texts)


def tally(records: Iterable[StepRecord]) -> tuple[int, int]:
    """(records cut, the bytes they had in full) of records as they are kept (Report.cut)."""
    count = total = 0
    for record in records:
        before = marked(record.output, record.error, record.stderr)
        if before is not None:
            count, total = count + 1, total + before
    return count, total


@dataclass
class TextBudget:
    """One run's record text: what it keeps, what it cut. Shared by a run and its bodies' runs."""

    limit: int = RUN_TEXT_BUDGET
    record_limit: int = RECORD_TEXT_LIMIT
    #: bytes of record text held
    held: int = 0
    #: records cut, and the bytes they had before
    cut: int = 0
    cut_bytes: int = 0
    #: body items started by the current decide (ITEMS_PER_DECIDE), and whether it stopped there
    started: int = 0
    capped: bool = False
    #: records the run was restored from (the cap on items grows with them)
    restored: int = 0
    #: bytes of its records besides their text (frame_bytes), and the most they may take
    frames: int = 0
    frame_limit: int = RUN_FRAME_BUDGET

    #: records whose frames are counted
    framed: int = 0

    def frames_spent(self, pending: int = 0) -> bool:
        """Whether the frames, with `pending` more records the size of the average so far
        (items started but not settled yet), would pass their budget."""
        average = max(FRAME_FLOOR, self.frames // self.framed if self.framed else 0)
        return self.frames + pending * average > self.frame_limit

    def frame(self, record: StepRecord) -> None:
        """A record settled now (qualified, as the report writes it): its frame counted."""
        self.frames += frame_bytes(record)
        self.framed += 1

    @property
    def items_per_decide(self) -> int:
        return max(ITEMS_PER_DECIDE, self.restored // 8)

    def keep(
        self, output: str | None, error: str | None, stderr: str | None = None
    ) -> tuple[str | None, str | None, str | None]:
        """(output, error, stderr) of a record settling now, within what the run has left: the
        error first, then stderr (at most a quarter of what is left), the output in the rest."""
        room = max(0, min(self.record_limit, self.limit - self.held))
        new_error = cut(error, max(MARK_ROOM + ERROR_FLOOR, min(ERROR_TEXT_LIMIT, room)))
        room -= _size(new_error)
        new_stderr = cut(stderr, max(MARK_ROOM, room // 4))
        room -= _size(new_stderr)
        new_output = cut(output, max(MARK_ROOM, room))
        self._tally(new_output, new_error, new_stderr)
        self.held += _size(new_output) + _size(new_error) + _size(new_stderr)
        return new_output, new_error, new_stderr

    def count(self, record: StepRecord) -> None:
        """A restored record: held as it is, and counted if it was cut (by anyone) before."""
        self.restored += 1
        self.frame(record)
        self.held += _size(record.output) + _size(record.error) + _size(record.stderr)
        self._tally(record.output, record.error, record.stderr)

    def _tally(self, output: str | None, error: str | None, stderr: str | None = None) -> None:
        before = marked(output, error, stderr)
        if before is not None:
            self.cut += 1
            self.cut_bytes += before


def exit_result(status: str, message: Any, output: Any) -> dict[str, Any]:
    """A fired exit's result, which its record keeps whole (it must stay JSON: whether the exit
    fired is read back from it), so bounded here: the message at ERROR_TEXT_LIMIT bytes, the
    output, when its JSON is over RECORD_TEXT_LIMIT, replaced by that JSON cut (a string)."""
    if isinstance(message, str):
        message = cut(message, ERROR_TEXT_LIMIT)
    elif message is not None and len(json.dumps(message)) > ERROR_TEXT_LIMIT:
        message = cut(json.dumps(message), ERROR_TEXT_LIMIT)
    if output is not None:
        text = json.dumps(output)
        if len(text) > RECORD_TEXT_LIMIT:
            output = cut(text, RECORD_TEXT_LIMIT)
    return {"fired": True, "status": status, "message": message, "output": output}
