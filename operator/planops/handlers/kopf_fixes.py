"""Corrections to kopf, applied before the operator runs: its namespace discovery, and its
reading of JSON (deep objects).

With a namespace glob (the chart's default), kopf watches Namespaces and starts a watch of
Plans in each one that matches. That namespace watch begins, like every kopf watch, with a
listing whose objects it hands on as events of type None, then watches from the listing's
resourceVersion. kopf's namespace processor drops those listing events, because the observer
listed the namespaces itself just before. So a namespace that first appears in such a listing
shows up in no event the processor keeps, and its Plans are never watched until the operator
restarts. That happens to a namespace created between the observer's own listing and the
watch's first listing, a second or so after the operator starts. It also happens to one
created while a broken watch re-lists (after an API server restart or a 410 Gone). This
project's tests saw it: Plans that never got a status.

The fix: the processor takes listing events too. A matching namespace added twice is one set
member, so nothing else changes. This patches a private kopf function (written against kopf
1.45); if kopf no longer has it, the operator logs a warning and runs unpatched, and
tests/unit/test_kopf_fixes.py fails, so an upgrade cannot drop the fix silently.
"""

from __future__ import annotations

import json
import logging
import types
from typing import Any

from planops.kube import jsontext

log = logging.getLogger("planops.handlers")
_MARK = "_planops_lists_too"


def apply() -> bool:
    """Patch kopf's namespace processor; True when it is (now or already) patched."""
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


def apply_json() -> bool:
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


#: the objects whose events kopf need not remember: planops handles them with event handlers
#: that keep nothing per object in kopf (the run-object cache, kube.cache.RunObjects, is its own)
_UNREMEMBERED = {("batch/v1", "Job"), ("v1", "Pod")}


def apply_memories() -> bool:
    """kopf remembers every object it ever saw an event of until the object is deleted (its
    ResourceMemories: a copy of the operator's memo, an error throttler, daemon and index
    bookkeeping; ~1.2 KB each, measured). A plan of 20,000 steps has 20,000 Jobs and as many
    pods, kept after they finish, so that was ~50 MB before a single byte of planops' own.
    planops' Job and pod handlers are plain event handlers that read nothing of it, so their
    events are recalled as kopf's admission webhook recalls objects not yet created:
    ephemeral, not kept. True when patched; if kopf no longer recalls that way, a warning and
    False (and tests/unit/test_kopf_fixes.py fails)."""
    try:
        from kopf._core.reactor import inventory  # noqa: PLC0415
    except ImportError:
        inventory = None  # type: ignore[assignment]
    memories = getattr(inventory, "ResourceMemories", None)
    recall = getattr(memories, "recall", None)
    if recall is None or "ephemeral" not in recall.__code__.co_varnames:
        log.warning(
            "kopf's object memories are not the ones planops corrects: every Job and pod "
            "seen is remembered until it is deleted (~1.2 KB each)"
        )
        return False
    if getattr(recall, _MARK, False):
        return True

    async def recall_unless_ours(
        self: Any,
        raw_body: Any,
        *,
        memobase: Any = None,
        noticed_by_listing: bool = False,
        ephemeral: bool = False,
    ) -> Any:
        kind = (raw_body.get("apiVersion"), raw_body.get("kind"))
        return await recall(
            self,
            raw_body,
            memobase=memobase,
            noticed_by_listing=noticed_by_listing,
            ephemeral=ephemeral or kind in _UNREMEMBERED,
        )

    setattr(recall_unless_ours, _MARK, True)
    memories.recall = recall_unless_ours  # type: ignore[union-attr]
    return True
