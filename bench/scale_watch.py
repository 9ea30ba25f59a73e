"""What bench/scale.py watches and sends while a workload runs: Jobs and pods seen, timed, on
`kubectl get --watch` columns; the operator sampled each second; plans and Jobs created with plain
POSTs; dispatch latency from the moment each step could start."""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import ssl
import sys
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.measure import Cluster, proc_rss_mib, watch  # noqa: E402
from bench.operator_bench import metric  # noqa: E402
from bench.scale_loads import Load  # noqa: E402
from tests.e2e.conftest import Operator  # noqa: E402


def progress(msg: str) -> None:
    print(f"[scale {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class Columns:
    """`kubectl get --watch` of one resource in one namespace, printing a few columns per event
    (the full objects of 20,000 pods are too much to parse beside the operator on 2 cores);
    `on(seen_at, [type, column...])` per event, timed as its line arrives.

    The API server closes a watch whose client falls behind ("Forcing watcher close due to
    unresponsiveness": a buffer of 10 events in its watch cache), and kubectl then exits
    without a word: the watch is started again, its listing reporting every object as it is
    then (an object that changed while no watch ran is timed at the new listing, later than it
    happened), and `restarts` counts how often that happened."""

    def __init__(
        self,
        kubeconfig: str,
        resource: str,
        namespace: str,
        columns: list[str],
        on: Callable[[float, list[str]], None],
    ) -> None:
        spec = ",".join(f"C{i}:{c}" for i, c in enumerate([".type", *columns]))
        self._args = (kubeconfig, resource, namespace, f"custom-columns={spec}", "--no-headers")
        self.proc = watch(*self._args)
        self.restarts = 0
        self._stopped = threading.Event()
        self.thread = threading.Thread(target=self._read, args=(on,), daemon=True)
        self.thread.start()

    def _read(self, on: Callable[[float, list[str]], None]) -> None:
        while True:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                on(time.monotonic(), line.split())
            self.proc.wait()
            if self._stopped.is_set():
                return
            self.restarts += 1
            progress(f"{self._args[1]} watch closed by the API server: started again")
            self.proc = watch(*self._args)
            if self._stopped.is_set():  # stopped while this one started
                self.proc.terminate()

    def stop(self) -> None:
        self._stopped.set()
        self.proc.terminate()
        self.proc.wait(10)


def stop_watches(watches: list[Columns], out: dict[str, Any]) -> None:
    """Stop a workload's watches; `out["watch_restarts"]` says how often the API server closed
    them (some objects then timed late: Columns)."""
    for w in watches:
        w.stop()
    if restarts := sum(w.restarts for w in watches):
        out["watch_restarts"] = restarts


STEP_LABEL = ".object.metadata.labels.planops\\.dev/step"
PLAN_LABEL = ".object.metadata.labels.planops\\.dev/plan"


@dataclass
class Seen:
    """Jobs first seen ADDED and pods first seen done, by (plan, step) label."""

    job_added: dict[tuple[str, str], float] = field(default_factory=dict)
    pod_done: dict[tuple[str, str], float] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def on_job(self, now: float, cols: list[str]) -> None:
        if len(cols) >= 3:
            with self.lock:
                self.job_added.setdefault((cols[1], cols[2]), now)

    def job_create_rate(self) -> float | None:
        """Jobs seen ADDED per second, from the first to the last (None: fewer than two)."""
        with self.lock:
            added = sorted(self.job_added.values())
        if len(added) < 2:
            return None
        return len(added) / max(added[-1] - added[0], 1e-3)

    def on_pod(self, now: float, cols: list[str]) -> None:
        if len(cols) >= 4 and cols[3] in ("Succeeded", "Failed"):
            with self.lock:
                self.pod_done.setdefault((cols[1], cols[2]), now)


def pod_watch(cluster: Cluster, ns: str, seen: Seen) -> Columns:
    """Each pod of `ns` seen done, timed, into `seen` (by its plan and step labels)."""
    return Columns(
        cluster.kubeconfig,
        "pods",
        ns,
        [PLAN_LABEL, STEP_LABEL, ".object.status.phase"],
        seen.on_pod,
    )


def requests_since(cluster: Cluster, before: dict[str, float]) -> dict[str, float]:
    """The API server's requests by FlowSchema since `before` (Cluster.requests())."""
    return {k: v - before.get(k, 0.0) for k, v in cluster.requests().items()}


class Sampler:
    """Each second: the operator's RSS and its settled-steps counter."""

    def __init__(self, op: Operator) -> None:
        self.op, self.rss, self.settled = op, 0.0, [(time.monotonic(), 0.0)]
        self.succeeded = 0.0
        self.plans_done = 0.0
        self.stop_ = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop_.is_set():
            self.sample()
            self.stop_.wait(1.0)

    def sample(self) -> None:
        try:
            self.rss = max(self.rss, proc_rss_mib(self.op.proc.pid))
            text = self.op.metrics()
        except OSError:
            return
        settled = metric(text, "planops_steps_total")
        self.succeeded = sum(
            float(line.rsplit(" ", 1)[1])
            for line in text.splitlines()
            if line.startswith("planops_steps_total{") and 'status="success"' in line
        )
        self.plans_done = metric(text, "planops_plans_total")
        if settled != self.settled[-1][1]:
            self.settled.append((time.monotonic(), settled))

    def stop(self) -> None:
        self.stop_.set()
        self.thread.join(5)
        self.sample()


def dispatch_latencies(load: Load, seen: Seen, applied: dict[str, float]) -> list[float]:
    with seen.lock:
        added, done = dict(seen.job_added), dict(seen.pod_done)
    if load.map_concurrency:  # item k + C starts when any of the earlier items ends
        starts = sorted(added.values())
        ends = sorted(done.values())
        first = min(applied.values())
        out = [t - first for t in starts[: load.map_concurrency]]
        out += [s - e for s, e in zip(starts[load.map_concurrency :], ends, strict=False)]
        return [max(0.0, x) for x in out]
    out = []
    for (p, s), t in added.items():
        dep = load.after(p, s)
        ready = done.get(dep) if dep is not None else applied.get(p)
        if ready is not None:
            out.append(max(0.0, t - ready))
    return out


class Poster:
    """Creates objects with plain POSTs on kept-alive connections, as the client `bench-submit`
    (its own FlowSchema): `kubectl apply` runs a process and a GET per object, far too slow to
    submit 83 plans a second on this machine."""

    def __init__(self, cluster: Cluster) -> None:
        cluster.identity("bench-submit")
        cluster.classify("bench-submit", [{"kind": "User", "user": {"name": "bench-submit"}}])
        pki = cluster.dir / "pki"
        self.ctx = ssl.create_default_context(cafile=str(pki / "ca.crt"))
        self.ctx.load_cert_chain(
            str(pki / "bench-bench-submit.crt"), str(pki / "bench-bench-submit.key")
        )
        self.host = urllib.parse.urlsplit(cluster.server).netloc
        self.local = threading.local()

    def create(self, path: str, obj: dict[str, Any]) -> None:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = self.local.conn = http.client.HTTPSConnection(self.host, context=self.ctx)
        conn.request("POST", path, json.dumps(obj), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        body = resp.read()
        if resp.status not in (200, 201):
            raise SystemExit(f"POST {path}: {resp.status} {body[:500]!r}")


def submit(cluster: Cluster, ns: str, load: Load) -> dict[str, float]:
    """Creates the plans (evenly over load.over_s, else at once), four at a time, returning when
    each one's create returned."""
    poster = Poster(cluster)
    path = f"/apis/planops.dev/v1alpha1/namespaces/{ns}/plans"
    applied: dict[str, float] = {}
    t0 = time.monotonic()
    n = len(load.plans)

    def one(i: int) -> None:
        if load.over_s:
            time.sleep(max(0.0, t0 + load.over_s * i / n - time.monotonic()))
        poster.create(path, load.plans[i])
        applied[load.plans[i]["metadata"]["name"]] = time.monotonic()

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(one, range(n)))
    return applied
