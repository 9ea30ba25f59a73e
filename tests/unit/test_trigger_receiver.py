"""The trigger receiver (planops.triggers): each delivery is authenticated in constant time,
new, within its size and rate, filtered and mapped by CEL, and starts a Plan as the trigger's
recorded author; each refusal creates nothing, says why (answer, status, Event, metric) and
echoes no secret. An attacker's deliveries, one test each."""

import asyncio
import contextlib
import hashlib
import json

import aiohttp
import pytest
from pydantic import ValidationError

from planops import metrics
from planops.api import names
from planops.api.trigger_models import PlanTriggerSpec
from planops.kube.errors import ApiError
from planops.triggers import main as receiver_main
from planops.triggers.limits import Limits, RateLimiter, TtlCache
from planops.triggers.receiver import Receiver, plan_name
from planops.triggers.verify import sign

SECRET = b"s3cret-hmac-key"
AUTHOR = {"username": "alice", "groups": ["team-a", "system:authenticated"]}


def trigger(**spec):
    base = {
        "webhook": {"type": "github", "secretRef": {"name": "hook"}},
        "templateRef": {"kind": "ClusterPlanTemplate", "name": "build-and-test"},
        "filter": "body.ref == 'refs/heads/main'",
        "input": {"repo": "body.repository.clone_url", "revision": "body.after"},
    }
    base.update(spec)
    return {
        "apiVersion": names.API_VERSION,
        "kind": "PlanTrigger",
        "metadata": {
            "name": "push",
            "namespace": "team-a",
            "uid": "u1",
            "resourceVersion": "1",
            "annotations": {names.ANNOTATION_AUTHOR: json.dumps(AUTHOR)},
        },
        "spec": base,
    }


class FakeKube:
    def __init__(self, obj=None, secret=SECRET):
        self.trigger = obj if obj is not None else trigger()
        self.secret = secret
        self.plans: dict[str, dict] = {}
        self.as_users: list[tuple[str, list[str]]] = []
        self.events: list[dict] = []
        self.gets = 0
        self.forbid_create = False
        self.secret_forbidden = False

    async def get_object(self, plural, namespace, name):
        self.gets += 1
        meta = self.trigger["metadata"]
        if (namespace, name) == (meta["namespace"], meta["name"]):
            return json.loads(json.dumps(self.trigger))
        return None

    async def get_secret_value_as(self, namespace, name, key, user, groups):
        self.as_users.append((user, groups))
        if self.secret_forbidden:
            raise ApiError(403, "Forbidden", f"{user} cannot get secrets")
        return self.secret

    async def create_plan_as(self, namespace, body, user, groups):
        self.as_users.append((user, groups))
        if self.forbid_create:
            raise ApiError(403, "Forbidden", "alice may not use Capsule default (internal text)")
        name = body["metadata"]["name"]
        if name in self.plans:
            raise ApiError(409, "AlreadyExists", "exists")
        self.plans[name] = body
        return body

    async def patch_status(self, plural, namespace, name, status, resource_version=None):
        self.trigger["status"] = status
        return self.trigger

    async def create_event(self, namespace, body):
        self.events.append(body)


PUSH = {
    "ref": "refs/heads/main",
    "after": "a" * 40,
    "repository": {"clone_url": "https://example.test/o/r.git"},
}


def signed(body: bytes, delivery="d-1", secret=SECRET, **extra):
    return {
        "Content-Type": "application/json",
        "X-GitHub-Event": "push",
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": "sha256=" + sign(secret, body),
        **extra,
    }


@contextlib.asynccontextmanager
async def serving(kube, limits=None):
    """The receiver on a free loopback port: its base URL."""
    runner = await receiver_main.start(Receiver(kube, limits or Limits()), "127.0.0.1", 0)
    try:
        host, port = runner.addresses[0][:2]
        yield host, port
    finally:
        await runner.cleanup()


def post(kube, body, headers, limits=None, path="/hooks/team-a/push", times=1):
    async def go():
        async with serving(kube, limits) as (host, port), aiohttp.ClientSession() as client:
            out = []
            for _ in range(times):
                resp = await client.post(f"http://{host}:{port}{path}", data=body, headers=headers)
                out.append((resp.status, await resp.json()))
            return out

    result = asyncio.run(go())
    return result if times > 1 else result[0]


def raw(body=PUSH):
    return json.dumps(body).encode()


