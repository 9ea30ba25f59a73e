"""The artifact repository's client (planops.store.client) against a real SeaweedFS
(tests/cluster/s3.py): what the operator and the steps' presigned URLs rely on."""

from __future__ import annotations

import hashlib
import io
import os
import socket
import time
import urllib.error
import urllib.request
import uuid
from datetime import timedelta
from pathlib import Path

import pytest

from planops.store import Repository, RunKeys, Store, StoreError
from planops.store.urls import expires_at
from tests.cluster.s3 import S3

pytestmark = [pytest.mark.cluster, pytest.mark.artifacts]


def repo(s3: S3, **change: object) -> Repository:
    fields: dict[str, object] = {
        "name": "test-repo",
        "endpoint": s3.endpoint,
        "bucket": s3.bucket,
        "access_key": s3.access_key,
        "secret_key": s3.secret_key,
        "read_timeout": 10.0,
        **change,
    }
    return Repository(**fields)  # type: ignore[arg-type]


@pytest.fixture
def store(s3_store: S3) -> Store:
    return Store(repo(s3_store))


@pytest.fixture
def keys() -> RunKeys:
    return RunKeys("t", "team-a", uuid.uuid4().hex, "r1")


def test_put_get_head_a_file(store: Store, keys: RunKeys, tmp_path: Path) -> None:
    data = os.urandom(3 << 20) + b"end"
    src = tmp_path / "src"
    src.write_bytes(data)
    key = keys.artifact("build", "out.bin")
    stored = store.put_file(key, src)
    assert stored.size == len(data)
    assert stored.sha256 == hashlib.sha256(data).hexdigest()
    head = store.head(key)
    assert head is not None and head.size == len(data) and head.sha256 == stored.sha256
    dst = tmp_path / "dst"
    assert store.get_file(key, dst) == len(data)
    assert dst.read_bytes() == data
    assert store.get_bytes(key, limit=10) == data[:10]
    assert store.head(keys.artifact("build", "none")) is None


def test_a_stream_of_unknown_length(store: Store, keys: RunKeys) -> None:
    data = b"line\n" * 100_000
    stored = store.put_stream(keys.log("s", 1), io.BufferedReader(io.BytesIO(data)))  # type: ignore[arg-type]
    assert (stored.size, stored.sha256) == (len(data), hashlib.sha256(data).hexdigest())
    assert store.get_bytes(keys.log("s", 1)) == data
    head = store.head(keys.log("s", 1))
    assert head is not None and head.sha256 == stored.sha256


def test_list_and_delete_a_prefix(store: Store, keys: RunKeys) -> None:
    other = RunKeys("t", "team-a", keys.plan_uid, "r2")
    for k in (keys.artifact("a", "x"), keys.log("a", 1), other.artifact("a", "x")):
        store.put_bytes(k, b"1")
    listed = store.list(keys.run_prefix)
    assert [o.key for o in listed] == sorted([keys.artifact("a", "x"), keys.log("a", 1)])
    assert all(o.size == 1 for o in listed)
    with pytest.raises(ValueError, match="ending in '/'"):
        store.delete_prefix(keys.run_prefix.rstrip("/"))
    assert store.delete_prefix(keys.run_prefix) == 2
    assert store.list(keys.run_prefix) == []
    assert [o.key for o in store.list(keys.plan_prefix)] == [other.artifact("a", "x")]
    assert store.delete_prefix(keys.run_prefix) == 0  # idempotent


def test_presigned_get_and_put(store: Store, keys: RunKeys) -> None:
    key = keys.artifact("s", "up")
    put = urllib.request.Request(store.presign_put(key, timedelta(minutes=5)), b"hi", method="PUT")
    urllib.request.urlopen(put, timeout=10).close()
    with urllib.request.urlopen(store.presign_get(key, timedelta(minutes=5)), timeout=10) as r:
        assert r.read() == b"hi"
    # the URL says when it expires (store.urls): what re-signing reads
    at = expires_at(store.presign_get(key, timedelta(minutes=5)))
    assert at is not None and abs(at - (time.time() + 300)) < 30
    # the URL names one key: another key with the same signature is refused
    other = store.presign_get(key, timedelta(minutes=5)).replace("/up?", "/other?")
    with pytest.raises(urllib.error.HTTPError) as got:
        urllib.request.urlopen(other, timeout=10)
    assert got.value.code == 403


def test_a_presigned_url_expires(store: Store, keys: RunKeys) -> None:
    key = keys.artifact("s", "x")
    store.put_bytes(key, b"x")
    url = store.presign_get(key, timedelta(seconds=1))
    time.sleep(2.5)
    with pytest.raises(urllib.error.HTTPError) as got:
        urllib.request.urlopen(url, timeout=10)
    assert got.value.code == 403
    with pytest.raises(ValueError, match="7 days"):
        store.presign_get(key, timedelta(days=8))


def test_wrong_credentials_name_the_repository(s3_store: S3, keys: RunKeys) -> None:
    bad = Store(repo(s3_store, secret_key="wrong" * 8))
    with pytest.raises(StoreError) as got:
        bad.put_bytes(keys.artifact("s", "x"), b"x")
    assert got.value.credentials
    text = str(got.value)
    assert "artifact repository test-repo" in text and s3_store.endpoint in text
    assert "SignatureDoesNotMatch" in text and "wrong" not in text
    with pytest.raises(StoreError) as got:
        Store(repo(s3_store, access_key="nobody")).check()
    assert got.value.credentials


def test_a_missing_download_leaves_nothing(store: Store, keys: RunKeys, tmp_path: Path) -> None:
    dst = tmp_path / "dst"
    with pytest.raises(StoreError, match="NoSuchKey") as got:
        store.get_file(keys.artifact("s", "missing"), dst)
    assert got.value.missing
    assert list(tmp_path.iterdir()) == []


def test_a_store_that_is_down_fails_fast(keys: RunKeys) -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = Store(Repository("down", f"http://127.0.0.1:{port}", "b", "a", "s", connect_timeout=1.0))
    started = time.monotonic()
    with pytest.raises(StoreError, match=r"artifact repository down .*put"):
        down.put_bytes(keys.artifact("s", "x"), b"x")
    assert time.monotonic() - started < 15
