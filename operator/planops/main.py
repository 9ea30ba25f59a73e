"""`planops-operator`: reads the flags and runs the operator (handlers.wiring) under kopf
(handlers.kopf_adapter, the one module that imports it); run as a module, so `operator` is never
shadowed.

planops-operator [--namespace NS ...|--all-namespaces] [--metrics-port 9090]
                 [--health-port 8080] [--json-logs] [--peering NAME] [--kubeconfig FILE]
                 [--leader-elect [--leader-election-id ID] [--leader-election-namespace NS]]
                 [--archive [--archive-queue N]]   (DSN in env PLANOPS_ARCHIVE_DSN)
                 [--ttl-seconds-after-finished SECONDS]
                 [--artifact-repository JSON] [--artifact-secrets-namespace NS]
                 [--artifact-gc-timeout SECONDS]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Callable
from typing import Any

from planops import __version__
from planops.api import quantity
from planops.api.limits import MAX_STEPS
from planops.api.pod_models import BASELINE_CAPABILITIES
from planops.engine import Policy
from planops.engine.bodies import MAX_RECORDS
from planops.engine.policy import ProfileCaps
from planops.reconciler import (
    CHUNK_RECORDS,
    HISTORY_REPORT_BYTES,
    STATUS_RECORDS,
    STATUS_RECORDS_MAX,
)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="planops-operator", description="The planops operator.")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument(
        "-n",
        "--namespace",
        action="append",
        metavar="NS",
        default=[],
        help="watch this namespace (repeatable); default: all namespaces",
    )
    scope.add_argument("-A", "--all-namespaces", action="store_true")
    p.add_argument("--kubeconfig", metavar="FILE", help="default: in-cluster, then $KUBECONFIG")
    p.add_argument("--metrics-port", type=int, default=9090, help="0 disables")
    p.add_argument("--health-port", type=int, default=8080, help="liveness at /healthz; 0 disables")
    p.add_argument(
        "--no-metrics-tenant-labels",
        dest="metrics_tenant_labels",
        action="store_false",
        help="no namespace and capsule labels on the run and step metrics (a cluster with too "
        "many tenants; docs/operations.md)",
    )
    p.add_argument("--json-logs", action="store_true")
    p.add_argument(
        "--peering", metavar="NAME", help="kopf peering object (default: standalone, one replica)"
    )
    p.add_argument(
        "--workers", type=int, default=8, help="plans reconciled at once (docs/performance.md)"
    )
    p.add_argument(
        "--create-concurrency",
        type=int,
        metavar="N",
        help="Jobs (and child Plans) one reconcile creates at once; default 16 "
        "(docs/performance.md)",
    )
    p.add_argument(
        "--allowed-images",
        default="*",
        help="operator-wide image allowlist, comma-"
        "separated patterns; a Capsule can only narrow it",
    )
    p.add_argument(
        "--max-steps",
        type=_bounded(1, MAX_STEPS),
        default=MAX_STEPS,
        help=f"literal steps of a Plan, at most {MAX_STEPS} (the CRD's bound; a map over "
        f"items runs up to {MAX_RECORDS} records)",
    )
    p.add_argument(
        "--report-chunk-records",
        type=_bounded(1, 100_000),
        default=CHUNK_RECORDS,
        help="settled records per PlanReport object (each also stays under 512 KiB)",
    )
    p.add_argument(
        "--status-records",
        type=_bounded(1, STATUS_RECORDS_MAX),
        default=STATUS_RECORDS,
        help=f"most recent records repeated in a Plan's status (at most {STATUS_RECORDS_MAX})",
    )
    p.add_argument(
        "--history-report-bytes",
        type=_bounded(0, HISTORY_REPORT_BYTES),
        default=HISTORY_REPORT_BYTES,
        help="bytes of earlier runs' PlanReports kept per Plan, newest first (at most and by "
        f"default {HISTORY_REPORT_BYTES >> 20} MiB); past it an earlier run keeps its summary",
    )
    p.add_argument(
        "--require-author-record",
        action="store_true",
        help="the cluster records authors (the chart's record-author policy): a run started "
        "later for its author (scheduled, re-run) needs the record, and an object written "
        "before it gets no such run until touched (docs/security.md)",
    )
    p.add_argument("--max-timeout-seconds", type=int, default=7 * 24 * 3600)
    p.add_argument(
        "--max-cpu",
        metavar="QUANTITY",
        help="ceiling of any step's cpu limit (a quantity: 2, 500m); default none",
    )
    p.add_argument(
        "--max-memory",
        metavar="QUANTITY",
        help="ceiling of any step's memory limit (a quantity: 4Gi); default none",
    )
    _profile_flags(p)
    p.add_argument("--resync-seconds", type=float, default=60.0)
    p.add_argument(
        "--webhook-port",
        type=int,
        default=0,
        help="serve the validating admission webhook (HTTPS; paths /plans, /scheduledplans, "
        "/clusterscheduledplans); 0 disables",
    )
    p.add_argument("--webhook-cert", metavar="FILE", help="the webhook's serving certificate (PEM)")
    p.add_argument("--webhook-key", metavar="FILE", help="its private key (PEM)")
    election = p.add_argument_group(
        "leader election (a coordination.k8s.io Lease; controller-runtime's flags and defaults)"
    )
    election.add_argument(
        "--leader-elect",
        action="store_true",
        help="only the replica holding the Lease reconciles; the others stand by",
    )
    election.add_argument("--leader-election-id", default="planops-operator", help="the Lease name")
    election.add_argument(
        "--leader-election-namespace",
        metavar="NS",
        help="the Lease's namespace (default: the pod's own namespace, else default)",
    )
    election.add_argument("--leader-elect-lease-duration", type=_seconds, default=15.0)
    election.add_argument("--leader-elect-renew-deadline", type=_seconds, default=10.0)
    election.add_argument("--leader-elect-retry-period", type=_seconds, default=2.0)
    archive = p.add_argument_group("the archive of finished runs (PostgreSQL; docs/runs.md)")
    archive.add_argument(
        "--archive",
        action="store_true",
        help=f"write each finished run to PostgreSQL; the DSN from env {ARCHIVE_DSN_ENV} "
        "(never a flag: a pod's args are readable by more than its Secrets)",
    )
    archive.add_argument(
        "--archive-queue",
        type=_bounded(1, 1_000_000),
        default=10_000,
        help="finished runs queued at most while the database is slow or down (more are found "
        "again from the cluster at the next resync)",
    )
    store = p.add_argument_group("the artifact repository (docs/artifacts.md)")
    store.add_argument(
        "--artifact-repository",
        metavar="JSON",
        help="the default artifact repository (the chart's artifactRepository as JSON: where, "
        "and which Secret holds the credentials; never the credentials themselves)",
    )
    store.add_argument(
        "--artifact-secrets-namespace",
        metavar="NS",
        help="the namespace of the repositories' credentials Secrets (default: the pod's own)",
    )
    store.add_argument(
        "--collector-image",
        metavar="IMAGE",
        default=f"ghcr.io/planops/operator:{__version__}",
        help="the image of the step pods' collector, which moves results and artifacts: the "
        "operator's own (the chart passes its image; default: %(default)s)",
    )
    store.add_argument(
        "--artifact-gc-timeout",
        type=_bounded(10, 7 * 24 * 3600),
        default=600,
        metavar="SECONDS",
        help="how long a deleted Plan's stored objects are retried while the store (or the "
        "archive) fails before its finalizer is removed anyway, with a Warning Event saying what "
        "is left (docs/artifacts.md, GC); default: %(default)s",
    )
    p.add_argument(
        "--ttl-seconds-after-finished",
        type=_bounded(0, 2**31 - 1),
        default=None,
        metavar="SECONDS",
        help="delete a finished Plan (Succeeded or Failed) this long after its run finished, "
        "unless its spec.ttlSecondsAfterFinished says otherwise (not a capsule step's child, not "
        "a scheduled run: their parent or schedule keeps them); default: kept (docs/runs.md)",
    )
    p.add_argument("-v", "--verbose", action="store_true")
    return p


def _profile_flags(p: argparse.ArgumentParser) -> None:
    """What any Capsule's security profiles may ask for (engine.policy.ProfileCaps; the chart's
    policy.securityProfiles): a profile past it is refused, and nothing of its plan runs."""
    p.add_argument(
        "--allow-privileged-profiles",
        action="store_true",
        help="a Capsule's security profile may run privileged containers",
    )
    p.add_argument(
        "--allow-host-namespaces",
        action="store_true",
        help="a Capsule's security profile may share the node's network, PID or IPC namespace",
    )
    p.add_argument(
        "--forbid-run-as-root",
        action="store_true",
        help="no Capsule's security profile may run as root (runAsUser 0) nor let a process "
        "escalate (a setuid-root program of the image would make it root)",
    )
    p.add_argument(
        "--allowed-capabilities",
        type=_capabilities,
        default=BASELINE,
        help="capabilities a Capsule's security profile may add, comma-separated; `baseline` "
        "stands for Pod Security baseline's (the default); empty: none",
    )
    p.add_argument(
        "--allowed-host-paths",
        type=_host_paths,
        default="",
        metavar="PATHS",
        help="directories of the node a Capsule's security profile may mount (each path equal "
        "to one or under it), comma-separated absolute paths; default none",
    )


#: in --allowed-capabilities: the capabilities Pod Security's baseline level allows
BASELINE = "baseline"


def _capabilities(text: str) -> str:
    for name in (c.strip() for c in text.split(",") if c.strip() not in ("", BASELINE)):
        if not re.fullmatch(r"[A-Z][A-Z0-9_]*", name) or name.startswith("CAP_"):
            raise argparse.ArgumentTypeError(f"{name!r} is not a capability (NET_ADMIN, no CAP_)")
    return text


def _host_paths(text: str) -> str:
    for path in (p.strip() for p in text.split(",") if p.strip()):
        parts = path.split("/")[1:]
        if not path.startswith("/") or any(x in ("", ".", "..") for x in parts if path != "/"):
            raise argparse.ArgumentTypeError(f"{path!r} is not an absolute path (/var/cache)")
    return text


def _expanded(text: str) -> tuple[str, ...]:
    names: list[str] = []
    for c in (c.strip() for c in text.split(",") if c.strip()):
        names += BASELINE_CAPABILITIES if c == BASELINE else [c]
    return tuple(dict.fromkeys(names))


def profile_caps(args: argparse.Namespace) -> ProfileCaps:
    """The operator's cap on security profiles, from its flags."""
    return ProfileCaps(
        allow_privileged=args.allow_privileged_profiles,
        allow_host_namespaces=args.allow_host_namespaces,
        allow_run_as_root=not args.forbid_run_as_root,
        allowed_capabilities=_expanded(args.allowed_capabilities),
        allowed_host_paths=tuple(
            p.strip() for p in args.allowed_host_paths.split(",") if p.strip()
        ),
    )


