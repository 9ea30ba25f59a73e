"""Reading URLs for a Plan's readers (docs/artifacts.md, "Reading logs and artifacts"): the
operator signs a presigned GET URL for each stored log and artifact of the runs a Plan keeps
and writes them into its `status.stored` (store.signed says what, and when they are due again),
so whoever may `get` the Plan reads them without any credential, and nobody else.

Signing is local (SigV4 is an HMAC: no request to the store); what costs is the status write,
once per run as records settle and once per run every SIGN_LIFETIME less the margin. `offer`
is called with every Plan the watch shows (an event, or the resync's pass over the cache): the
pure `due` decides; at most one signing per Plan at a time, in a task of its own, so a watch
event never waits. A failure (no repository, its Secret unusable) is logged, naming it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from planops.api.capsule_models import CapsuleSpec
from planops.kube.errors import ApiError
from planops.kube.manifests import PlanRef
from planops.reconciler.effects.actuator import StatusWriter
from planops.reconciler.effects.stored_logs import StoredLogs
from planops.reconciler.history import chunks
from planops.store import keys as keys_
from planops.store import repositories, signed
from planops.store.client import StoreError

log = logging.getLogger("planops.reconciler")
Obj = dict[str, Any]
#: Plans remembered as storing nothing (the oldest forgotten first)
NONE_KEPT = 10_000


@dataclass
class Signer:
    stored: StoredLogs
    writer: StatusWriter
    clock: Callable[[], float] = time.time
    #: whether this replica acts (it leads, or there is no election)
    ready: Callable[[], bool] = lambda: True
    _busy: set[tuple[str, str]] = field(default_factory=set)
    #: Plans whose run has no repository (no Capsule's, no default), by run: not asked again
    _none: dict[tuple[str, str], str] = field(default_factory=dict)
    _tasks: set[asyncio.Task[None]] = field(default_factory=set)

    def offer(self, plan: Obj) -> None:
        """Sign the Plan's due runs in the background (nothing when none is due); never
        raises (a watch event's handler and the resync's pass call it)."""
        try:
            self._offer(plan)
        except Exception:
            log.exception("reading URLs: plan %s not looked at", (plan.get("metadata") or {}))

    def _offer(self, plan: Obj) -> None:
        meta = plan.get("metadata") or {}
        key = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        status = plan.get("status") or {}
        run = (status.get("run") or {}).get("id")
        if key in self._busy or (run and self._none.get(key) == run) or not self.ready():
            return
        if not signed.due(status, self.clock()):
            return
        self._busy.add(key)
        task = asyncio.create_task(self._sign(plan, key), name=f"planops-sign-{key[1]}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _sign(self, plan: Obj, key: tuple[str, str]) -> None:
        try:
            await self.sign(plan)
        except (ApiError, repositories.RepositoryError, StoreError, keys_.BadKeyError) as e:
            log.warning("reading URLs of plan %s/%s not signed: %s", *key, e)
        except Exception:
            log.exception("reading URLs of plan %s/%s not signed", *key)
        finally:
            self._busy.discard(key)

    async def sign(self, plan: Obj) -> Obj | None:
        """Signs the Plan's due runs and writes them; the Plan as written, or None."""
        meta, status = plan.get("metadata") or {}, plan.get("status") or {}
        ns, name, uid = str(meta["namespace"]), str(meta["name"]), str(meta["uid"])
        runs = signed.due(status, self.clock())
        capsule_name = (plan.get("spec") or {}).get("capsule") or "default"
        capsule = await self._capsule(ns, capsule_name)
        log.debug("plan %s/%s: runs %s due for signing", ns, name, runs)
        if not runs or capsule is None or not self.stored.wanted(capsule):
            if capsule is not None and runs:
                self._none[(ns, name)] = signed.kept_runs(status)[0]
                while len(self._none) > NONE_KEPT:
                    del self._none[next(iter(self._none))]
            return None
        store = await self.stored.store_for(ns, capsule_name, capsule)
        current = signed.kept_runs(status)[0]
        lifetime = timedelta(seconds=signed.SIGN_LIFETIME_SECONDS)
        at = datetime.fromtimestamp(self.clock(), UTC).replace(microsecond=0)
        new = []
        for run in runs:
            rels, unsigned = signed.budgeted(await self._keys(plan, run, current))
            run_keys = keys_.RunKeys(store.repo.key_prefix, ns, uid, run)
            urls = {r: store.presign_get(run_keys.run_prefix + r, lifetime, at) for r in rels}
            new.append(
                signed.compact(
                    run,
                    urls,
                    repository=store.repo.describe(),
                    key_prefix=store.repo.key_prefix,
                    records=signed.records_of(status) if run == current else None,
                    expires_at=at.timestamp() + lifetime.total_seconds(),
                    unsigned=unsigned,
                )
            )
        written = await self.writer.change(ns, name, lambda p: _with(p, new))
        counts = ", ".join(f"run {e['run']}: {len(signed.signed_keys(e))}" for e in new)
        log.info("plan %s/%s: reading URLs signed (%s)", ns, name, counts)
        return written

    async def _keys(self, plan: Obj, run: str, current: str) -> tuple[str, ...]:
        """The keys to sign of `run`: from its records (the current run's, as they settle),
        else those its entry holds (an earlier run: signed again as they were; an entry kept
        in the history is within signed.BUDGET_BYTES, so never a full one)."""
        meta, status = plan["metadata"], plan.get("status") or {}
        held = signed.entry(status, run)
        if run != current:
            return signed.signed_keys(held) if held is not None else ()
        records = (status.get("report") or {}).get("steps") or []
        if (status.get("report") or {}).get("reportObjects"):
            ref_selector = chunks.selector(
                PlanRef(meta["namespace"], meta["name"], meta["uid"], run)
            )
            listed = await self.stored.kube.list_plan_reports(meta["namespace"], ref_selector)
            records = chunks.records_json(listed, meta["uid"], run)
        rel = signed.relative_run_keys(meta["namespace"], meta["uid"], run)
        return signed.keys_of_records(records, rel)

    async def _capsule(self, namespace: str, name: str) -> CapsuleSpec | None:
        return await self.stored.capsule_spec(namespace, name)


def _with(plan: Obj, new: list[Obj]) -> Obj | None:
    """The Plan's status with the new entries, only for runs it still keeps (a run replaced
    while signing: its entry is still kept while the history holds it)."""
    status = plan.get("status") or {}
    kept = set(signed.kept_runs(status))
    return signed.written(status, [e for e in new if e["run"] in kept])
