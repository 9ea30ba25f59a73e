"""The operator keeps at most main.ARENAS malloc arenas (glibc): without the cap, each thread
that validates a Plan gets an arena of its own, which keeps the pages of its largest validation
and raises the peak RSS of a burst (docs/performance.md, round 6 of the peers). An operator
started with env MALLOC_ARENA_MAX keeps what that says."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from planops import main

# threads that allocate at once, then glibc's own count of its arenas (malloc_stats, on stderr)
PROBE = """
import ctypes, sys, threading
from planops.main import few_malloc_arenas
if sys.argv[1] == "cap":
    few_malloc_arenas()
start, keep = threading.Barrier(8), []
def work():
    start.wait()
    keep.append([bytearray(512) for _ in range(2000)])
threads = [threading.Thread(target=work) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
ctypes.CDLL("libc.so.6").malloc_stats()
"""


def _arenas(mode: str, **env: str) -> int:
    run = subprocess.run(
        [sys.executable, "-c", PROBE, mode],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"} | env,
        check=True,
    )
    return sum(1 for line in run.stderr.splitlines() if line.startswith("Arena "))


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_the_operator_keeps_few_malloc_arenas_however_many_threads_allocate():
    assert _arenas("cap") <= main.ARENAS
    assert _arenas("default") > main.ARENAS  # the threads' own arenas, without the cap


def test_env_malloc_arena_max_is_left_to_glibc(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert main.few_malloc_arenas() is False
