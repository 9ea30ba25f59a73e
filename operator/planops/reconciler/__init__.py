"""The reconciler: executes the engine's decisions for Plans in a cluster (through planops.kube).

What the rest of planops may use of it is named here, and nothing else: the kopf handlers, the
operator's entry point and the CLI import these names from `planops.reconciler`, never a module
inside it (tests/unit/test_layering.py keeps it so), so the reconciler's modules can be cut and
joined without touching them. Each name is imported on first use: the CLI's reading of
PlanReports does not load the reconciler.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from planops.reconciler.effects.actuator import CREATE_CONCURRENCY, StatusApi, StatusWriter
    from planops.reconciler.effects.files import FileMover
    from planops.reconciler.effects.signing import Signer
    from planops.reconciler.effects.stored_logs import StoredLogs
    from planops.reconciler.history.chunks import CHUNK_RECORDS, records_json
    from planops.reconciler.history.chunks import selector as reports_selector
    from planops.reconciler.history.earlier import earlier_run
    from planops.reconciler.history.run_history import (
        HISTORY_REPORT_BYTES,
        earlier_status,
        run_ids,
        waits_for_archive,
    )
    from planops.reconciler.history.run_history import entries as history_entries
    from planops.reconciler.queue.slots import Counting as SlotCounting
    from planops.reconciler.queue.slots import capsule_key as slot_group
    from planops.reconciler.queue.slots import is_child as is_child_plan
    from planops.reconciler.queue.standing import Standing as SlotStanding
    from planops.reconciler.queue.standing import to_wake as slot_waiters
    from planops.reconciler.reconcile import Reconciler, ScheduleReconciler
    from planops.reconciler.run.authors import Author, UnreadableAuthorError, recorded_author
    from planops.reconciler.run.observe import (
        controller_uid,
        job_event_matters,
        owned,
        pod_event_matters,
    )
    from planops.reconciler.run.status import STATUS_RECORDS, STATUS_RECORDS_MAX

#: public name -> (module, its name there)
_PUBLIC = {
    "Reconciler": ("reconcile", "Reconciler"),
    "ScheduleReconciler": ("reconcile", "ScheduleReconciler"),
    "StatusWriter": ("effects.actuator", "StatusWriter"),
    "StatusApi": ("effects.actuator", "StatusApi"),
    "StoredLogs": ("effects.stored_logs", "StoredLogs"),
    "Signer": ("effects.signing", "Signer"),
    "FileMover": ("effects.files", "FileMover"),
    "job_event_matters": ("run.observe", "job_event_matters"),
    "pod_event_matters": ("run.observe", "pod_event_matters"),
    "controller_uid": ("run.observe", "controller_uid"),
    "owned": ("run.observe", "owned"),
    "CHUNK_RECORDS": ("history.chunks", "CHUNK_RECORDS"),
    "CREATE_CONCURRENCY": ("effects.actuator", "CREATE_CONCURRENCY"),
    "earlier_run": ("history.earlier", "earlier_run"),
    "history_entries": ("history.run_history", "entries"),
    "run_ids": ("history.run_history", "run_ids"),
    "HISTORY_REPORT_BYTES": ("history.run_history", "HISTORY_REPORT_BYTES"),
    "earlier_status": ("history.run_history", "earlier_status"),
    "waits_for_archive": ("history.run_history", "waits_for_archive"),
    "records_json": ("history.chunks", "records_json"),
    "reports_selector": ("history.chunks", "selector"),
    "STATUS_RECORDS": ("run.status", "STATUS_RECORDS"),
    "STATUS_RECORDS_MAX": ("run.status", "STATUS_RECORDS_MAX"),
    "slot_waiters": ("queue.standing", "to_wake"),
    "slot_group": ("queue.slots", "capsule_key"),
    "SlotCounting": ("queue.slots", "Counting"),
    "SlotStanding": ("queue.standing", "Standing"),
    "is_child_plan": ("queue.slots", "is_child"),
    # the trigger receiver acts as a PlanTrigger's recorded author (planops.triggers)
    "Author": ("run.authors", "Author"),
    "UnreadableAuthorError": ("run.authors", "UnreadableAuthorError"),
    "recorded_author": ("run.authors", "recorded_author"),
}


def __getattr__(name: str) -> Any:
    found = _PUBLIC.get(name)
    if found is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attr = found
    return getattr(import_module(f"{__name__}.{module}"), attr)


__all__ = [
    "CHUNK_RECORDS",
    "CREATE_CONCURRENCY",
    "HISTORY_REPORT_BYTES",
    "STATUS_RECORDS",
    "STATUS_RECORDS_MAX",
    "Author",
    "FileMover",
    "Reconciler",
    "ScheduleReconciler",
    "Signer",
    "SlotCounting",
    "SlotStanding",
    "StatusApi",
    "StatusWriter",
    "StoredLogs",
    "UnreadableAuthorError",
    "controller_uid",
    "earlier_run",
    "earlier_status",
    "history_entries",
    "is_child_plan",
    "job_event_matters",
    "owned",
    "pod_event_matters",
    "recorded_author",
    "records_json",
    "reports_selector",
    "run_ids",
    "slot_group",
    "slot_waiters",
    "waits_for_archive",
]