def test_a_signed_push_starts_a_plan_as_the_author_with_the_payloads_input():
    kube = FakeKube()
    status, answer = post(kube, raw(), signed(raw()))
    assert (status, answer["result"]) == (202, "accepted")
    plan = kube.plans[answer["plan"]]
    assert plan["spec"] == {
        "templateRef": {"kind": "ClusterPlanTemplate", "name": "build-and-test"},
        "input": {"repo": "https://example.test/o/r.git", "revision": "a" * 40},
    }
    # named by what the signature covers (the body), the delivery id kept beside it
    assert plan["metadata"]["name"] == plan_name("push", hashlib.sha256(raw()).hexdigest())
    assert plan["metadata"]["annotations"] == {names.ANNOTATION_DELIVERY: "d-1"}
    assert plan["metadata"]["labels"] == {names.LABEL_TRIGGER: "push"}
    # no owner: deleting the trigger leaves the Plans it started (docs/triggers.md)
    assert "ownerReferences" not in plan["metadata"]
    # made as the recorded author, never as the receiver
    assert kube.as_users == [("alice", AUTHOR["groups"])] * 2
    assert kube.trigger["status"]["accepted"] == 1
    assert kube.trigger["status"]["lastAccepted"]["plan"] == answer["plan"]
    assert kube.events[-1]["reason"] == "Started"


def refused(kube, status, answer, reason):
    assert (status, answer["result"], answer["reason"]) == (status, "refused", reason)
    assert kube.plans == {}


def test_a_forged_signature_creates_nothing_and_echoes_nothing():
    kube = FakeKube()
    status, answer = post(kube, raw(), signed(raw(), secret=b"guess"))
    assert status == 401
    refused(kube, status, answer, "BadSignature")
    text = json.dumps(answer)
    assert "s3cret" not in text and sign(SECRET, raw()) not in text
    assert kube.trigger["status"]["lastRefused"]["reason"] == "BadSignature"
    assert kube.events[-1]["type"] == "Warning"


def test_a_signature_over_another_body_is_refused():
    other = raw({**PUSH, "after": "b" * 40})
    kube = FakeKube()
    status, answer = post(kube, other, signed(raw()))
    refused(kube, status, answer, "BadSignature")


def test_an_unsigned_or_non_ascii_signature_is_refused_not_a_crash():
    kube = FakeKube()
    headers = signed(raw())
    del headers["X-Hub-Signature-256"]
    refused(kube, *post(kube, raw(), headers), "Unsigned")
    headers = signed(raw(), **{"X-Hub-Signature-256": "sha256=\u00e9\u00e9"})
    status, answer = post(
        kube, raw(), {k: v.encode().decode("latin-1") for k, v in headers.items()}
    )
    refused(kube, status, answer, "BadSignature")


def test_a_replay_is_refused_by_the_window_and_by_the_plans_name():
    kube = FakeKube()
    (s1, _a1), (s2, a2) = post(kube, raw(), signed(raw()), times=2)
    assert (s1, s2, a2["reason"]) == (202, 409, "Replay")
    # the window refused it before any create: a secret read (kept) and one create
    assert len(kube.as_users) == 2
    assert len(kube.plans) == 1
    # another replica (a new window): the Plan's name makes it AlreadyExists
    status, answer = post(kube, raw(), signed(raw()))
    assert (status, answer["reason"]) == (409, "Replay")
    assert len(kube.plans) == 1


def test_an_oversized_body_is_refused_before_it_is_read_whole():
    kube = FakeKube()
    big = raw({**PUSH, "pad": "x" * 5000})
    status, answer = post(kube, big, signed(big), limits=Limits(body_bytes=1000))
    assert status == 413
    refused(kube, status, answer, "TooLarge")
    # no secret read, nothing verified: the trigger's status says why
    assert kube.as_users == []
    assert kube.trigger["status"]["lastRefused"]["reason"] == "TooLarge"


def test_a_chunked_body_is_cut_at_the_limit():
    kube = FakeKube()
    sent = []

    async def chunks():
        for _ in range(1000):  # 1 MB offered, in 1 KB chunks, no Content-Length
            sent.append(1)
            yield b"x" * 1024

    async def go():
        limits = Limits(body_bytes=4096)
        async with serving(kube, limits) as (host, port), aiohttp.ClientSession() as client:
            url = f"http://{host}:{port}/hooks/team-a/push"
            try:
                resp = await client.post(url, data=chunks(), headers=signed(b"x"))
                return resp.status, await resp.json()
            except aiohttp.ClientError:  # the server answered and closed while it sent
                return 413, {"reason": "TooLarge", "result": "refused"}

    status, answer = asyncio.run(go())
    refused(kube, status, answer, "TooLarge")
    # the receiver, not the client, said so
    assert kube.trigger["status"]["lastRefused"]["reason"] == "TooLarge"