def usage(width: int = 100) -> str:
    """The usage line docs/operator.md shows, made from the parser (a test compares): every
    option with its default, or its metavar when it has none."""
    parser = _parser()
    groups = {id(a): g for g in parser._mutually_exclusive_groups for a in g._group_actions}
    words: list[str] = []
    done: set[int] = set()
    for action in parser._actions:
        if action.dest == "help" or id(action) in done:
            continue
        members = groups[id(action)]._group_actions if id(action) in groups else [action]
        done.update(id(a) for a in members)
        words.append("[" + " | ".join(_shown(a) for a in members) + "]")
    head = f"{parser.prog} "
    lines, line = [], head
    for word in words:
        if len(line) + len(word) > width and line.strip():
            lines.append(line.rstrip())
            line = " " * len(head)
        line += word + " "
    lines.append(line.rstrip())
    return "\n".join(lines) + "\n"


def _shown(action: argparse.Action) -> str:
    flag = action.option_strings[0]
    if action.nargs == 0:
        return flag
    if action.default not in (None, [], ""):
        default = action.default
        text = f"{default:g}" if isinstance(default, float) else str(default)
        return f"{flag} {text!r}" if text == "*" else f"{flag} {text}"
    metavar = action.metavar or action.dest.upper()
    return f"{flag} {metavar} ..." if action.default == [] else f"{flag} {metavar}"


