"""The trigger receiver: `POST /hooks/<namespace>/<trigger>` starts a Plan from the trigger's
template when the delivery is authentic, new, within the limits and passes the filter.

Each delivery goes through the same gates, cheapest first, and the first that refuses answers:
the rates (before any request to the API server), the body's size and encoding, the trigger (it
exists, is not suspended, has an author record), its secret (read as the trigger's author), the
signature (constant time), the replay window, the JSON, the filter, the mapping, and the Plan's
create, made as the trigger's recorded author (impersonated): the API server's admission checks
that author's `use` on the Capsule at that moment, so a revoked grant stops the next run, and
records them as the Plan's author. The Plan's name is derived from the trigger and what the
delivery's signature covers (its body; GitLab's id): a replay on any replica, under the same
id or a made-up one, is AlreadyExists.

Each answer is JSON `{result, reason, message}` with messages written here: never a secret, a
signature, an expression's error or the API server's text (those go to the trigger's status and
Events, which the namespace's users read). The outcome is counted in
planops_trigger_deliveries_total, and, once the trigger is known, in its status and an Event.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import re
from collections.abc import Mapping
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
from planops.triggers import cel
from planops.triggers.limits import Limits, RateLimiter, ReplayWindow
from planops.triggers.verify import Delivery, Refused, verify

log = logging.getLogger("planops.triggers")
Obj = dict[str, Any]
PLURAL = "plantriggers"
#: the headers a source's authentication reads: a second copy of one is refused (a proxy and
#: this receiver could each read a different one)
SIGNED_HEADERS = frozenset(
    {
        "x-hub-signature-256",
        "x-github-delivery",
        "x-github-event",
        "x-gitlab-token",
        "x-gitlab-event-uuid",
        "x-gitlab-event",
        "content-length",
        "content-type",
        "content-encoding",
    }
)
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


def header_map(headers: Mapping[str, str]) -> dict[str, str]:
    """The delivery's headers as the expressions see them: lower-case names, a repeated header's
    values joined by ", " (RFC 9110); Refused when a header the authentication reads repeats."""
    out: dict[str, str] = {}
    for key, value in headers.items():
        name = key.lower()
        if name in out:
            if name in SIGNED_HEADERS:
                raise Refused("DuplicateHeader", f"the header {name} is given more than once", 400)
            out[name] += ", " + value
        else:
            out[name] = value
    return out


def map_delivery(spec: PlanTriggerSpec, body: Any, headers: dict[str, str]) -> Obj | None:
    """The template's input for a delivery, or None when the filter says no; Refused when an
    expression fails or runs past the cost limit (one meter for all of them)."""
    activation = {"body": cel.to_cel(body), "headers": cel.to_cel(headers)}
    meter = cel.Meter()
    if spec.filter:
        passed = _run("filter", spec.filter, activation, meter)
        if not isinstance(passed, bool):
            raise Refused(
                "FilterFailed", f"the filter gave {type(passed).__name__}, not a bool", 422
            )
        if not passed:
            return None
    return {key: _run(f"input {key}", text, activation, meter) for key, text in spec.input.items()}


def _run(what: str, text: str, activation: Obj, meter: cel.Meter) -> Any:
    try:
        return cel.evaluate(text, activation, meter)
    except cel.CostExceeded as e:
        raise Refused("CostExceeded", f"{what}: {e}", 422) from None
    except cel.CelError as e:
        reason = "FilterFailed" if what == "filter" else "MappingFailed"
        raise Refused(reason, f"{what}: {e}", 422) from None


NAME = re.compile(NAME_PATTERN)
#: the deepest payload the expressions see (CEL's conversion recurses; GitHub's nest about 6)
PAYLOAD_DEPTH = 64


def depth(value: Any) -> int:
    """How deep a JSON value nests (without recursion: the value is the sender's)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(node, dict):
            stack += [(v, level + 1) for v in node.values()]
        elif isinstance(node, list):
            stack += [(v, level + 1) for v in node]
    return deepest


@dataclass
class Receiver:
    """The receiver's state: its client, limits, rate buckets and replay window."""

    kube: TriggerKube
    limits: Limits = field(default_factory=Limits)

    def __post_init__(self) -> None:
        lim = self.limits
        self.per_trigger = RateLimiter(lim.per_minute / 60.0, lim.burst)
        self.total = RateLimiter(lim.total_per_second, max(lim.total_per_second, 1.0))
        self.replays = ReplayWindow(lim.replay_window)

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
        try:
            if not self.total.take(None) or not self.per_trigger.take((namespace, name)):
                raise Refused("RateLimited", "too many deliveries: slow down", 429)
            headers, body, unread = await self._read(request)
            trigger = await self.kube.get_object(PLURAL, namespace, name)
            if trigger is None:
                raise Refused("NotFound", "no such trigger", 404)
            if unread is not None:  # refused for its body or headers: said on the trigger too
                raise unread
            outcome = await self._accept(trigger, headers, body)
        except Refused as r:
            outcome = Outcome("refused", r.reason, r.message, r.status, detail=r.detail)
        except (ApiError, *UNREACHABLE) as e:  # type: ignore[misc]
            log.warning("trigger %s/%s: the API server answered %s", namespace, name, e)
            msg = "the cluster could not be reached: retry later"
            outcome = Outcome("refused", "ApiUnavailable", msg, 503, detail=str(e)[:500])
        except Exception:  # a bug of ours: logged whole, answered without a word of it
            log.exception("trigger %s/%s: delivery failed", namespace, name)
            outcome = Outcome("refused", "InternalError", "the receiver failed: retry later", 500)
        if trigger is not None:
            await self._record(trigger, outcome)
        return outcome

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
        try:
            async with asyncio.timeout(self.limits.body_seconds):
                data = await request.content.read(limit + 1)
                while len(data) <= limit and not request.content.at_eof():
                    more = await request.content.read(limit + 1 - len(data))
                    if not more:
                        break
                    data += more
        except TimeoutError:
            raise Refused("Timeout", "the body was not sent in time", 408) from None
        if len(data) > limit:
            raise Refused("TooLarge", f"the body is larger than {limit} bytes", 413)
        return data

    async def _accept(self, trigger: Obj, headers: dict[str, str], body: bytes) -> Outcome:
        meta = trigger["metadata"]
        namespace, name = meta["namespace"], meta["name"]
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
        groups = list(author.groups)
        ref = spec.webhook.secret_ref
        secret = await self._secret(namespace, ref.name, ref.key, author)
        delivery = verify(spec.webhook, secret, headers, body)
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

    async def _secret(self, namespace: str, name: str, key: str, author: Author) -> bytes:
        try:
            value = await self.kube.get_secret_value_as(
                namespace, name, key, author.username, list(author.groups)
            )
        except ApiError as e:
            if e.status == 403:
                raise Refused(
                    "SecretForbidden",
                    "the trigger cannot be checked: " + SEE_STATUS,
                    503,
                    f"the trigger's author {author.username} may not read Secret {name} (RBAC "
                    "get on it): the receiver reads the trigger's secret as its author",
                ) from None
            raise
        if value is None:
            raise Refused(
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
                await self.kube.patch_status(
                    PLURAL, meta["namespace"], meta["name"], status, meta.get("resourceVersion")
                )
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
