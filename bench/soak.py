"""Soak under faults: N plans of mixed shapes run to the end while a bounded random schedule of
faults hits the test cluster; every plan must end with the report an undisturbed run gives.

    eval "$(tests/cluster/up --with-node)"
    .venv/bin/python bench/soak.py [--plans 50] [--seed S] [--fault-every 25] [-o json]

Two operator replicas with leader election (the chart's shape) run the plans; the faults are the
ones whose defined outcome is "nothing changes for the plan" (docs/operations.md, "Faults"): the
leader SIGKILLed (and started again as the standby), kube-apiserver or etcd down for a few
seconds, the kubelet, the scheduler or the controller manager restarted, the operators cut off
from the API server. (Not containerd: while it is down, what a running container prints is lost
by the node itself; docs/operations.md says what planops does about it.) Shapes: a chain, a
fan-out and join, tool steps with references, a flaky step with retries, a capsule step (a child
Plan). Prints the faults injected,
the plans that ended exact, any step whose report differs, and Jobs per step attempt (must be 1).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.conftest import Kube  # noqa: E402
from tests.e2e.conftest import capsule, plan  # noqa: E402
from tests.faults.conftest import Cluster, Pair, jobs_per_attempt  # noqa: E402

FLAKY = "sh -c '[ \"$PLANOPS_ATTEMPT\" -ge 2 ] && echo ok-$PLANOPS_STEP || exit 1'"


def shapes() -> dict[str, tuple[list[dict[str, Any]], dict[str, tuple[str, Any, int]]]]:
    """name -> (steps, expected {step: (status, output, attempts)})."""
    chain = [{"id": "c0", "shell": "sh -c 'sleep 1; echo c0'"}] + [
        {"id": f"c{i}", "shell": f"sh -c 'sleep 1; echo c{i}'", "dependsOn": [f"c{i - 1}"]}
        for i in range(1, 5)
    ]
    fan = [{"id": "go", "shell": "echo go"}]
    fan += [{"id": f"w{i}", "shell": f"echo w{i}", "dependsOn": ["go"]} for i in range(6)]
    fan += [{"id": "join", "shell": "echo joined", "dependsOn": [f"w{i}" for i in range(6)]}]
    tools = [
        {"id": "src", "shell": "echo src"},
        {"id": "t1", "tool": "echo-input", "dependsOn": ["src"], "input": {"v": "$src.output"}},
        {"id": "t2", "tool": "echo-input", "dependsOn": ["t1"], "input": {"s": "$t1.status"}},
    ]
    retry = [
        {"id": "flaky", "shell": FLAKY, "retries": 2},
        {"id": "after", "shell": "echo after", "dependsOn": ["flaky"]},
    ]
    child = [{"id": "delegate", "capsule": "helper", "input": "work"}]
    return {
        "chain": (chain, {f"c{i}": ("success", f"c{i}\n", 1) for i in range(5)}),
        "fan": (
            fan,
            {"go": ("success", "go\n", 1), "join": ("success", "joined\n", 1)}
            | {f"w{i}": ("success", f"w{i}\n", 1) for i in range(6)},
        ),
        "tools": (
            tools,
            {
                "src": ("success", "src\n", 1),
                "t1": ("success", {"v": "src\n"}, 1),
                "t2": ("success", {"s": "success"}, 1),
            },
        ),
        "retry": (
            retry,
            {"flaky": ("success", "ok-flaky\n", 2), "after": ("success", "after\n", 1)},
        ),
        "child": (child, {"delegate": ("success", "delegated\n", 1)}),
    }


def report_of(obj: dict[str, Any]) -> dict[str, tuple[str, Any, int]]:
    out = {}
    for s in (obj.get("status") or {}).get("report", {}).get("steps", []):
        output = s.get("output")
        if s["stepId"].startswith("t") and output:
            output = json.loads(output)
        out[s["stepId"]] = (s["status"], output, s["attempts"])
    return out


def settled_get(kube: Kube, *args: str) -> dict[str, Any]:
    """kubectl get, retried while the API server comes back from the last fault."""
    deadline = time.monotonic() + 60
    while True:
        got = kube.run("get", *args, "-o", "json", check=False)
        if got.returncode == 0 and got.stdout.strip():
            return json.loads(got.stdout)  # type: ignore[no-any-return]
        if time.monotonic() > deadline:
            raise RuntimeError(f"kubectl get {' '.join(args)}: {got.stderr}")
        time.sleep(1)


class Faults:
    """A bounded random schedule of faults, one every `every` seconds (jittered)."""

    KINDS = (
        "kill-leader",
        "kube-apiserver",
        "etcd",
        "kubelet",
        "kube-scheduler",
        "kube-controller-manager",
        "cut-operators",
    )

    def __init__(
        self,
        pair: Pair,
        cluster: Cluster,
        rng: random.Random,
        every: float,
        kinds: tuple[str, ...] = KINDS,
    ) -> None:
        self.pair, self.cluster, self.rng, self.every = pair, cluster, rng, every
        self.kinds = kinds
        self.done: Counter[str] = Counter()
        self.stop = threading.Event()
        self.errors: list[str] = []

    def one(self) -> str:
        kind = self.rng.choice(self.kinds)
        if kind == "kill-leader":
            leader = self.pair.leader()
            self.pair.kill(leader)
            self.pair.start(leader.name)
        elif kind == "cut-operators":
            threads = [
                threading.Thread(target=r.relay.cut, args=(10,))
                for r in self.pair.replicas.values()
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        else:
            down = "4" if kind in ("kube-apiserver", "etcd") else "1"
            self.cluster.restart(kind, "--down", down)
        return kind

    def run(self) -> None:
        while not self.stop.wait(self.rng.uniform(0.5, 1.5) * self.every):
            try:
                self.done[self.one()] += 1
            except Exception as e:  # a fault that could not be injected is reported, not fatal
                self.errors.append(f"{type(e).__name__}: {e}")
                self.cluster.heal()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plans", type=int, default=50)
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--fault-every", type=float, default=25.0, help="seconds between faults")
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--keep", action="store_true", help="keep the namespace, to look into it")
    ap.add_argument(
        "--faults", default=",".join(Faults.KINDS), help="the kinds to draw from (comma-separated)"
    )
    ap.add_argument("-o", "--output", choices=["table", "json"], default="table")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    kubeconfig = str(Path(os.environ["KUBECONFIG"]).resolve())
    kube = Kube(kubeconfig)
    kube.run("apply", "-f", str(ROOT / "crds"))
    busybox = (Path(kubeconfig).parent / "busybox-image").read_text().strip()
    ns, lease_ns = f"f-soak-{uuid.uuid4().hex[:6]}", f"lease-{uuid.uuid4().hex[:6]}"
    for n in (ns, lease_ns):
        kube.run("create", "namespace", n)
    kube.apply(capsule(busybox, spawn={"allow": ["helper"]}), "-n", ns)
    helper = capsule(
        busybox, name="helper", plan={"steps": [{"id": "w", "shell": "echo delegated"}]}
    )
    kube.apply(helper, "-n", ns)
    cluster = Cluster(kubeconfig)
    pair = Pair(kube, kubeconfig, Path(tempfile.mkdtemp(prefix="planops-soak-")), lease_ns)
    catalog = shapes()
    names = sorted(catalog)
    wanted = {f"p{i:03d}-{(s := names[i % len(names)])}": s for i in range(args.plans)}
    kinds = tuple(k for k in args.faults.split(",") if k)
    unknown = set(kinds) - set(Faults.KINDS)
    if unknown:
        ap.error(f"unknown faults: {', '.join(sorted(unknown))} (known: {', '.join(Faults.KINDS)})")
    faults = Faults(pair, cluster, rng, args.fault_every, kinds)
    t0 = time.monotonic()
    injector = threading.Thread(target=faults.run, daemon=True)
    injector.start()
    try:
        for name, shape in wanted.items():  # submitted while the faults already run
            body = json.dumps(plan(name, *catalog[shape][0]))
            deadline = time.monotonic() + 120
            while kube.run("apply", "-n", ns, "-f", "-", input=body, check=False).returncode:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"could not submit {name}")
                time.sleep(1)
        pending = set(wanted)
        while pending and time.monotonic() - t0 < args.timeout:
            time.sleep(3)
            got = kube.run("get", "plans", "-n", ns, "-o", "json", check=False)
            if got.returncode != 0:
                continue  # the API server is down right now
            for p in json.loads(got.stdout)["items"]:
                if (p.get("status") or {}).get("phase") in ("Succeeded", "Failed", "Invalid"):
                    pending.discard(p["metadata"]["name"])
        faults.stop.set()
        injector.join()
        cluster.heal()
        wall = time.monotonic() - t0
        exact, wrong, duplicates, again = 0, [], 0, 0
        items = {p["metadata"]["name"]: p for p in settled_get(kube, "plans", "-n", ns)["items"]}
        for name, shape in wanted.items():
            obj = items.get(name, {})
            rep, expected = report_of(obj), catalog[shape][1]
            per_attempt = jobs_per_attempt(kube, ns, name)
            duplicates += sum(n - 1 for n in per_attempt.values() if n > 1)
            phase = (obj.get("status") or {}).get("phase")
            # exact: every step's status and output; attempts as undisturbed, or more where an
            # attempt never ran (the node failed to start it: started again, visible)
            same = rep.keys() == expected.keys() and all(
                rep[k][:2] == expected[k][:2] and rep[k][2] >= expected[k][2] for k in rep
            )
            if phase == "Succeeded" and same:
                exact += 1
                again += sum(rep[k][2] - expected[k][2] for k in rep)
            else:
                errors = {
                    r["stepId"]: r.get("error")
                    for r in (obj.get("status") or {}).get("report", {}).get("steps", [])
                    if r.get("error")
                }
                wrong.append(
                    {
                        "plan": name,
                        "phase": phase,
                        "got": rep,
                        "expected": expected,
                        "errors": errors,
                    }
                )
    finally:
        faults.stop.set()
        pair.stop()
        cluster.heal()
        for n in (lease_ns,) if args.keep else (ns, lease_ns):
            kube.run("delete", "namespace", n, "--wait=false", check=False)
    summary = {
        "namespace": ns if args.keep else None,
        "plans": args.plans,
        "exact": exact,
        "not_exact": len(wrong),
        "duplicate_jobs": duplicates,
        "attempts_started_again": again,
        "unfinished": len(pending),
        "faults": dict(faults.done),
        "fault_errors": faults.errors,
        "wall_s": round(wall, 1),
        "seed": args.seed,
    }
    if args.output == "json":
        print(json.dumps(summary))
    else:
        print(json.dumps(summary, indent=1))
    for w in wrong[:5]:
        print("NOT EXACT:", json.dumps(w)[:1500], file=sys.stderr)
    sys.exit(0 if exact == args.plans and duplicates == 0 else 1)


if __name__ == "__main__":
    main()