def test_a_filter_miss_creates_nothing_and_says_so():
    kube = FakeKube()
    tag = raw({**PUSH, "ref": "refs/tags/v1"})
    status, answer = post(kube, tag, signed(tag))
    assert (status, answer["result"], answer["reason"]) == (200, "filtered", "FilteredOut")
    assert kube.plans == {}
    assert kube.trigger["status"]["filtered"] == 1


def test_a_rate_past_the_burst_is_refused_before_any_api_request():
    kube = FakeKube()
    results = post(kube, raw(), signed(raw()), limits=Limits(per_minute=1, burst=2), times=4)
    assert [s for s, _ in results] == [202, 409, 429, 429]
    assert kube.gets == 1  # the trigger read once (kept limits.cache_seconds)
    assert len(kube.plans) == 1 and "RateLimited" not in json.dumps(kube.trigger["status"])


def post_all(kube, deliveries, limits=None):
    """Each (body, headers) POSTed in turn to one receiver: the answers' statuses."""

    async def go():
        async with serving(kube, limits) as (host, port), aiohttp.ClientSession() as client:
            out = []
            for body, headers in deliveries:
                url = f"http://{host}:{port}/hooks/team-a/push"
                resp = await client.post(url, data=body, headers=headers)
                out.append(resp.status)
            return out

    return asyncio.run(go())


def test_forged_deliveries_do_not_spend_the_triggers_rate():
    """A sender without the secret cannot starve the trigger: the signature is checked before
    its rate is charged, so after many forged deliveries a signed one still starts a Plan."""
    kube = FakeKube()
    forged = [(raw(), signed(raw(), secret=b"guess-%d" % i)) for i in range(40)]
    limits = Limits(per_minute=1, burst=2, total_per_second=1)
    statuses = post_all(kube, [*forged, (raw(), signed(raw()))], limits)
    assert statuses == [401] * 40 + [202]
    assert len(kube.plans) == 1
    # the trigger and its secret read once for all 41: a forged delivery costs no request
    assert kube.gets == 1 and len([u for u in kube.as_users if u[0] == "alice"]) == 2


def test_refusals_before_the_signature_are_written_to_the_trigger_at_a_bounded_rate():
    kube = FakeKube()
    forged = [(raw(), signed(raw(), secret=b"guess")) for _ in range(10)]
    statuses = post_all(kube, forged, Limits(unverified_per_minute=3))
    assert statuses == [401] * 10  # every one refused, and counted in the metric
    assert kube.trigger["status"]["refused"] == 3 and len(kube.events) == 3


def test_all_requests_are_bounded_before_anything_is_read():
    kube = FakeKube()
    forged = [(raw(), signed(raw(), secret=b"guess")) for _ in range(5)]
    statuses = post_all(kube, forged, Limits(requests_per_second=2))
    assert statuses == [401, 401, 429, 429, 429]


def test_a_trigger_and_its_secret_are_kept_for_the_cache_seconds_then_read_again():
    now = [0.0]
    cache: TtlCache[int] = TtlCache(ttl=10.0, size=2, clock=lambda: now[0])
    loads = []

    async def load(value):
        loads.append(value)
        return value

    async def go():
        assert await cache.get("a", lambda: load(1)) == 1
        assert await cache.get("a", lambda: load(2)) == 1  # kept
        now[0] = 10.0
        assert await cache.get("a", lambda: load(3)) == 3  # expired: read again
        await cache.get("b", lambda: load(4))
        await cache.get("c", lambda: load(5))  # past `size`: the least recently used goes
        assert await cache.get("a", lambda: load(6)) == 6

    asyncio.run(go())
    assert loads == [1, 3, 4, 5, 6]


def test_the_rate_limiter_refills_at_its_rate():
    now = [0.0]
    rl = RateLimiter(rate=1.0, burst=2, clock=lambda: now[0])
    assert [rl.take("k") for _ in range(3)] == [True, True, False]
    now[0] = 1.0
    assert rl.take("k") and not rl.take("k")


