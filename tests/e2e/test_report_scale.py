"""A run of 40,000 body steps, accepted by the operator and reported completely.

One literal step costs at least ~25 bytes of spec, so 100,000 of them would make an object of
~2.5 MB: over what the API server takes (etcd's ~1.5 MiB request limit; the CRD bounds a spec
to 768 KiB and 30,000 steps, api/limits.py). A run of 100,000 steps is a `map` over
100,000 items (the spec holds the items, ~600 KB), which is how data teams fan out. Its body
is a `filter` step, settled by the operator itself, so the test measures the operator's and the
report's side without 100,000 pods; the pods' side is test_kwok.py's large plan and bench/scale.py.

Such a map of 100,000 items no longer runs to its end: a run writes at most 16 MiB of PlanReports
(engine/budget.py RUN_REPORT_BYTES; ~250 bytes per record), so it fails at about 48,800 records
with ReportBytesExceeded (test_report_bytes.py). 40,000 items stay within that budget.

The size is PLANOPS_REPORT_SCALE_ITEMS (40,000 by default).
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Iterator

import pytest

from planops.api.limits import SPEC_BUDGET
from planops.reconciler.run.status import json_size
from tests.conftest import Kube
from tests.e2e.conftest import (
    NS_PREFIX,
    STATUS_BOUND,
    Operator,
    capsule,
    cli,
    dense,
    plan,
    report_records,
    wait_plan,
)

pytestmark = pytest.mark.cluster

ITEMS = int(os.environ.get("PLANOPS_REPORT_SCALE_ITEMS", "40000"))
KEEP = {"value": "{{item}}", "op": "gte", "to": 0}  # every item: an integer from 0


@pytest.fixture
def big_ns(kube: Kube, operator: Operator, request: pytest.FixtureRequest) -> Iterator[str]:
    name = f"{NS_PREFIX}big-{uuid.uuid4().hex[:8]}"  # the session operator watches it
    kube.run("create", "namespace", name)
    kube.apply(capsule("local/busybox:1.35.0"), "-n", name)  # no step here runs a pod
    try:
        yield name
    finally:
        if getattr(request.node, "rep_call", None) and request.node.rep_call.failed:
            print(f"--- operator log (last 6000 chars) ---\n{operator.logs()[-6000:]}")
        kube.run("delete", "namespace", name, "--wait=false", check=False)


def test_a_map_of_40000_items_within_the_report_budget_runs_and_its_report_is_complete(
    kube: Kube, kubeconfig: str, big_ns: str
):
    doc = plan(
        "huge",
        {
            "id": "each",
            "map": {
                "over": "{{input.items}}",
                "concurrency": 1000,
                "do": [{"id": "keep", "filter": {"over": ["{{item}}"], "where": KEEP}}],
            },
        },
        input={"items": list(range(ITEMS))},  # ~590 KB: under the 768 KiB a spec may take
    )
    started = time.monotonic()
    # server-side: a client-side apply keeps the whole object in an annotation, which the API
    # server bounds at 256 KiB (docs/troubleshooting.md)
    kube.apply(doc, "-n", big_ns, "--server-side")
    obj = wait_plan(kube, big_ns, "huge", timeout=max(300, ITEMS / 100))
    took = time.monotonic() - started
    st = obj["status"]
    assert st["phase"] == "Succeeded", json.dumps(st)[:3000]
    total = ITEMS + 1  # every item's body step, and the map step itself
    assert st["report"]["records"] == total
    assert st["counts"]["success"] == total
    assert dense(st) <= STATUS_BOUND and dense(obj) < 1024 * 1024

    ids = [r["stepId"] for r in report_records(kube, big_ns, "huge")]
    assert len(ids) == total and len(set(ids)) == total  # none lost, none twice
    assert set(ids) == {f"each.{k}.keep" for k in range(ITEMS)} | {"each"}

    got = cli(kubeconfig, "get", "huge", "-n", big_ns, "-o", "json", timeout=600)
    assert got.returncode == 0, got.stderr
    full = json.loads(got.stdout)["status"]["report"]["steps"]
    assert len(full) == total
    assert {s["status"] for s in full} == {"success"}
    print(f"{ITEMS} items: Succeeded {took:.1f} s after the apply")


def test_a_plan_of_20000_literal_steps_fits_the_spec_budget_as_the_api_server_stores_it(
    kube: Kube, big_ns: str
):
    # The API server stores a spec with the CRD's defaults filled in; a default on a step
    # field would be stored 20,000 times (onError and retries made this plan 1.2 MB, refused).
    # A server-side dry run returns the object as it would be stored, and stores nothing.
    steps = [{"id": f"s{i:05d}", "shell": "true"} for i in range(20_000)]
    doc = plan("literal", *steps)
    out = kube.run(
        "create",
        "--dry-run=server",
        "-o",
        "json",
        "-n",
        big_ns,
        "-f",
        "-",
        input=json.dumps(doc),
    ).stdout
    stored = json.loads(out)["spec"]
    assert len(stored["steps"]) == 20_000
    assert stored["steps"][0] == {"id": "s00000", "shell": "true"}  # nothing added per step
    assert json_size(stored) <= SPEC_BUDGET
