"""The one harness the reconcile tests drive the reconciler with: a namespace of the in-memory
API (fakekube.FakeKube) holding Capsules and Plans, a clock, and a reconciler as an operator
(re)started then would have. What the cluster does by itself (a step's Job ending with its pod
and log, the archive's mark, an edit by a user) is done here as the cluster would show it; faults
are the fake's (refuse, deny, fail, on, delay, gate)."""

from __future__ import annotations

import asyncio
from typing import Any

from planops.api import names
from planops.engine.report import rfc3339
from planops.kube import manifests
from planops.reconciler.reconcile import Reconciler

from .fakekube import FakeKube

NOW = 1_800_000_000.0
Obj = dict[str, Any]


class Cluster:
    """One namespace `ns` (others when named), its Capsules and Plans (`steps`: those of a Plan
    made without), a clock (`now`, moved by `tick` seconds before each reconcile) and the
    reconciler (`operator` makes a new one: a restart, other flags)."""

    def __init__(
        self,
        capsules: dict[str, Obj] | None = None,
        *,
        kube: FakeKube | None = None,
        now: float = NOW,
        tick: float = 0.0,
        steps: list[Obj] | None = None,
        **operator: Any,
    ) -> None:
        self.kube = kube or FakeKube()
        self.now, self.tick = now, tick
        #: the steps of a Plan made with none given
        self.steps = steps or []
        for name, spec in (capsules or {}).items():
            self.capsule(name, spec)
        self._operator = operator
        self.reconciler = self.operator()

    def operator(self, **kw: Any) -> Reconciler:
        """A reconciler as an operator (re)started now would have (nothing in memory), with the
        flags given to the harness and `kw`."""
        return Reconciler(self.kube, clock=lambda: self.now, **{**self._operator, **kw})

    # -- what users and the cluster write -----------------------------------------------------

    def capsule(self, name: str, spec: Obj, namespace: str = "ns") -> None:
        self.kube.put("capsule", {"metadata": {"name": name, "namespace": namespace}, "spec": spec})

    def new_plan(
        self,
        name: str = "p",
        second: int | None = None,
        steps: list[Obj] | None = None,
        namespace: str = "ns",
        *,
        uid: str | None = None,
        annotations: dict[str, str] | None = None,
        **spec: Any,
    ) -> Obj:
        """A Plan as its author applies it (`second`: created at that second of a fixed minute,
        which orders a Capsule's queue)."""
        meta: Obj = {
            "name": name,
            "namespace": namespace,
            "uid": uid or f"uid-{name}",
            "generation": 1,
        }
        if second is not None:
            meta["creationTimestamp"] = f"2027-01-15T08:00:{second:02d}Z"
        if annotations:
            meta["annotations"] = dict(annotations)
        return self.kube.put(
            "plan",
            {
                "apiVersion": "planops.dev/v1alpha1",
                "kind": "Plan",
                "metadata": meta,
                "spec": {"steps": steps if steps is not None else self.steps, **spec},
            },
        )

    def annotate(self, key: str, value: str, name: str = "p", namespace: str = "ns") -> None:
        """A user's annotation (kubectl annotate, kubectl plan rerun/retry/cancel/answer)."""
        obj = self.obj(name, namespace)
        obj["metadata"].setdefault("annotations", {})[key] = value
        self._changed(obj)

    def set_phase(self, name: str, phase: str = "Succeeded", namespace: str = "ns") -> None:
        """The Plan's run ends (its status says so), without its steps."""
        obj = self.obj(name, namespace)
        obj["status"] = {**obj["status"], "phase": phase}
        self._changed(obj)

    def mark_archived(self, name: str = "p", namespace: str = "ns") -> None:
        """What the archive writes once the run's row commits."""
        obj = self.obj(name, namespace)
        obj["status"]["archived"] = obj["status"]["run"]["id"]
        self._changed(obj)

    def end(
        self,
        step: str,
        attempt: int | None = 1,
        *,
        ok: bool = True,
        output: str = "",
        name: str = "p",
    ) -> None:
        """The step's Job (of `attempt` in the Plan's current run; None: its latest) ends, as
        the Job controller and the kubelet show it: its condition, its pod ended, its log."""
        self.end_job(self.job_name(step, attempt, name), ok=ok, output=output)

    def end_job(self, job_name: str, *, ok: bool = True, output: str = "") -> None:
        """The Job `job_name` ends (end)."""
        job = self.kube.get("job", "ns", job_name)
        assert job is not None, job_name
        self.kube.finish_job(job, ok, rfc3339(self.now) or "", output)

    def finish(self, step: str, ok: bool, name: str = "p") -> None:
        """The step's latest Job ends, saying hi."""
        self.end(step, None, ok=ok, output=f"{step} said hi\n", name=name)

    def _changed(self, obj: Obj) -> None:
        obj["metadata"]["resourceVersion"] += "1"

    # -- reconcile -------------------------------------------------------------------------------

    def reconcile(self, *names: str, namespace: str = "ns") -> float | None:
        """Reconcile the Plans (`p` when none is named), one after another; the last wake-up."""
        wake = None
        for name in names or ("p",):
            self.now += self.tick
            wake = asyncio.run(self.reconciler.reconcile(namespace, name))
        return wake

    def reconciled(self, name: str = "p", namespace: str = "ns") -> Obj:
        """Reconcile the Plan; its status after."""
        self.reconcile(name, namespace=namespace)
        return self.status(name, namespace)

    # -- what the cluster holds ------------------------------------------------------------------

    def obj(self, name: str = "p", namespace: str = "ns") -> Obj:
        found = self.kube.get("plan", namespace, name)
        assert found is not None, name
        return found

    @property
    def plan(self) -> Obj:
        """The Plan `p`."""
        return self.obj()

    def plans(self, namespace: str = "ns") -> dict[str, Obj]:
        return {p["metadata"]["name"]: p for p in self.kube.of("plan", namespace)}

    def status(self, name: str = "p", namespace: str = "ns") -> Obj:
        status: Obj = self.obj(name, namespace).get("status") or {}
        return status

    def run(self, name: str = "p") -> str:
        """The id of the Plan's current run (its first run's before any reconcile)."""
        found = (self.status(name).get("run") or {}).get("id")
        uid = self.obj(name)["metadata"]["uid"]
        return str(found) if found else manifests.run_id(uid, 1, 1)

    def job_name(self, step: str, attempt: int | None = 1, name: str = "p") -> str:
        """The Job of the step's attempt in the Plan's current run (None: its latest)."""
        if attempt is None:
            mine = self.step_jobs(name)
            assert step in mine, (step, sorted(mine))
            return str(mine[step]["metadata"]["name"])
        return manifests.child_name(name, self.run(name), step, attempt)

    def jobs(self, name: str | None = None) -> list[str]:
        """The Jobs there are (the Plan's, when named), by name."""
        return sorted(
            j["metadata"]["name"]
            for j in self.kube.of("job")
            if name is None or j["metadata"]["labels"].get(names.LABEL_PLAN) == name
        )

    def step_jobs(self, name: str = "p") -> dict[str, Obj]:
        """The Plan's current run's Jobs by step (each step's latest attempt)."""
        run = self.run(name)
        found = [
            j
            for j in self.kube.of("job")
            if j["metadata"]["labels"].get(names.LABEL_PLAN) == name
            and j["metadata"]["labels"][names.LABEL_RUN] == run
        ]
        found.sort(key=lambda j: int(j["metadata"]["labels"][names.LABEL_ATTEMPT]))
        return {j["metadata"]["labels"][names.LABEL_STEP]: j for j in found}

    def running(self) -> set[str]:
        """The Plans that created a Job (in any namespace)."""
        return {
            j["metadata"]["labels"][names.LABEL_PLAN]
            for (kind, _, _), j in self.kube.objects.items()
            if kind == "job"
        }

    def events(self, reason: str) -> list[str]:
        return [e["message"] for e in self.kube.events if e.get("reason") == reason]

    def deleted(self, method: str = "delete_job") -> list[str]:
        return [n for m, _, n in self.kube.calls if m == method]
