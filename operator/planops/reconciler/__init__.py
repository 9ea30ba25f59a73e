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
    from planops.reconciler.actuator import CREATE_CONCURRENCY
    from planops.reconciler.earlier_runs import earlier_run
    from planops.reconciler.observe import (
        controller_uid,
        job_event_matters,
        owned,
        pod_event_matters,
    )
    from planops.reconciler.reconcile import Reconciler
    from planops.reconciler.reports import CHUNK_RECORDS, records_json
    from planops.reconciler.reports import selector as reports_selector
    from planops.reconciler.run_history import (
        HISTORY_REPORT_BYTES,
        earlier_status,
        run_ids,
        waits_for_archive,
    )
    from planops.reconciler.run_history import entries as history_entries
    from planops.reconciler.scheduled import ScheduleReconciler
    from planops.reconciler.slots import Counting as SlotCounting
    from planops.reconciler.slots import capsule_key as slot_group
    from planops.reconciler.slots import is_child as is_child_plan
    from planops.reconciler.standing import Standing as SlotStanding
    from planops.reconciler.standing import to_wake as slot_waiters
    from planops.reconciler.status import STATUS_RECORDS, STATUS_RECORDS_MAX

#: public name -> (module, its name there)
_PUBLIC = {
    "Reconciler": ("reconcile", "Reconciler"),
    "ScheduleReconciler": ("scheduled", "ScheduleReconciler"),
    "job_event_matters": ("observe", "job_event_matters"),
    "pod_event_matters": ("observe", "pod_event_matters"),
    "controller_uid": ("observe", "controller_uid"),
    "owned": ("observe", "owned"),
    "CHUNK_RECORDS": ("reports", "CHUNK_RECORDS"),
    "CREATE_CONCURRENCY": ("actuator", "CREATE_CONCURRENCY"),
    "earlier_run": ("earlier_runs", "earlier_run"),
    "history_entries": ("run_history", "entries"),
    "run_ids": ("run_history", "run_ids"),
    "HISTORY_REPORT_BYTES": ("run_history", "HISTORY_REPORT_BYTES"),
    "earlier_status": ("run_history", "earlier_status"),
    "waits_for_archive": ("run_history", "waits_for_archive"),
    "records_json": ("reports", "records_json"),
    "reports_selector": ("reports", "selector"),
    "STATUS_RECORDS": ("status", "STATUS_RECORDS"),
    "STATUS_RECORDS_MAX": ("status", "STATUS_RECORDS_MAX"),
    "slot_waiters": ("standing", "to_wake"),
    "slot_group": ("slots", "capsule_key"),
    "SlotCounting": ("slots", "Counting"),
    "SlotStanding": ("standing", "Standing"),
    "is_child_plan": ("slots", "is_child"),
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
    "Reconciler",
    "ScheduleReconciler",
    "SlotCounting",
    "SlotStanding",
    "controller_uid",
    "earlier_run",
    "earlier_status",
    "history_entries",
    "is_child_plan",
    "job_event_matters",
    "owned",
    "pod_event_matters",
    "records_json",
    "reports_selector",
    "run_ids",
    "slot_group",
    "slot_waiters",
    "waits_for_archive",
]
