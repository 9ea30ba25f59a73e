"""A Plan nested deeper than Python's json can read (the API server takes 10,000 levels) never
stops the others from being read: kube.jsontext cuts only the too-deep part, in our client and in
kopf's (handlers.kopf_adapter.fix_json); the validator then refuses that Plan."""

from __future__ import annotations

import asyncio
import json

import pytest

from planops.api import parse_document
from planops.handlers import kopf_adapter
from planops.kube import jsontext


def deep_plan(name: str, levels: int) -> dict:
    value: object = "bottom"
    for _ in range(levels):
        value = {"a": [value]} if _ % 2 else [value]
    return {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": {"name": name, "namespace": "ns"},
        "spec": {"input": {"x": value}, "steps": [{"id": "a", "shell": "true"}]},
    }


def listing(levels: int) -> str:
    items = [deep_plan("before", 1), deep_plan("deep", levels), deep_plan("after", 1)]
    # json.dumps recurses too: write the deep one by hand
    texts = [json.dumps(items[0]), deep_text(levels), json.dumps(items[2])]
    return '{"kind":"PlanList","items":[' + ",".join(texts) + "]}"


def deep_text(levels: int) -> str:
    opening = "".join('{"a":[' if n % 2 else "[" for n in range(levels))
    closing = "".join("]}" if n % 2 else "]" for n in reversed(range(levels)))
    return (
        '{"apiVersion":"planops.dev/v1alpha1","kind":"Plan","metadata":{"name":"deep",'
        '"namespace":"ns"},"spec":{"input":{"x":'
        + opening
        + '"a \\"]}[{ string"'
        + closing
        + '},"steps":[{"id":"a","shell":"true"}]}}'
    )


def test_python_json_cannot_read_1200_levels():
    with pytest.raises(RecursionError):
        json.loads(listing(1200))


def test_a_list_holding_a_1200_level_plan_is_read_and_the_others_are_whole():
    text = listing(1200)
    assert len(deep_text(1200)) < 8_000  # ~7 KB, as the issue found
    page = jsontext.loads(text)
    before, deep, after = page["items"]
    assert before == deep_plan("before", 1) and after == deep_plan("after", 1)
    # the deep one keeps its name and the levels up to CUT_DEPTH, then the mark
    assert deep["metadata"]["name"] == "deep"
    node, levels = deep["spec"]["input"]["x"], 0
    while isinstance(node, (list, dict)):
        node = node[0] if isinstance(node, list) else node["a"]
        levels += 1
    assert node == jsontext.CUT
    assert jsontext.CUT_DEPTH - 10 < levels < jsontext.CUT_DEPTH  # counted from the list's root


def test_bytes_and_a_shallow_text_read_as_json_reads_them():
    assert jsontext.loads(b'{"a": ["]", "[{"]}') == {"a": ["]", "[{"]}
    text = listing(1200).encode()
    assert jsontext.loads(text)["items"][2]["metadata"]["name"] == "after"


def test_the_cut_plan_is_refused_by_the_validator_with_a_clear_error():
    deep = jsontext.loads(deep_text(1200))
    doc, problems = parse_document(deep)
    assert doc is None and problems
    assert any("deep" in p.message for p in problems), problems


def test_kopfs_lists_and_watch_events_read_through_the_bounded_reader():
    from kopf._cogs.clients import api  # noqa: PLC0415

    assert kopf_adapter.fix_json()
    assert kopf_adapter.fix_json()  # twice: once patched, left as it is
    assert api.json.loads(listing(1200))["items"][2]["metadata"]["name"] == "after"

    class Response:
        async def __aenter__(self):
            return self

        async def __aexit__(self, *_):
            return None

        async def json(self, loads=json.loads):
            return loads(listing(1200))

    async def request(**_):
        return Response()

    saved = api.request
    patched_get = api.get
    try:
        api.request = request  # the patched get asks kopf's request for the answer
        got = asyncio.run(patched_get("/x", settings=None, logger=None))
    finally:
        api.request = saved
    assert got["items"][0]["metadata"]["name"] == "before"


def test_our_clients_answers_are_read_through_the_bounded_reader():
    from planops.kube import client  # noqa: PLC0415

    class Response:
        status = 200

        async def read(self):
            return listing(1200).encode()

        def release(self):
            pass

    page = asyncio.run(client._json(Response()))  # type: ignore[arg-type]
    assert [p["metadata"]["name"] for p in page["items"]] == ["before", "deep", "after"]


def test_the_admission_webhook_reads_a_deep_plan_and_the_validator_refuses_it():
    from kopf._kits import webhooks  # noqa: PLC0415

    assert kopf_adapter.fix_json()
    review = '{"request":{"uid":"u","object":' + deep_text(1200) + "}}"
    data = webhooks.json.loads(review)  # as kopf's webhook server reads the request
    doc, problems = parse_document(data["request"]["object"])
    assert doc is None and any("deep" in p.message for p in problems)
