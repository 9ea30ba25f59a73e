"""The trigger receiver: `POST /hooks/<namespace>/<trigger>` starts a Plan from the trigger's
template when the delivery is authentic, new, within the limits and passes the filter.

Each delivery goes through the same gates, cheapest first, and the first that refuses answers:
the rate of all requests, the body's size and encoding, the trigger (it exists, is not
suspended, has an author record), its secret (read as the trigger's author), the signature
(constant time), then the trigger's rate and the total of authenticated deliveries (charged only
once the signature is checked: a sender without the secret spends none of them), the replay
window, the JSON, the filter, the mapping, and the Plan's create, made as the trigger's
recorded author (impersonated): the API server's admission checks that author's `use` on the
Capsule at that moment, so a revoked grant stops the next run, and records them as the Plan's
author. The Plan's name is derived from the trigger and what the
delivery's signature covers (its body; GitLab's id): a replay on any replica, under the same
id or a made-up one, is AlreadyExists.

Each answer is JSON `{result, reason, message}` with messages written here: never a secret, a
signature, an expression's error or the API server's text (those go to the trigger's status and
Events, which the namespace's users read). The outcome is counted in
planops_trigger_deliveries_total, and, once the trigger is known, in its status and an Event
(those of deliveries refused before their signature is checked at most
limits.unverified_per_minute per trigger: a sender without the secret cannot write to the
cluster as fast as it sends). The trigger and its secret are kept limits.cache_seconds once
read (limits.TtlCache): a forged delivery costs no request to the API server.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

import orjson
from aiohttp import web
from pydantic import ValidationError

from planops import metrics
from planops.api import names
from planops.api.base import NAME_PATTERN
from planops.api.trigger_models import PlanTriggerSpec
from planops.kube import events
from planops.kube.api import ScheduleApi
from planops.kube.client import UNREACHABLE
from planops.kube.errors import ApiError
from planops.reconciler import Author, UnreadableAuthorError, recorded_author
from planops.triggers.limits import Limits, RateLimiter, ReplayWindow, TtlCache
from planops.triggers.payload import PAYLOAD_DEPTH, depth, header_map, map_delivery
from planops.triggers.verify import Delivery, Refused, verify

log = logging.getLogger("planops.triggers")
Obj = dict[str, Any]
PLURAL = "plantriggers"
#: what a trigger's answer may say of the mapping's or the API server's failure (the details
#: are in its status)
SEE_STATUS = "see the PlanTrigger's status (kubectl describe plantrigger)"


class TriggerKube(ScheduleApi, Protocol):
    """What the receiver asks of the API server: a trigger by plural, its status and Events
    (ScheduleApi's), and the two requests made as its author (kube.acting.ActingKube)."""

    async def get_secret_value_as(
        self, namespace: str, name: str, key: str, user: str, groups: list[str]
    ) -> bytes | None: ...
    async def create_plan_as(
        self, namespace: str, body: Obj, user: str, groups: list[str]
    ) -> Obj: ...


@dataclass(frozen=True)
class Outcome:
    """What became of a delivery: accepted (a Plan), filtered (nothing to do) or refused."""

    result: str
    reason: str
    message: str
    status: int
    plan: str = ""
    delivery: str = ""
    #: what the trigger's status and Event say (may be more than the answer says)
    detail: str = ""

    def answer(self) -> web.Response:
        body: Obj = {"result": self.result, "reason": self.reason, "message": self.message}
        if self.plan:
            body["plan"] = self.plan
        return web.json_response(body, status=self.status)


def plan_name(trigger: str, delivery: str) -> str:
    """The Plan a delivery starts: the trigger's name and a digest of the delivery's key
    (verify.Delivery.key: what its signature covers; the same delivery, the same name on every
    replica: a replay is AlreadyExists)."""
    # the whole trigger name is hashed: two triggers cut to the same prefix stay apart
    digest = hashlib.sha256(f"{trigger}\0{delivery}".encode()).hexdigest()[:12]
    return f"{trigger[:50].rstrip('-.')}-{digest}"


def plan_body(trigger: Obj, spec: PlanTriggerSpec, delivery: Delivery, inputs: Obj) -> Obj:
    """The Plan a delivery starts: the trigger's template and the mapped input, as data."""
    meta = trigger["metadata"]
    plan_spec: Obj = {
        "templateRef": {"kind": spec.template_ref.kind, "name": spec.template_ref.name},
        "input": inputs,
    }
    if spec.capsule:
        plan_spec["capsule"] = spec.capsule
    return {
        "apiVersion": names.API_VERSION,
        "kind": "Plan",
        "metadata": {
            "name": plan_name(meta["name"], delivery.key),
            "namespace": meta["namespace"],
            "labels": {names.LABEL_TRIGGER: meta["name"]},
            "annotations": {names.ANNOTATION_DELIVERY: delivery.id},
        },
        "spec": plan_spec,
    }


NAME = re.compile(NAME_PATTERN)


@dataclass
class Receiver:
    """The receiver's state: its client, limits, rate buckets and replay window."""

    kube: TriggerKube
    limits: Limits = field(default_factory=Limits)

    def __post_init__(self) -> None:
        lim = self.limits
        self.per_trigger = RateLimiter(lim.per_minute / 60.0, lim.burst)
        self.total = RateLimiter(lim.total_per_second, max(lim.total_per_second, 1.0))
        self.requests = RateLimiter(lim.requests_per_second, max(lim.requests_per_second, 1.0))
        per_second = lim.unverified_per_minute / 60.0
        self.unverified = RateLimiter(per_second, max(lim.unverified_per_minute, 1.0))
        self.replays = ReplayWindow(lim.replay_window)
        self.reading = 0  # bodies being read now (limits.reading_at_once)
        self.triggers: TtlCache[Obj | None] = TtlCache(lim.cache_seconds, lim.cache_entries)
        self.secrets: TtlCache[bytes | Refused] = TtlCache(lim.cache_seconds, lim.cache_entries)

    async def handle(self, request: web.BaseRequest) -> web.StreamResponse:
        """The server's one handler: the hook, and /healthz."""
        parts = request.path.strip("/").split("/")
        if request.path == "/healthz":
            return web.Response(text="ok")
        if len(parts) != 3 or parts[0] != "hooks" or not all(NAME.match(p) for p in parts[1:]):
            return web.json_response({"result": "refused", "reason": "NotFound"}, status=404)
        if request.method != "POST":
            return web.json_response(
                {"result": "refused", "reason": "MethodNotAllowed"}, status=405
            )
        namespace, name = parts[1], parts[2]
        outcome = await self.deliver(namespace, name, request)
        metrics.trigger_deliveries.labels(
            namespace, name if outcome.reason != "NotFound" else "", outcome.result, outcome.reason
        ).inc()
        return outcome.answer()

    async def deliver(self, namespace: str, name: str, request: web.BaseRequest) -> Outcome:
        """A delivery's outcome, recorded on the trigger once it is known."""
        trigger: Obj | None = None
        verified = False
        try:
            if not self.requests.take(None):
                raise Refused("RateLimited", "too many requests: slow down", 429)
            headers, body, unread = await self._read(request)
            trigger = await self.triggers.get(
                (namespace, name), lambda: self.kube.get_object(PLURAL, namespace, name)
            )
            if trigger is None:
                raise Refused("NotFound", "no such trigger", 404)
            if unread is not None:  # refused for its body or headers: said on the trigger too
                raise unread
            spec, author, delivery = await self._authenticate(trigger, headers, body)
            verified = True  # the rates of deliveries are charged only now
            # the trigger's own rate first: a tenant past it spends nothing of the others' total
            if not self.per_trigger.take((namespace, name)) or not self.total.take(None):
                raise Refused("RateLimited", "too many deliveries: slow down", 429)
            outcome = await self._accept(trigger, spec, author, delivery, headers, body)
        except Refused as r:
            outcome = Outcome("refused", r.reason, r.message, r.status, detail=r.detail)
        except (ApiError, *UNREACHABLE) as e:  # type: ignore[misc]
            log.warning("trigger %s/%s: the API server answered %s", namespace, name, e)
            msg = "the cluster could not be reached: retry later"
            outcome = Outcome("refused", "ApiUnavailable", msg, 503, detail=str(e)[:500])
        except Exception:  # a bug of ours: logged whole, answered without a word of it
            log.exception("trigger %s/%s: delivery failed", namespace, name)
            outcome = Outcome("refused", "InternalError", "the receiver failed: retry later", 500)
        if trigger is not None and self._told(namespace, name, outcome, verified):
            await self._record(trigger, outcome)
        return outcome

    def _told(self, namespace: str, name: str, outcome: Outcome, verified: bool) -> bool:
        """Whether an outcome goes to the trigger's status and Events: not a rate's refusal,
        and one before the signature was checked only within limits.unverified_per_minute."""
        if outcome.reason in ("RateLimited", "Busy"):
            return False
        return verified or self.unverified.take((namespace, name))

    async def _read(self, request: web.BaseRequest) -> tuple[dict[str, str], bytes, Refused | None]:
        """The headers and body, or why they are refused (told once the trigger is known)."""
        try:
            headers = header_map(request.headers)
            return headers, await self._body(request, headers), None
        except Refused as r:
            return {}, b"", r

    async def _body(self, request: web.BaseRequest, headers: dict[str, str]) -> bytes:
        """The body, at most limits.body_bytes of it, read within limits.body_seconds."""
        encoding = headers.get("content-encoding", "identity").strip().lower()
        if encoding != "identity":
            raise Refused("UnsupportedEncoding", "send the body uncompressed", 415)
        kind = headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json":
            raise Refused(
                "UnsupportedMediaType", "send the payload as JSON (application/json)", 415
            )
        limit = self.limits.body_bytes
        if request.content_length is not None and request.content_length > limit:
            raise Refused("TooLarge", f"the body is larger than {limit} bytes", 413)
        if self.reading >= self.limits.reading_at_once:
            raise Refused("Busy", "too many deliveries being sent at once: retry later", 503)
        self.reading += 1
        data = bytearray()
        try:
            async with asyncio.timeout(self.limits.body_seconds):
                while len(data) <= limit and not request.content.at_eof():
                    more = await request.content.read(limit + 1 - len(data))
                    if not more:
                        break
                    data += more
        except TimeoutError:
            raise Refused("Timeout", "the body was not sent in time", 408) from None
        finally:
            self.reading -= 1
        if len(data) > limit:
            raise Refused("TooLarge", f"the body is larger than {limit} bytes", 413)
        return bytes(data)

    async def _authenticate(
        self, trigger: Obj, headers: dict[str, str], body: bytes
    ) -> tuple[PlanTriggerSpec, Author, Delivery]:
        """The trigger's spec and author, and the delivery its signature proves; Refused when
        the trigger cannot be used or the signature is not its secret's."""
        namespace = trigger["metadata"]["namespace"]
        try:
            spec = PlanTriggerSpec.model_validate(trigger.get("spec") or {})
        except ValidationError as e:
            raise Refused(
                "InvalidTrigger",
                "the trigger is invalid: " + SEE_STATUS,
                503,
                f"the trigger's spec is invalid: {e.errors()[0]['msg']}",
            ) from None
        if spec.suspend:
            raise Refused("Suspended", "the trigger is suspended", 503)
        author = _author(trigger)
        ref = spec.webhook.secret_ref
        secret = await self.secrets.get(
            (namespace, ref.name, ref.key, author.username, tuple(author.groups)),
            lambda: self._secret(namespace, ref.name, ref.key, author),
        )
        # a refusal kept is raised as a fresh copy (one raised again would grow its traceback)
        if isinstance(secret, Refused):
            raise Refused(secret.reason, secret.message, secret.status, secret.detail)
        return spec, author, verify(spec.webhook, secret, headers, body)

    async def _accept(
        self,
        trigger: Obj,
        spec: PlanTriggerSpec,
        author: Author,
        delivery: Delivery,
        headers: dict[str, str],
        body: bytes,
    ) -> Outcome:
        """An authenticated delivery: new, parsed, filtered, mapped, and its Plan created."""
        meta = trigger["metadata"]
        namespace, name = meta["namespace"], meta["name"]
        groups = list(author.groups)
        key = (namespace, name, delivery.key)
        if self.replays.seen(key):
            raise Refused("Replay", "this delivery was received before", 409)
        try:
            payload = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise Refused("BadPayload", "the body is not JSON", 400) from None
        if depth(payload) > PAYLOAD_DEPTH:
            raise Refused("BadPayload", f"the body is nested deeper than {PAYLOAD_DEPTH}", 400)
        inputs = await asyncio.to_thread(map_delivery, spec, payload, headers)
        if inputs is None:
            self.replays.add(key)
            return Outcome(
                "filtered",
                "FilteredOut",
                "the trigger's filter is false for this delivery",
                200,
                delivery=delivery.id,
                detail="the filter is false for this delivery",
            )
        plan = plan_body(trigger, spec, delivery, inputs)
        created = await self._create(namespace, plan, author, groups)
        self.replays.add(key)
        return Outcome(
            "accepted",
            "Started",
            f"started Plan {created}",
            202,
            plan=created,
            delivery=delivery.id,
            detail=f"started Plan {created} for delivery {delivery.id}",
        )

    async def _secret(self, namespace: str, name: str, key: str, author: Author) -> bytes | Refused:
        """The trigger's secret read as its author, or why it cannot be (kept as the secret is:
        a refusal is asked again after limits.cache_seconds)."""
        try:
            value = await self.kube.get_secret_value_as(
                namespace, name, key, author.username, list(author.groups)
            )
        except ApiError as e:
            if e.status == 403:
                return Refused(
                    "SecretForbidden",
                    "the trigger cannot be checked: " + SEE_STATUS,
                    503,
                    f"the trigger's author {author.username} may not read Secret {name} (RBAC "
                    "get on it): the receiver reads the trigger's secret as its author",
                )
            raise
        if value is None:
            return Refused(
                "SecretMissing",
                "the trigger cannot be checked: " + SEE_STATUS,
                503,
                f"Secret {name} or its key {key} does not exist in the trigger's namespace",
            )
        return value

    async def _create(self, namespace: str, plan: Obj, author: Author, groups: list[str]) -> str:
        name = str(plan["metadata"]["name"])
        try:
            await self.kube.create_plan_as(namespace, plan, author.username, groups)
        except ApiError as e:
            if e.status == 409:
                raise Refused("Replay", "this delivery was received before", 409) from None
            if e.status == 403:
                raise Refused(
                    "Forbidden",
                    "the trigger's author may not start this Plan: " + SEE_STATUS,
                    403,
                    f"the Plan was refused for {author.username}: {e.message}",
                ) from None
            if e.status in (400, 422):
                raise Refused(
                    "PlanInvalid",
                    "the Plan was refused: " + SEE_STATUS,
                    422,
                    f"the Plan was refused: {e.message}",
                ) from None
            raise
        return name

    async def _record(self, trigger: Obj, outcome: Outcome) -> None:
        """The outcome in the trigger's status and an Event (best effort: logged on failure)."""
        try:
            await self._write_status(trigger, outcome)
            warning = outcome.result == "refused"
            await self.kube.create_event(
                trigger["metadata"]["namespace"],
                events.event(trigger, outcome.reason, _detail(outcome), warning=warning),
            )
        except (ApiError, *UNREACHABLE) as e:  # type: ignore[misc]
            log.warning(
                "trigger %s: could not record %s: %s",
                trigger["metadata"]["name"],
                outcome.reason,
                e,
            )

    async def _write_status(self, trigger: Obj, outcome: Outcome) -> None:
        meta = trigger["metadata"]
        for _ in range(3):
            status = next_status(trigger.get("status") or {}, outcome, _now())
            try:
                written = await self.kube.patch_status(
                    PLURAL, meta["namespace"], meta["name"], status, meta.get("resourceVersion")
                )
                if written.get("metadata"):  # the next write's base
                    self.triggers.put((meta["namespace"], meta["name"]), written)
                return
            except ApiError as e:
                if e.status != 409:
                    raise
            fresh = await self.kube.get_object(PLURAL, meta["namespace"], meta["name"])
            if fresh is None:
                return
            trigger, meta = fresh, fresh["metadata"]


def _detail(outcome: Outcome) -> str:
    text = outcome.detail or outcome.message
    return f"delivery {outcome.delivery}: {text}" if outcome.delivery else text


def _author(trigger: Obj) -> Author:
    try:
        author = recorded_author(trigger["metadata"])
    except UnreadableAuthorError:
        author = None
    if author is None:
        raise Refused(
            "AuthorUnknown",
            "the trigger has no author record: apply it again (kubectl apply) to be recorded",
            503,
        )
    return author


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def next_status(status: Obj, outcome: Outcome, now: str) -> Obj:
    """The trigger's status after `outcome`: counts and the last delivery of each result."""
    out = dict(status)
    out[outcome.result] = int(out.get(outcome.result) or 0) + 1
    last: Obj = {"time": now, "reason": outcome.reason, "message": _detail(outcome)[:1024]}
    if outcome.delivery:
        last["delivery"] = outcome.delivery
    if outcome.plan:
        last["plan"] = outcome.plan
    out["last" + outcome.result.capitalize()] = last
    return out
