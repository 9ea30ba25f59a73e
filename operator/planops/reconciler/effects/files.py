"""The operator's half of a step pod that moves files (docs/artifacts.md): the presigned URLs
for exactly the attempt's keys, minted with the run's repository (the credentials stay here),
and the pod kube.files_pod makes with them. A step with results alone needs no repository:
its results travel in the collector's termination message.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from planops.api import CapsuleSpec
from planops.engine import Dispatch, step_files
from planops.kube import files_pod, manifests
from planops.reconciler.effects.stored_logs import StoredLogs
from planops.store import keys as keys_
from planops.store import repositories
from planops.store.client import StoreError

Obj = dict[str, Any]

#: SigV4's bound of a presigned URL's life
MAX_LIFETIME = timedelta(days=7)
#: what an attempt's URLs outlive its Job's deadline by (the collector's last PUT)
URL_MARGIN = timedelta(minutes=10)


def url_lifetime(job: Obj) -> timedelta:
    """How long an attempt's URLs live: its Job's deadline (the wait for a node and the step's
    timeout) and a margin; a URL read from the pod's spec later is dead."""
    deadline = job.get("spec", {}).get("activeDeadlineSeconds")
    if not isinstance(deadline, int):
        return MAX_LIFETIME
    return min(MAX_LIFETIME, timedelta(seconds=deadline) + URL_MARGIN)


@dataclass
class FileMover:
    """Makes a files step's pod: `image` is the operator's own (the collector's)."""

    image: str
    stored: StoredLogs | None = None

    async def pod(
        self, ref: manifests.PlanRef, d: Dispatch, capsule: CapsuleSpec, capsule_name: str, job: Obj
    ) -> Obj | str:
        """`job` made the pod of a step with results or artifacts, or why it cannot be (the
        attempt fails with it, naming the repository)."""
        urls = files_pod.Urls()
        if step_files.uses_artifacts(d.step):
            try:
                urls = await self._urls(ref, d, capsule, capsule_name, url_lifetime(job))
            except (repositories.RepositoryError, StoreError, keys_.BadKeyError) as e:
                return f"the step's artifacts cannot be moved: {e}"
        bound = step_files.artifact_policy(capsule).max_bytes
        return files_pod.with_files(job, d, self.image, urls, bound)

    async def _urls(
        self,
        ref: manifests.PlanRef,
        d: Dispatch,
        capsule: CapsuleSpec,
        capsule_name: str,
        lifetime: timedelta,
    ) -> files_pod.Urls:
        if self.stored is None:
            raise repositories.RepositoryError(
                "the operator has no artifact repository configured (--artifact-repository, "
                "--artifact-secrets-namespace)"
            )
        store = await self.stored.store_for(ref.namespace, capsule_name, capsule)
        run = keys_.RunKeys(store.repo.key_prefix, ref.namespace, ref.uid, ref.run)
        outputs = d.step.outputs.artifacts if d.step.outputs is not None else []
        puts = tuple(store.presign_put(run.artifact(d.step.id, a.name), lifetime) for a in outputs)
        mine = keys_.plan_prefix("", ref.namespace, ref.uid)
        gets = []
        for record, _ in d.fetch:
            # a record's key is relative to the repository (reconciler.run.moved); one that is
            # not the Plan's own (a status edited by hand) is never signed
            if not record.key.startswith(mine) or ".." in record.key.split("/"):
                raise keys_.BadKeyError(
                    f"input artifact {record.name!r}: key {record.key!r} is not this Plan's"
                )
            key = f"{store.repo.key_prefix}/{record.key}" if store.repo.key_prefix else record.key
            gets.append(store.presign_get(key, lifetime))
        return files_pod.Urls(puts, tuple(gets))
