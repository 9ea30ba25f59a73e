"""One connection pool to the API server: the TLS context and the credentials of a kubeconfig's
context or of the pod's own ServiceAccount (kube/credentials.py) turned into aiohttp requests.
What the requests mean (the API's paths, verbs and answers) is kube/client.py's.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import aiohttp
from multidict import CIMultiDict

from planops.kube import credentials as credentials_

#: Seconds a request may take (a watch: see Kube.watch_plan).
REQUEST_TIMEOUT = 60
USER_AGENT = "planops"
Query = Mapping[str, str | int | bool | None]


class Transport:
    """One connection pool to the API server, with the TLS context and credentials of a
    kubeconfig's context or of the pod's own ServiceAccount (kube/credentials.py)."""

    def __init__(self, credentials: credentials_.Credentials) -> None:
        self.credentials = credentials
        self._session: aiohttp.ClientSession | None = None

    def session(self) -> aiohttp.ClientSession:
        if self._session is None:
            # no trust_env: the API server is reached as the kubeconfig says (its proxy-url is
            # honoured below), and aiohttp would otherwise read the environment and ~/.netrc in a
            # thread on every request
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(ssl=self.credentials.tls(), limit=100),
                headers={"User-Agent": USER_AGENT, "Accept": "application/json"},
                read_bufsize=2**21,
            )
        return self._session

    async def _headers(self) -> CIMultiDict[str]:
        c = self.credentials
        headers: CIMultiDict[str] = CIMultiDict()
        token = await c.bearer()
        if token:
            headers["Authorization"] = f"Bearer {token}"
        elif c.username and c.password:
            headers["Authorization"] = aiohttp.BasicAuth(c.username, c.password).encode()
        return headers

    async def request(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: Any = None,
        content_type: str = "application/json",
        timeout: aiohttp.ClientTimeout | None = None,
        extra_headers: list[tuple[str, str]] | None = None,
    ) -> aiohttp.ClientResponse:
        c = self.credentials
        headers = CIMultiDict(await self._headers())
        for key, value in extra_headers or ():  # a key may repeat (Impersonate-Group)
            headers.add(key, value)
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = json.dumps(body, separators=(",", ":"))
        params = {
            k: str(v).lower() if isinstance(v, bool) else str(v)
            for k, v in (query or {}).items()
            if v is not None
        }
        return await self.session().request(
            method,
            c.server.rstrip("/") + path,
            params=params,
            data=data,
            headers=headers,
            timeout=timeout or aiohttp.ClientTimeout(total=REQUEST_TIMEOUT),
            proxy=c.proxy or None,
            server_hostname=c.tls_server_name or None,
        )

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class Impersonating(Transport):
    """Requests of `base`'s connection pool and credentials made AS another user: the
    Impersonate-User and Impersonate-Group headers (the UI server's, planops.uiserver), so the
    API server's authorizer and admission judge that user, and its audit log names both. Closing
    it leaves `base`'s pool open (it is shared by every user's requests)."""

    def __init__(self, base: Transport, user: str, groups: tuple[str, ...]) -> None:
        super().__init__(base.credentials)
        self.base, self.user, self.groups = base, user, groups

    def session(self) -> aiohttp.ClientSession:
        return self.base.session()

    async def _headers(self) -> CIMultiDict[str]:
        headers = await self.base._headers()
        headers.extend(impersonation_headers(self.user, self.groups))
        return headers

    async def close(self) -> None:
        return None


def impersonation_headers(user: str, groups: tuple[str, ...]) -> list[tuple[str, str]]:
    """The headers that make a request `user`'s, in `groups` (one Impersonate-Group each)."""
    return [("Impersonate-User", user), *(("Impersonate-Group", g) for g in groups)]
