"""The credentials the operator and the CLI present (kube/credentials.py), read without the
Kubernetes client library except for exec plugins and auth providers; and the operator process
does not import that library at all (its memory). Temporary files only; nothing reaches a
server."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from planops.kube import credentials
from planops.kube.credentials import Credentials, CredentialsError

DATA = Path(__file__).parent / "data"  # a throwaway self-signed client certificate and key


def b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def kubeconfig(tmp_path: Path, user: dict[str, Any], **cluster: Any) -> str:
    path = tmp_path / "kube" / "config"
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {
        "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443", **cluster}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": "team"}}],
        "current-context": "x",
    }
    path.write_text(json.dumps(doc))
    return str(path)


def load(explicit: str | None = None, context: str | None = None) -> Credentials:
    return asyncio.run(credentials.load(explicit, context))


@pytest.fixture
def pod(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A pod's ServiceAccount mount and service variables."""
    account = tmp_path / "serviceaccount"
    account.mkdir()
    (account / "token").write_text("first\n")
    (account / "namespace").write_text("planops-system")
    (account / "ca.crt").write_text("unused")
    monkeypatch.setattr(credentials, "SERVICE_ACCOUNT", account)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    return account


def test_the_pods_own_service_account_and_its_rotated_token(pod, monkeypatch):
    got = load()
    assert (got.server, got.namespace, got.ca_file) == (
        "https://10.96.0.1:443",
        "planops-system",
        str(pod / "ca.crt"),
    )
    assert asyncio.run(got.bearer()) == "first"
    (pod / "token").write_text("rotated")  # the kubelet rewrites the projected token
    assert asyncio.run(got.bearer()) == "first"  # read again only after a minute
    monkeypatch.setattr(credentials, "TOKEN_FILE_REFRESH", 0.0)
    assert asyncio.run(got.bearer()) == "rotated"


def test_an_ipv6_service_host_is_bracketed(pod, monkeypatch):
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "fd00::1")
    assert load().server == "https://[fd00::1]:443"


def test_outside_a_pod_the_kubeconfig_is_read(tmp_path, monkeypatch, pod):
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    monkeypatch.setenv("KUBECONFIG", kubeconfig(tmp_path, {"token": "t"}))
    got = load()
    assert (got.server, got.namespace, got.token) == ("https://127.0.0.1:6443", "team", "t")


def test_a_named_kubeconfig_wins_over_the_pods_account(tmp_path, pod):
    got = load(kubeconfig(tmp_path, {"token": "t"}))
    assert got.server == "https://127.0.0.1:6443"


def test_relative_paths_are_relative_to_their_kubeconfig(tmp_path):
    user = {"client-certificate": "cert.pem", "client-key": "k/key.pem", "tokenFile": "tok"}
    got = load(kubeconfig(tmp_path, user, **{"certificate-authority": "ca.pem"}))
    folder = tmp_path / "kube"
    assert (got.cert_file, got.key_file, got.token_file, got.ca_file) == (
        str(folder / "cert.pem"),
        str(folder / "k" / "key.pem"),
        str(folder / "tok"),
        str(folder / "ca.pem"),
    )


def test_a_token_file_is_read_and_its_absence_is_named(tmp_path):
    (tmp_path / "kube").mkdir()
    (tmp_path / "kube" / "tok").write_text("from-file\n")
    got = load(kubeconfig(tmp_path, {"tokenFile": "tok"}))
    assert asyncio.run(got.bearer()) == "from-file"
    (tmp_path / "kube" / "tok").unlink()
    got = load(kubeconfig(tmp_path, {"tokenFile": "tok"}))
    with pytest.raises(CredentialsError, match=r"token file .*tok: No such file"):
        asyncio.run(got.bearer())


@pytest.mark.parametrize("form", ["files", "data"])
def test_a_client_certificate_is_loaded_from_files_or_data(tmp_path, form, monkeypatch):
    if form == "files":
        user = {"client-certificate": str(DATA / "client.crt"),
                "client-key": str(DATA / "client.key")}  # fmt: skip
    else:
        user = {"client-certificate-data": b64(DATA / "client.crt"),
                "client-key-data": b64(DATA / "client.key")}  # fmt: skip
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path))
    got = load(kubeconfig(tmp_path, user, **{"insecure-skip-tls-verify": True}))
    tls = got.tls()
    assert tls.verify_mode == ssl.CERT_NONE
    assert not list(tmp_path.glob("planops-tls-*"))  # the key data written for ssl is gone


def test_certificate_data_that_is_not_base64_is_refused(tmp_path):
    got = load(kubeconfig(tmp_path, {"token": "t"}, **{"certificate-authority-data": "@@@"}))
    with pytest.raises(CredentialsError, match="certificate-authority-data is not base64"):
        got.tls()


def test_no_current_context_says_to_name_one(tmp_path):
    path = Path(kubeconfig(tmp_path, {"token": "t"}))
    doc = json.loads(path.read_text())
    del doc["current-context"]
    path.write_text(json.dumps(doc))
    with pytest.raises(CredentialsError, match="no current-context: name one with --context"):
        load(str(path))


def test_an_exec_plugin_user_is_served_by_the_library(tmp_path):
    plugin = tmp_path / "kube" / "bin" / "cred"
    plugin.parent.mkdir(parents=True)
    reply = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "kind": "ExecCredential",
        "status": {"token": "from-plugin"},
    }
    plugin.write_text(f"#!{sys.executable}\nprint({json.dumps(json.dumps(reply))})\n")
    plugin.chmod(0o755)
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1",
            "command": "./bin/cred",  # relative to the kubeconfig, as kubectl reads it
            "interactiveMode": "Never",
        }
    }
    got = load(kubeconfig(tmp_path, user))
    assert got.library is not None
    assert asyncio.run(got.bearer()) == "from-plugin"


def test_kopfs_login_uses_the_same_credentials(tmp_path, monkeypatch):
    from planops.handlers.config import CONFIG  # noqa: PLC0415
    from planops.handlers.kopf_adapter import login  # noqa: PLC0415

    monkeypatch.setattr(CONFIG, "kubeconfig", kubeconfig(tmp_path, {"token": "t"}))
    info = asyncio.run(login())
    assert (info.server, info.token, info.default_namespace) == (
        "https://127.0.0.1:6443",
        "t",
        "team",
    )


def test_the_operator_process_does_not_import_the_kubernetes_library():
    """Everything `python -m planops.main` sets up before kopf.run (main's `run` stands in for
    it); the library is ~9 MiB of the operator's memory."""
    probe = textwrap.dedent(
        """
        import sys
        from planops.main import main
        def run(**_):
            loaded = sorted(m for m in sys.modules if m.split(".")[0] == "kubernetes")
            assert not loaded, loaded
            # nor croniter until a ScheduledPlan needs it (engine.schedule: ~0.5 MiB)
            assert "croniter" not in sys.modules
            assert "kopf" in sys.modules and "planops.handlers" in sys.modules
            print("checked")
        main(["--namespace", "x", "--metrics-port", "0"], run=run)
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    got = subprocess.run(
        [sys.executable, "-c", probe], env=env, timeout=60, capture_output=True, text=True
    )
    assert got.returncode == 0 and got.stdout.strip() == "checked", got.stderr[-3000:]
