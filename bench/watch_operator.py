"""Samples a running operator's memory and CPU from /proc, with its Plans' progress, while a long
test or bench runs beside it: the figures of a run too long to time inside a test (the
20,000-step plan of tests/e2e/test_kwok.py). Prints a line per sample, and the peak RSS the
kernel recorded (VmHWM, so no peak between samples is missed).

    PLANOPS_KWOK_LARGE_STEPS=20000 .venv/bin/pytest -s tests/e2e/test_kwok.py -k large &
    .venv/bin/python bench/watch_operator.py --kubeconfig "$KUBECONFIG"

The operator is --pid, else the newest process whose command line runs `planops.main` (or
`planops-operator`); the progress is every Plan's `status.progress` (kubectl, every
--progress-every seconds, as it reads the whole Plan objects)."""

from __future__ import annotations

import argparse
import os
import subprocess
import time
from pathlib import Path

TICKS = os.sysconf("SC_CLK_TCK")


def operator_pid() -> int | None:
    found: list[tuple[float, int]] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
            started = (entry / "stat").stat().st_mtime
        except OSError:
            continue
        if b"planops.main" in cmd or b"planops-operator" in cmd:
            found.append((started, int(entry.name)))
    return max(found)[1] if found else None


def sample(pid: int) -> tuple[float, float, float] | None:
    """(RSS MiB, peak RSS MiB, CPU seconds) of `pid`, or None when it is gone."""
    try:
        status = (Path("/proc") / str(pid) / "status").read_text()
        stat = (Path("/proc") / str(pid) / "stat").read_text()
    except OSError:
        return None
    kb = {
        line.split(":")[0]: int(line.split()[1])
        for line in status.splitlines()
        if line.startswith(("VmRSS", "VmHWM"))
    }
    fields = stat.rpartition(")")[2].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime
    return kb["VmRSS"] / 1024, kb["VmHWM"] / 1024, cpu


def progress(kubeconfig: str) -> str:
    out = subprocess.run(
        [
            "kubectl",
            "--kubeconfig",
            kubeconfig,
            "get",
            "plans",
            "-A",
            "-o",
            "jsonpath={range .items[*]}{.metadata.name}={.status.progress} {end}",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return out.stdout.strip() or out.stderr.strip()[:200]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG", ""))
    parser.add_argument("--every", type=float, default=5.0, help="seconds between samples")
    parser.add_argument("--progress-every", type=float, default=30.0)
    parser.add_argument("--wait", type=float, default=600.0, help="for the operator to start")
    parser.add_argument(
        "--pid", type=int, help="the operator's process (on a machine where others run one too)"
    )
    args = parser.parse_args()
    deadline = time.monotonic() + args.wait
    pid = args.pid or operator_pid()
    while pid is None and time.monotonic() < deadline:
        time.sleep(1)
        pid = operator_pid()
    if pid is None:
        raise SystemExit("no operator process found")
    start, last_progress, peak = time.monotonic(), -1e9, 0.0
    print(f"operator pid {pid}", flush=True)
    while (got := sample(pid)) is not None:
        rss, hwm, cpu = got
        peak = max(peak, hwm)
        now = time.monotonic()
        line = f"+{now - start:7.0f}s rss {rss:7.1f} MiB  peak {hwm:7.1f} MiB  cpu {cpu:8.1f} s"
        if args.kubeconfig and now - last_progress >= args.progress_every:
            last_progress = now
            line += f"  {progress(args.kubeconfig)}"
        print(line, flush=True)
        time.sleep(args.every)
    print(f"operator {pid} ended; peak RSS {peak:.1f} MiB", flush=True)


if __name__ == "__main__":
    main()
