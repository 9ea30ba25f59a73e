"""Helpers that reach the test cluster's etcd directly (ports: <cluster dir>/ports.env)."""

from __future__ import annotations

import base64
import json
import urllib.request
from pathlib import Path

import pytest


def _etcd_url(kubeconfig: str) -> str:
    ports = Path(kubeconfig).parent / "ports.env"
    if not ports.exists():
        pytest.skip("etcd is reachable only on a cluster started by tests/cluster/up")
    values = dict(line.split("=", 1) for line in ports.read_text().split())
    return f"http://127.0.0.1:{values['ETCD_PORT']}"


def _post(url: str, body: dict[str, object]) -> dict[str, object]:
    req = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(req, timeout=10) as resp:
        return json.load(resp)  # type: ignore[no-any-return]


def compact(kubeconfig: str) -> int:
    """Compact etcd's history up to its current revision (what kube-apiserver does every 5 min)."""
    base = _etcd_url(kubeconfig)
    header = _post(f"{base}/v3/kv/range", {"key": base64.b64encode(b"/").decode()})["header"]
    revision = int(header["revision"])  # type: ignore[index]
    _post(f"{base}/v3/kv/compaction", {"revision": revision, "physical": True})
    return revision
