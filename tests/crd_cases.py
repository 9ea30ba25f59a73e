"""Plans with one field of the wrong type or one unknown field, made from the Plan CRD's own
schema: for every typed field (and every object's unknown field) of a Plan that sets them all.
`kubectl-plan validate` must refuse each (tests/unit/test_strict_schema.py), and the API server
refuses exactly the same (tests/e2e/test_strict_schema.py sends them, server-side dry-run)."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]

#: A Plan that sets every typed field of the CRD's schema (the validator may refuse what it means;
#: the schema accepts it).
BASE: dict[str, Any] = {
    "apiVersion": "planops.dev/v1alpha1",
    "kind": "Plan",
    "metadata": {"name": "typed"},
    "spec": {
        "capsule": "default",
        "parallelism": 2,
        "activeDeadlineSeconds": 600,
        "finallyTimeoutSeconds": 120,
        "workspace": {"size": "1Gi", "storageClassName": "standard", "claimName": "data"},
        "inputSchema": {"type": "object"},
        "input": {"n": 1},
        "output": {"n": "{{input.n}}"},
        "steps": [
            {
                "id": "a",
                "shell": "echo hi",
                "dependsOn": [],
                "if": "true",
                "onError": "fail",
                "retries": 1,
                "retryBackoff": {"duration": "10s", "factor": 2.5, "maxDuration": "1m"},
                "timeoutSeconds": 60,
                "image": "local/busybox:1.35.0",
                "resources": {
                    "requests": {"cpu": "10m", "memory": "32Mi"},
                    "limits": {"cpu": 1, "memory": "64Mi"},
                },
            },
            {"id": "b", "tool": "echo-input", "input": {"x": 1}, "dependsOn": ["a"]},
            {
                "id": "c",
                "script": "echo hi",
                "interpreter": "sh",
                "env": [
                    {"name": "A", "value": "{{input.n}}"},
                    {"name": "B", "valueFrom": {"secretKeyRef": {"name": "ci", "key": "k"}}},
                    {
                        "name": "C",
                        "valueFrom": {
                            "configMapKeyRef": {"name": "s", "key": "k", "optional": True}
                        },
                    },
                ],
                "volumeMounts": [{"name": "cache", "mountPath": "/cache", "readOnly": True}],
            },
        ],
    },
}

#: values of the wrong type for each schema type (int-or-string: neither)
WRONG: dict[str, list[Any]] = {
    "integer": ["2", 1.5, True],
    "number": ["2.5", True],
    "string": [5, True],
    "boolean": ["true", 1],
    "array": ["a", {"a": 1}],
    "object": ["a", [1]],
    "int-or-string": [1.5, True, [1]],
}


def plan_schema() -> dict[str, Any]:
    crd = yaml.safe_load((ROOT / "crds" / "plans.planops.dev.yaml").read_text())
    schema: dict[str, Any] = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema["properties"]["spec"]


def _type(node: dict[str, Any]) -> str | None:
    if node.get("x-kubernetes-int-or-string"):
        return "int-or-string"
    if node.get("x-kubernetes-preserve-unknown-fields"):
        return None  # any value (the validator judges it)
    return node.get("type")


def _fields(
    node: dict[str, Any], value: Any, path: tuple[str | int, ...]
) -> Iterator[tuple[tuple[str | int, ...], str, bool]]:
    """(path, type, is an object with declared properties) of every value BASE sets."""
    kind = _type(node)
    if kind is not None:
        yield path, kind, bool(node.get("properties"))
    if isinstance(value, dict) and node.get("properties"):
        for key, child in value.items():
            if key in node["properties"]:
                yield from _fields(node["properties"][key], child, (*path, key))
    elif isinstance(value, list) and "items" in node:
        for i, child in enumerate(value):
            yield from _fields(node["items"], child, (*path, i))


def _set(doc: dict[str, Any], path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    parent: Any = out
    for part in path[:-1]:
        parent = parent[part]
    parent[path[-1]] = value
    return out


def dotted(path: tuple[str | int, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")


def cases() -> list[tuple[str, dict[str, Any]]]:
    """(what is wrong, the Plan) for every wrong type and unknown field."""
    found = []
    for path, kind, has_properties in _fields(plan_schema(), BASE["spec"], ("spec",)):
        if path == ("spec",):
            continue
        for wrong in WRONG[kind]:
            found.append((f"{dotted(path)} = {wrong!r} ({kind})", _set(BASE, path, wrong)))
        if has_properties:
            parent: Any = BASE
            for part in path:
                parent = parent[part]
            found.append((f"{dotted(path)}.bogus (unknown)", _set(BASE, (*path, "bogus"), 1)))
    found.append(("spec.bogus (unknown)", _set(BASE, ("spec", "bogus"), 1)))
    return found
