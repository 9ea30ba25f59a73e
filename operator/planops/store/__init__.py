"""The artifact repository: an S3-compatible store where runs keep their artifacts and their
steps' full logs (docs/artifacts.md). `keys` says where each object lives (pure); `client`
(`Store`, `Repository`, `StoreError`) is the one surface that speaks S3; `background` runs
uploads off the reconcile loop. Kube-free: the operator and the CLI hand it a Repository.

The client is imported on first use (`from planops.store import Store` loads it): code that
only builds keys pays nothing for it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from planops.store.keys import RunKeys, plan_prefix

if TYPE_CHECKING:
    from planops.store.client import Head, Listed, Repository, Store, Stored, StoreError

__all__ = [
    "Head",
    "Listed",
    "Repository",
    "RunKeys",
    "Store",
    "StoreError",
    "Stored",
    "plan_prefix",
]

_LAZY = {"Head", "Listed", "Repository", "Store", "StoreError", "Stored"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from planops.store import client  # noqa: PLC0415 - lazy: minio only when used

        return getattr(client, name)
    raise AttributeError(name)
