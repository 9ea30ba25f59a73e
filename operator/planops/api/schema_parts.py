"""The building blocks of the CRDs' OpenAPI schemas, and the bounds they take from the models.

Every schema node carries a description (`kubectl explain` prints it), so the helpers take one
first; every bound comes from the pydantic models (`bounds`), the one source the CLI, the webhook
and the reconciler read plans through.
"""

from __future__ import annotations

import functools
from typing import Any

from planops.api.models import Model

Schema = dict[str, Any]

#: the JSON Schema keywords that bound a value, in the order the CRDs list them
BOUNDS = ("pattern", "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "enum")


@functools.cache
def _model_schema(model: type[Model]) -> Schema:
    return model.model_json_schema(by_alias=True)


def bounds(model: type[Model], name: str) -> Schema:
    """The bounds of `model`'s field `name` (its camelCase name), as pydantic states them in
    JSON Schema: the models are the one source of every bound (tests/unit/test_crd_bounds.py
    walks both field by field). The models, not the CRDs, because every reader of a plan (the
    CLI, the webhook, the reconciler) goes through them, in or out of a cluster."""
    prop = _model_schema(model)["properties"][name]
    branches = [b for b in prop.get("anyOf", [prop]) if b.get("type") != "null"]
    found = {k: v for b in branches for k, v in b.items() if k in BOUNDS}
    return {k: found[k] for k in BOUNDS if k in found}


def text(description: str, **kw: Any) -> Schema:
    return {"type": "string", "description": description, **kw}


def integer(description: str, **kw: Any) -> Schema:
    return {"type": "integer", "description": description, **kw}


def obj(description: str, properties: dict[str, Schema], **kw: Any) -> Schema:
    return {"type": "object", "description": description, "properties": properties, **kw}


def array(description: str, items: Schema, **kw: Any) -> Schema:
    return {"type": "array", "description": description, "items": items, **kw}


def quantities(description: str) -> Schema:
    q = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}
    return obj(
        description,
        {
            "cpu": {**q, "description": "CPU, in cores or millicores (500m)."},
            "memory": {**q, "description": "Memory, in bytes or with a suffix (64Mi)."},
        },
    )


def resources(description: str) -> Schema:
    return obj(
        description,
        {
            "requests": quantities("What the step's container is guaranteed (scheduling)."),
            "limits": quantities(
                "The cgroup limits of the step's container; exceeding memory is OOMKilled."
            ),
        },
    )
