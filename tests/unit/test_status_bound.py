"""The object bounds: a Plan's status summary stays under SUMMARY_BUDGET and its spec under
SPEC_BUDGET whatever the plan's size (together well under etcd's 1.5 MiB), and every PlanReport
chunk stays well under 1 MiB, whatever the steps print."""

import json

from planops.api import crd, limits
from planops.engine import AttemptFact, PlanError, Report, StepRecord, outputs
from planops.engine.bodies import MAX_RECORDS
from planops.reconciler.history import chunks as reports
from planops.reconciler.run import status
from planops.store import signed

MIB = 1 << 20
ETCD_LIMIT = 1536 * 1024  # etcd's --max-request-bytes default
METADATA_ROOM = 64 << 10  # a Plan's metadata: labels, annotations, managedFields
TEXTS = ["é" * 300_000, "<&>" * 100_000, '"\\\n' * 100_000]  # multi-byte, Go-escaped, escaped
LONG_ID = "s" * 63


def stored_size(obj: object) -> int:
    """Size as the API server stores it: raw UTF-8, Go's escapes of <, > and &."""
    text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False)
    return len(text.encode()) + 5 * sum(text.count(c) for c in "<>&")


def test_the_crd_step_limit_is_the_one_the_budgets_are_computed_for():
    assert limits.MAX_STEPS == status.MAX_STEPS
    schema = crd.plan_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert schema["properties"]["spec"]["properties"]["steps"]["maxItems"] == status.MAX_STEPS
    assert status.SPEC_BUDGET + status.SUMMARY_BUDGET + METADATA_ROOM < ETCD_LIMIT - (128 << 10)
    # and the reading URLs of stored logs and artifacts (status.stored) beside them
    stored = max(signed.ENTRY_BUDGET_BYTES, signed.BUDGET_BYTES)
    assert status.SPEC_BUDGET + status.SUMMARY_BUDGET + METADATA_ROOM + stored < ETCD_LIMIT - (
        32 << 10
    )


def test_max_steps_of_the_smallest_steps_fit_the_spec_budget_and_no_more_than_that():
    """The CRD's maxItems is what a spec of SPEC_BUDGET can hold: MAX_STEPS of the smallest
    steps (ids as short as unique ids can be, one-letter tools) fit; twice as many do not."""

    def spec(n: int) -> dict[str, object]:
        return {"steps": [{"id": f"s{i:x}", "tool": "t"} for i in range(n)]}

    assert stored_size(spec(status.MAX_STEPS)) <= status.SPEC_BUDGET
    assert stored_size(spec(2 * status.MAX_STEPS)) > status.SPEC_BUDGET


def records(n: int, prefix: str = "") -> list[StepRecord]:
    out = []
    for i in range(n):
        huge = TEXTS[i % 3]
        sid = f"{prefix}{i:06d}".ljust(63, "x")
        out.append(StepRecord(sid, "failed", huge, huge, 100, 1.7e9, 1.7e9 + 3600, stderr=huge))
    return out


def worst_status(n: int, status_records: int) -> dict[str, object]:
    recs = records(n)
    report = Report("p" * 253, False, recs[0].step_id, tuple(recs), output={"x": "é" * 900_000})
    refused = [
        AttemptFact(f"r{i}".ljust(63, "r"), 100, 1.7e9, "failed", 1.7e9, None, "x" * 100_000)
        for i in range(5000)
    ]
    st = status.running(
        report,
        status.Progress(
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
            reports=n,
            status_records=status_records,
        ),
    ).to_status()
    # the reconciler adds these, each bounded (reconciler.run.identity.in_flight)
    st["inFlight"] = [
        {"stepId": LONG_ID, "attempt": 100, "since": "2026-11-30T00:00:00.000Z"}
    ] * status.IN_FLIGHT_LIMIT
    return st


def test_a_100000_step_status_summary_stays_under_its_bound():
    st = worst_status(100_000, status.STATUS_RECORDS_MAX)
    size = stored_size(st)
    assert size < status.SUMMARY_BUDGET, f"{size} bytes"
    rep = st["report"]
    assert rep["records"] == 100_000 and len(rep["steps"]) == status.STATUS_RECORDS_MAX
    assert rep["stepsOmitted"] == 100_000 - status.STATUS_RECORDS_MAX
    assert rep["failedRecord"]["stepId"] == rep["failedStep"]  # the failed step, though not recent
    assert rep["output"] is None and "more than a Plan's status holds" in rep["outputError"]
    assert st["counts"] == {"success": 0, "failed": 100_000, "skipped": 0}
    assert len(st["refusedAttempts"]) == status.REFUSED_LIMIT
    assert outputs.cut_size(rep["steps"][-1]["output"])  # the newest: cut to LAST_TEXT
    # the summary does not grow with the plan
    assert abs(stored_size(worst_status(1_000, status.STATUS_RECORDS_MAX)) - size) < 1024


def test_the_default_summary_repeats_the_last_records_in_order():
    st = worst_status(120, status.STATUS_RECORDS)
    ids = [s["stepId"] for s in st["report"]["steps"]]
    assert ids == [r.step_id for r in records(120)][-status.STATUS_RECORDS :]


def test_every_chunk_of_the_largest_report_stays_well_under_one_mib():
    """MAX_RECORDS records, each with as much text as its share allows, in chunks of the
    default size and of one record per chunk beyond the default (the flag's ceiling)."""
    n = MAX_RECORDS
    share_records = [
        status.recut(r.to_json(), n, 1 << 20) for r in records(2000)
    ]  # texts at the share of the largest run
    few = [status.recut(r.to_json(), 1, 1 << 20) for r in records(6)]  # a small run: 256 KiB each
    for recs, per_chunk in ((share_records, reports.CHUNK_RECORDS), (few, 100_000)):
        writes = reports.plan_writes(reports.Written("r"), recs, per_chunk)
        for w in writes:
            ref = reports.manifests.PlanRef("ns", "p" * 253, "u" * 36, "r" * 10)
            size = stored_size(reports.body(ref, w.chunk, w.records))
            assert size < 600 << 10, f"{size} bytes"
    # the whole report's text is bounded too: REPORT_BUDGET, the run's budget of record text
    # (a few MiB), shared out while that leaves each record at least 256 bytes
    assert status.REPORT_BUDGET <= 4 << 20
    for records_ in (1, 16, 2001, 10_000):
        assert status.text_share(records_) * records_ <= status.REPORT_BUDGET


def test_a_small_plan_keeps_its_outputs_up_to_the_capsule_limit():
    out, err, stderr = status.cap_step("x" * 60_000, None, 65536, 10, "w" * 100)
    assert out == "x" * 60_000 and err is None and stderr == "w" * 100
    text = "h" * 50_000 + "x" * 50_000 + "t" * 50_000
    out, _, _ = status.cap_step(text, None, 65536, 10)
    assert out is not None and len(out) <= 65536 + status.MARK_ROOM
    head, _, tail = out.partition("\n[planops: ")
    assert head == "h" * 32768 and tail.endswith("t" * 32000)  # head and tail, half each
    assert "of 150000 bytes cut here (the report's share)]" in out


def test_invalid_status_is_bounded_too():
    errors = [PlanError("unknown-step", "s" * 63, "steps[1].dependsOn[0]", "m" * 10_000)] * 5000
    st = status.invalid(errors, generation=1, run={}, previous={}, now=0.0).to_status()
    assert stored_size(st) < status.SUMMARY_BUDGET
    assert st["errorCount"] == 5000 and len(st["errors"]) == status.MAX_ERRORS