def _bounded(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value}: expected {low} to {high}")
        return value

    return parse


def _seconds(text: str) -> float:
    """A duration as controller-runtime's flags take it (15s, 500ms, 1m) or plain seconds."""
    units = {"ms": 0.001, "s": 1.0, "m": 60.0}
    for suffix in ("ms", "s", "m"):
        if text.endswith(suffix):
            number, factor = text[: -len(suffix)], units[suffix]
            break
    else:
        number, factor = text, 1.0
    try:
        value = float(number) * factor
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (15s, 500ms)") from None
    if not 0 < value < 3600:
        raise argparse.ArgumentTypeError(f"{text!r}: expected a duration above 0 and below 1h")
    return value


ARCHIVE_DSN_ENV = "PLANOPS_ARCHIVE_DSN"
SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def _own_namespace() -> str:
    try:
        with open(SERVICE_ACCOUNT_NAMESPACE) as f:
            return f.read().strip() or "default"
    except OSError:
        return "default"


def _artifact_repository(parser: argparse.ArgumentParser, text: str | None) -> Any:
    """The default repository from its flag, or the parser's clear error (every reason)."""
    from pydantic import ValidationError  # noqa: PLC0415

    from planops.store.repositories import RepositoryError, default_from_flag  # noqa: PLC0415

    try:
        return default_from_flag(text)
    except (ValueError, ValidationError, RepositoryError) as e:
        parser.error(f"--artifact-repository: {e}")


