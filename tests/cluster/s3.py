"""A real S3-compatible store for the artifact tests: SeaweedFS (`weed server` with its S3
gateway), built by `tests/cluster/build seaweedfs` and started like PostgreSQL
(tests/cluster/postgres.py): on loopback, free ports, a temporary directory of its own, an S3
identity (access key and secret) and a bucket; stopped, its whole process group, when done.

    python -m tests.cluster.s3 up DIR     # start (prints endpoint, bucket, access key, secret)
    python -m tests.cluster.s3 down DIR   # stop
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
BUCKET = "planops-test"
#: how long the store has to answer after its start (a cold start on a busy 2-core machine)
START_SECONDS = 90.0


def weed_binary() -> Path:
    """The built `weed` (tests/cluster/build seaweedfs; cached by version after the first)."""
    done = subprocess.run(
        [str(HERE / "build"), "seaweedfs"], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise RuntimeError(f"tests/cluster/build seaweedfs failed:\n{done.stderr[-3000:]}")
    return Path(done.stdout.strip().splitlines()[-1]) / _version_dir() / "weed"


def _version_dir() -> str:
    for line in (HERE / "versions.env").read_text().splitlines():
        if line.startswith("SEAWEEDFS_VERSION="):
            return "seaweedfs-" + line.split("=", 1)[1].split()[0]
    raise RuntimeError("SEAWEEDFS_VERSION is missing from tests/cluster/versions.env")


#: starts tried when a chosen port was taken before weed bound it (the ports are free when
#: chosen; another process of a parallel run may take one before weed binds it)
START_TRIES = 3


def _free_ports(n: int, ip: str = "127.0.0.1") -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind((ip, 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


@dataclass(frozen=True)
class S3:
    """What a test needs of the store: where it is and who it lets in."""

    endpoint: str  # http://127.0.0.1:PORT
    bucket: str
    access_key: str
    secret_key: str
    root: Path

    @property
    def pid_file(self) -> Path:
        return self.root / "weed.pid"


class Store:
    """One `weed server` (master, volume, filer, S3 gateway) in `root`."""

    def __init__(self, root: Path, ip: str = "127.0.0.1") -> None:
        self.root, self.ip = root, ip  # ip: the node's, for a store the step pods reach
        self.state = root / "store.json"

    def start(self) -> S3:
        self.root.mkdir(parents=True, exist_ok=True)
        if self.state.exists():
            s3 = self.load()
            if self.running():
                return s3
        for tries_left in reversed(range(START_TRIES)):
            try:
                return self._start()
            except RuntimeError as e:
                if tries_left == 0 or "address already in use" not in str(e):
                    raise
                shutil.rmtree(self.root / "data", ignore_errors=True)  # its state names the ports
        raise AssertionError("unreachable")

    def _start(self) -> S3:
        ports = _free_ports(8, self.ip)
        master, master_g, volume, volume_g, filer, filer_g, s3_port, s3_g = ports
        s3 = S3(
            endpoint=f"http://{self.ip}:{s3_port}",
            bucket=BUCKET,
            access_key="planops" + secrets.token_hex(4),
            secret_key=secrets.token_hex(20),
            root=self.root,
        )
        config = self.root / "s3.json"
        config.write_text(json.dumps(_identities(s3)))
        config.chmod(0o600)
        (self.root / "data").mkdir(exist_ok=True)
        argv = [
            str(weed_binary()),
            "server",
            f"-dir={self.root / 'data'}",
            f"-ip={self.ip}",
            f"-ip.bind={self.ip}",
            f"-master.port={master}",
            f"-master.port.grpc={master_g}",
            "-master.telemetry=false",
            "-master.volumeSizeLimitMB=64",
            f"-volume.port={volume}",
            f"-volume.port.grpc={volume_g}",
            "-volume.max=0",  # as many 64 MiB volumes as the disk holds
            "-filer",
            f"-filer.port={filer}",
            f"-filer.port.grpc={filer_g}",
            "-s3",
            f"-s3.port={s3_port}",
            f"-s3.port.grpc={s3_g}",
            "-s3.port.iceberg=0",
            "-s3.port.lance=0",
            f"-s3.config={config}",
        ]
        with (self.root / "weed.log").open("ab") as log:
            proc = subprocess.Popen(
                argv, stdout=log, stderr=log, stdin=subprocess.DEVNULL, start_new_session=True
            )
        s3.pid_file.write_text(str(proc.pid))
        self.state.write_text(json.dumps({**s3.__dict__, "root": str(self.root)}))
        try:
            self._wait(s3, proc)
            make_bucket(s3)
        except BaseException:
            self.stop()
            raise
        return s3

    def load(self) -> S3:
        got = json.loads(self.state.read_text())
        return S3(**{**got, "root": Path(got["root"])})

    def _wait(self, s3: S3, proc: subprocess.Popen[bytes]) -> None:
        deadline = time.monotonic() + START_SECONDS
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"weed exited ({proc.returncode}):\n{self.log_tail()}")
            try:
                urllib.request.urlopen(s3.endpoint + "/healthz", timeout=2).close()
                return
            except urllib.error.HTTPError:
                return  # it answers: up
            except OSError:
                time.sleep(0.3)
        raise RuntimeError(f"weed did not answer within {START_SECONDS:g}s:\n{self.log_tail()}")

    def log_tail(self) -> str:
        log = self.root / "weed.log"
        return log.read_text(errors="replace")[-3000:] if log.exists() else ""

    def pid(self) -> int | None:
        pid_file = self.root / "weed.pid"
        return int(pid_file.read_text()) if pid_file.exists() else None

    def running(self) -> bool:
        pid = self.pid()
        if pid is None:
            return False
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        return True

    def stop(self) -> None:
        """Stops the process group started here (weed and nothing else), and waits for it."""
        pid = self.pid()
        if pid is None:
            return
        try:  # the recorded pid is still our weed (not a reused pid): its command line says so
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            cmdline = []
        if not cmdline or not cmdline[0].endswith(b"/weed"):
            (self.root / "weed.pid").unlink(missing_ok=True)
            return
        for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, os.WNOHANG)
                try:
                    os.killpg(pid, 0)
                except ProcessLookupError:
                    (self.root / "weed.pid").unlink(missing_ok=True)
                    return
                time.sleep(0.1)


def _identities(s3: S3) -> dict[str, object]:
    """SeaweedFS's S3 identity file: one identity, every action (the tests' operator)."""
    return {
        "identities": [
            {
                "name": "planops",
                "credentials": [{"accessKey": s3.access_key, "secretKey": s3.secret_key}],
                "actions": ["Admin", "Read", "List", "Tagging", "Write"],
            }
        ]
    }


def make_bucket(s3: S3) -> None:
    """Creates the test bucket (retried: the gateway answers before its filer is ready)."""
    from minio import Minio  # noqa: PLC0415 - the fixture's only use of a client
    from minio.error import S3Error  # noqa: PLC0415

    client = Minio(
        s3.endpoint.removeprefix("http://"),
        access_key=s3.access_key,
        secret_key=s3.secret_key,
        secure=False,
        region="us-east-1",
    )
    deadline = time.monotonic() + START_SECONDS
    while True:
        try:
            if not client.bucket_exists(s3.bucket):
                client.make_bucket(s3.bucket)
            return
        except (S3Error, OSError) as e:
            if time.monotonic() > deadline:
                raise RuntimeError(f"could not create bucket {s3.bucket}: {e}") from e
            time.sleep(0.5)


@contextlib.contextmanager
def server(ip: str = "127.0.0.1") -> Iterator[S3]:
    """A started store in a fresh directory (listening on `ip`); stopped and removed afterwards."""
    root = Path(tempfile.mkdtemp(prefix="planops-s3-"))
    store = Store(root, ip)
    try:
        yield store.start()
    finally:
        store.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def s3_store() -> Iterator[S3]:
    """The session's SeaweedFS (tests marked `artifacts`): endpoint, bucket, access key,
    secret."""
    with server() as s3:
        yield s3


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("up", "down"):
        sys.stderr.write(__doc__ or "")
        return 2
    store = Store(Path(argv[1]))
    if argv[0] == "up":
        s3 = store.start()
        print(json.dumps({k: str(v) for k, v in s3.__dict__.items()}))
    else:
        store.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
