"""`planops-trigger-receiver`: the HTTP server that starts Plans from PlanTriggers' webhook
deliveries (planops.triggers.receiver), run by the chart in its own Deployment.

planops-trigger-receiver [--port 8080] [--metrics-port 9090] [--kubeconfig FILE]
                         [--body-bytes N] [--per-minute N] [--burst N] [--total-per-second N]
                         [--requests-per-second N] [--unverified-per-minute N]
                         [--cache-seconds S]

Plain HTTP: TLS ends at the Ingress (or Service mesh) in front of it, which the user provides.
Every connection is closed after --connection-seconds whatever it sends (aiohttp has no timeout
for a request's headers: a sender trickling them would otherwise hold a connection forever), and
headers are bounded in number and size (aiohttp's parser: 64 headers of at most 8 KiB).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
from typing import Any

from aiohttp import web
from aiohttp.web_protocol import RequestHandler

from planops import metrics
from planops.kube.acting import ActingKube
from planops.triggers.limits import Limits
from planops.triggers.receiver import Receiver

#: aiohttp's parser bounds: headers per request, bytes of a header line or request line
MAX_HEADERS = 64
MAX_FIELD = 8190


class _Deadline(RequestHandler):
    """aiohttp's connection handler, closing its connection `seconds` after it opened."""

    seconds = 30.0

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._planops_deadline = asyncio.get_running_loop().call_later(
            self.seconds, transport.close
        )

    def connection_lost(self, exc: BaseException | None) -> None:
        self._planops_deadline.cancel()
        super().connection_lost(exc)


class _Server(web.Server):
    def __init__(self, handler: Any, seconds: float, **kwargs: Any) -> None:
        super().__init__(handler, **kwargs)
        self._seconds = seconds

    def __call__(self) -> RequestHandler:
        handler = _Deadline(self, loop=self._loop, **self._kwargs)
        handler.seconds = self._seconds
        return handler


def server(receiver: Receiver) -> web.Server:
    """The receiver's HTTP server (its bounds set: headers, compression, connection time)."""
    return _Server(
        receiver.handle,
        receiver.limits.connection_seconds,
        max_headers=MAX_HEADERS,
        max_field_size=MAX_FIELD,
        max_line_size=MAX_FIELD,
        auto_decompress=False,  # a gzip bomb stays compressed (and is refused: 415)
        keepalive_timeout=5.0,
    )


async def start(receiver: Receiver, address: str, port: int) -> web.ServerRunner:
    """The receiver listening on address:port (0: any free port; runner.addresses has it)."""
    runner = web.ServerRunner(server(receiver))
    await runner.setup()
    await web.TCPSite(runner, address, port).start()
    return runner


def _parser() -> argparse.ArgumentParser:
    d = Limits()
    p = argparse.ArgumentParser(prog="planops-trigger-receiver", description=__doc__)
    p.add_argument("--port", type=int, default=8080)
    p.add_argument("--address", default="0.0.0.0")
    p.add_argument("--metrics-port", type=int, default=9090, help="0 disables")
    p.add_argument("--kubeconfig", metavar="FILE", help="default: in-cluster, then $KUBECONFIG")
    p.add_argument("--body-bytes", type=int, default=d.body_bytes)
    p.add_argument("--per-minute", type=float, default=d.per_minute, help="per trigger")
    p.add_argument("--burst", type=int, default=d.burst, help="per trigger")
    p.add_argument("--total-per-second", type=float, default=d.total_per_second)
    p.add_argument("--requests-per-second", type=float, default=d.requests_per_second)
    p.add_argument("--unverified-per-minute", type=float, default=d.unverified_per_minute)
    p.add_argument("--cache-seconds", type=float, default=d.cache_seconds)
    p.add_argument("--reading-at-once", type=int, default=d.reading_at_once)
    p.add_argument("--connection-seconds", type=float, default=d.connection_seconds)
    return p


async def serve(args: argparse.Namespace) -> None:
    limits = Limits(
        body_bytes=args.body_bytes,
        per_minute=args.per_minute,
        burst=args.burst,
        total_per_second=args.total_per_second,
        requests_per_second=args.requests_per_second,
        unverified_per_minute=args.unverified_per_minute,
        cache_seconds=args.cache_seconds,
        reading_at_once=args.reading_at_once,
        connection_seconds=args.connection_seconds,
    )
    kube = await ActingKube.connect(args.kubeconfig)
    runner = await start(Receiver(kube, limits), args.address, args.port)
    logging.getLogger("planops.triggers").info("listening on %s:%d", args.address, args.port)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    try:
        await stop.wait()
    finally:
        await runner.cleanup()
        await kube.close()


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(message)s")
    if args.metrics_port:
        metrics.serve(args.metrics_port)
    asyncio.run(serve(args))


if __name__ == "__main__":
    main()
