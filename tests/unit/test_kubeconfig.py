"""Kubeconfig files are read as kubectl reads them (kube/kubeconfig.py): every file $KUBECONFIG
lists, merged with the first file's word winning;
one that does not exist skipped; a file that is no kubeconfig named in the error. Temporary
files only; connecting reads the configuration, it does not reach any server."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
from pathlib import Path
from typing import Any

import certifi
import pytest

from planops.kube import kubeconfig
from planops.kube.client import ConfigError, Kube


def config(name: str, server: str, *, current: str | None = None, **cluster: Any) -> dict:
    doc: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": name, "cluster": {"server": server, **cluster}}],
        "users": [{"name": name, "user": {"token": f"token-{name}"}}],
        "contexts": [
            {"name": name, "context": {"cluster": name, "user": name, "namespace": f"ns-{name}"}}
        ],
    }
    if current:
        doc["current-context"] = current
    return doc


def write(path: Path, doc: Any) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return str(path)


@pytest.fixture
def two(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """$KUBECONFIG = first:second; both set current-context; the second's CA is a relative path."""
    first = write(tmp_path / "a" / "config", config("a", "https://127.0.0.1:1001", current="a"))
    (tmp_path / "b").mkdir()
    shutil.copy(certifi.where(), tmp_path / "b" / "ca.pem")  # any CA bundle: never used
    second = write(
        tmp_path / "b" / "config",
        config("b", "https://127.0.0.1:1002", current="b", **{"certificate-authority": "ca.pem"}),
    )
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([first, second]))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    return first, second


def connected(kubeconfig_file: str | None = None, context: str | None = None) -> Any:
    """The credentials Kube.connect set up."""

    async def go() -> Any:
        kube = await Kube.connect(kubeconfig_file, context)
        await kube.close()
        return kube.api.credentials

    return asyncio.run(go())


def test_the_first_files_current_context_wins(two):
    got = connected()
    assert got.server == "https://127.0.0.1:1001"
    assert got.token == "token-a"
    assert kubeconfig.namespace(None, None) == "ns-a"


def test_a_context_of_the_second_file_is_found_with_its_relative_paths(two, tmp_path):
    got = connected(context="b")
    assert got.server == "https://127.0.0.1:1002"
    assert got.token == "token-b"
    assert got.ca_file == str(tmp_path / "b" / "ca.pem")  # relative to its own file
    assert kubeconfig.namespace(None, "b") == "ns-b"


def test_the_first_file_to_name_a_context_defines_it(tmp_path, monkeypatch, two):
    first, second = two
    again = write(tmp_path / "c" / "config", config("b", "https://127.0.0.1:1003"))
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([again, first, second]))
    assert connected(context="b").server == "https://127.0.0.1:1003"
    assert connected().server == "https://127.0.0.1:1001"  # current-context: first to set it


def test_a_missing_file_in_the_list_is_skipped(tmp_path, monkeypatch, two):
    _, second = two
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([str(tmp_path / "nope"), second]))
    assert connected().server == "https://127.0.0.1:1002"


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("clusters: [\n", "not YAML"),
        ("- just\n- a list\n", "not a kubeconfig"),
        ("contexts: [1, 2]\n", "contexts must be a list of entries, each with a name"),
    ],
)
def test_a_file_that_is_no_kubeconfig_is_named(tmp_path, monkeypatch, two, text, says):
    first, _ = two
    bad = write(tmp_path / "bad" / "config", text)
    monkeypatch.setenv("KUBECONFIG", os.pathsep.join([first, bad]))
    with pytest.raises(ConfigError) as e:
        connected()
    assert str(e.value).startswith(f"{bad}: {says}"), str(e.value)
    assert kubeconfig.namespace(None, None) == "default"  # connecting is what reports it


def test_an_explicit_file_is_the_only_one_read(tmp_path, two):
    only = write(tmp_path / "only", config("z", "https://127.0.0.1:1009", current="z"))
    assert connected(only).server == "https://127.0.0.1:1009"
    with pytest.raises(ConfigError, match=r"no context named a in .*only \(contexts: z\)"):
        connected(only, "a")  # $KUBECONFIG's contexts are not there


def test_no_file_at_all_says_where_it_looked(tmp_path, monkeypatch):
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "nope"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(ConfigError, match="no kubeconfig there"):
        connected()
