"""The step pod's collector (planops.collector) as a real process against a real HTTP server on
loopback standing in for presigned URLs (the artifacts-marked tests use the real store): results
into its termination message, artifacts PUT whole and fetched with their checksum checked, and a
store that stops or hangs failing it with a clear message within its timeout, never a hang."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import os
import socket
import subprocess
import sys
import tarfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from planops import collector as mover


class _Store(http.server.BaseHTTPRequestHandler):
    objects: dict[str, bytes]

    def do_PUT(self) -> None:
        size = int(self.headers["Content-Length"])
        self.objects[self.path] = self.rfile.read(size)
        self.send_response(200)
        self.end_headers()

    def do_GET(self) -> None:
        data = self.objects.get(self.path)
        if data is None:
            self.send_response(404, "Not Found")
            self.end_headers()
            self.wfile.write(b"<Error><Code>NoSuchKey</Code></Error>")
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def store() -> Iterator[tuple[str, dict[str, bytes]]]:
    objects: dict[str, bytes] = {}
    handler = type("Store", (_Store,), {"objects": objects})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", objects
    finally:
        server.shutdown()
        server.server_close()


def collector(mode: str, config: dict, message: Path, timeout: float = 30):
    env = {**os.environ, "PLANOPS_COLLECT": json.dumps(config), "PLANOPS_MESSAGE": str(message)}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "planops.collector", mode],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    read = json.loads(message.read_text()) if message.exists() else None
    return done, read, time.monotonic() - started


def test_results_and_artifacts_go_out_and_come_back(tmp_path, store):
    url, objects = store
    work, results = tmp_path / "work", tmp_path / "results"
    (work / "dist" / "sub").mkdir(parents=True)
    (work / "dist" / "sub" / "f").write_text("inside\n")
    (work / "one.txt").write_text("one\n")
    results.mkdir()
    (results / "version").write_text("v1\n")
    config = {
        "workdir": str(work),
        "results": {"dir": str(results), "names": ["version", "unwritten"], "bound": 3072},
        "outputs": [
            {"name": "dist", "path": "dist", "url": f"{url}/k/dist", "maxBytes": 1 << 20},
            {"name": "one", "path": "one.txt", "url": f"{url}/k/one", "maxBytes": 1 << 20},
        ],
    }
    done, message, _ = collector("collect", config, tmp_path / "msg")
    assert done.returncode == 0, done.stderr
    assert message["results"] == {"version": "v1\n"}  # the engine drops the line end
    (dist_sha, dist_size, dist_dir), one = message["artifacts"]
    assert one == [hashlib.sha256(b"one\n").hexdigest(), 4, False]
    assert dist_dir and dist_size == len(objects["/k/dist"])
    assert dist_sha == hashlib.sha256(objects["/k/dist"]).hexdigest()
    assert len((tmp_path / "msg").read_bytes()) <= 4096

    into = tmp_path / "next"
    config = {
        "workdir": str(into),
        "inputs": [
            {
                "name": "dist",
                "path": "d",
                "url": f"{url}/k/dist",
                "sha256": dist_sha,
                "directory": True,
            },
            {"name": "one", "path": "x/one", "url": f"{url}/k/one", "sha256": one[0]},
        ],
    }
    done, _, _ = collector("fetch", config, tmp_path / "msg2")
    assert done.returncode == 0, done.stderr
    assert (into / "d" / "sub" / "f").read_text() == "inside\n"
    assert (into / "x" / "one").read_text() == "one\n"


def test_a_fetched_artifact_whose_checksum_differs_is_not_placed(tmp_path, store):
    url, objects = store
    objects["/k/f"] = b"forged"
    config = {
        "workdir": str(tmp_path / "w"),
        "inputs": [{"name": "f", "path": "f", "url": f"{url}/k/f", "sha256": "0" * 64}],
    }
    done, message, _ = collector("fetch", config, tmp_path / "msg")
    assert done.returncode == 1
    assert "sha256" in message["error"] and "not placed" in message["error"]
    assert not (tmp_path / "w" / "f").exists()


def test_a_missing_object_says_what_the_store_answered(tmp_path, store):
    url, _ = store
    config = {
        "workdir": str(tmp_path / "w"),
        "inputs": [{"name": "f", "path": "f", "url": f"{url}/k/gone", "sha256": "0" * 64}],
    }
    done, message, _ = collector("fetch", config, tmp_path / "msg")
    assert done.returncode == 1 and "input artifact 'f'" in message["error"]
    assert "404" in message["error"] and "NoSuchKey" in message["error"]


def test_a_store_that_is_gone_fails_the_collector_naming_the_artifact(tmp_path):
    with socket.socket() as s:  # a port nobody listens on: the store stopped
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    (tmp_path / "f").write_text("x")
    config = {
        "workdir": str(tmp_path),
        "outputs": [
            {"name": "f", "path": "f", "url": f"http://127.0.0.1:{port}/k", "maxBytes": 10}
        ],
    }
    done, message, _ = collector("collect", config, tmp_path / "msg")
    assert done.returncode == 1
    assert "artifact 'f'" in message["error"] and "cannot be reached" in message["error"]


def test_a_store_that_hangs_fails_within_the_timeout(tmp_path):
    """Accepts the connection, never answers: the collector gives up at its timeout."""
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        (tmp_path / "f").write_text("x")
        config = {
            "workdir": str(tmp_path),
            "timeout": 1,
            "outputs": [
                {"name": "f", "path": "f", "url": f"http://127.0.0.1:{port}/k", "maxBytes": 10}
            ],
        }
        done, message, took = collector("collect", config, tmp_path / "msg", timeout=20)
    assert done.returncode == 1 and "artifact 'f'" in message["error"]
    assert took < 10


def test_an_artifact_past_its_bound_is_not_stored(tmp_path, store):
    url, objects = store
    (tmp_path / "f").write_bytes(b"x" * 100)
    config = {
        "workdir": str(tmp_path),
        "outputs": [{"name": "f", "path": "f", "url": f"{url}/k/f", "maxBytes": 50}],
    }
    done, message, _ = collector("collect", config, tmp_path / "msg")
    assert done.returncode == 1 and "maxBytes (50 bytes)" in message["error"]
    assert objects == {}


def test_results_past_the_bound_name_the_one_that_crossed_it(tmp_path):
    (tmp_path / "a").write_text("small")
    (tmp_path / "b").write_text("x" * 5000)
    config = {
        "workdir": str(tmp_path),
        "results": {"dir": str(tmp_path), "names": ["a", "b"], "bound": 3072},
    }
    done, message, _ = collector("collect", config, tmp_path / "msg")
    assert done.returncode == 0
    assert message == {"results": {"a": "small"}, "over": "b", "artifacts": []}


@pytest.fixture
def no_data_filter(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Python before PEP 706 (the operator image's Debian 3.11.2 has no `filter`)."""
    monkeypatch.delattr(tarfile, "data_filter", raising=False)


