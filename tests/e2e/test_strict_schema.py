"""The real API server refuses exactly what `kubectl-plan validate` refuses for a Plan's types
and unknown fields: every case of tests/crd_cases.py (made from the CRD), and a few edges where
JSON's number types meet (3.0 for an integer, null for an optional field), are created with a
server-side dry run under strict field validation (`kubectl apply`'s default) and the verdicts
compared with the offline ones."""

from __future__ import annotations

import asyncio
import copy
from typing import Any

import pytest

from planops.api import parse_document
from planops.engine import validate
from planops.kube.client import Kube
from tests import crd_cases
from tests.unit.helpers import resolver

pytestmark = pytest.mark.cluster


def _edge(path: tuple[str | int, ...], value: Any) -> tuple[str, dict[str, Any]]:
    doc = copy.deepcopy(crd_cases.BASE)
    parent: Any = doc
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = value
    return f"{crd_cases.dotted(path)} = {value!r} (edge)", doc


STEP = ("spec", "steps", 0)
EDGES = [
    _edge((*STEP, "retries"), 3.0),
    _edge(("spec", "parallelism"), 2.0),
    _edge((*STEP, "timeoutSeconds"), None),
    _edge((*STEP, "retryBackoff", "factor"), 2),
    _edge((*STEP, "resources", "limits", "cpu"), "1"),
    _edge((*STEP, "resources", "limits", "cpu"), 0.5),
    _edge((*STEP, "onError"), "sometimes"),
]


def refused_offline(what: str, doc: dict[str, Any]) -> bool:
    """Refused by the schema, or by the validator at the field the case changed (the fields
    typed loosely so that their refusal carries the seed's code: onError)."""
    parsed, problems = parse_document(doc)
    if problems:
        return True
    assert parsed is not None and hasattr(parsed, "spec")
    field = what.split(" ", maxsplit=1)[0].removeprefix("spec.")
    return field in [e.path for e in validate(parsed.spec, resolver())]


async def _server_verdicts(kubeconfig: str, ns: str, docs: list[dict[str, Any]]) -> list[int]:
    kube = await Kube.connect(kubeconfig)
    path = f"/apis/planops.dev/v1alpha1/namespaces/{ns}/plans"
    query = {"dryRun": "All", "fieldValidation": "Strict"}

    async def one(doc: dict[str, Any]) -> int:
        resp = await kube.api.request("POST", path, query=query, body=doc)
        resp.release()
        return resp.status

    try:
        return list(await asyncio.gather(*(one(d) for d in docs)))
    finally:
        await kube.close()


def test_the_api_server_refuses_exactly_what_validate_refuses(
    kubeconfig: str, crds: None, namespace: str
):
    cases = [("the base plan", crd_cases.BASE), *crd_cases.cases(), *EDGES]
    statuses = asyncio.run(_server_verdicts(kubeconfig, namespace, [d for _, d in cases]))
    assert set(statuses) <= {200, 201, 400, 422}, statuses
    differ = [
        (what, status)
        for (what, doc), status in zip(cases, statuses, strict=True)
        if (status >= 400) != refused_offline(what, doc)
    ]
    assert differ == []
    assert statuses[0] in (200, 201)  # the base plan is accepted: the refusals are the cases'
