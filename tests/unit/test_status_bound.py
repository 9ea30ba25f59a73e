"""The Plan status bound: under 1 MiB for the largest plan, whatever its steps print."""

import json

from planops.api import crd
from planops.engine import AttemptFact, PlanError, Report, StepRecord
from planops.reconciler import status

MIB = 1 << 20


def stored_size(obj: object) -> int:
    """Size as the API server stores it: raw UTF-8, Go's escapes of <, > and &."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return len(text.encode()) + 5 * sum(text.count(c) for c in "<>&")


def test_the_crd_step_limit_is_the_one_the_budget_is_computed_for():
    assert crd.MAX_STEPS == status.MAX_STEPS


def test_the_worst_case_status_stays_under_one_mib():
    n = status.MAX_STEPS
    texts = ["é" * 200_000, "<&>" * 70_000, '"\\\n' * 70_000]  # multi-byte, Go-escaped, escaped
    records = []
    for i in range(n):
        huge = texts[i % 3]
        out, err = status.cap_step(huge, huge, 1 << 20, n)
        sid = f"s{i:05d}".ljust(63, "x")
        records.append(StepRecord(sid, "failed", out, err, 100, 1.7e9, 1.7e9 + 3600))
    report = Report("p" * 253, False, records[0].step_id, tuple(records))
    refused = [
        AttemptFact(r.step_id, 100, 1.7e9, "failed", 1.7e9, None, "x" * 100) for r in records
    ]
    st = status.running(
        report,
        total=n,
        finished=True,
        dispatched_any=True,
        generation=2**31,
        run={
            "id": "x" * 10,
            "generation": 2**31,
            "rerun": "r" * 63,
            "startedAt": "2026-11-30T00:00:00.000Z",
        },
        refused=refused,
        previous={},
        started_at=1.7e9,
        now=1.7e9 + 7200,
    )
    size = stored_size(st)
    assert size < MIB, f"{size} bytes"
    assert records[0].output.endswith("bytes]") and records[0].error.endswith("bytes]")


def test_a_small_plan_keeps_its_outputs_up_to_the_capsule_limit():
    out, err = status.cap_step("x" * 60_000, None, 65536, 10)
    assert out == "x" * 60_000 and err is None
    out, _ = status.cap_step("x" * 100_000, None, 65536, 10)
    assert out.startswith("x" * 65536) and out.endswith(
        "[planops: output truncated at 65536 bytes]"
    )


def test_invalid_status_is_bounded_too():
    errors = [PlanError("unknown-step", "s" * 63, "steps[1].dependsOn[0]", "m" * 10_000)] * 5000
    st = status.invalid(errors, generation=1, run={}, previous={}, now=0.0)
    assert stored_size(st) < MIB
    assert st["errorCount"] == 5000 and len(st["errors"]) == status.MAX_ERRORS