def test_a_directory_is_unpacked_without_the_data_filter(tmp_path: Path, no_data_filter: None):
    source = tmp_path / "d"
    (source / "sub").mkdir(parents=True)
    (source / "sub" / "y").write_text("deep\n")
    (source / "link").symlink_to("sub/y")
    raw = io.BytesIO()
    out = mover.Bounded(raw, "artifact 'd'", 1 << 20)
    mover.pack(source, out, True)
    raw.seek(0)
    mover.place(raw, tmp_path / "got", True)
    assert (tmp_path / "got" / "sub" / "y").read_text() == "deep\n"
    assert os.readlink(tmp_path / "got" / "link") == "sub/y"
    # a member out of the directory, or a link out of it: refused, nothing placed out
    for name, kind, link in (("../evil", tarfile.REGTYPE, ""), ("l", tarfile.SYMTYPE, "/etc")):
        bad = io.BytesIO()
        with tarfile.open(fileobj=bad, mode="w") as tar:
            info = tarfile.TarInfo(name)
            info.type, info.linkname = kind, link
            tar.addfile(info, io.BytesIO(b""))
        bad.seek(0)
        with pytest.raises(mover.MoveError, match="not placed"):
            mover.place(bad, tmp_path / "other", True)
    assert not (tmp_path / "evil").exists()
