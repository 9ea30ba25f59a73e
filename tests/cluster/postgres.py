"""A real PostgreSQL server for the archive's tests and bench: Debian's `postgresql` package
(/usr/lib/postgresql/N/bin), started like the control plane, on loopback and a unix socket
directory of its own, in a temporary directory, never as a system service.

PostgreSQL refuses to run as root: as root the server runs as the `postgres` user the package
creates (through runuser), in a directory that user owns.

    python -m tests.cluster.postgres up DIR     # start (prints the DSN)
    python -m tests.cluster.postgres down DIR   # stop
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

USER = "planops"


def bin_dir() -> Path:
    """The newest installed PostgreSQL's binaries."""
    found = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/postgres"), key=lambda p: int(p.parts[-3])
    )
    if not found:
        raise RuntimeError("PostgreSQL is not installed: apt-get install postgresql")
    return found[-1].parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Postgres:
    """One server in `root` (data/, sock/, log); `dsn` reaches it over TCP on 127.0.0.1."""

    def __init__(self, root: Path, port: int | None = None) -> None:
        self.root = root
        self.data = root / "data"
        self.sock = root / "sock"
        self.log = root / "postgres.log"
        port_file = root / "port"
        self.port = port or (int(port_file.read_text()) if port_file.exists() else _free_port())
        self.as_postgres = os.geteuid() == 0

    def dsn(self, dbname: str = "postgres") -> str:
        return f"host=127.0.0.1 port={self.port} user={USER} dbname={dbname} connect_timeout=3"

    def _run(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = [str(bin_dir() / cmd[0]), *cmd[1:]]
        if self.as_postgres:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        return subprocess.run(argv, check=check, capture_output=True, text=True)

    def init(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.sock.mkdir(exist_ok=True)
        if self.as_postgres:
            pw = pwd.getpwnam("postgres")
            for p in (self.root, self.sock):
                os.chown(p, pw.pw_uid, pw.pw_gid)
        (self.root / "port").write_text(str(self.port))
        if not (self.data / "PG_VERSION").exists():
            # trust on loopback and the socket: a throwaway server of the tests, reachable only
            # from this machine
            self._run("initdb", "-D", str(self.data), "-U", USER, "-A", "trust", "-N", "-E", "UTF8")

    def start(self) -> None:
        options = f"-p {self.port} -k {self.sock} -c listen_addresses=127.0.0.1"
        done = self._run(
            "pg_ctl",
            "-D",
            str(self.data),
            "-l",
            str(self.log),
            "-o",
            options,
            "-w",
            "start",
            check=False,
        )
        if done.returncode != 0:
            log = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
            raise RuntimeError(f"postgres did not start: {done.stdout}{done.stderr}\n{log}")

    def stop(self) -> None:
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop", check=False)

    def running(self) -> bool:
        return self._run("pg_ctl", "-D", str(self.data), "status", check=False).returncode == 0

    def create_database(self, name: str) -> str:
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", USER, name)
        return self.dsn(name)


@contextlib.contextmanager
def server() -> Iterator[Postgres]:
    """A started server in a fresh directory; stopped and removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="planops-pg-"))
    os.chmod(root, 0o755)  # the postgres user reaches it
    pg = Postgres(root)
    try:
        pg.init()
        pg.start()
        yield pg
    finally:
        pg.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres() -> Iterator[Postgres]:
    """The session's PostgreSQL server (tests marked `archive`)."""
    with server() as pg:
        yield pg


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("up", "down"):
        sys.stderr.write(__doc__ or "")
        return 2
    pg = Postgres(Path(argv[1]))
    if argv[0] == "up":
        pg.init()
        if not pg.running():
            pg.start()
        print(pg.dsn())
    else:
        pg.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
