"""bench/scale.py's workloads as data: the plans (or, for `jobs`, the bare Jobs) of each, their
sizes (a tenth with --quick, K times with --scale K) and when each step could start. Apart from
the runner so that the unit tests read them without a cluster."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.cluster import kwok  # noqa: E402
from tests.e2e.conftest import plan  # noqa: E402

IMAGE = "local/busybox:1.35.0"  # never pulled: simulated nodes run nothing
FULL = {
    "one_step": {"plans": 5000, "over_s": 60},
    "concurrent": {"plans": 200, "steps": 50},
    "large": {"steps": 20000},
    "map": {"items": 10000},
    "jobs": {"jobs": 20000},
}
#: what runs without --workloads: the operator's workloads (jobs is the baseline beside them)
DEFAULT_WORKLOADS = "one_step,concurrent,large,map"


@dataclass
class Load:
    """One workload: its plans, how many steps settle, and when each step could start."""

    plans: list[dict[str, Any]]
    total: int
    over_s: float = 0.0  # submitted evenly over this long (0: at once)
    size: int = 0  # what the limit applies to (steps of one plan, items of one map)
    #: (plan, step) -> the key whose pod being done lets it start; None: its plan being applied
    after: Callable[[str, str], tuple[str, str] | None] = lambda p, s: None
    map_concurrency: int = 0
    jobs: list[dict[str, Any]] = field(default_factory=list)  # created bare, no operator


def one_step(n: int, over_s: float) -> Load:
    step = {"id": "only", "shell": f"sleep {max(1, round(over_s))}"}
    return Load([plan(f"one-{i}", step) for i in range(n)], n, over_s, 1)


def chains(n: int, steps: int) -> Load:
    def chain(name: str) -> dict[str, Any]:
        s = [{"id": "s0", "shell": "true"}]
        s += [{"id": f"s{i}", "shell": "true", "dependsOn": [f"s{i - 1}"]} for i in range(1, steps)]
        return plan(name, *s)

    def after(p: str, s: str) -> tuple[str, str] | None:
        i = int(s[1:])
        return (p, f"s{i - 1}") if i else None

    return Load([chain(f"chain-{i}") for i in range(n)], n * steps, 0, steps, after)


def large(steps: int) -> Load:
    s = [{"id": f"s{i}", "shell": "true"} for i in range(steps)]
    return Load([plan("large", *s)], steps, 0, steps)


def mapped(items: int) -> Load:
    conc = min(1000, items)
    step = {
        "id": "fan",
        "map": {"over": "{{input.items}}", "concurrency": conc, "do": {"shell": "true"}},
    }
    doc = plan("map", step, input={"items": list(range(items))})
    return Load([doc], items + 1, 0, items, map_concurrency=conc)


def bare_jobs(n: int) -> Load:
    """Jobs shaped like a step's (kube/manifests.py job()), labelled like one so the watches
    time them alike; the plan label is one no Plan has. Written out rather than made by job():
    that one names its Plan as the Job's owner, and the garbage collector deletes Jobs whose
    owner does not exist."""

    def one(i: int) -> dict[str, Any]:
        labels: dict[str, Any] = {"planops.dev/plan": "bare", "planops.dev/step": f"s{i}"}
        return {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": f"bare-s{i}", "labels": labels},
            "spec": {
                "backoffLimit": 0,
                "template": {
                    "metadata": {"labels": labels},
                    "spec": {
                        "restartPolicy": "Never",
                        "automountServiceAccountToken": False,
                        "enableServiceLinks": False,
                        "securityContext": {
                            "runAsNonRoot": True,
                            "runAsUser": 65532,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "containers": [
                            {
                                "name": "step",
                                "image": IMAGE,
                                "command": ["sh", "-c", "true"],
                                "securityContext": {
                                    "allowPrivilegeEscalation": False,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                                "resources": {"limits": {"cpu": "100m", "memory": "64Mi"}},
                            }
                        ],
                        "nodeSelector": kwok.PLACEMENT["nodeSelector"],
                        "tolerations": kwok.PLACEMENT["tolerations"],
                    },
                },
            },
        }

    return Load([], n, 0, 0, jobs=[one(i) for i in range(n)])


def loads(quick: bool, k: float) -> dict[str, Load]:
    f = (0.1 if quick else 1.0) * k
    one, conc = FULL["one_step"], FULL["concurrent"]
    return {
        "one_step": one_step(round(one["plans"] * f), one["over_s"] * (0.1 if quick else 1.0)),
        "concurrent": chains(round(conc["plans"] * f), conc["steps"]),
        "large": large(round(FULL["large"]["steps"] * f)),
        "map": mapped(round(FULL["map"]["items"] * f)),
        "jobs": bare_jobs(round(FULL["jobs"]["jobs"] * f)),
    }
