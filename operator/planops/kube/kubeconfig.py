"""Which kubeconfig files a client reads and what they say, as kubectl reads them: `--kubeconfig`
names one file; else every file `$KUBECONFIG` lists (colon-separated; one that does not exist is
skipped), merged: the first file to name a cluster, user or context, or to set current-context,
wins; else ~/.kube/config.

The merge is the Kubernetes client's own (`KubeConfigMerger`, which also resolves each file's
relative certificate paths against that file's folder). Two things are added, each why the
library alone would mislead: each file is read and checked here first, so a file that is not a
kubeconfig says which file it is (the library raises a bare YAML or TypeError), and
current-context follows kubectl (the library keeps the last file's, kubectl the first's).
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import yaml
from kubernetes.aio.config import kube_config

LISTS = ("clusters", "contexts", "users")


class KubeconfigError(ValueError):
    """A kubeconfig file that cannot be used; the message names the file."""


def listed() -> list[str]:
    """The files $KUBECONFIG lists, in order (the empty entries dropped)."""
    return [p for p in os.environ.get("KUBECONFIG", "").split(os.pathsep) if p]


def files(explicit: str | None) -> list[str]:
    """The files to read, in kubectl's order of precedence (only those that exist, but an
    explicit one always: that it is missing is an error, not a fallback)."""
    if explicit:
        return [explicit]
    if os.environ.get("KUBECONFIG"):
        return [p for p in map(os.path.expanduser, listed()) if Path(p).is_file()]
    default = Path.home() / ".kube" / "config"
    return [str(default)] if default.is_file() else []


def _read(path: str) -> dict[str, Any]:
    try:
        text = Path(path).read_text()
    except (OSError, UnicodeDecodeError) as e:
        raise KubeconfigError(f"{path}: cannot read it: {type(e).__name__}: {e}") from None
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise KubeconfigError(f"{path}: not YAML: {e}") from None
    if doc is None:
        return {}  # an empty file adds nothing (kubectl agrees)
    if not isinstance(doc, dict):
        raise KubeconfigError(
            f"{path}: not a kubeconfig (a mapping of clusters, contexts, users and "
            f"current-context), but a YAML {type(doc).__name__}"
        )
    for key in LISTS:
        items = doc.get(key)
        if items is not None and not (
            isinstance(items, list)
            and all(isinstance(i, dict) and isinstance(i.get("name"), str) for i in items)
        ):
            raise KubeconfigError(f"{path}: {key} must be a list of entries, each with a name")
    return doc


class _Merger(kube_config.KubeConfigMerger):
    """The library's merger over a list of files (its own constructor splits one string on
    ':', so a path holding one could not be named)."""

    def __init__(self, paths: list[str]) -> None:
        self.paths: list[str] = []
        self.config_files: dict[str, Any] = {}
        self.config_merged: Any = None
        for path in paths:
            self.paths.append(path)
            self.load_config(path)  # type: ignore[no-untyped-call]
        self.config_saved = copy.deepcopy(self.config_files)


def merged(explicit: str | None) -> Any:
    """The merged kubeconfig (the client's ConfigNode, for `load_kube_config_from_dict`);
    KubeconfigError when a file cannot be used or there is none."""
    paths = files(explicit)
    docs = [(path, _read(path)) for path in paths]
    usable = [path for path, doc in docs if doc]
    if not usable:
        where = explicit or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise KubeconfigError(f"{where}: no kubeconfig there (no clusters, contexts or users)")
    merger = _Merger(usable)
    current = next((d["current-context"] for _, d in docs if d.get("current-context")), None)
    if current is not None:
        merger.config.value["current-context"] = current
    return merger.config


def namespace(explicit: str | None, context: str | None) -> str:
    """The namespace of the context in use (--context, else current-context), else `default`
    (as kubectl, also when the kubeconfig cannot be read: connecting says why)."""
    try:
        config = merged(explicit).value
    except KubeconfigError:
        return "default"
    current = context or config.get("current-context")
    for ctx in config["contexts"]:  # merged: the first file to name a context defines it
        if ctx.value["name"] == current:
            found = ctx.value.get("context")
            return str((found if isinstance(found, dict) else {}).get("namespace") or "default")
    return "default"
