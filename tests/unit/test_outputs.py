"""engine.outputs: the one place a step's output value is made and a text is cut (both executors,
the run's budget and the report's share call it)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from planops.engine import outputs
from planops.reconciler.run import status


def captured(data: bytes, limit: int, head: bool = True, chunk: int = 7) -> outputs.Capture:
    capture = outputs.Capture.for_limit(limit, head)
    for start in range(0, len(data), chunk):
        capture.feed(data[start : start + chunk])
    return capture


@pytest.mark.parametrize(
    ("printed", "value"),
    [
        ("v1.2.3\n", "v1.2.3"),  # echo's line end is not the value's
        ("v1.2.3", "v1.2.3"),  # printf without one: nothing to drop
        ("v1.2.3\r\n", "v1.2.3"),  # a CRLF is one line end
        ("two\n\n", "two\n"),  # one line end only: a blank line printed on purpose stays
        ("a\nb\n", "a\nb"),
        ("\n", None),  # an empty value is no output
        ("", None),
        ("x\r", "x\r"),  # a lone CR is no line end
    ],
)
def test_one_trailing_line_end_is_not_part_of_the_value(printed: str, value: str | None):
    assert outputs.output_value(captured(printed.encode(), 1000), 1000) == value


def test_invalid_utf8_is_replaced_not_fatal():
    assert outputs.output_value(captured(b"ok \xff\xfe\n", 100), 100) == "ok \ufffd\ufffd"


def test_a_long_output_keeps_its_head_and_its_tail_around_the_mark():
    data = "".join(f"line {i}\n" for i in range(10_000)).encode()
    value = outputs.output_value(captured(data, 1000, chunk=4096), 1000)
    assert value is not None and len(value.encode()) <= 1000
    head, _, rest = value.partition("\n[planops: ")
    mark, _, tail = rest.partition("]\n")
    assert head.startswith("line 0\nline 1\n") and tail.endswith("line 9998\nline 9999")
    total = len(data) - 1  # its last line end dropped
    left_out = total - len(head) - len(tail)
    assert mark == f"{left_out} of {total} bytes cut here (outputLimitBytes)"
    # whole lines on both sides, when that keeps at least half of each
    assert head.endswith(head.splitlines()[-1]) and tail.startswith("line ")


def test_a_capture_holds_a_bounded_amount_whatever_the_stream():
    capture = outputs.Capture.for_limit(1000)
    for _ in range(10_000):
        capture.feed(b"y" * 1000)
    assert capture.total == 10_000_000
    assert len(capture._head) + len(capture._tail) <= 3 * 1008


def test_stderr_keeps_its_tail_only():
    data = "".join(f"debug {i}\n" for i in range(5000)).encode() + b"fatal: gone\n"
    tail = outputs.stderr_value(captured(data, outputs.STDERR_LIMIT, head=False))
    assert tail is not None and len(tail.encode()) <= outputs.STDERR_LIMIT
    assert tail.startswith("[planops: ") and tail.endswith("debug 4999\nfatal: gone")
    assert outputs.cut_size(tail) == len(data) - 1
    assert outputs.stderr_value(outputs.Capture.of("short\n", outputs.STDERR_LIMIT, False)) == (
        "short"
    )


def test_a_text_cut_again_keeps_its_first_total_its_head_and_its_tail():
    text = "H" * 5000 + "m" * 10_000 + "T" * 5000
    once = outputs.cut(text, 4000, outputs.OUTPUT_LIMIT)
    twice = outputs.cut(once, 1000, outputs.RUN_BUDGET)
    assert twice is not None and len(twice.encode()) <= 1000
    assert twice.startswith("H") and twice.endswith("T") and twice.count("[planops: ") == 1
    assert outputs.cut_size(twice) == outputs.cut_size(once) == 20_000
    assert "(the run's result budget)" in twice  # the last cut says why it is this short


def test_a_mark_quoted_in_a_text_is_not_taken_for_one():
    """A step that prints another's cut output (or a look-alike) was not cut itself."""
    quoted = "before\n[planops: 5 of 10 bytes cut here (outputLimitBytes)]\nafter"
    assert outputs.cut_size(quoted) is None
    cut = outputs.cut("x" * 3000, 500, outputs.OUTPUT_LIMIT)
    assert cut is not None and outputs.cut_size("say: " + cut) is None  # sizes disagree


def test_the_status_measures_what_the_api_server_stores():
    """Go's JSON escapes <, > and & as 6 bytes: the status's share is counted that way."""
    text = "<&>" * 1000
    kept = status.cap_text(text, 300)
    assert kept is not None and status.stored_len(kept) <= 300 + status.MARK_ROOM
    assert kept.startswith("<&>") and kept.endswith("<&>")
    assert outputs.cut_size(kept) == 3000


@settings(max_examples=200, derandomize=True, deadline=None)
@given(
    st.text(max_size=3000),
    st.integers(min_value=outputs.MARK_ROOM, max_value=2000),
    st.floats(min_value=0.0, max_value=1.0),
)
def test_a_cut_is_within_its_limit_and_reads_back_its_full_size(text, limit, share):
    cut = outputs.cut(text, limit, outputs.RUN_BUDGET, head_share=share)
    assert cut is not None or not text
    if outputs.size(text) <= limit:
        assert cut == text
        return
    assert cut is not None and outputs.size(cut) <= limit
    assert outputs.cut_size(cut) == outputs.size(text)
    head, tail, total = outputs.parts(cut)
    assert text.startswith(head) and text.endswith(tail) and total == outputs.size(text)
