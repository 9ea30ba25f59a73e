"""Logs that outlive pods: when a run has an artifact repository (its Capsule's, else the
operator's default), each ended attempt's full log (stdout and stderr as one, as `kubectl logs`
shows it, up to step_logs.READ_LIMIT) is stored at `store.keys.RunKeys.log(step, attempt)`.

When the attempt settles, the reconcile that reads its output also copies its log into a
temporary file (one more log request, only with a repository; before any podGC can race it),
then hands the upload to `store.background.Uploads`: the store's latency, slowness or outage
never holds a reconcile. The repository's credentials are read from its Secret in the
operator's namespace (store.repositories judges it), and a client is kept per repository while
its Secret's resourceVersion stays the same.

A failure (the Secret missing or not listing the namespace, wrong credentials, the store down)
is logged with the repository's name; the step's record and the run are unchanged (its capped
output is in the report as always).
"""

from __future__ import annotations

import base64
import contextlib
import functools
import logging
import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from planops.api.artifact_models import ArtifactRepository
from planops.api.capsule_models import CapsuleSpec
from planops.engine.policy import DEFAULT_CAPSULE
from planops.kube import manifests
from planops.kube.api import KubeApi
from planops.kube.errors import ApiError
from planops.kube.events import Poster
from planops.reconciler.history import deletion, run_history
from planops.reconciler.history.retention import Archived
from planops.reconciler.run.observe import Observed
from planops.reconciler.run.step_logs import READ_LIMIT
from planops.store import keys as keys_
from planops.store import repositories
from planops.store.background import Uploads
from planops.store.client import Repository, Store

log = logging.getLogger("planops.reconciler")
Obj = dict[str, Any]
#: a credentials Secret is read again after this long (a rotated key is used within it)
SECRET_SECONDS = 30.0


