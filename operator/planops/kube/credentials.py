"""What the operator and the CLI present to the API server, read as kubectl reads it, without
importing the Kubernetes client library for the forms an operator meets.

Why hand-written: the operator's memory. Importing the `kubernetes` package costs ~9 MiB of
resident memory (an idle operator: 70 MiB with it, 61 without) for code the operator never
runs, since requests are plain aiohttp (kube/client.py). The forms read here are short and
fixed: the pod's own ServiceAccount (token file re-read as the kubelet rotates it, the cluster
CA), and a kubeconfig's server, CA (file or data), TLS server name, proxy, client certificate
and key (files or data), token, token file, or basic auth. A kubeconfig user with an `exec`
plugin or an `auth-provider` is handed to the library (`kubernetes.aio.config`, imported only
then): it runs the plugin and refreshes what the plugin returns, which is not worth writing
twice.
"""

from __future__ import annotations

import base64
import binascii
import os
import ssl
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from planops.kube import kubeconfig as kubeconfig_

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
#: The kubelet rewrites a projected token well before it expires; re-read it this often (seconds),
#: as the Kubernetes clients do.
TOKEN_FILE_REFRESH = 60.0


class CredentialsError(ValueError):
    """The kubeconfig (or the pod's credentials) cannot be used; the message says which part."""


@dataclass
class Credentials:
    """One API server and how to authenticate to it. `*_data` fields are base64, as in a
    kubeconfig (and as kopf's ConnectionInfo takes them)."""

    server: str
    namespace: str = "default"
    ca_file: str | None = None
    ca_data: str | None = None
    insecure: bool = False
    tls_server_name: str | None = None
    proxy: str | None = None
    cert_file: str | None = None
    cert_data: str | None = None
    key_file: str | None = None
    key_data: str | None = None
    token: str | None = None
    token_file: str | None = None
    username: str | None = None
    password: str | None = None
    #: a `kubernetes.aio` Configuration, for users only the library can serve (exec plugins,
    #: auth providers): it supplies and refreshes the token
    library: Any = None
    _read_at: float = field(default=0.0, repr=False)

    def tls(self) -> ssl.SSLContext:
        cadata = _pem(self.ca_data, "certificate-authority-data") if self.ca_data else None
        tls = ssl.create_default_context(cafile=self.ca_file, cadata=cadata)
        if self.cert_file or self.cert_data:
            with tempfile.TemporaryDirectory(prefix="planops-tls-") as private:  # mode 0700
                cert = self.cert_file or _written(private, "cert", self.cert_data)
                key = self.key_file or (
                    _written(private, "key", self.key_data) if self.key_data else None
                )
                tls.load_cert_chain(cert, keyfile=key)  # read now: the files may go after
        if self.insecure:
            tls.check_hostname = False
            tls.verify_mode = ssl.CERT_NONE
        return tls

    async def bearer(self) -> str | None:
        """The current bearer token (a token file re-read once a minute; the library's hook
        refreshes an exec plugin's)."""
        if self.library is not None:
            token = (await self.library.auth_settings()).get("BearerToken")
            value = str(token["value"]) if token and token.get("value") else ""
            return value.removeprefix("Bearer ") or None
        if self.token_file and time.monotonic() - self._read_at > TOKEN_FILE_REFRESH:
            try:
                self.token = Path(self.token_file).read_text().strip() or None
            except OSError as e:
                raise CredentialsError(f"token file {self.token_file}: {e.strerror}") from None
            self._read_at = time.monotonic()
        return self.token


def _pem(data: str, what: str) -> str:
    try:
        return base64.b64decode(data, validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise CredentialsError(f"{what} is not base64 of a PEM text") from None


def _written(folder: str, name: str, data: str | None) -> str:
    path = os.path.join(folder, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(_pem(data or "", f"client-{name}-data"))
    return path


def in_cluster() -> Credentials | None:
    """The pod's own ServiceAccount, or None outside a pod (as client-go: the service host and
    port variables and the token file all present)."""
    host = os.environ.get("KUBERNETES_SERVICE_HOST")
    port = os.environ.get("KUBERNETES_SERVICE_PORT")
    token = SERVICE_ACCOUNT / "token"
    if not (host and port and token.is_file()):
        return None
    if ":" in host:  # IPv6
        host = f"[{host}]"
    namespace = SERVICE_ACCOUNT / "namespace"
    return Credentials(
        server=f"https://{host}:{port}",
        namespace=namespace.read_text().strip() if namespace.is_file() else "default",
        ca_file=str(SERVICE_ACCOUNT / "ca.crt"),
        token_file=str(token),
    )


async def from_kubeconfig(explicit: str | None, context: str | None) -> Credentials:
    """The credentials of `context` (else current-context) in the merged kubeconfig."""
    config = kubeconfig_.merged(explicit)
    name = context or config.get("current-context")
    if not name:
        raise CredentialsError("the kubeconfig sets no current-context: name one with --context")
    ctx = kubeconfig_.entry(config, "contexts", name)
    cluster = kubeconfig_.entry(config, "clusters", str(ctx.get("cluster", "")))
    user = kubeconfig_.entry(config, "users", str(ctx.get("user", ""))) if ctx.get("user") else {}
    if not cluster.get("server"):
        raise CredentialsError(f"context {name}: its cluster has no server")
    found = Credentials(
        server=str(cluster["server"]),
        namespace=str(ctx.get("namespace") or "default"),
        ca_file=cluster.get("certificate-authority"),
        ca_data=cluster.get("certificate-authority-data"),
        insecure=bool(cluster.get("insecure-skip-tls-verify")),
        tls_server_name=cluster.get("tls-server-name"),
        proxy=cluster.get("proxy-url"),
        cert_file=user.get("client-certificate"),
        cert_data=user.get("client-certificate-data"),
        key_file=user.get("client-key"),
        key_data=user.get("client-key-data"),
        token=user.get("token"),
        token_file=user.get("tokenFile") if not user.get("token") else None,
        username=user.get("username"),
        password=user.get("password"),
    )
    if "exec" in user or "auth-provider" in user:
        found.library = library = await _library(config, name)
        if library.cert_file:  # an exec plugin's client certificate, in the library's file
            found.cert_file, found.key_file = library.cert_file, library.key_file
            found.cert_data = found.key_data = None
    return found


async def _library(config: dict[str, Any], context: str) -> Any:
    """A Configuration from the Kubernetes client library, for users it alone can serve."""
    from kubernetes.aio import config as untyped  # noqa: PLC0415 - only for these users
    from kubernetes.aio.client.configuration import Configuration  # noqa: PLC0415

    library: Any = untyped

    configuration = Configuration()
    try:
        await library.load_kube_config_from_dict(
            {k: v for k, v in config.items() if k != "sources"},
            context,
            client_configuration=configuration,
        )
    except library.ConfigException as e:
        raise CredentialsError(str(e)) from None
    return configuration


async def load(explicit: str | None = None, context: str | None = None) -> Credentials:
    """In-cluster credentials unless a kubeconfig or context is named, else the kubeconfig (given,
    else every file $KUBECONFIG lists, merged as kubectl merges them, else ~/.kube/config);
    CredentialsError or KubeconfigError when neither is usable."""
    if not (explicit or context):
        found = in_cluster()
        if found is not None:
            return found
    return await from_kubeconfig(explicit, context)
