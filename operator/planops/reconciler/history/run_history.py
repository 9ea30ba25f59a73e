"""A Plan's earlier runs: `status.history`, what each entry says, which entries are kept, and an
earlier run's report put back together from its entry and its PlanReports.

A Plan object runs one run at a time (its current run, `status.run`). When a new run replaces
it (a re-run, a new generation), the replaced run becomes the first entry of `status.history`,
newest first: its id, generation, the Capsule it ran under, phase, reason, start and finish,
failed step, counts by outcome, how many records it has and whether it is archived. Its records
stay in its own PlanReports (labelled with its run id), which are kept while its entry is in
the history and deleted when the entry falls off, so `kubectl plan get NAME --run ID` still
shows the whole report of a failure someone re-ran.

The history is bounded twice: by `spec.historyLimit` (HISTORY_LIMIT by default, at most
HISTORY_LIMIT_MAX, the CRD's bound) and, in bytes, by ENTRIES_MAX entries of at most
ENTRY_BYTES each, which the status' budget holds beside the summary (reconciler.run.status). While
the archive is on, an entry whose run is finished and not archived yet stays past the limit (up
to ENTRIES_MAX), so its PlanReports are there when the archive's writer reads them.

Earlier runs' PlanReports are bounded in bytes too: one run writes at most RUN_REPORT_BYTES
(engine.budget), so a Plan re-run 50 times could otherwise keep 51 runs' worth in etcd. When a
run is replaced, each kept entry records `reportBytes` (its PlanReport objects as JSON, measured
then) and, newest first, entries keep their PlanReports while the sum fits HISTORY_REPORT_BYTES;
from the first entry past it on, an entry keeps only its summary (`recordsKept: false`) and its
PlanReports are deleted. So a Plan holds at most its current run's PlanReports plus
HISTORY_REPORT_BYTES of earlier runs' (plus one run's chunk overshoot, the first that does not
fit being dropped whole). While the archive is on, an entry not archived yet keeps its
PlanReports past the budget (the archive's writer reads them); they count in the sum.

Pure: reconciler.history.replacing does the requests.
"""

from __future__ import annotations

import re
from typing import Any

from planops.api.limits import HISTORY_ENTRIES_MAX, HISTORY_LIMIT, HISTORY_LIMIT_MAX
from planops.api.models import NAME_PATTERN
from planops.api.names import Phase
from planops.reconciler.run.status import cap_text, human_duration, parse_rfc3339, rfc3339

#: entries at most, runs waiting for the archive included (the CRD's maxItems)
ENTRIES_MAX = HISTORY_ENTRIES_MAX
#: the bytes of earlier runs' PlanReports a Plan keeps (JSON of the objects as listed)
HISTORY_REPORT_BYTES = 16 << 20
#: the most one entry takes in the status (tests/unit/test_run_history.py checks the worst case)
ENTRY_BYTES = 1216
#: the texts of an entry at most (bytes before a truncation mark): its message, its failed step
#: (a body step's qualified id may be long), its re-run value and reason (short words)
MESSAGE_LIMIT = 160
STEP_LIMIT = 128
WORD_LIMIT = 64
#: the reason of a run stopped because a new one replaced it before it finished
REPLACED = "Replaced"
#: why an earlier run shows no records (its summary stays)
DROPPED = (
    "this run's records were deleted: the earlier runs' PlanReports of this Plan are kept within "
    f"the history byte budget ({HISTORY_REPORT_BYTES >> 20} MiB, newest first); its summary stays"
)
#: the phases a run has once it ran (an Invalid run ran nothing: it gets no entry)
_RAN = (Phase.PENDING, Phase.RUNNING, Phase.SUCCEEDED, Phase.FAILED)
_ENDED = (Phase.SUCCEEDED.value, Phase.FAILED.value)


def limit(spec: Any) -> int:
    """The Plan's `spec.historyLimit` (read from the object as it is: an invalid spec still
    replaces runs), HISTORY_LIMIT when absent, within 0..HISTORY_LIMIT_MAX."""
    value = spec.get("historyLimit") if isinstance(spec, dict) else None
    if isinstance(value, bool) or not isinstance(value, int):
        return HISTORY_LIMIT
    return max(0, min(HISTORY_LIMIT_MAX, value))


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


