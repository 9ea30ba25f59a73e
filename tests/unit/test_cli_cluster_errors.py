"""kubectl-plan's cluster verbs say what happened (cli/cluster.py): a kubeconfig that cannot be
used names itself and why, an API server that cannot be reached says so with the error's kind,
and a bug is not disguised as either (its traceback shows). No cluster is needed: the server is
a closed port on the loopback address."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from planops.cli import cluster
from planops.cli.exit_codes import EXIT_CLUSTER
from planops.cli.parser import build as build_parser


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    args = build_parser().parse_args(list(argv))
    code = cluster.run(args)
    return code, capsys.readouterr().err


#: a complete kubeconfig whose server is a closed port on the loopback address
CLOSED_PORT: dict[str, Any] = {
    "current-context": "x",
    "contexts": [{"name": "x", "context": {"cluster": "x", "user": "x"}}],
    "clusters": [{"name": "x", "cluster": {"server": "https://127.0.0.1:1"}}],
    "users": [{"name": "x", "user": {"token": "t"}}],
}


def kubeconfig(tmp_path: Path, **config: Any) -> str:
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "Config", **config}))
    return str(path)


def test_a_missing_kubeconfig_says_so(capsys: pytest.CaptureFixture[str], tmp_path: Path):
    code, err = run(capsys, "get", "--kubeconfig", str(tmp_path / "nope"))
    assert code == EXIT_CLUSTER
    assert err == f"error: --kubeconfig {tmp_path / 'nope'}: the file does not exist\n"


def test_a_kubeconfig_without_a_context_names_itself(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
):
    path = kubeconfig(tmp_path)
    code, err = run(capsys, "get", "--kubeconfig", path)
    assert code == EXIT_CLUSTER
    assert err.startswith(f"error: --kubeconfig {path}: ") and "current-context" in err
    assert "cannot reach" not in err


def test_an_unreachable_server_is_named_with_the_errors_kind(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
):
    path = kubeconfig(
        tmp_path,
        **CLOSED_PORT,
    )
    code, err = run(capsys, "get", "--kubeconfig", path)
    assert code == EXIT_CLUSTER
    assert err.startswith("error: cannot reach the cluster: ClientConnectorError")


def test_a_bug_is_not_reported_as_an_unreachable_cluster(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    async def broken(*_: Any) -> int:
        raise KeyError("a bug")

    monkeypatch.setitem(cluster.VERBS, "get", broken)
    path = kubeconfig(
        tmp_path,
        **CLOSED_PORT,
    )
    with pytest.raises(KeyError):
        run(capsys, "get", "--kubeconfig", path)
