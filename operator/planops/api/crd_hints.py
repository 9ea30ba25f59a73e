"""What a model tells its CRD beyond what the model itself checks: the API server's own rules.

The CRDs' schemas are generated from the pydantic models (planops.api.structural), so a field's
type, bounds and `kubectl explain` text are written once, on the model. A few things the API
server enforces have no pydantic form, or are the server's alone: a CEL rule that mirrors a
model validator (exactly one step kind), a bound on a stored object the models leave to the
validator (a Plan's 30,000 literal steps: the validator refuses past the operator's own bound,
with the seed's code), a field the model types loosely so that the validator refuses it with the
seed's code (`onError`), a default the API server stores. `crd(...)` states them on the model, as
`json_schema_extra`: they sit under one keyword of the model's JSON Schema (HINT), which the
generator merges into the field's CRD schema, and no other reader of the JSON Schema takes for a
rule the model checks.

A leaf of data (the models import it at run time; the generator is never imported then).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: the JSON Schema keyword holding a field's or a model's CRD hints
HINT = "x-crd"
#: in a hint: keep the field's default in the CRD (the API server stores it in every object)
STORE_DEFAULT = "storeDefault"


def crd(
    *,
    store_default: bool = False,
    rules: Sequence[tuple[str, str]] = (),
    **schema: Any,
) -> dict[str, Any]:
    """A model's or a field's `json_schema_extra`: what its CRD schema adds to the model's.

    `schema`: JSON Schema keywords, as the CRD spells them (`maxItems=...`, `type="object"`,
    `items={"maxLength": 63}`), merged into the generated node (nested objects merge key by
    key). `rules`: CEL rules (rule, message), the node's x-kubernetes-validations.
    `store_default`: the API server writes the field's default into each object (elsewhere the
    models apply their defaults when they read an object, and nothing is stored)."""
    hint: dict[str, Any] = dict(schema)
    if rules:
        hint["x-kubernetes-validations"] = [{"rule": r, "message": m} for r, m in rules]
    if store_default:
        hint[STORE_DEFAULT] = True
    return {HINT: hint}