_NAME = re.compile(NAME_PATTERN)


def _name(value: Any) -> str | None:
    """A Capsule's name as the run recorded it: a Kubernetes name (at most 63 characters, as
    spec.capsule's schema holds it), else nothing (never a cut text: a name is whole or wrong)."""
    return value if isinstance(value, str) and _NAME.fullmatch(value) else None


def entry(status: dict[str, Any], replaced_by: str, now: float) -> dict[str, Any] | None:
    """The history entry of the run `status` holds, now that run `replaced_by` replaces it; None
    for a run that ran nothing (Invalid, still waiting for a slot of its Capsule: `queue`, or no
    run at all). A run replaced before it ended was stopped: it is recorded as Failed, reason
    Replaced."""
    run = status.get("run") or {}
    rid, phase = run.get("id"), status.get("phase")
    if not isinstance(rid, str) or not rid or phase not in _RAN or status.get("queue"):
        return None
    report = status.get("report") or {}
    cond: dict[str, Any] = next(
        (c for c in status.get("conditions") or [] if c.get("type") == "Succeeded"), {}
    )
    ended = phase in _ENDED
    counts = status.get("counts") or {}
    generation = run.get("generation")
    found = {
        "id": rid[:WORD_LIMIT],
        "generation": _count(generation) or None,
        "rerun": cap_text(str(run["rerun"]), WORD_LIMIT) if run.get("rerun") else None,
        "capsule": _name(run.get("capsule")),
        "phase": phase if ended else Phase.FAILED.value,
        "reason": cap_text(str(cond.get("reason") or ""), WORD_LIMIT) if ended else REPLACED,
        "message": cap_text(str(cond.get("message") or ""), MESSAGE_LIMIT)
        if ended
        else f"stopped before it ended: run {replaced_by} replaced it",
        "startedAt": _time(status.get("startedAt") or run.get("startedAt")),
        "finishedAt": _time(status.get("finishedAt")) if ended else rfc3339(now),
        "failedStep": cap_text(str(status.get("failedStep") or ""), STEP_LIMIT),
        "completed": report.get("completed") is True and phase == Phase.SUCCEEDED,
        "counts": {k: _count(counts.get(k)) for k in ("success", "failed", "skipped")},
        "records": _count(report.get("records")),
        "reportObjects": _count(report.get("reportObjects")),
        "archived": status.get("archived") == rid,
    }
    return {k: v for k, v in found.items() if v is not None}  # the CRD's fields take no null


def _time(value: Any) -> str | None:
    at = parse_rfc3339(value) if isinstance(value, str) else None
    return rfc3339(at) if at is not None else None


def carried(new: dict[str, Any], previous: dict[str, Any]) -> dict[str, Any]:
    """The status `new` with the earlier runs of `previous`: every status write of a Plan carries
    its history on (a new run's `previous` holds the history it starts with), the templates its
    run snapshot (run.templating), when it runs some, and the reading URLs of its runs' stored
    logs and artifacts (store.signed)."""
    out = {**new, "history": previous.get("history")}
    for key in ("template", "templates"):
        if previous.get(key) is not None:
            out[key] = previous[key]
    if previous.get("stored"):  # the runs' reading URLs (store.signed): the signer's to change
        out["stored"] = previous["stored"]
    return out


def entries(status: dict[str, Any]) -> list[dict[str, Any]]:
    """The status' history entries (what is not an entry with a run id is left out)."""
    found = status.get("history")
    if not isinstance(found, list):
        return []
    return [e for e in found if isinstance(e, dict) and isinstance(e.get("id"), str)]


def waits_for_archive(e: dict[str, Any]) -> bool:
    """Whether the entry's run is finished and not in the archive yet."""
    return e.get("phase") in _ENDED and e.get("archived") is not True


