"""The requests only kubectl-plan's verbs make, beside kube.client.Kube's (CliApi): Plans listed
and watched across namespaces with a label selector (`get -A -l -w`), a Plan deleted with
whether it was there (`delete`), the API server's version and a CRD (`version`). A subclass, so
the operator's client holds none of them (and client.py stays one screenful of requests)."""

from __future__ import annotations

from collections.abc import AsyncGenerator

from planops.kube.client import BACKGROUND, Kube, Obj, _json, _obj
from planops.kube.errors import ApiError, ListExpired
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
