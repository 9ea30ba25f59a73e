"""Kubernetes structural schemas made from the pydantic models: the CRDs' schemas (api.crd).

Why: a field's type, bounds and `kubectl explain` text are written once, on the model, which every
reader of a plan goes through (the CLI, the webhook, the reconciler); the API server's copy is
made from it. pydantic's JSON Schema (2020-12) becomes what the API server requires of a CRD (a
structural OpenAPI v3 schema):

- no `$ref`: each model is inlined where it is used, a field's own description before its
  model's docstring;
- no `anyOf`, but for int-or-string (`str | int`: x-kubernetes-int-or-string); an Optional's
  `null` is dropped: Kubernetes spells "none" by leaving a field out (it prunes a null);
- a type on every node, or x-kubernetes-preserve-unknown-fields where the model takes any value
  (`Any`, `dict[str, Any]`): the validator judges those, with the seed's codes;
- no `additionalProperties: false` (the API server prunes unknown fields, and strict field
  validation, kubectl's default, refuses them); an exclusive bound as OpenAPI v3.0 spells it;
- no `title`, and no `default` but those the model says the API server stores (api.crd_hints);
- what the API server adds to the model (CEL rules, its bounds of a stored object) from the
  model's hints (api.crd_hints).

Every property has a description (`kubectl explain` prints it): a field without one, or a type
with no structural form, fails the generator (SchemaError) rather than the API server. Run by
`python -m planops.api.crd` and the tests only: no runtime code imports it (import-linter).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from planops.api.crd_hints import HINT, STORE_DEFAULT

Schema = dict[str, Any]

#: the JSON Schema keywords that bound a value (the keywords a CRD may carry besides its type,
#: description, structure and the x-kubernetes extensions)
BOUNDS = (
    "pattern",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "enum",
    "format",
)
#: the order of a node's keywords in the CRD files (readers find the type and text first)
_ORDER = (
    "type",
    "x-kubernetes-int-or-string",
    "anyOf",
    "x-kubernetes-preserve-unknown-fields",
    "description",
    "default",
    *BOUNDS,
    "properties",
    "additionalProperties",
    "items",
    "required",
    "x-kubernetes-validations",
)
_INT_OR_STRING: Schema = {
    "x-kubernetes-int-or-string": True,
    "anyOf": [{"type": "integer"}, {"type": "string"}],
}


class SchemaError(ValueError):
    """A model the generator cannot make a structural schema of (path: where in the model)."""


def schema(model: type[BaseModel]) -> Schema:
    """The structural schema of `model` (its objects as the API server checks them)."""
    raw = model.model_json_schema(by_alias=True)
    defs = raw.pop("$defs", {})
    return _Maker(defs).node(raw, model.__name__)


def merge(base: Schema, extra: Schema) -> Schema:
    """`base` with `extra`'s keys: nested objects key by key, any other value replaced."""
    out = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def _text(description: str) -> str:
    """A docstring or a field's text as one paragraph (kubectl explain wraps it itself)."""
    return " ".join(description.split())


@dataclass(frozen=True)
class _Maker:
    defs: dict[str, Schema]

    def flat(self, node: Schema) -> Schema:
        """`node` with its `$ref` (or its Optional's one non-null branch) inlined, under the
        node's own keys; the hints of both merged (the node's last)."""
        own = dict(node)
        base: Schema = {}
        if "$ref" in own:
            base = self.flat(self.defs[own.pop("$ref").rsplit("/", 1)[-1]])
        elif "anyOf" in own:
            branches = [b for b in own["anyOf"] if b.get("type") != "null"]
            own["anyOf"] = branches
            if len(branches) == 1:
                del own["anyOf"]
                base = self.flat(branches[0])
        hint = merge(base.pop(HINT, {}), own.pop(HINT, {}))
        return {**base, **own, **({HINT: hint} if hint else {})}

    def node(self, raw: Schema, path: str) -> Schema:
        node = self.flat(raw)
        hint = node.pop(HINT, {})
        store_default = hint.pop(STORE_DEFAULT, False)
        node = merge(node, hint)
        node.pop("title", None)
        if not store_default:
            node.pop("default", None)
        if "const" in node:
            node["enum"] = [node.pop("const")]
        out = self._shape(node, path)
        if "description" in node:
            out["description"] = _text(node.pop("description"))
        for key, value in node.items():
            if not (key in BOUNDS or key in ("default", "required") or key.startswith("x-k")):
                raise SchemaError(f"{path}: {key!r} has no place in a structural schema")
            if key == "required" and not value:  # a hint's `required=[]`: nothing required
                continue
            out[key] = value
        if "x-kubernetes-validations" in out:  # pydantic sorts keys: a rule before its message
            out["x-kubernetes-validations"] = [
                {"rule": v["rule"], **{k: x for k, x in v.items() if k != "rule"}}
                for v in out["x-kubernetes-validations"]
            ]
        if isinstance(out.get("exclusiveMinimum"), int | float):  # 2020-12 -> OpenAPI v3.0
            out["minimum"], out["exclusiveMinimum"] = out["exclusiveMinimum"], True
        if isinstance(out.get("exclusiveMaximum"), int | float):
            out["maximum"], out["exclusiveMaximum"] = out["exclusiveMaximum"], True
        order = {k: i for i, k in enumerate(_ORDER)}
        return dict(sorted(out.items(), key=lambda kv: order.get(kv[0], len(order))))

    def _shape(self, node: Schema, path: str) -> Schema:
        """The node's type and structure (taken out of `node`): int-or-string, any value, an
        object's properties or values, an array's items."""
        if "anyOf" in node:
            types = sorted(str(b.get("type")) for b in node.pop("anyOf"))
            if types != ["integer", "string"]:
                raise SchemaError(f"{path}: a value of types {types} has no structural form")
            return copy.deepcopy(_INT_OR_STRING)
        kind = node.pop("type", None)
        if kind is None:
            return {"x-kubernetes-preserve-unknown-fields": True}
        out: Schema = {"type": kind}
        props = node.pop("properties", None)
        values = node.pop("additionalProperties", None)
        items = node.pop("items", None)
        if kind == "object":
            if props and isinstance(values, dict):
                raise SchemaError(f"{path}: properties and additionalProperties exclude each other")
            if props:
                out["properties"] = {k: self.field(v, f"{path}.{k}") for k, v in props.items()}
            elif isinstance(values, dict):
                out["additionalProperties"] = self.node(values, f"{path}{{}}")
            else:
                out["x-kubernetes-preserve-unknown-fields"] = True
        elif kind == "array":
            out["items"] = self.node(items or {}, f"{path}[]")
        return out

    def field(self, raw: Schema, path: str) -> Schema:
        out = self.node(raw, path)
        if not out.get("description"):
            raise SchemaError(f"{path}: no description (`kubectl explain` prints it)")
        return out
