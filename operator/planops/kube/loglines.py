"""A followed pod log as lines, whatever their length (`kubectl plan logs -f`).

A step may print anything, a megabytes-long line included (a minified JSON, a base64 blob, a
progress bar that never ends its line). Reading the stream with aiohttp's `readline` fails on a
line longer than the client's buffer (4 MiB here: kube/transport.py) with an exception, which
ended `logs -f` with a traceback. Here the stream is read in chunks as they come, and a line
longer than LINE_LIMIT is shown up to it, ended with CUT_MARK, and the rest of it is dropped
until its end: memory stays bounded by the limit plus one chunk, and the next line shows whole.
Pure: bytes in, text out.
"""

from __future__ import annotations

import codecs

#: bytes of one line shown at most (the report keeps 1 MiB of a step's output as well)
LINE_LIMIT = 1 << 20
CUT_MARK = " … [planops: line cut at 1 MiB, the rest of it not shown]"


def _text(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


class LineCutter:
    """Chunks of a stream in (`feed`), its lines out, each with its newline; a line longer
    than `limit` bytes comes out as its first `limit` bytes (never half a character), CUT_MARK
    and a newline, at once (a line that never ends is still shown), its rest dropped."""

    def __init__(self, limit: int = LINE_LIMIT) -> None:
        self.limit = limit
        self._line = bytearray()
        self._dropping = False  # past the limit: drop until the line ends

    def _cut(self) -> str:
        head = codecs.getincrementaldecoder("utf-8")(errors="replace").decode(
            bytes(self._line[: self.limit])
        )  # not final: an incomplete character at the cut is left out
        self._line.clear()
        self._dropping = True
        return head + CUT_MARK + "\n"

    def feed(self, chunk: bytes) -> list[str]:
        lines = []
        start = 0
        while start < len(chunk):
            end = chunk.find(b"\n", start)
            stop = len(chunk) if end < 0 else end + 1
            if not self._dropping:
                self._line += chunk[start:stop]
                content = len(self._line) - (1 if end >= 0 else 0)
                if content > self.limit:
                    lines.append(self._cut())
                elif end >= 0:
                    lines.append(_text(bytes(self._line)))
                    self._line.clear()
            if end >= 0:
                self._dropping = False
            start = stop
        return lines

    def end(self) -> list[str]:
        """The last line when the stream ended without a newline."""
        rest = [_text(bytes(self._line))] if self._line and not self._dropping else []
        self._line.clear()
        return rest
