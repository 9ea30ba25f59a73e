"""The step pod's collector (planops.collector) against a real SeaweedFS through presigned URLs,
as the operator will hand them (planops.store.Store.presign_*): nothing but the URLs reaches it.
Files and directories go out whole and come back checked; a store stopped mid-run fails it with
a message naming the artifact, within its timeout, and nothing half-written is read."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import time
import uuid
from datetime import timedelta
from pathlib import Path

import pytest

from planops.store import Repository, RunKeys, Store
from tests.cluster.s3 import S3, server
from tests.cluster.s3 import Store as Weed

pytestmark = [pytest.mark.cluster, pytest.mark.artifacts]

HOUR = timedelta(hours=1)


def _store(s3: S3) -> Store:
    return Store(
        Repository(
            name="test-repo",
            endpoint=s3.endpoint,
            bucket=s3.bucket,
            access_key=s3.access_key,
            secret_key=s3.secret_key,
            read_timeout=10.0,
        )
    )


def collector(mode: str, config: dict, message: Path) -> tuple[int, dict, float, float]:
    """(exit code, its termination message, wall seconds, CPU seconds of the process)."""
    env = {**os.environ, "PLANOPS_COLLECT": json.dumps(config), "PLANOPS_MESSAGE": str(message)}
    before = os.times()
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "planops.collector", mode], env=env, capture_output=True, timeout=60
    )
    after = os.times()
    cpu = (after.children_user - before.children_user) + (
        after.children_system - before.children_system
    )
    read = json.loads(message.read_text()) if message.exists() else {}
    return done.returncode, read, time.monotonic() - started, cpu


def test_a_file_and_a_directory_through_presigned_urls(s3_store: S3, tmp_path: Path) -> None:
    store = _store(s3_store)
    keys = RunKeys("t", "team-a", uuid.uuid4().hex, "r1")
    work = tmp_path / "work"
    (work / "site" / "css").mkdir(parents=True)
    (work / "site" / "index.html").write_text("<h1>hi</h1>\n")
    (work / "site" / "css" / "a.css").write_text("h1{}\n")
    payload = os.urandom(1 << 20)
    (work / "blob.bin").write_bytes(payload)
    outputs = [
        {"name": "site", "path": "site", "maxBytes": 1 << 24},
        {"name": "blob", "path": "blob.bin", "maxBytes": 1 << 24},
    ]
    for o in outputs:
        o["url"] = store.presign_put(keys.artifact("build", o["name"]), HOUR)
    code, message, _, cpu = collector(
        "collect", {"workdir": str(work), "outputs": outputs}, tmp_path / "m1"
    )
    assert code == 0, message
    (site_sha, _, site_dir), (blob_sha, blob_size, _) = message["artifacts"]
    assert blob_sha == hashlib.sha256(payload).hexdigest() and blob_size == len(payload)
    assert site_dir
    # the store holds exactly what the collector measured
    got = store.get_bytes(keys.artifact("build", "blob"))
    assert hashlib.sha256(got).hexdigest() == blob_sha
    print(f"collector CPU for one 1 MiB file and one directory: {cpu * 1000:.0f} ms")

    into = tmp_path / "next"
    inputs = [
        {"name": "site", "path": "in/site", "sha256": site_sha, "directory": True},
        {"name": "blob", "path": "in/blob", "sha256": blob_sha},
    ]
    for i in inputs:
        i["url"] = store.presign_get(keys.artifact("build", i["name"]), HOUR)
    code, message, _, _ = collector(
        "fetch", {"workdir": str(into), "inputs": inputs}, tmp_path / "m2"
    )
    assert code == 0, message
    assert (into / "in" / "site" / "css" / "a.css").read_text() == "h1{}\n"
    assert (into / "in" / "blob").read_bytes() == payload


def test_a_url_for_another_key_reads_nothing_of_this_one(s3_store: S3, tmp_path: Path) -> None:
    """A presigned URL names one key and one method: a GET URL cannot write."""
    store = _store(s3_store)
    keys = RunKeys("t", "team-a", uuid.uuid4().hex, "r1")
    (tmp_path / "f").write_text("x")
    url = store.presign_get(keys.artifact("s", "f"), HOUR)
    config = {
        "workdir": str(tmp_path),
        "outputs": [{"name": "f", "path": "f", "url": url, "maxBytes": 10}],
    }
    code, message, _, _ = collector("collect", config, tmp_path / "m")
    assert code == 1 and "artifact 'f'" in message["error"] and "403" in message["error"]
    assert store.head(keys.artifact("s", "f")) is None


def test_the_store_stopped_mid_run_fails_with_a_clear_error(tmp_path: Path) -> None:
    """A store of its own, stopped between the step's start and its collector: the collector
    fails within its timeout naming the artifact, and the key holds nothing."""
    with server() as s3:
        store = _store(s3)
        keys = RunKeys("t", "team-a", uuid.uuid4().hex, "r1")
        key = keys.artifact("s", "big")
        url = store.presign_put(key, HOUR)
        (tmp_path / "big").write_bytes(os.urandom(1 << 20))
        config = {
            "workdir": str(tmp_path),
            "timeout": 5,
            "outputs": [{"name": "big", "path": "big", "url": url, "maxBytes": 1 << 24}],
        }
        Weed(s3.root).stop()
        code, message, took, _ = collector("collect", config, tmp_path / "m")
    assert code == 1 and "artifact 'big'" in message["error"]
    assert "cannot be reached" in message["error"]
    assert took < 30