def main(argv: list[str] | None = None, *, run: Callable[..., Any] | None = None) -> int:
    """The operator; `run` stands in for kopf_adapter.run (a test sees what main set up
    without running the operator)."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.webhook_port and not (args.webhook_cert and args.webhook_key):
        parser.error("--webhook-port needs --webhook-cert and --webhook-key")
    if args.archive and not os.environ.get(ARCHIVE_DSN_ENV):
        parser.error(f"--archive needs the database's DSN in env {ARCHIVE_DSN_ENV}")
    from planops.kube.leader import Timing  # noqa: PLC0415

    try:
        Timing(
            args.leader_elect_lease_duration,
            args.leader_elect_renew_deadline,
            args.leader_elect_retry_period,
        )
    except ValueError as e:
        parser.error(str(e))
    if args.create_concurrency is not None and not 1 <= args.create_concurrency <= 256:
        parser.error("--create-concurrency: between 1 and 256")
    for flag in ("max_cpu", "max_memory"):
        value = getattr(args, flag)
        if value is not None:
            try:
                quantity.parse(value)
            except ValueError as e:
                parser.error(f"--{flag.replace('_', '-')}: {e}")
    from planops.handlers import kopf_adapter  # noqa: PLC0415
    from planops.handlers.config import CONFIG  # noqa: PLC0415
    from planops.handlers.wiring import exact_names  # noqa: PLC0415

    kopf_adapter.configure_logging(args.json_logs, args.verbose)
    CONFIG.kubeconfig = args.kubeconfig
    CONFIG.workers = args.workers
    CONFIG.metrics_port = args.metrics_port
    CONFIG.metrics_tenant_labels = args.metrics_tenant_labels
    CONFIG.resync_seconds = args.resync_seconds
    CONFIG.chunk_records = args.report_chunk_records
    CONFIG.status_records = args.status_records
    CONFIG.history_report_bytes = args.history_report_bytes
    if args.create_concurrency is not None:
        CONFIG.create_concurrency = args.create_concurrency
    CONFIG.require_author = args.require_author_record
    CONFIG.policy = Policy(
        images=tuple(p.strip() for p in args.allowed_images.split(",") if p.strip()),
        max_steps=args.max_steps,
        max_timeout_seconds=args.max_timeout_seconds,
        max_cpu=args.max_cpu,
        max_memory=args.max_memory,
        needs_image=True,
        profiles=profile_caps(args),
        # the chart's default repository grants one to every Capsule (engine.step_files)
        artifact_repository=args.artifact_repository is not None,
    )
    # kopf's runtime scanning (it lists every CRD and namespace) is only needed for namespace
    # patterns; without it the operator needs no cluster-wide read of CRDs (RBAC least
    # privilege)
    CONFIG.scanning = not exact_names(args.namespace)
    CONFIG.webhook_port = args.webhook_port
    CONFIG.webhook_cert = args.webhook_cert
    CONFIG.webhook_key = args.webhook_key
    CONFIG.leader_elect = args.leader_elect
    CONFIG.leader_election_id = args.leader_election_id
    CONFIG.leader_election_namespace = args.leader_election_namespace or _own_namespace()
    CONFIG.lease_duration = args.leader_elect_lease_duration
    CONFIG.renew_deadline = args.leader_elect_renew_deadline
    CONFIG.retry_period = args.leader_elect_retry_period
    CONFIG.archive_dsn = os.environ[ARCHIVE_DSN_ENV] if args.archive else None
    CONFIG.archive_queue = args.archive_queue
    CONFIG.ttl_seconds_after_finished = args.ttl_seconds_after_finished
    CONFIG.artifact_repository = _artifact_repository(parser, args.artifact_repository)
    CONFIG.collector_image = args.collector_image
    CONFIG.artifact_gc_seconds = float(args.artifact_gc_timeout)
    if args.artifact_repository or args.artifact_secrets_namespace:
        CONFIG.artifact_secrets_namespace = args.artifact_secrets_namespace or _own_namespace()
    CONFIG.namespaces = list(args.namespace)
    (run or kopf_adapter.run)(
        namespaces=args.namespace, peering=args.peering, health_port=args.health_port
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
