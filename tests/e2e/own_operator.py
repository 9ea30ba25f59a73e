"""A namespace with an operator of its own (the way conftest's session operator is started, but
watching this namespace only), for the tests of `kubectl plan ui` and the CLI's views: their
Plans are run by an operator this test session started, whatever else watches `e2e-*`."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from pathlib import Path

from tests.conftest import Kube
from tests.e2e.conftest import capsule, start_operator


@contextlib.contextmanager
def namespace_with_operator(
    kube: Kube, kubeconfig: str, busybox: str, log_dir: Path, prefix: str
) -> Iterator[str]:
    """A fresh namespace `PREFIX-<hex>` holding the example Capsule `default`, and an operator
    watching it; both gone afterwards (the operator's log printed if it was asked for)."""
    name = f"{prefix}-{uuid.uuid4().hex[:10]}"
    kube.run("create", "namespace", name)
    kube.apply(capsule(busybox, spawn={"allow": ["worker"]}), "-n", name)
    kube.apply(
        capsule(busybox, name="worker", plan={"steps": [{"id": "work", "shell": "echo done"}]}),
        "-n",
        name,
    )
    op = start_operator(kubeconfig, [name], log_dir / f"operator-{name}.log")
    try:
        yield name
    finally:
        op.stop()
        kube.run("delete", "namespace", name, "--wait=false", check=False)