@dataclass
class StoredLogs:
    """Stores ended attempts' full logs in the run's repository."""

    kube: KubeApi
    default: ArtifactRepository | None
    secrets_namespace: str
    uploads: Uploads = field(default_factory=Uploads)
    #: a user's deletion of a Plan (effects.plan_deletion): the archive's question (None: off),
    #: the Events' poster, and the seconds after which it gives up on the store
    archived: Archived = None
    poster: Poster | None = None
    gc_seconds: float = deletion.GIVE_UP
    #: a client per (repository, Secret resourceVersion)
    _stores: dict[tuple[str, str], Store] = field(default_factory=dict)
    #: Secrets as last read, and when (monotonic)
    _secrets: dict[str, tuple[float, Obj | None]] = field(default_factory=dict)
    #: each Capsule as last used to store (a deleted Plan's objects are found after the
    #: Capsule went first: its namespace's deletion)
    _used: dict[tuple[str, str], CapsuleSpec] = field(default_factory=dict)

    def wanted(self, capsule: CapsuleSpec) -> bool:
        return capsule.artifact_repository is not None or self.default is not None

    async def store_for(self, namespace: str, capsule_name: str, capsule: CapsuleSpec) -> Store:
        """The client of the run's repository; raises RepositoryError naming it."""
        self._used[(namespace, capsule_name)] = capsule
        chosen = repositories.choose(
            capsule.artifact_repository, self.default, namespace, capsule_name
        )
        if chosen is None:
            raise repositories.RepositoryError("no artifact repository")
        spec = chosen.spec
        secret = await self._secret(spec.credentials_secret.name)
        access, secret_key = repositories.credentials(
            chosen, secret, self.secrets_namespace, namespace
        )
        version = str(((secret or {}).get("metadata") or {}).get("resourceVersion", ""))
        cache_key = (spec.model_dump_json() + chosen.source, version)
        found = self._stores.get(cache_key)
        if found is None:
            found = Store(
                Repository(
                    name=chosen.source,
                    endpoint=spec.endpoint,
                    bucket=spec.bucket,
                    access_key=access,
                    secret_key=secret_key,
                    region=spec.region,
                    key_prefix=spec.key_prefix,
                    ca_file=await self._ca_file(spec) if spec.ca_secret else None,
                )
            )
            self._stores = {k: v for k, v in self._stores.items() if k[0] != cache_key[0]}
            self._stores[cache_key] = found
        return found

    async def _secret(self, name: str) -> Obj | None:
        """A Secret of the operator's namespace, read at most every SECRET_SECONDS (a settle
        of many steps asks once); None when missing or not readable (Forbidden: not one the
        chart names)."""
        now = time.monotonic()
        held = self._secrets.get(name)
        if held is not None and now - held[0] < SECRET_SECONDS:
            return held[1]
        try:
            found = await self.kube.get_secret(self.secrets_namespace, name)
        except ApiError as e:
            log.info("Secret %s/%s unreadable: %s", self.secrets_namespace, name, e)
            found = None
        self._secrets[name] = (now, found)
        return found

    async def _ca_file(self, spec: ArtifactRepository) -> str:
        """The repository's CA bundle (its caSecret's ca.crt) in a file of the operator's own;
        raises RepositoryError naming the Secret when it cannot be read."""
        name = spec.ca_secret or ""
        secret = await self._secret(name)
        encoded = ((secret or {}).get("data") or {}).get("ca.crt")
        if not encoded:
            raise repositories.RepositoryError(
                f"artifact repository {spec.endpoint}: Secret {self.secrets_namespace}/{name} "
                "has no ca.crt, is missing, or the operator may not read it"
            )
        fd, path = tempfile.mkstemp(prefix="planops-store-ca-", suffix=".pem")
        with os.fdopen(fd, "wb") as out:
            out.write(base64.b64decode(encoded))
        return path

    async def keep(
        self, ref: manifests.PlanRef, capsule_name: str, capsule: CapsuleSpec, ended: list[Observed]
    ) -> None:
        """Copies each ended attempt's log to a temporary file and hands its upload over."""
        pods = [o for o in ended if o.pod is not None and o.kind == "job"]
        if not pods or not self.wanted(capsule):
            return
        try:
            store = await self.store_for(ref.namespace, capsule_name, capsule)
            run_keys = keys_.RunKeys(store.repo.key_prefix, ref.namespace, ref.uid, ref.run)
        except (repositories.RepositoryError, keys_.BadKeyError, ValueError) as e:
            log.warning("logs of %s/%s are not stored: %s", ref.namespace, ref.name, e)
            return
        for obs in pods:
            await self._keep_one(ref, store, run_keys, obs)

    async def _keep_one(
        self, ref: manifests.PlanRef, store: Store, run_keys: keys_.RunKeys, obs: Observed
    ) -> None:
        assert obs.pod is not None
        key = run_keys.log(obs.step_id, obs.attempt)
        fd, path = tempfile.mkstemp(prefix="planops-log-")
        spool = os.fdopen(fd, "wb")

        def feed(chunk: bytes) -> None:
            spool.write(chunk)

        try:
            await self.kube.stream_log(
                ref.namespace, obs.pod, manifests.CONTAINER, feed, None, READ_LIMIT
            )
            spool.close()
        except ApiError as e:
            spool.close()
            os.unlink(path)
            log.info("log of %s/%s not stored: %s", ref.namespace, obs.pod, e)
            return

        def cleanup() -> None:
            with contextlib.suppress(OSError):
                os.unlink(path)

        self.uploads.submit(
            f"log {key}",
            lambda: store.put_file(key, path, content_type="text/plain"),
            cleanup,
            group=ref.uid,  # the Plan's deletion waits for it (effects.plan_deletion)
        )

    async def forget_plan(self, plan: Obj) -> None:
        """The Plan is deleted by retention (its TTL; never before the archive holds its run:
        history.retention waits): every run's objects go too, in the background, unless its
        repository keeps them (`artifactGC.strategy: Never`). A failure is logged, naming the
        repository; the objects are then the bucket's lifecycle rules' to remove. A Plan with
        the artifact finalizer is left to its deletion's own (effects.plan_deletion)."""
        if deletion.FINALIZER not in deletion.finalizers(plan):
            await self._gc(plan, None)

    async def forget_runs(self, plan: Obj, dropped: list[Obj], new_run: str, archive: bool) -> None:
        """Runs a new run dropped from the Plan's history (historyLimit): their objects go
        too, but the new run's own id's (an earlier run of that id: the new run writes there)
        and, with the archive on, a run it does not hold yet."""
        runs = [
            e["id"]
            for e in dropped
            if isinstance(e.get("id"), str)
            and e["id"] != new_run
            and not (archive and run_history.waits_for_archive(e))
        ]
        if runs:
            await self._gc(plan, runs)

    async def _gc(self, plan: Obj, runs: list[str] | None) -> None:
        """Deletes, in the background, the objects of `runs` of the Plan (None: all its runs)."""
        meta = plan.get("metadata") or {}
        try:
            found = await self.targets(plan, runs)
        except (repositories.RepositoryError, keys_.BadKeyError, ValueError) as e:
            where = f"{meta.get('namespace')}/{meta.get('name')}"
            log.warning("objects of %s are not deleted: %s", where, e)
            return
        if found is None:
            return
        store, prefixes = found
        for p in prefixes:
            self.uploads.submit(f"delete {p}", functools.partial(store.delete_prefix, p), _nothing)

    async def targets(
        self, plan: Obj, runs: list[str] | None, strict: bool = False
    ) -> tuple[Store, list[str]] | None:
        """The store and the prefixes of `runs` of the Plan (None: all its runs), or None when
        its run stores nothing or its repository keeps them (`artifactGC.strategy: Never`).
        Raises RepositoryError (the repository named; `strict`: its Capsule gone), BadKeyError
        or ValueError."""
        meta = plan.get("metadata") or {}
        namespace, uid = meta.get("namespace", ""), meta.get("uid", "")
        capsule_name = ((plan.get("spec") or {}).get("capsule")) or DEFAULT_CAPSULE
        capsule = await self.capsule_spec(namespace, capsule_name, strict)
        if capsule is None or not self.wanted(capsule):
            return None
        chosen = repositories.choose(
            capsule.artifact_repository, self.default, namespace, capsule_name
        )
        if chosen is None or chosen.spec.artifact_gc.strategy == "Never":
            return None
        store = await self.store_for(namespace, capsule_name, capsule)
        at = store.repo.key_prefix
        if runs is None:
            return store, [keys_.plan_prefix(at, namespace, uid)]
        return store, [keys_.RunKeys(at, namespace, uid, r).run_prefix for r in runs]

    async def capsule_spec(
        self, namespace: str, name: str, strict: bool = False
    ) -> CapsuleSpec | None:
        """The run's Capsule's spec (an empty one when it is missing and a default repository
        exists); None when it cannot be read. `strict` (a deletion that must know where the
        objects are): one that is gone or unreadable raises RepositoryError, but the default
        Capsule's (the operator's own rules, and the default repository, apply without one)."""
        try:
            found = await self.kube.get_capsule(namespace, name)
        except ApiError as e:
            if strict:
                raise repositories.RepositoryError(f"Capsule {namespace}/{name}: {e}") from e
            log.info("capsule %s/%s unreadable: %s", namespace, name, e)
            return None
        if found is None and (namespace, name) in self._used:
            return self._used[(namespace, name)]  # gone since it was used: what it said then
        if found is None and strict and name != DEFAULT_CAPSULE:
            raise repositories.RepositoryError(
                f"Capsule {namespace}/{name} is gone: the repository its runs stored objects in "
                "is not known"
            )
        if found is None:
            return CapsuleSpec() if self.default is not None else None
        try:
            return CapsuleSpec.model_validate(found.get("spec") or {})
        except ValueError:
            return None


def _nothing() -> None:
    """No temporary file to remove."""