def replaced(
    status: dict[str, Any],
    new_run: str,
    history_limit: int,
    now: float,
    *,
    archive: bool = False,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(kept, dropped): the history of the run `new_run` that replaces the one `status` holds:
    that run's entry first, then the earlier entries, the newest `history_limit` kept (past it,
    while the archive is on, the runs it still waits for, up to ENTRIES_MAX in all). An entry of
    the new run's own id (a re-run value used again names an earlier run) is dropped: the run
    starts again, and its objects are its new ones."""
    first = entry(status, new_run, now)
    candidates = ([first] if first is not None else []) + entries(status)
    kept: list[dict[str, Any]] = []
    dropped: list[dict[str, Any]] = []
    seen: set[str] = set()
    for e in candidates:
        if e["id"] == new_run or e["id"] in seen or len(kept) >= ENTRIES_MAX:
            dropped.append(e)
        elif len(kept) < history_limit or (archive and waits_for_archive(e)):
            kept.append(e)
            seen.add(e["id"])
        else:
            dropped.append(e)
    return kept, dropped


def within_budget(
    kept: list[dict[str, Any]],
    sizes: dict[str, int],
    *,
    archive: bool = False,
    budget: int | None = None,
) -> list[dict[str, Any]]:
    """`kept` (newest first) with each entry's `reportBytes` (from `sizes`, the run's
    PlanReports as measured now; else what the entry recorded) and, from the first entry whose
    PlanReports do not fit `budget` with the newer ones' on, `recordsKept: false`: its
    PlanReports are to be deleted. An entry that already lost its records stays so; one that
    waits for the archive (while it is on) keeps them whatever the sum."""
    budget = HISTORY_REPORT_BYTES if budget is None else budget
    out: list[dict[str, Any]] = []
    total, full = 0, False
    for e in kept:
        size = sizes.get(e["id"], _count(e.get("reportBytes")))
        e = {**e, "reportBytes": size}
        if not records_kept(e):
            out.append(e)
            continue
        held = archive and waits_for_archive(e)
        full = full or total + size > budget
        if full and not held:
            e["recordsKept"] = False
        else:
            total += size
        out.append(e)
    return out


def records_kept(e: dict[str, Any]) -> bool:
    """Whether the entry's run still has its PlanReports (the history byte budget dropped
    those of an entry with `recordsKept: false`)."""
    return e.get("recordsKept") is not False


def find(status: dict[str, Any], run_id: str) -> dict[str, Any] | None:
    """The history entry of the run `run_id`, if the status keeps one."""
    return next((e for e in entries(status) if e["id"] == run_id), None)


def run_ids(status: dict[str, Any]) -> list[str]:
    """The runs a Plan's status knows: its current run, then its history, newest first."""
    current = (status.get("run") or {}).get("id")
    return ([current] if isinstance(current, str) and current else []) + [
        e["id"] for e in entries(status)
    ]


def earlier_status(
    plan_id: str, e: dict[str, Any], records: list[dict[str, Any]]
) -> dict[str, Any]:
    """The status of an earlier run as it ended, from its history entry and every record of
    its PlanReports: what `kubectl plan get NAME --run ID -o json` shows, and what a retry
    reads of the run it retries. The plan's output is not kept for an earlier run (its steps'
    outputs are, in their records)."""
    started, finished = parse_rfc3339(e.get("startedAt")), parse_rfc3339(e.get("finishedAt"))
    succeeded = e.get("phase") == Phase.SUCCEEDED
    top = sum(1 for r in records if "." not in str(r.get("stepId", "")))
    return {
        "observedGeneration": e.get("generation"),
        "run": {
            "id": e["id"],
            "generation": e.get("generation"),
            "rerun": e.get("rerun"),
            "startedAt": e.get("startedAt"),
            "capsule": e.get("capsule"),
        },
        "phase": e.get("phase"),
        "progress": f"{top}/{top}",
        "conditions": [
            {
                "type": "Succeeded",
                "status": "True" if succeeded else "False",
                "reason": e.get("reason") or "",
                "message": e.get("message") or "",
            }
        ],
        "report": {
            "planId": plan_id,
            "completed": bool(e.get("completed")),
            "failedStep": e.get("failedStep"),
            "steps": records,
            "records": len(records),
            "stepsOmitted": 0,
            "reportObjects": e.get("reportObjects"),
            "generation": e.get("generation"),
        },
        "counts": e.get("counts"),
        "failedStep": e.get("failedStep"),
        "startedAt": e.get("startedAt"),
        "finishedAt": e.get("finishedAt"),
        "duration": human_duration(max(0.0, finished - started))
        if started is not None and finished is not None
        else None,
        "archived": e.get("archived"),
    } | ({} if records_kept(e) else {"recordsKept": False, "recordsDropped": DROPPED})
