"""`kubectl plan logs -f` reads a followed log of any line length (kube/loglines.py): a line over
4 MiB ended the command with a traceback (aiohttp's readline over the client's 4 MiB buffer); it
is now shown up to 1 MiB with a mark, and the lines after it whole. The client's follow_log is
driven here by a fake response whose body is a real aiohttp stream, fed as a server would."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from typing import Any, cast

import aiohttp
import pytest
from hypothesis import given
from hypothesis import strategies as st

from planops.cli import follow
from planops.kube import loglines
from planops.kube.cli_client import CliKube
from planops.kube.manifests import PlanRef
from planops.kube.transport import Transport

from .fakekube import FakeKube

MIB = 1 << 20
CUT = loglines.CUT_MARK + "\n"


def test_short_lines_come_out_as_they_went_in_across_chunks():
    cutter = loglines.LineCutter()
    out = cutter.feed(b"one\ntw") + cutter.feed(b"o\n") + cutter.feed(b"\nthree")
    assert out + cutter.end() == ["one\n", "two\n", "\n", "three"]


def test_a_line_over_the_limit_is_cut_with_a_mark_and_the_next_line_is_whole():
    cutter = loglines.LineCutter(limit=10)
    out = cutter.feed(b"0123456789ABCDEF") + cutter.feed(b"GHI\nnext\n")
    assert out == ["0123456789" + CUT, "next\n"]
    assert cutter.end() == []


def test_a_line_of_exactly_the_limit_is_not_cut():
    cutter = loglines.LineCutter(limit=4)
    assert cutter.feed(b"abcd\nabcde\n") == ["abcd\n", "abcd" + CUT]


def test_a_line_that_never_ends_is_shown_at_once_and_then_dropped():
    cutter = loglines.LineCutter(limit=8)
    assert cutter.feed(b"x" * 9) == ["x" * 8 + CUT]  # shown before the line ends
    assert cutter.feed(b"y" * 100) == [] and cutter.end() == []


def test_the_cut_never_splits_a_character():
    cutter = loglines.LineCutter(limit=5)
    assert cutter.feed("abcdé!\n".encode()) == ["abcd" + CUT]  # é is 2 bytes: 4 + 2 > 5


@given(st.lists(st.binary(max_size=40), max_size=12), st.integers(1, 30))
def test_any_chunking_gives_the_lines_of_the_whole_cut_alike(chunks: list[bytes], limit: int):
    whole = loglines.LineCutter(limit)
    expected = whole.feed(b"".join(chunks)) + whole.end()
    cutter = loglines.LineCutter(limit)
    got = [line for c in chunks for line in cutter.feed(c)] + cutter.end()
    assert got == expected
    # a character per byte at most (an invalid byte is one U+FFFD)
    assert all(len(line) <= limit + max(len(CUT), 1) for line in got)


class _Protocol:
    """What aiohttp's StreamReader asks of its connection: flow control."""

    connected = True

    def pause_reading(self) -> None: ...

    def resume_reading(self) -> None: ...


class _Response:
    status = 200

    def __init__(self, content: aiohttp.StreamReader) -> None:
        self.content = content
        self.released = False

    def release(self) -> None:
        self.released = True


class _Transport:
    """The API server's answer to the follow request: a body streamed as `parts`, with the
    client's real buffer (read_bufsize 2 MiB: a 4 MiB high water mark, as kube/transport.py)."""

    def __init__(self, parts: list[bytes]) -> None:
        self.parts = parts
        self.response: _Response | None = None

    async def request(self, method: str, path: str, **_: Any) -> _Response:
        stream = aiohttp.StreamReader(
            cast(Any, _Protocol()), 2**21, loop=asyncio.get_running_loop()
        )
        self.response = _Response(stream)

        async def serve() -> None:
            for part in self.parts:
                stream.feed_data(part)
                await asyncio.sleep(0)
            stream.feed_eof()

        asyncio.get_running_loop().create_task(serve())
        return self.response


async def _follow(parts: list[bytes]) -> tuple[list[str], _Transport]:
    transport = _Transport(parts)
    kube = CliKube(cast(Transport, transport))
    async with contextlib.aclosing(kube.follow_log("team", "pod-1", "step")) as lines:
        return [line async for line in lines], transport


def test_the_client_follows_a_log_with_a_line_over_4_mib_and_cuts_it():
    long_line = [b"x" * MIB] * 5 + [b"!\n"]  # 5 MiB and a bit, in the chunks a server sends
    got, transport = asyncio.run(_follow([b"before\n", *long_line, b"after\n", b"last"]))
    assert got == ["before\n", "x" * MIB + CUT, "after\n", "last"]
    assert transport.response is not None and transport.response.released


def test_logs_f_shows_the_cut_line_and_goes_on(capsys: pytest.CaptureFixture[str]):
    """The command itself, on the in-memory API: the fake's followed log goes through the same
    LineCutter as the client's (tests/unit/fakekube.py)."""
    kube = _big_plan("x" * (5 * MIB) + "\ndone\n")
    args = argparse.Namespace(name="big", step=None)
    assert asyncio.run(follow.cmd_follow(kube, args, "team")) == 0
    assert capsys.readouterr().out == "[dump] " + "x" * MIB + CUT + "[dump] done\n"


def _big_plan(log: str) -> FakeKube:
    """A finished Plan whose one step's pod (the Plan's Job's) logged `log`."""
    kube, run = FakeKube(), PlanRef("team", "big", "plan-uid", "r1")
    kube.put(
        "plan",
        {
            "metadata": {"name": "big", "namespace": "team", "uid": "plan-uid"},
            "spec": {"steps": [{"id": "dump", "shell": "cat big.json"}]},
            "status": {"phase": "Succeeded", "run": {"id": "r1"}, "progress": "1/1"},
        },
    )
    job = {"name": "j", "uid": "job-uid", "ownerReferences": _owner("plan-uid", "Plan")}
    pod = {"name": "dump-pod", "ownerReferences": _owner("job-uid", "Job")}
    for kind, meta in (("job", job), ("pod", pod)):
        obj = {"metadata": {**meta, "namespace": "team", "labels": run.labels("dump", 1)}}
        kube.put(kind, {**obj, "status": {"phase": "Succeeded"}})
    kube.logs["dump-pod"] = log
    return kube


def _owner(uid: str, kind: str) -> list[dict[str, Any]]:
    api = "planops.dev/v1alpha1" if kind == "Plan" else "batch/v1"
    return [{"apiVersion": api, "kind": kind, "uid": uid, "controller": True}]


def test_a_log_stream_that_breaks_is_a_note_not_a_traceback(capsys: pytest.CaptureFixture[str]):
    kube = _big_plan("x\n")
    kube.fail("follow_log", aiohttp.ClientPayloadError("Response payload is not completed"))
    args = argparse.Namespace(name="big", step=None)
    assert asyncio.run(follow.cmd_follow(kube, args, "team")) == 0  # the plan's result
    err = capsys.readouterr().err
    assert "note: [dump] pod dump-pod: the log stream broke: ClientPayloadError" in err
