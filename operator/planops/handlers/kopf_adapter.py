"""kopf, in one place: the only module of planops that imports it (an import-linter contract).

What kopf does for planops: it watches the planops kinds (Plans, Capsules, ScheduledPlans,
ClusterScheduledPlans) and hands each event to the operator (handlers.wiring.Operator), logs
in with the operator's own credentials, runs the operator's start-up and clean-up, serves the
admission webhook and the liveness probe, and formats the log. The rest of the controller
runtime is planops' own (kube/: the client, the informers of Jobs, pods and namespaces, the
caches, the work queues, leader election, Events), so a run's Jobs and pods never pass through
kopf's per-event machinery.

Only `on.event` handlers: no state-changing handlers, so kopf writes no annotations on Plans
(nothing shows as drift in Argo CD) and adds no finalizers (a finalizer would block Argo CD prunes
while the operator is down; planops' one, on Plans that store objects in an artifact repository,
is its own: reconciler.history.deletion). Garbage collection removes children with their owner.

kopf's private modules are patched here and nowhere else, for the kopf version pinned in
pyproject.toml (tests/unit/test_kopf_adapter.py runs each patch against it and fails on
another version, so an upgrade cannot drop a fix silently):
- its namespace discovery (`fix_namespace_discovery`; written up for kopf in
  docs/upstream/kopf-namespace-discovery.md);
- its JSON reading (`fix_json`: kube.jsontext, so one deeply nested Plan cannot stop a watch).
"""

from __future__ import annotations

import json
import logging
import sys
import types
from typing import Any

# kopf imports the Kubernetes client library whenever it is installed (to recognise its model
# objects, which planops never hands it, and to log in through it): ~9 MiB of the operator's
# memory for nothing, since planops has its own client and login (kube/credentials.py, `login`).
# A None in sys.modules makes kopf's optional import fail as if the package were absent; it is
# taken out again at once, so a kubeconfig user with an exec plugin can still load the library
# later (tests/unit/test_credentials.py checks that nothing else imports it).
_HIDDEN = "kubernetes" not in sys.modules
if _HIDDEN:
    sys.modules["kubernetes"] = None  # type: ignore[assignment]
try:
    import kopf
finally:
    if _HIDDEN:
        del sys.modules["kubernetes"]

from planops.api import names  # noqa: E402
from planops.handlers import webhook  # noqa: E402
from planops.handlers.config import CONFIG  # noqa: E402
from planops.handlers.wiring import Operator  # noqa: E402
from planops.kube import credentials, jsontext  # noqa: E402

log = logging.getLogger("planops.handlers")
GROUP, VERSION = names.GROUP, names.VERSION
#: the operator's handlers: a plain registry (kopf's default one adds logins through the
#: Kubernetes client library)
REGISTRY = kopf.OperatorRegistry()
_MARK = "_planops_fixed"


def configure_logging(json_logs: bool, verbose: bool) -> None:
    """kopf's own log set-up: one JSON object per line (`message`, `timestamp`, `severity`, the
    Kubernetes `object` a kopf record is about, `exc_info`) with --json-logs, else kopf's text
    lines. Each JSON line also names its `logger` (planops.trace for the trace records), which
    kopf's format leaves out: a log pipeline filters on it."""
    kopf.configure(
        verbose=verbose, log_format=kopf.LogFormat.JSON if json_logs else kopf.LogFormat.FULL
    )
    if json_logs:
        for handler in logging.getLogger().handlers:
            handler.addFilter(_name_the_logger)
    if not verbose:  # kopf logs every handler call at INFO: keep our trace records readable
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)


def _name_the_logger(record: logging.LogRecord) -> bool:
    record.logger = record.name  # a record's extra attribute is a field of its JSON line
    return True


def run(namespaces: list[str], peering: str | None, health_port: int) -> None:
    """Run the operator under kopf until it is stopped (SIGTERM, SIGINT)."""
    if CONFIG.scanning:  # only a pattern makes kopf discover namespaces
        fix_namespace_discovery()
    fix_json()  # one deeply nested Plan must not stop the watch of all
    if CONFIG.webhook_port:
        register_webhook()
    kopf.run(
        registry=REGISTRY,
        standalone=peering is None,
        peering_name=peering,
        clusterwide=not namespaces,
        namespaces=namespaces,
        liveness_endpoint=f"http://0.0.0.0:{health_port}/healthz" if health_port else None,
    )


def watched(namespace: str) -> bool:
    """Whether kopf watches the planops kinds in `namespace` (its own rule for the patterns
    of --namespace), so that the operator's informers watch a run's Jobs and pods there too."""
    from kopf._cogs.structs import references  # noqa: PLC0415

    return any(
        references.match_namespace(references.NamespaceName(namespace), p)
        for p in CONFIG.namespaces
    )


