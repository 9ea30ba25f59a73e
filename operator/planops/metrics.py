"""Prometheus metrics of the operator (prometheus-client). Names follow Prometheus conventions:
`planops_` prefix, `_total` counters, `_seconds` durations; no per-plan label (cardinality).

The run and step metrics (`Tenanted`) carry the tenant first: `namespace` and `capsule`, so a
team can have its own dashboard, SLO and alerts. Both are sets an administrator controls (the
namespaces, and the Capsules in them: a Plan's author cannot create one), never a Plan's name, a
step id or any text its author chose: the capsule label is only the name of a Capsule the judge
found (reconciler.effects.actuator.tenant; an unknown one is counted with capsule ""), so the
series grow with the tenants, not with the plans. `configure(tenant_labels=False)` (the
operator's --no-metrics-tenant-labels, the chart's metrics.tenantLabels) declares them without
the two labels, for clusters with too many tenants: the labels are then absent, and the series
are exactly those of an operator that never had them.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.metrics import MetricWrapperBase

REGISTRY = CollectorRegistry(auto_describe=True)
_FAST = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
_SLOW = (1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0)
#: the labels of a run or step metric's tenant, first; a Tenant is their values
TENANT_LABELS = ("namespace", "capsule")
Tenant = tuple[str, str]
#: the tenant of what has none known (a Plan gone before its tenant was seen)
NO_TENANT: Tenant = ("", "")
M = TypeVar("M", bound=MetricWrapperBase)


class Tenanted(Generic[M]):
    """A run or step metric (a Counter, Histogram or Gauge of `kind`), declared with the tenant
    labels first, or without them (`configure`); `of` is its series for a tenant and the
    metric's own labels."""

    def __init__(
        self, kind: type[M], name: str, doc: str, labels: tuple[str, ...] = (), **options: Any
    ) -> None:
        self._kind, self._name, self._doc = kind, name, doc
        self._labels, self._options = labels, options
        self.tenant_labels = True
        self.metric = self._declare(TENANT_LABELS)

    def _declare(self, tenant: tuple[str, ...]) -> M:
        labels = [*tenant, *self._labels]
        return self._kind(self._name, self._doc, labels, registry=REGISTRY, **self._options)

    def declare(self, tenant_labels: bool) -> None:
        if tenant_labels != self.tenant_labels:
            REGISTRY.unregister(self.metric)
            self.tenant_labels = tenant_labels
            self.metric = self._declare(TENANT_LABELS if tenant_labels else ())

    def of(self, tenant: Tenant, *labels: str) -> M:
        values = (*tenant, *labels) if self.tenant_labels else labels
        return self.metric.labels(*values) if values else self.metric


plans = Tenanted(
    Counter,
    "planops_plans_total",
    "Plans finished, by result (succeeded, failed, cancelled, invalid).",
    ("result",),
)
plan_duration = Tenanted(
    Histogram, "planops_plan_duration_seconds", "Duration of finished plan runs.", buckets=_SLOW
)
steps = Tenanted(
    Counter, "planops_steps_total", "Steps settled, by kind and status.", ("kind", "status")
)
step_duration = Tenanted(
    Histogram,
    "planops_step_duration_seconds",
    "Duration of settled steps, first dispatch to settlement.",
    ("kind",),
    buckets=_SLOW,
)
steps_running = Tenanted(
    Gauge, "planops_steps_running", "Step attempts in flight across all plans."
)
plans_waiting = Tenanted(
    Gauge,
    "planops_plans_waiting",
    "Plans waiting for a slot in their Capsule's queue (its concurrency.maxRunningPlans).",
)
leader = Gauge(
    "planops_leader",
    "1 while this replica acts (holds the leader Lease, or runs without leader election).",
    registry=REGISTRY,
)
retries = Tenanted(Counter, "planops_step_retries_total", "Step attempts after the first.")
refusals = Tenanted(
    Counter,
    "planops_validation_refusals_total",
    "Validation errors of refused plans, by code.",
    ("code",),
)
calls_denied = Tenanted(
    Counter,
    "planops_calls_denied_total",
    "Step attempts refused at dispatch (planops policy or a cluster admission policy).",
)
#: the run and step metrics, which carry the tenant labels when they are on
TENANTED: tuple[Tenanted[Counter] | Tenanted[Histogram] | Tenanted[Gauge], ...] = (
    plans, plan_duration, steps, step_duration, steps_running, plans_waiting, retries, refusals,
    calls_denied,
)  # fmt: skip


def configure(*, tenant_labels: bool) -> None:
    """Declare the run and step metrics with the tenant labels or without them (the operator's
    flag, once, before anything is counted; a test may switch back and forth)."""
    for m in TENANTED:
        m.declare(tenant_labels)


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

#: the trigger receiver's (planops.triggers): `trigger` is "" for a delivery to a trigger that
#: does not exist (its name is the sender's, any text: no series per guessed name); `reason` is
#: one of a fixed set (docs/triggers.md)
trigger_deliveries = Counter(
    "planops_trigger_deliveries_total",
    "Webhook deliveries to PlanTriggers, by result (accepted, filtered, refused) and reason.",
    ["namespace", "trigger", "result", "reason"],
    registry=REGISTRY,
)


def serve(port: int, address: str = "0.0.0.0") -> None:
    start_http_server(port, addr=address, registry=REGISTRY)