def test_a_cost_bomb_in_the_mapping_is_refused_and_creates_nothing():
    body = raw({**PUSH, "list": list(range(3000))})
    kube = FakeKube(trigger(input={"x": "body.list.map(a, body.list.map(b, a + b))"}))
    status, answer = post(kube, body, signed(body))
    refused(kube, status, answer, "CostExceeded")
    assert status == 422


def test_payload_text_reaches_the_input_as_data_never_rendered():
    evil = {**PUSH, "after": "{{ input.secret }}$(rm -rf /)"}
    kube = FakeKube()
    status, answer = post(kube, raw(evil), signed(raw(evil)))
    assert status == 202
    assert kube.plans[answer["plan"]]["spec"]["input"]["revision"] == evil["after"]


def test_a_payload_cannot_add_input_keys_or_reach_the_plans_other_fields():
    evil = {**PUSH, "repository": {"clone_url": {"steps": [{"shell": "id"}]}}}
    kube = FakeKube()
    _status, answer = post(kube, raw(evil), signed(raw(evil)))
    spec = kube.plans[answer["plan"]]["spec"]
    assert set(spec) == {"templateRef", "input"} and set(spec["input"]) == {"repo", "revision"}


def test_a_duplicated_signature_header_is_refused():
    kube = FakeKube()

    async def go():
        async with serving(kube) as (host, port), aiohttp.ClientSession() as client:
            headers = [(k, v) for k, v in signed(raw()).items()]
            headers.append(("X-Hub-Signature-256", "sha256=" + "0" * 64))
            url = f"http://{host}:{port}/hooks/team-a/push"
            resp = await client.post(url, data=raw(), headers=headers)
            return resp.status, await resp.json()

    status, answer = asyncio.run(go())
    refused(kube, status, answer, "DuplicateHeader")


def test_a_compressed_or_non_json_body_is_refused():
    kube = FakeKube()
    refused(
        kube,
        *post(kube, raw(), signed(raw(), **{"Content-Encoding": "gzip"})),
        "UnsupportedEncoding",
    )
    refused(
        kube,
        *post(kube, raw(), signed(raw(), **{"Content-Type": "text/plain"})),
        "UnsupportedMediaType",
    )


def test_a_revoked_use_is_forbidden_and_the_answer_hides_the_api_text():
    kube = FakeKube()
    kube.forbid_create = True
    status, answer = post(kube, raw(), signed(raw()))
    assert status == 403
    refused(kube, status, answer, "Forbidden")
    assert "internal text" not in json.dumps(answer)
    assert "internal text" in kube.trigger["status"]["lastRefused"]["message"]


def test_a_secret_the_author_may_not_read_is_refused():
    kube = FakeKube()
    kube.secret_forbidden = True
    status, answer = post(kube, raw(), signed(raw()))
    refused(kube, status, answer, "SecretForbidden")
    assert "alice may not read Secret hook" in kube.trigger["status"]["lastRefused"]["message"]


def test_a_trigger_without_author_record_or_suspended_starts_nothing():
    t = trigger()
    del t["metadata"]["annotations"]
    kube = FakeKube(t)
    refused(kube, *post(kube, raw(), signed(raw())), "AuthorUnknown")
    kube = FakeKube(trigger(suspend=True))
    refused(kube, *post(kube, raw(), signed(raw())), "Suspended")


def test_an_unknown_trigger_counts_under_no_name():
    kube = FakeKube()
    before = metrics.trigger_deliveries.labels("team-a", "", "refused", "NotFound")._value.get()
    status, answer = post(kube, raw(), signed(raw()), path="/hooks/team-a/guessed-name")
    assert (status, answer["reason"]) == (404, "NotFound")
    after = metrics.trigger_deliveries.labels("team-a", "", "refused", "NotFound")._value.get()
    assert after == before + 1


def test_gitlab_token_and_generic_hmac():
    gl = trigger(webhook={"type": "gitlab", "secretRef": {"name": "hook"}}, filter=None)
    kube = FakeKube(gl)
    headers = {
        "Content-Type": "application/json",
        "X-Gitlab-Token": "s3cret-hmac-key",
        "X-Gitlab-Event-UUID": "u-1",
    }
    assert post(kube, raw(), headers)[0] == 202
    assert post(kube, raw(), {**headers, "X-Gitlab-Token": "nope"})[1]["reason"] == "BadSignature"
    gen = trigger(
        webhook={
            "type": "generic",
            "secretRef": {"name": "hook"},
            "generic": {"signatureHeader": "X-Sig", "prefix": "v1="},
        },
        filter=None,
    )
    kube = FakeKube(gen)
    headers = {"Content-Type": "application/json", "X-Sig": "v1=" + sign(SECRET, raw())}
    assert post(kube, raw(), headers)[0] == 202
    # no delivery header: the body names the delivery, so the same body is a replay
    assert post(kube, raw(), headers)[1]["reason"] == "Replay"


