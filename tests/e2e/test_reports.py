"""A report larger than the status holds, on the real cluster: every record goes to PlanReport
objects (chunks of 5 here, 3 records repeated in the status: the operator's flags), owned by the
Plan; `kubectl plan get -o json` and `describe` show every step; a SIGKILLed operator restarted
mid-plan resumes from the status, the PlanReports and the Jobs without losing or doubling a
record or running a settled step again (its Job deleted meanwhile), and never writes a closed
chunk again; deleting the Plan garbage-collects them (the
test cluster runs kube-controller-manager's garbage collector)."""

from __future__ import annotations

import json
import signal
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import Kube
from tests.e2e.conftest import capsule, cli, plan, start_operator, wait_plan

pytestmark = [pytest.mark.cluster, pytest.mark.node]

KEEP = {"value": "{{item}}", "op": "not_empty"}
STEPS = [
    {"id": "s0", "shell": "sh -c 'sleep 1; echo s0'"},
    *[
        {"id": f"f{i}", "dependsOn": ["s0"], "filter": {"over": "{{input.words}}", "where": KEEP}}
        for i in range(10)
    ],
    {"id": "s1", "shell": "sh -c 'sleep 6; echo s1'", "dependsOn": [f"f{i}" for i in range(10)]},
    *[
        {"id": f"g{i}", "dependsOn": ["s1"], "filter": {"over": "{{input.words}}", "where": KEEP}}
        for i in range(5)
    ],
    {"id": "s2", "shell": "echo s2", "dependsOn": [f"g{i}" for i in range(5)]},
]
IDS = [s["id"] for s in STEPS]  # also the order they settle in
FLAGS = ("--report-chunk-records", "5", "--status-records", "3")


def chunks(kube: Kube, ns: str, name: str) -> list[dict]:
    items = kube.get("planreports", "-n", ns, "-l", f"planops.dev/plan={name}")["items"]
    return sorted(items, key=lambda o: o["chunk"])


def test_a_report_beyond_the_status_lives_in_owned_chunks_survives_a_restart_and_is_collected(
    kube: Kube, kubeconfig: str, crds: None, busybox: str, tmp_path: Path
):
    ns = f"reports-{uuid.uuid4().hex[:8]}"
    kube.run("create", "namespace", ns)
    kube.apply(capsule(busybox), "-n", ns)
    log = tmp_path / "operator.log"
    op = start_operator(kubeconfig, [ns], log, *FLAGS)
    try:
        kube.apply(plan("wide", *STEPS, input={"words": ["a", "b"]}), "-n", ns)
        # kill the operator while s1 runs: 11 records written, chunks 0 and 1 closed
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            st = kube.get("plan", "wide", "-n", ns).get("status") or {}
            if any(f["stepId"] == "s1" for f in st.get("inFlight") or []):
                break
            time.sleep(0.3)
        else:
            raise AssertionError(f"s1 never started: {json.dumps(st)[:2000]}")
        op.stop(signal.SIGKILL)
        # s0's Job goes while the operator is down (as a TTL would take it): its record is only
        # in the PlanReports now (the status repeats the last 3), and the restart must not run
        # it again
        s0 = "planops.dev/plan=wide,planops.dev/step=s0"
        kube.run("delete", "jobs", "-n", ns, "-l", s0, "--cascade=foreground", "--wait=true")
        before = chunks(kube, ns, "wide")
        assert [c["count"] for c in before] == [5, 5, 1]
        closed = {c["metadata"]["name"]: c["metadata"]["resourceVersion"] for c in before[:2]}
        op = start_operator(kubeconfig, [ns], log, *FLAGS)

        obj = wait_plan(kube, ns, "wide", phases=("Succeeded", "Failed"), timeout=180)
        st = obj["status"]
        assert st["phase"] == "Succeeded", json.dumps(st)[:3000]
        # the status: a summary, every printer column and the Argo CD health fields there
        rep = st["report"]
        assert rep["records"] == len(IDS) and rep["stepsOmitted"] == len(IDS) - 3
        assert [s["stepId"] for s in rep["steps"]] == IDS[-3:]
        assert st["counts"] == {"success": len(IDS), "failed": 0, "skipped": 0}
        assert st["progress"] == f"{len(IDS)}/{len(IDS)}" and st["conditions"][0]["status"]
        row = kube.run("get", "plan", "wide", "-n", ns, "--no-headers").stdout.split()
        assert row[:3] == ["wide", "Succeeded", f"{len(IDS)}/{len(IDS)}"], row

        # the chunks: owned by the Plan, labelled with its run, continuing one another
        found = chunks(kube, ns, "wide")
        assert [(c["chunk"], c["first"], c["count"]) for c in found] == [
            (0, 0, 5),
            (1, 5, 5),
            (2, 10, 5),
            (3, 15, 3),
        ]
        for c in found:
            (owner,) = c["metadata"]["ownerReferences"]
            assert owner["kind"] == "Plan" and owner["uid"] == obj["metadata"]["uid"]
            assert owner["controller"] is True
            assert c["metadata"]["labels"]["planops.dev/run"] == st["run"]["id"]
        records = [r for c in found for r in c["records"]]
        assert [r["stepId"] for r in records] == IDS  # none lost, none twice, in order
        assert Counter(r["status"] for r in records) == {"success": len(IDS)}
        # the chunks closed before the restart were never written again
        assert {c["metadata"]["name"]: c["metadata"]["resourceVersion"] for c in found[:2]} == (
            closed
        )

        assert kube.get("jobs", "-n", ns, "-l", s0)["items"] == [], "s0 ran again"

        # the CLI assembles the whole report
        got = cli(kubeconfig, "get", "wide", "-n", ns, "-o", "json")
        assert got.returncode == 0, got.stderr
        full = json.loads(got.stdout)["status"]["report"]["steps"]
        assert [s["stepId"] for s in full] == IDS
        assert full[0]["output"] == "s0" and full[11]["output"] == "s1"
        described = cli(kubeconfig, "describe", "wide", "-n", ns)
        assert described.returncode == 0, described.stderr
        shown = [
            line.split()[0] for line in described.stdout.splitlines() if line[:1] in ("s", "f", "g")
        ]
        assert [s for s in shown if s in IDS] == IDS

        # deleting the Plan deletes its report (ownerReferences: the garbage collector)
        kube.run("delete", "plan", "wide", "-n", ns)
        deadline = time.monotonic() + 60
        while chunks(kube, ns, "wide"):
            assert time.monotonic() < deadline, "the PlanReports outlived their Plan"
            time.sleep(0.5)
    except BaseException:
        print(f"--- operator log ---\n{log.read_text()[-6000:] if log.exists() else ''}")
        raise
    finally:
        op.stop()
        kube.run("delete", "namespace", ns, "--wait=false", check=False)
