"""Operator-wide settings (from the command line / Helm values), read by the handlers."""

from __future__ import annotations

from dataclasses import dataclass, field

from planops import __version__
from planops.api.artifact_models import ArtifactRepository
from planops.engine import Policy
from planops.reconciler import (
    CHUNK_RECORDS,
    CREATE_CONCURRENCY,
    HISTORY_REPORT_BYTES,
    STATUS_RECORDS,
)


@dataclass
class Config:
    kubeconfig: str | None = None
    namespaces: list[str] = field(default_factory=list)  # --namespace (names or patterns); [] all
    policy: Policy = field(default_factory=Policy)
    workers: int = 8
    metrics_port: int = 0
    metrics_address: str = "0.0.0.0"
    metrics_tenant_labels: bool = True  # namespace and capsule labels on run and step metrics
    resync_seconds: float = 60.0
    chunk_records: int = CHUNK_RECORDS  # records per PlanReport object
    status_records: int = STATUS_RECORDS  # most recent records repeated in a Plan's status
    history_report_bytes: int = HISTORY_REPORT_BYTES  # earlier runs' PlanReports per Plan
    create_concurrency: int = CREATE_CONCURRENCY  # a reconcile's Job/Plan creates in flight
    require_author: bool = False  # runs for an author need a recorded one (reconciler.run.authors)
    webhook_port: int = 0  # 0: no admission webhook (handlers.webhook)
    webhook_cert: str | None = None
    webhook_key: str | None = None
    scanning: bool = False  # kopf's runtime CRD/namespace scanning (namespace globs need it)
    leader_elect: bool = False  # planops.kube.leader: only the Lease holder reconciles
    leader_election_id: str = "planops-operator"
    leader_election_namespace: str = "default"
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    archive_dsn: str | None = None  # planops.archive: PostgreSQL's DSN (None: no archive)
    archive_queue: int = 10_000  # finished runs queued at most for the archive
    # the artifact repository (planops.store): the default one (None: only Capsules'), and the
    # namespace of the credentials Secrets (None: no repository at all)
    artifact_repository: ArtifactRepository | None = None
    artifact_secrets_namespace: str | None = None
    # a deleted Plan's stored objects: retried this long, then left (reconciler.history.deletion)
    artifact_gc_seconds: float = 600.0
    #: the step pods' collector (planops.collector): the operator's own image
    collector_image: str = f"ghcr.io/planops/operator:{__version__}"
    # a finished Plan's TTL when its spec sets none (reconciler.history.retention; None: kept)
    ttl_seconds_after_finished: int | None = None


CONFIG = Config()
