"""Prometheus metrics of the operator (prometheus-client). Names follow Prometheus conventions:
`planops_` prefix, `_total` counters, `_seconds` durations; no per-plan label (cardinality).
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

REGISTRY = CollectorRegistry(auto_describe=True)
_FAST = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_SLOW = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0)

plans = Counter(
    "planops_plans_total",
    "Plans finished, by result (succeeded, failed, cancelled, invalid).",
    ["result"],
    registry=REGISTRY,
)
plan_duration = Histogram(
    "planops_plan_duration_seconds",
    "Duration of finished plan runs.",
    buckets=_SLOW,
    registry=REGISTRY,
)
steps = Counter(
    "planops_steps_total",
    "Steps settled, by kind and status.",
    ["kind", "status"],
    registry=REGISTRY,
)
step_duration = Histogram(
    "planops_step_duration_seconds",
    "Duration of settled steps, first dispatch to settlement.",
    ["kind"],
    buckets=_SLOW,
    registry=REGISTRY,
)
steps_running = Gauge(
    "planops_steps_running", "Step attempts in flight across all plans.", registry=REGISTRY
)
leader = Gauge(
    "planops_leader",
    "1 while this replica acts (holds the leader Lease, or runs without leader election).",
    registry=REGISTRY,
)
retries = Counter("planops_step_retries_total", "Step attempts after the first.", registry=REGISTRY)
refusals = Counter(
    "planops_validation_refusals_total",
    "Validation errors of refused plans, by code.",
    ["code"],
    registry=REGISTRY,
)
calls_denied = Counter(
    "planops_calls_denied_total",
    "Step attempts refused at dispatch (planops policy or a cluster admission policy).",
    registry=REGISTRY,
)
dispatch_latency = Histogram(
    "planops_dispatch_latency_seconds",
    "From a step becoming ready (its last dependency settled) to its Job or child Plan created.",
    buckets=_FAST,
    registry=REGISTRY,
)
reconcile_duration = Histogram(
    "planops_reconcile_duration_seconds",
    "Duration of one reconcile.",
    buckets=_FAST,
    registry=REGISTRY,
)
reconcile_errors = Counter(
    "planops_reconcile_errors_total",
    "Reconciles that ended in an error, by kind (api, unexpected).",
    ["kind"],
    registry=REGISTRY,
)
scheduled_runs = Counter(
    "planops_scheduled_runs_total",
    "Scheduled times, by outcome: started, missed (never run), skipped (Forbid kept it waiting).",
    ["result"],
    registry=REGISTRY,
)
status_patches = Counter(
    "planops_status_patches_total", "Status patches written.", registry=REGISTRY
)
status_conflicts = Counter(
    "planops_status_conflicts_total",
    "Status writes refused because the object changed since it was read (read again, decided "
    "again).",
    registry=REGISTRY,
)

archive_pending = Gauge(
    "planops_archive_pending_runs",
    "Finished runs waiting in the archive's queue (growing while the database is down).",
    registry=REGISTRY,
)
archive_up = Gauge(
    "planops_archive_database_up",
    "1 when the archive's last write reached PostgreSQL, 0 when it failed.",
    registry=REGISTRY,
)
archive_runs = Counter(
    "planops_archive_runs_total",
    "Runs archived, by result: written, or already there (a retry after a restart).",
    ["result"],
    registry=REGISTRY,
)
archive_failures = Counter(
    "planops_archive_failures_total",
    "Archive writes that failed (the run stays queued and is written again), by kind.",
    ["kind"],
    registry=REGISTRY,
)
archive_overflow = Counter(
    "planops_archive_overflow_total",
    "Finished runs not queued because the queue was full (found again by the next sweep).",
    registry=REGISTRY,
)
archive_write = Histogram(
    "planops_archive_write_seconds",
    "Duration of one run's archive write (the row, then the Plan's status).",
    buckets=_FAST,
    registry=REGISTRY,
)

scheduled_runs_kept_for_archive = Gauge(
    "planops_scheduled_runs_kept_for_archive",
    "Finished scheduled runs kept past their schedule's history limits until the archive holds "
    "them (growing while its database is down; at most 100 per schedule and namespace).",
    registry=REGISTRY,
)
runs_deleted_unarchived = Counter(
    "planops_runs_deleted_unarchived_total",
    "Finished runs deleted before the archive held them: a schedule's history limits, past the "
    "100 runs kept for the archive.",
    registry=REGISTRY,
)
plans_deleted_by_ttl = Counter(
    "planops_plans_deleted_by_ttl_total",
    "Finished Plans deleted because their ttlSecondsAfterFinished (or the operator's) passed.",
    registry=REGISTRY,
)
jobs_collected = Counter(
    "planops_jobs_collected_total",
    "Step Jobs (and so their pods) deleted by a Plan's podGC, by policy.",
    ["policy"],
    registry=REGISTRY,
)


def serve(port: int, address: str = "0.0.0.0") -> None:
    start_http_server(port, addr=address, registry=REGISTRY)
