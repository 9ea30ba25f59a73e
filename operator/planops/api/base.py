"""The base of every model of the plan language (api.models, api.capsule_models, ...): strict,
both spellings, immutable, unknown fields refused; and the one pattern of a Kubernetes object's
name. A leaf of its own so that the models of a container's env and mounts
(api.container_models), which a step and a Capsule's tool share, can build on it without
importing the step's module.
"""

from __future__ import annotations

import functools
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.alias_generators import to_camel

#: A Kubernetes object name (RFC 1123 subdomain, shortened to what a label value may hold).
NAME_PATTERN = r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$"


@functools.cache
def _integer_keys(model: type[BaseModel]) -> tuple[str, ...]:
    """The keys (both spellings) of a model's fields that take an integer and not a number."""
    keys: list[str] = []
    for name, f in model.model_fields.items():
        annotation = f.annotation
        types = set(typing.get_args(annotation)) if typing.get_args(annotation) else {annotation}
        if int in types and float not in types:
            keys += [name] + ([f.alias] if f.alias and f.alias != name else [])
    return tuple(keys)


class Model(BaseModel):
    """Base: unknown fields refused, both spellings accepted, immutable; types strict, as the
    API server holds them to the CRD's schema (`retries: "3"` is refused, not converted), so
    what `kubectl apply` refuses is refused offline too."""

    model_config = ConfigDict(
        strict=True,
        extra="forbid",
        populate_by_name=True,
        alias_generator=to_camel,
        frozen=True,
    )

    @model_validator(mode="before")
    @classmethod
    def _whole_numbers(cls, data: Any) -> Any:
        """JSON has one number type, and the API server takes 3.0 for a CRD's integer (a whole
        number is an integer there): so does the model, strict as it is otherwise."""
        if not isinstance(data, dict):
            return data
        fixed: dict[str, Any] | None = None
        for key in _integer_keys(cls):
            value = data.get(key)
            if isinstance(value, float) and value.is_integer():
                fixed = fixed if fixed is not None else dict(data)
                fixed[key] = int(value)
        return fixed if fixed is not None else data

    def dump(self) -> dict[str, Any]:
        """The camelCase form, without unset optional fields (as the seed writes plans)."""
        return self.model_dump(by_alias=True, exclude_none=True, exclude_defaults=True)