def test_huge_headers_are_refused_by_the_parser():
    kube = FakeKube()
    status = post_raw_status(kube, b"X-Pad: " + b"x" * 20000 + b"\r\n")
    assert status in (400, 431)
    assert kube.plans == {}


def post_raw_status(kube, extra_header: bytes) -> int:
    async def go():
        async with serving(kube) as (host, port):
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(
                b"POST /hooks/team-a/push HTTP/1.1\r\nHost: x\r\n"
                + extra_header
                + b"Content-Length: 2\r\n\r\n{}"
            )
            await writer.drain()
            line = await reader.readline()
            writer.close()
            return int(line.split()[1])

    return asyncio.run(go())


def test_a_slow_sender_is_cut_off_at_the_connection_deadline():
    kube = FakeKube()

    async def go():
        async with serving(kube, Limits(connection_seconds=0.5)) as (host, port):
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(b"POST /hooks/team-a/push HTTP/1.1\r\nHost: x\r\n")  # headers never end
            await writer.drain()
            data = await asyncio.wait_for(reader.read(), timeout=5)  # EOF: the server closed
            writer.close()
            return data

    assert asyncio.run(go()) == b""
    assert kube.plans == {}


def test_a_deeply_nested_payload_is_refused_not_a_crash():
    deep = b'{"a":' * 5000 + b"1" + b"}" * 5000
    kube = FakeKube()
    status, answer = post(kube, deep, signed(deep))
    refused(kube, status, answer, "BadPayload")


def test_plans_of_triggers_with_the_same_long_prefix_do_not_collide():
    long = "t" * 60
    assert plan_name(long + "a", "d-1") != plan_name(long + "b", "d-1")
    assert len(plan_name(long, "d-1")) <= 63


def test_a_payload_nested_as_deep_as_json_allows_is_refused_or_mapped_never_a_500():
    deep = b'{"ref":"refs/heads/main","a":' + b'{"a":' * 1000 + b"1" + b"}" * 1001
    kube = FakeKube(trigger(input={"x": "body.a.a.a"}))
    status, answer = post(kube, deep, signed(deep))
    refused(kube, status, answer, "BadPayload")
    assert "nested deeper than 64" in answer["message"]


def test_an_unreachable_api_server_or_a_bug_answers_without_details():
    class Down(FakeKube):
        async def get_object(self, plural, namespace, name):
            raise OSError("connect to 10.0.0.1:6443 refused")

    status, answer = post(Down(), raw(), signed(raw()))
    assert (status, answer["reason"]) == (503, "ApiUnavailable")
    assert "10.0.0.1" not in json.dumps(answer)

    class Buggy(FakeKube):
        async def create_plan_as(self, namespace, body, user, groups):
            raise KeyError("internal-detail")

    status, answer = post(Buggy(), raw(), signed(raw()))
    assert (status, answer["reason"]) == (500, "InternalError")
    assert "internal-detail" not in json.dumps(answer)


def test_a_captured_delivery_replayed_under_a_new_delivery_id_is_refused():
    # GitHub's HMAC covers the body, not X-GitHub-Delivery: whoever captured one signed delivery
    # (a proxy's log, a shared screen of the webhook's "Recent Deliveries") could start a Plan
    # per fresh id they made up; the signed body is what names a delivery
    kube = FakeKube()
    body = raw()
    assert post(kube, body, signed(body, delivery="d-1"))[0] == 202
    status, answer = post(kube, body, signed(body, delivery="made-up-2"))
    assert (status, answer["reason"]) == (409, "Replay")
    assert len(kube.plans) == 1
    # the same replica's window refuses it before any create too
    kube2 = FakeKube()
    ids = iter(["d-1", "made-up-3"])

    async def go():
        async with serving(kube2) as (host, port), aiohttp.ClientSession() as client:
            out = []
            for _ in range(2):
                resp = await client.post(
                    f"http://{host}:{port}/hooks/team-a/push",
                    data=body,
                    headers=signed(body, delivery=next(ids)),
                )
                out.append((resp.status, (await resp.json())["reason"]))
            return out

    assert asyncio.run(go()) == [(202, "Started"), (409, "Replay")]
    assert len(kube2.as_users) == 2  # the second: no create (and the secret kept)
    # a new body (a new push) is a new delivery
    other = raw({**PUSH, "after": "b" * 40})
    assert post(kube, other, signed(other, delivery="d-4"))[0] == 202


