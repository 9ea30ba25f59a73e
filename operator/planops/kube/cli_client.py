"""The requests only kubectl-plan's verbs make, beside kube.client.Kube's (CliApi): Plans listed
and watched across namespaces with a label selector (`get -A -l -w`), a Plan deleted with
whether it was there (`delete`), the API server's version and a CRD (`version`), a Plan's
Events (`describe`, `trace`), a pod's log read (`logs`, the UI) or followed (`logs -f`). A
subclass, so the operator's client holds none of them (and client.py stays one screenful of
requests)."""

from __future__ import annotations

from collections.abc import AsyncGenerator

import aiohttp

from planops.kube import loglines
from planops.kube.api import LogWindow
from planops.kube.client import BACKGROUND, Kube, Obj, Window, _json, _obj
from planops.kube.errors import ApiError, ListExpired
from planops.kube.paths import core as _core
from planops.kube.paths import custom


class CliKube(Kube):
    async def list_plans_at(self, namespace: str | None, selector: str) -> tuple[list[Obj], str]:
        """The Plans of a namespace (None: of every namespace) and the list's resourceVersion
        (a watch from it misses nothing); listed again once when its continue token expired."""
        query = {"labelSelector": selector or None}
        for again in (True, False):
            items: list[Obj] = []
            try:
                version = await self.list_pages(custom("plans", namespace), items.append, query)
            except ListExpired:
                if again:
                    continue
                raise
            return items, version
        raise AssertionError("not reached")

    def watch_plans(
        self,
        namespace: str | None,
        selector: str,
        resource_version: str | None,
        timeout_seconds: int = 240,
    ) -> AsyncGenerator[tuple[str, Obj], None]:
        """The watch events of the Plans of a namespace (None: every namespace) that `selector`
        picks, as watch_plan's."""
        query = {"labelSelector": selector or None}
        return self.watch(custom("plans", namespace), resource_version, query, timeout_seconds)

    async def delete_plan_found(self, namespace: str, name: str) -> bool:
        """Delete a Plan (its Jobs, pods, PlanReports and child Plans go with it, owned): True,
        or False when there was none (`kubectl plan delete` says NotFound)."""
        path = custom("plans", namespace, name)
        try:
            await _json(await self.api.request("DELETE", path, query=BACKGROUND))
        except ApiError as e:
            if e.not_found:
                return False
            raise
        return True

    async def server_version(self) -> Obj:
        """The API server's /version (gitVersion, major, minor, platform...)."""
        return await _obj(await self.api.request("GET", "/version"))

    async def get_crd(self, name: str) -> Obj | None:
        return await self._get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")

    async def list_events(self, namespace: str, name: str) -> list[Obj]:
        return await self._list(
            _core("events", namespace),
            fieldSelector=f"involvedObject.name={name},involvedObject.kind=Plan",
        )

    async def read_log(
        self, namespace: str, pod: str, container: str, limit_bytes: int, window: Window = None
    ) -> str:
        chunks: list[bytes] = []
        await self.stream_log(namespace, pod, container, chunks.append, None, limit_bytes, window)
        return b"".join(chunks).decode(errors="replace")

    async def follow_log(
        self, namespace: str, pod: str, container: str, window: Window = None
    ) -> AsyncGenerator[str, None]:
        """A pod's log line by line as the container writes it (`follow=true`), from its start;
        it ends when the container ends. Read in chunks, so a line of any length is shown (one
        over 1 MiB cut, with a mark: kube/loglines.py). Close it (`aclosing`) when leaving
        early."""
        resp = await self.api.request(
            "GET",
            _core("pods", namespace, pod, "log"),
            query={"container": container, "follow": True, **(window or LogWindow()).query()},
            timeout=aiohttp.ClientTimeout(total=None),  # as long as the step runs
        )
        if resp.status >= 300:
            await _json(resp)  # raises ApiError
        lines = loglines.LineCutter()
        try:
            async for chunk in resp.content.iter_any():
                for line in lines.feed(chunk):
                    yield line
            for line in lines.end():
                yield line
        finally:
            resp.release()
