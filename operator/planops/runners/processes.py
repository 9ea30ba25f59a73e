"""A local attempt's process: started in a process group of its own with the memory limit
(RLIMIT_DATA), fed its stdin, its stdout and stderr read apart and bounded (engine.outputs), killed
as a group at its timeout or when the run is cancelled, and what its end means (the attempt's
Result). Apart from runners.local, which decides what runs; this is only how a process runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import signal
from collections.abc import Coroutine, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from planops.engine import outputs
from planops.engine.report import ArtifactRecord


@dataclass(frozen=True)
class Result:
    status: Literal["success", "failed"]
    output: str | None
    error: str | None
    #: the tail of the process's stderr (engine.outputs.stderr_value)
    stderr: str | None = None
    #: the results it wrote and the artifacts it left, when its step declares any
    #: (runners.files)
    results: Mapping[str, str] | None = None
    artifacts: tuple[ArtifactRecord, ...] | None = None


async def run(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    stdin: str | None,
    timeout: float,
    memory: int,
    limit: int,
) -> Result:
    """Run `argv` to its end (or its timeout) and say how it ended; `limit`: the output's bytes
    kept (the Capsule's outputLimitBytes)."""
    try:
        proc = await spawn(
            asyncio.create_subprocess_exec(
                *argv,
                cwd=cwd,
                env=env,
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,  # apart: never part of the output
                start_new_session=True,  # its own process group: killed as a whole
                preexec_fn=lambda: limit_memory(memory),
            )
        )
    except ValueError:  # a NUL in a word (a rendered template): no process can take it
        return Result("failed", None, "cannot start: a word of the command holds a NUL byte")
    except OSError as e:  # not executable, not a binary, ...: the attempt fails, not the run
        return Result("failed", None, f"cannot start {argv[0]!r}: {e.strerror or e}")
    streams = Streams(outputs.Capture.for_limit(limit), outputs.stderr_capture())
    try:
        timed_out = await communicate(proc, stdin, timeout, streams)
    finally:
        if proc.returncode is None:
            kill_group(proc.pid)
            await proc.wait()
    kill_group(proc.pid)  # leftovers of the group (background children of the step)
    return result(proc.returncode, streams, limit, timeout if timed_out else None, memory)


async def spawn(
    creating: Coroutine[Any, Any, asyncio.subprocess.Process],
) -> asyncio.subprocess.Process:
    """The started process; cancelled while it starts (the run is cancelled), its group is
    killed once it exists, so none is left behind (a start with a memory limit forks and waits
    for the exec: a window a cancellation often falls in)."""
    task = asyncio.ensure_future(creating)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        with contextlib.suppress(Exception):
            proc = await task
            kill_group(proc.pid)
            await proc.wait()
        raise


def limit_memory(limit: int) -> None:  # runs in the child between fork and exec
    resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))


def kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


@dataclass(frozen=True)
class Streams:
    """What a process writes, read apart and bounded (engine.outputs.Capture)."""

    stdout: outputs.Capture
    stderr: outputs.Capture


def result(
    code: int | None, streams: Streams, limit: int, timed_out: float | None, memory: int
) -> Result:
    """The attempt's result: how the process ended, its output (stdout's value) and the tail of
    its stderr, made by the engine's one rule (engine.outputs)."""
    output = outputs.output_value(streams.stdout, limit)
    stderr = outputs.stderr_value(streams.stderr)
    if timed_out is not None:
        return Result("failed", output, f"timed out after {timed_out}s", stderr)
    if code == 0:
        return Result("success", output, None, stderr)
    if code is not None and code < 0:
        name = signal.Signals(-code).name
        hint = f" (memory limit {memory} bytes in force)" if memory else ""
        return Result("failed", output, f"killed by {name}{hint}", stderr)
    return Result("failed", output, f"exit code {code}", stderr)


async def communicate(
    proc: asyncio.subprocess.Process, stdin: str | None, timeout: float, streams: Streams
) -> bool:
    """Feed stdin, read stdout and stderr apart into `streams` (bounded: each keeps its head
    and tail and counts the rest), wait for exit; whether the timeout passed first."""

    async def drain(pipe: asyncio.StreamReader | None, capture: outputs.Capture) -> None:
        assert pipe is not None
        while chunk := await pipe.read(65536):
            capture.feed(chunk)

    async def feed() -> None:
        if stdin is not None and proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                proc.stdin.write(stdin.encode())
                await proc.stdin.drain()
            proc.stdin.close()

    async def pump() -> None:  # all at once: a process that writes before it reads never waits
        await asyncio.gather(
            feed(), drain(proc.stdout, streams.stdout), drain(proc.stderr, streams.stderr)
        )
        await proc.wait()

    try:
        await asyncio.wait_for(pump(), timeout)
    except TimeoutError:
        return True
    return False
