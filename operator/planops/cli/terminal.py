"""What kubectl-plan writes to a terminal is text, never commands to the terminal.

Step output, ask prompts, error messages, Event messages and names are written by plan authors
and by whatever their steps run. Written as they are, an escape sequence in them is obeyed by
the terminal: OSC 52 writes the user's clipboard, a CR or cursor movement overwrites what was
printed before, colours hide text (an approver reading `describe` before `answer` sees another
prompt than the one asked), a bidi override reorders what is read (Trojan Source). So while a
command runs, sys.stdout and sys.stderr, where they are terminals, are replaced by an Escaping
stream: every writer of the CLI (print, .write, the tables, `logs`, `logs -f`, prompts) goes
through `escape`, the one function that turns control characters into visible `\\xHH` and
`\\uHHHH`: C0 but tab and newline (ESC, BEL, backspace; a CR unless it ends a line), DEL, C1,
and the bidi embeddings, overrides, isolates and marks.

Where a stream is not a terminal (a pipe, a file) the bytes are kept, as `kubectl logs` keeps
them: `logs NAME STEP > out.json` is the step's output exactly. `--raw` keeps them on a
terminal too (a step's colours, deliberately). The CLI's own sequences (the graph's colours,
`graph --watch`'s redraw) go to the terminal under the stream (`trusted`), around text the
graph already cleaned (graph_model.clean).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
from collections.abc import Iterator
from typing import Any, TextIO

#: bidi embeddings, overrides and isolates (and the marks): reorder what is read
BIDI = (0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A))
#: C0 but tab, newline and CR (below), DEL, C1
CONTROLS = (*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), 0x7F, *range(0x80, 0xA0))
_TABLE = {c: f"\\x{c:02x}" for c in CONTROLS} | {c: f"\\u{c:04x}" for c in BIDI}
#: a CR that does not end a line (CRLF is a line end, a lone CR rewrites the line)
_LONE_CR = re.compile(r"\r(?!\n)")


def escape(text: str) -> str:
    """`text` with every character a terminal would obey written out visibly."""
    return _LONE_CR.sub(r"\\x0d", text.translate(_TABLE))


class Escaping:
    """A terminal's stream that writes `escape(text)`; everything else is the stream's."""

    def __init__(self, terminal: TextIO) -> None:
        self.terminal = terminal

    def write(self, text: str) -> int:
        self.terminal.write(escape(text))
        return len(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.terminal, name)


@contextlib.contextmanager
def guarded(raw: bool = False) -> Iterator[None]:
    """While a command runs: sys.stdout and sys.stderr, where they are terminals, escape what is
    written to them (unless `raw`); put back after."""
    saved = sys.stdout, sys.stderr
    try:
        if not raw:
            for name in ("stdout", "stderr"):
                stream = getattr(sys, name)
                if not isinstance(stream, Escaping) and stream.isatty():
                    setattr(sys, name, Escaping(stream))
        yield
    finally:
        sys.stdout, sys.stderr = saved


def trusted(stream: TextIO) -> TextIO:
    """The terminal under `stream`: for the CLI's own control sequences only (colours, a
    redraw), around text already cleaned of any."""
    return stream.terminal if isinstance(stream, Escaping) else stream


def add_raw(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--raw",
        action="store_true",
        help="write text as it is to a terminal too (by default control characters and escape "
        "sequences of step output, prompts and messages are shown escaped there, as \\x1b; "
        "pipes and files always get the bytes)",
    )