def test_a_trigger_names_no_other_namespace_and_no_field_of_the_plan_beyond_its_own():
    # an author reaching another tenant's Secret or template, or choosing the Plan's other
    # fields, through the trigger's spec: the model refuses each, naming the field
    base = trigger()["spec"]
    attempts = {
        "webhook.secretRef.namespace": {
            "webhook": {**base["webhook"], "secretRef": {"name": "hook", "namespace": "team-b"}}
        },
        "templateRef.namespace": {"templateRef": {**base["templateRef"], "namespace": "team-b"}},
        "templateRef.name": {"templateRef": {"kind": "PlanTemplate", "name": "team-b/build"}},
        "serviceAccount": {"serviceAccount": "admin"},
    }
    for field, change in attempts.items():
        with pytest.raises(ValidationError) as e:
            PlanTriggerSpec.model_validate({**base, **change})
        assert field in str(e.value)
    # and a valid trigger's Secret is read, and its Plan made, in the trigger's namespace
    calls: list[str] = []

    class Recording(FakeKube):
        async def get_secret_value_as(self, namespace, name, key, user, groups):
            calls.append(f"secret {namespace}/{name}")
            return await super().get_secret_value_as(namespace, name, key, user, groups)

        async def create_plan_as(self, namespace, body, user, groups):
            calls.append(f"plan {namespace}/{body['metadata']['namespace']}")
            return await super().create_plan_as(namespace, body, user, groups)

    assert post(Recording(), raw(), signed(raw()))[0] == 202
    assert calls == ["secret team-a/hook", "plan team-a/team-a"]


class TwoTriggers(FakeKube):
    """Two triggers of the same author and secret: team-a/push and team-a/other."""

    async def get_object(self, plural, namespace, name):
        self.gets += 1
        if (namespace, name) not in (("team-a", "push"), ("team-a", "other")):
            return None
        found = json.loads(json.dumps(self.trigger))
        found["metadata"]["name"] = name
        return found


def test_a_trigger_past_its_own_rate_spends_nothing_of_the_total():
    """One tenant sending signed deliveries past its trigger's rate must not use up the total
    over all triggers: the trigger's own rate is charged first."""
    kube = TwoTriggers()
    limits = Limits(per_minute=1, burst=1, total_per_second=2)  # two deliveries in all, at once

    async def go():
        async with serving(kube, limits) as (host, port), aiohttp.ClientSession() as client:
            out = []
            for hook, delivery in (("push", "d-1"), ("push", "d-2"), ("other", "d-3")):
                url = f"http://{host}:{port}/hooks/team-a/{hook}"
                resp = await client.post(url, data=raw(), headers=signed(raw(), delivery))
                out.append(resp.status)
            return out

    assert asyncio.run(go()) == [202, 429, 202]


def test_bodies_read_at_once_are_bounded_and_the_rest_answered_busy():
    """Senders who open many requests and send their bodies slowly hold memory while each is
    read: past limits.reading_at_once a request is answered 503 at once."""
    kube = FakeKube()
    release = asyncio.Event()

    async def go():
        limits = Limits(reading_at_once=1, body_seconds=30)
        async with serving(kube, limits) as (host, port), aiohttp.ClientSession() as client:
            url = f"http://{host}:{port}/hooks/team-a/push"

            async def slow():
                yield b"{"
                await release.wait()
                yield b"}"

            held = asyncio.create_task(client.post(url, data=slow(), headers=signed(b"{}")))
            await asyncio.sleep(0.3)  # the first body is being read
            resp = await client.post(url, data=raw(), headers=signed(raw()))
            busy = resp.status, (await resp.json())["reason"]
            release.set()
            first = await held
            return busy, first.status

    busy, first = asyncio.run(go())
    assert busy == (503, "Busy")
    assert first == 422  # read whole once released, signed, and judged (no `ref` to filter on)
    assert kube.plans == {} and "Busy" not in json.dumps(kube.trigger.get("status") or {})
