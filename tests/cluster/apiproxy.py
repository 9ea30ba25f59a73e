#!/usr/bin/env python3
"""A TCP relay standing in for kube-proxy's one rule the test node needs: pods reach the API
server through the `kubernetes` Service (10.0.0.1:443, what in-cluster clients use).

The API server listens on loopback only; `up --with-node` adds one DNAT rule (traffic entering
on the pod bridge for 10.0.0.1:443 -> this relay on the bridge address), and this relays the
bytes to 127.0.0.1:<API port>. TLS passes through untouched (the API server's certificate names
10.0.0.1). Usage: apiproxy.py LISTEN_HOST LISTEN_PORT TARGET_HOST TARGET_PORT CLUSTER_DIR/
(the cluster directory only marks the process as this cluster's, for `down`).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys


async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


async def main(listen: str, port: int, target: str, target_port: int) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(target, target_port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    server = await asyncio.start_server(handle, listen, port)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])))
