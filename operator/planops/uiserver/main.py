"""`planops-ui-server` (`python -m planops.uiserver`): the chart's UI server process. In the
cluster it uses its pod's ServiceAccount (which may only review tokens and impersonate users and
groups: charts/planops/templates/ui.yaml); out of the cluster, a kubeconfig (the e2e tests run it
so, as they run the operator)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import ssl
import sys
from pathlib import Path

from aiohttp import web

from planops.kube.client import ConfigError
from planops.kube.ui_client import UiKube
from planops.uiserver import app as app_
from planops.uiserver import auth


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="planops-ui-server", description=__doc__)
    p.add_argument("--kubeconfig", help="out of the cluster: the server's own credentials")
    p.add_argument("--context")
    p.add_argument("--address", default="0.0.0.0", help="the address to listen on")
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--tls-cert", help="serve HTTPS with this certificate (PEM) and --tls-key")
    p.add_argument("--tls-key")
    p.add_argument(
        "--secure-cookie",
        action="store_true",
        help="mark the session cookie Secure (implied by --tls-cert; set it behind a TLS proxy)",
    )
    p.add_argument("--default-namespace", default="default", help="the namespace `/` opens")
    p.add_argument(
        "--audience",
        action="append",
        default=[],
        help="a token must be for this audience (repeat; none: the API server's own)",
    )
    p.add_argument(
        "--proxy-secret-file",
        help="trust X-Remote-User/X-Remote-Group only on requests carrying this file's secret "
        "in --proxy-secret-header (an authenticating proxy in front)",
    )
    p.add_argument("--proxy-secret-header", default="X-Planops-Proxy-Secret")
    p.add_argument("--proxy-user-header", default="X-Remote-User")
    p.add_argument("--proxy-group-header", default="X-Remote-Group")
    return p


def settings_of(args: argparse.Namespace) -> app_.Settings:
    """The server's settings from its flags; ValueError with what is wrong."""
    if bool(args.tls_cert) != bool(args.tls_key):
        raise ValueError("--tls-cert and --tls-key go together")
    proxy = None
    if args.proxy_secret_file:
        secret = Path(args.proxy_secret_file).read_text().strip()
        if len(secret) < 16:
            raise ValueError("--proxy-secret-file: the secret is shorter than 16 characters")
        proxy = auth.ProxyTrust(
            secret, args.proxy_secret_header, args.proxy_user_header, args.proxy_group_header
        )
    return app_.Settings(
        default_namespace=args.default_namespace,
        secure_cookie=bool(args.secure_cookie or args.tls_cert),
        proxy=proxy,
        audiences=tuple(args.audience),
    )


async def serve(args: argparse.Namespace, settings: app_.Settings) -> None:
    kube = await UiKube.connect(args.kubeconfig, args.context)
    tls = None
    if args.tls_cert:
        tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        tls.load_cert_chain(args.tls_cert, args.tls_key)
    runner = web.AppRunner(app_.make_app(kube, settings), shutdown_timeout=2.0)
    await runner.setup()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await web.TCPSite(runner, args.address, args.port, ssl_context=tls).start()
        scheme = "https" if tls else "http"
        print(f"planops UI server on {scheme}://{args.address}:{args.port}/", flush=True)
        await stop.wait()
    finally:
        await runner.cleanup()
        await kube.close()


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=os.environ.get("PLANOPS_LOG_LEVEL", "INFO"))
    args = parser().parse_args(argv)
    try:
        settings = settings_of(args)
    except (ValueError, OSError) as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    try:
        asyncio.run(serve(args, settings))
    except ConfigError as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    except OSError as e:
        sys.stderr.write(f"error: cannot listen on {args.address}:{args.port}: {e.strerror}\n")
        return 2
    return 0
