"""Which kubeconfig files a client reads and what they say, as kubectl reads them: `--kubeconfig`
names one file; else every file `$KUBECONFIG` lists (colon-separated; one that does not exist is
skipped), merged: the first file to name a cluster, user or context, or to set current-context,
wins; else ~/.kube/config.

Each file's relative paths (certificates, keys, token files, an exec plugin's ./command) are
made absolute against that file's folder, as kubectl does. Each file is checked as it is read, so
a file that is not a kubeconfig says which file it is.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

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


#: The fields that name a file, by the list their entries are in: a relative path is relative to
#: the kubeconfig file that holds it (as kubectl resolves them).
PATH_FIELDS = {
    "clusters": ("certificate-authority",),
    "users": ("client-certificate", "client-key", "tokenFile"),
}


def _resolved(kind: str, entry: dict[str, Any], base: Path) -> dict[str, Any]:
    key = kind[:-1]  # clusters -> cluster, users -> user, contexts -> context
    body = entry.get(key)
    if not isinstance(body, dict):
        return entry
    body = dict(body)
    for field in PATH_FIELDS.get(kind, ()):
        value = body.get(field)
        if isinstance(value, str) and value and not os.path.isabs(value):
            body[field] = str(base / os.path.expanduser(value))
    command = (body.get("exec") or {}).get("command") if kind == "users" else None
    if isinstance(command, str) and os.sep in command and not os.path.isabs(command):
        body["exec"] = {**body["exec"], "command": str(base / command)}  # kubectl: ./bin/x
    return {**entry, key: body}


def merged(explicit: str | None) -> dict[str, Any]:
    """The merged kubeconfig as one document (every relative path made absolute against its own
    file's folder); KubeconfigError when a file cannot be used or there is none.

    Hand-written, not the Kubernetes client's merger: the operator does not import that package
    (its memory, see kube/credentials.py), and the rule is short: the first file to name a
    cluster, user or context defines it, and the first file to set current-context sets it."""
    paths = files(explicit)
    docs = [(path, _read(path)) for path in paths]
    if not any(doc for _, doc in docs):
        where = explicit or os.environ.get("KUBECONFIG") or "~/.kube/config"
        raise KubeconfigError(f"{where}: no kubeconfig there (no clusters, contexts or users)")
    out: dict[str, Any] = {key: [] for key in LISTS}
    named: dict[str, set[str]] = {key: set() for key in LISTS}
    out["sources"] = [path for path, doc in docs if doc]
    for path, doc in docs:
        base = Path(path).resolve().parent
        if doc.get("current-context") and "current-context" not in out:
            out["current-context"] = doc["current-context"]
        for kind in LISTS:
            for entry in doc.get(kind) or []:
                if entry["name"] not in named[kind]:
                    named[kind].add(entry["name"])
                    out[kind].append(_resolved(kind, entry, base))
    return out


def entry(config: dict[str, Any], kind: str, name: str) -> dict[str, Any]:
    """The body of the `kind` entry called `name` (a context's cluster, user, ...);
    KubeconfigError naming the files when there is none."""
    for item in config.get(kind) or []:
        if item["name"] == name:
            body = item.get(kind[:-1])
            return body if isinstance(body, dict) else {}
    where = ", ".join(config.get("sources") or []) or "the kubeconfig"
    have = ", ".join(sorted(i["name"] for i in config.get(kind) or [])) or "none"
    raise KubeconfigError(f"no {kind[:-1]} named {name} in {where} ({kind}: {have})")


def namespace(explicit: str | None, context: str | None) -> str:
    """The namespace of the context in use (--context, else current-context), else `default`
    (as kubectl, also when the kubeconfig cannot be read: connecting says why)."""
    try:
        config = merged(explicit)
        found = entry(config, "contexts", context or config.get("current-context") or "")
    except KubeconfigError:
        return "default"
    return str(found.get("namespace") or "default")
