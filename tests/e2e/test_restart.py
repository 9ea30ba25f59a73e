"""Restart safety: the operator is SIGKILLed at random points of a multi-step plan and restarted.

All run state lives in the Plan's status and its Jobs, and Job names are deterministic, so the run
must finish with the report an uninterrupted run gives, and no step attempt may have two Jobs.
"""

from __future__ import annotations

import json
import random
import signal
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import Kube
from tests.e2e.conftest import capsule, plan, start_operator, steps, wait_plan

pytestmark = [pytest.mark.cluster, pytest.mark.node]

FLAKY = "sh -c '[ \"$PLANOPS_ATTEMPT\" -ge 2 ] && echo ok-$PLANOPS_STEP || exit 1'"
STEPS = [
    {"id": "a", "shell": "sh -c 'sleep 1; echo a'"},
    {"id": "b", "shell": "sh -c 'sleep 2; echo b'", "dependsOn": ["a"]},
    {"id": "c", "shell": "sh -c 'sleep 1; echo c'", "dependsOn": ["a"]},
    {"id": "t1", "tool": "echo-input", "dependsOn": ["b"], "input": {"from": "$b.output"}},
    {"id": "t2", "tool": "echo-input", "dependsOn": ["c"], "input": {"from": "$c.output"}},
    {"id": "r", "shell": FLAKY, "retries": 2, "dependsOn": ["c"]},
    {"id": "skip", "shell": "echo never", "dependsOn": ["r"], "if": "$r.status == 'failed'"},
    {"id": "z", "shell": "echo done", "dependsOn": ["t1", "t2", "skip"]},
]
EXPECTED = {  # step -> (status, output, attempts)
    "a": ("success", "a", 1),
    "b": ("success", "b", 1),
    "c": ("success", "c", 1),
    "t1": ("success", {"from": "b"}, 1),
    "t2": ("success", {"from": "c"}, 1),
    "r": ("success", "ok-r", 2),
    "skip": ("skipped", None, 0),
    "z": ("success", "done", 1),
}


def test_sigkill_at_random_points_never_duplicates_a_job_and_the_report_is_exact(
    kube: Kube, kubeconfig: str, crds: None, busybox: str, tmp_path: Path
):
    ns = f"restart-{uuid.uuid4().hex[:8]}"
    kube.run("create", "namespace", ns)
    kube.apply(capsule(busybox), "-n", ns)
    rng = random.Random(int(time.time()))
    log = tmp_path / "operator.log"
    kills = 0
    try:
        op = start_operator(kubeconfig, [ns], log)
        kube.apply(plan("survivor", *STEPS), "-n", ns)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            time.sleep(rng.uniform(0.3, 2.5))
            phase = (kube.get("plan", "survivor", "-n", ns).get("status") or {}).get("phase")
            if phase in ("Succeeded", "Failed"):
                break
            op.stop(signal.SIGKILL)
            kills += 1
            op = start_operator(kubeconfig, [ns], log)
        obj = wait_plan(kube, ns, "survivor", phases=("Succeeded", "Failed"), timeout=120)
        op.stop()
        assert kills >= 3, f"only {kills} kills happened: the test proved little"
        assert obj["status"]["phase"] == "Succeeded", json.dumps(obj["status"], indent=1)
        rep = steps(obj)
        got = {}
        for sid, rec in rep.items():
            out = rec["output"]
            got[sid] = (
                rec["status"],
                json.loads(out) if sid.startswith("t") else out,
                rec["attempts"],
            )
        assert got == EXPECTED
        # eight short records: the status was the whole report, restored from it at each start
        assert obj["status"]["report"]["reportObjects"] == 0
        assert kube.get("planreports", "-n", ns)["items"] == []
        jobs = kube.get("jobs", "-n", ns, "-l", "planops.dev/plan=survivor")["items"]
        per_attempt = Counter(
            (
                j["metadata"]["labels"]["planops.dev/step"],
                j["metadata"]["labels"]["planops.dev/attempt"],
            )
            for j in jobs
        )
        assert all(n == 1 for n in per_attempt.values()), per_attempt
        assert sorted(per_attempt) == sorted(
            (sid, str(a)) for sid, (_, _, n) in EXPECTED.items() for a in range(1, n + 1)
        )
    except BaseException:
        tail = log.read_text()[-6000:] if log.exists() else ""
        print(f"--- operator log ({kills} kills) ---\n{tail}")
        raise
    finally:
        kube.run("delete", "namespace", ns, "--wait=false", check=False)