# -- the operator's lifecycle ---------------------------------------------------------------------


class NoDiffBase(kopf.DiffBaseStorage):
    """No diff base: planops has no change-detecting handlers (on.create/update/field), only
    on.event, so kopf's default storage, which deep-copies every watched object on every event
    to build an "essence" nobody reads, cost a seventh of the operator's CPU (measured with
    py-spy in bench/vs_argo.py) for nothing."""

    def build(self, *, body: kopf.Body, extra_fields: Any = None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


@kopf.on.login(registry=REGISTRY)
async def login(**_: Any) -> kopf.ConnectionInfo:
    """kopf's watches use the operator's own credentials (kube/credentials.py), read again at
    each login (kopf logs in again on a 401: a rotated token file is read anew). Without this
    handler kopf would log in through the Kubernetes client library, which the operator does
    not import (its memory)."""
    c = await credentials.load(CONFIG.kubeconfig)
    return kopf.ConnectionInfo(
        server=c.server,
        default_namespace=c.namespace,
        ca_path=c.ca_file,
        ca_data=c.ca_data,
        insecure=c.insecure,
        username=c.username,
        password=c.password,
        token=await c.bearer(),
        certificate_path=c.cert_file,
        certificate_data=c.cert_data,
        private_key_path=c.key_file,
        private_key_data=c.key_data,
        proxy_url=c.proxy,
    )


@kopf.on.startup(registry=REGISTRY)
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    settings.posting.enabled = False  # our own Events only, not kopf's log lines
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.networking.request_timeout = 60
    settings.scanning.disabled = not CONFIG.scanning
    settings.persistence.diffbase_storage = NoDiffBase()
    memo.operator = Operator(CONFIG, watched if CONFIG.scanning else None)
    await memo.operator.start()


@kopf.on.cleanup(registry=REGISTRY)
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    if "operator" in memo:
        await memo.operator.stop()


@kopf.on.probe(id="queue", registry=REGISTRY)
def queue_depth(memo: kopf.Memo, **_: Any) -> int:
    return memo.operator.queue_depth() if "operator" in memo else 0


@kopf.on.probe(id="synced", registry=REGISTRY)
def synced(memo: kopf.Memo, **_: Any) -> bool:
    """Whether the informers of Jobs, pods and namespaces have listed (the queues wait)."""
    return bool("operator" in memo and memo.operator.has_synced())


# -- the planops kinds' events, to the operator ------------------------------------------------


#: each planops kind kopf watches, and the Operator's method its events go to
WATCHED = {
    "plans": "plan_event",
    "capsules": "capsule_event",
    "scheduledplans": "scheduled_event",
    "clusterscheduledplans": "cluster_scheduled_event",
}


def _forward(plural: str, method: str) -> None:
    @kopf.on.event(GROUP, VERSION, plural, id=method, registry=REGISTRY)
    async def forward(event: kopf.RawEvent, memo: kopf.Memo, **_: Any) -> None:
        getattr(memo.operator, method)(event["type"], dict(event["object"]))


for _plural, _method in WATCHED.items():
    _forward(_plural, _method)


# -- the admission webhook ------------------------------------------------------------------------


def register_webhook() -> None:
    """Serve the admission webhook (handlers.webhook) on --webhook-port: registered once the
    flags are known."""
    if getattr(REGISTRY, _MARK, False):
        return
    setattr(REGISTRY, _MARK, True)

    @kopf.on.startup(registry=REGISTRY)
    async def serve(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.admission.server = kopf.WebhookServer(
            addr="0.0.0.0",  # the API server calls the pod's address
            port=CONFIG.webhook_port,
            certfile=CONFIG.webhook_cert,
            pkeyfile=CONFIG.webhook_key,
        )
        settings.admission.managed = None  # the chart owns the ValidatingWebhookConfiguration

    @kopf.on.validate(GROUP, VERSION, "plans", id=webhook.PATH_ID, registry=REGISTRY)
    async def validate_plan(*, body: Any, memo: Any, warnings: list[str], **kw: Any) -> None:
        try:
            warnings += await webhook.judge_plan(
                memo.operator.reconciler, dict(body), kw.get("operation"), kw.get("old")
            )
        except webhook.Refused as e:
            raise kopf.AdmissionError(str(e), code=webhook.REFUSED) from None

    for plural, path_id in webhook.SCHEDULED_PATH_IDS.items():
        _validate_scheduled(plural, path_id)


def _validate_scheduled(plural: str, path_id: str) -> None:
    @kopf.on.validate(GROUP, VERSION, plural, id=path_id, registry=REGISTRY)
    async def validate_scheduled(*, body: Any, memo: Any, **kw: Any) -> None:
        try:
            await webhook.judge_scheduled(
                memo.operator.schedule_judge, plural, dict(body), kw.get("operation"), kw.get("old")
            )
        except webhook.Refused as e:
            raise kopf.AdmissionError(str(e), code=webhook.REFUSED) from None


# -- corrections to kopf's private modules (the pinned version's) ---------------------------------


def fix_namespace_discovery() -> bool:
    """With a namespace pattern, kopf watches Namespaces and starts a watch of the planops kinds
    in each one that matches. That namespace watch begins, like every kopf watch, with a listing
    whose objects it hands on as events of type None, then watches from the listing's
    resourceVersion. kopf's namespace processor drops those listing events, because the
    observer listed the namespaces itself just before. So a namespace that first appears in
    such a listing shows up in no event the processor keeps, and its Plans are never watched
    until the operator restarts: one created between the observer's own listing and the
    watch's first listing (a second or so after the start), or while a broken watch re-lists
    (after an API server restart or a 410 Gone). This project's tests saw it: Plans that never
    got a status. The fix: the processor takes listing events too (a matching namespace added
    twice is one set member). True when patched (now or before); if kopf no longer has that
    function, a warning and False (and tests/unit/test_kopf_adapter.py fails)."""
    try:
        from kopf._core.reactor import observation  # noqa: PLC0415
    except ImportError:
        observation = None  # type: ignore[assignment]
    revise = getattr(observation, "revise_namespaces", None)
    if revise is None or not hasattr(observation, "process_discovered_namespace_event"):
        log.warning(
            "kopf's namespace discovery is not the one planops corrects: a namespace created "
            "just after the operator starts may go unwatched until it restarts"
        )
        return False
    if getattr(observation.process_discovered_namespace_event, _MARK, False):
        return True

    async def process_discovered_namespace_event(
        *, raw_event: Any, namespaces: Any, insights: Any, **_: Any
    ) -> None:
        async with insights.revised:
            revise(raw_events=[raw_event], insights=insights, namespaces=namespaces)
            insights.revised.notify_all()

    setattr(process_discovered_namespace_event, _MARK, True)
    observation.process_discovered_namespace_event = process_discovered_namespace_event
    return True


def fix_json() -> bool:
    """kopf reads lists and watch events with `json.loads`, which raises RecursionError on an
    object nested ~1,000 deep: one such Plan (the API server takes 10,000 levels) broke every
    list and watch of Plans, for every Plan. Its API module reads through kube.jsontext instead
    (a too-deep part cut, the object then refused by the validator, the others read as they
    are). True when patched; if kopf no longer reads that way, a warning and False (and
    tests/unit/test_deep_json.py fails)."""
    try:
        from kopf._cogs.clients import api  # noqa: PLC0415
    except ImportError:
        api = None  # type: ignore[assignment]
    get = getattr(api, "get", None)
    if get is None or not hasattr(api, "request") or getattr(api, "json", None) is None:
        log.warning(
            "kopf's API client is not the one planops corrects: a Plan nested ~1,000 "
            "deep would stop the operator's watch of Plans"
        )
        return False
    if getattr(get, _MARK, False):
        return True
    # the module's `json` name, as its watch reads it (json.loads of each event's line), and
    # the admission webhook's (an AdmissionReview of a deep Plan answered 500, which the
    # webhook's failurePolicy Ignore let through: read, it is refused by the validator)
    shim = types.SimpleNamespace(
        loads=jsontext.loads, dumps=json.dumps, JSONDecodeError=json.JSONDecodeError
    )
    setattr(api, "json", shim)  # noqa: B010
    try:
        from kopf._kits import webhooks  # noqa: PLC0415

        if getattr(webhooks, "json", None) is json:
            setattr(webhooks, "json", shim)  # noqa: B010
    except ImportError:
        log.warning("kopf's webhook server is not the one planops corrects")

    async def bounded_get(
        url: str,
        *,
        settings: Any,
        payload: Any = None,
        headers: dict[str, str] | None = None,
        timeout: Any = None,
        logger: Any,
    ) -> Any:
        response = await api.request(  # kopf's own request: retries, credentials
            method="get",
            url=url,
            payload=payload,
            headers=headers,
            timeout=timeout,
            settings=settings,
            logger=logger,
        )
        async with response:
            return await response.json(loads=jsontext.loads)

    setattr(bounded_get, _MARK, True)
    api.get = bounded_get
    return True
