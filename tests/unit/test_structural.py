"""pydantic's JSON Schema made structural (planops.api.structural), rule by rule, on small models:
what the API server requires of a CRD's schema, and what the generator refuses to make."""

from __future__ import annotations

from typing import Any, Literal

import pytest
from pydantic import ConfigDict, Field

from planops.api.crd_hints import crd
from planops.api.models import Model
from planops.api.structural import SchemaError, schema


class Inner(Model):
    """The inner object's text."""

    model_config = ConfigDict(json_schema_extra=crd(rules=[("self.n > 0", "n is positive")]))

    n: int = Field(default=1, gt=0, description="A count.")


class Outer(Model):
    """The outer object."""

    named: Inner | None = Field(default=None, description="The field's own text.")
    plain: Inner | None = None
    many: list[Inner] = Field(default_factory=list, description="Several.")
    size: str | int = Field(default="1Gi", description="A quantity.")
    anything: Any = Field(default=None, description="Any value.")
    free: dict[str, Any] = Field(default_factory=dict, description="Any object.")
    labels: dict[str, str] = Field(default_factory=dict, description="Labels.")
    mode: Literal["a", "b"] = Field(
        default="a", description="A or b.", json_schema_extra=crd(store_default=True)
    )
    only: Literal["x"] = Field(default="x", description="Always x.")
    ids: list[str] = Field(
        default_factory=list,
        description="Ids.",
        json_schema_extra=crd(maxItems=9, items={"maxLength": 5}),
    )


def test_a_model_is_inlined_where_it_is_used_with_the_fields_text_first():
    out = schema(Outer)
    named, plain, many = (out["properties"][k] for k in ("named", "plain", "many"))
    assert named["description"] == "The field's own text."
    assert plain["description"] == "The inner object's text."  # no text of its own
    assert many["items"]["description"] == "The inner object's text."
    assert named["type"] == plain["type"] == "object" and "anyOf" not in named  # no null
    assert named["properties"]["n"] == {
        "type": "integer",
        "description": "A count.",
        "minimum": 0,
        "exclusiveMinimum": True,  # OpenAPI v3.0's spelling of pydantic's gt
    }
    assert named["x-kubernetes-validations"] == [{"rule": "self.n > 0", "message": "n is positive"}]
    assert "$ref" not in str(out) and "title" not in str(out)
    assert "additionalProperties" not in named  # pydantic's `false`: the API server prunes


def test_values_of_any_shape_are_kept_and_int_or_string_is_the_one_union():
    props = schema(Outer)["properties"]
    assert props["size"] == {
        "x-kubernetes-int-or-string": True,
        "anyOf": [{"type": "integer"}, {"type": "string"}],
        "description": "A quantity.",
    }
    assert props["anything"] == {
        "x-kubernetes-preserve-unknown-fields": True,
        "description": "Any value.",
    }
    assert props["free"] == {
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "description": "Any object.",
    }
    assert props["labels"]["additionalProperties"] == {"type": "string"}


def test_only_marked_defaults_are_stored_and_hints_merge_into_nested_nodes():
    props = schema(Outer)["properties"]
    assert props["mode"] == {
        "type": "string",
        "description": "A or b.",
        "default": "a",
        "enum": ["a", "b"],
    }
    assert props["only"]["enum"] == ["x"] and "default" not in props["only"]
    assert props["ids"] == {
        "type": "array",
        "description": "Ids.",
        "maxItems": 9,
        "items": {"type": "string", "maxLength": 5},
    }
    assert "default" not in props["size"] and "default" not in props["named"]["properties"]["n"]


def test_the_generator_refuses_what_the_api_server_would():
    class Undescribed(Model):
        """An object."""

        name: str

    class Union(Model):
        """An object."""

        value: int | list[str] = Field(description="A number or a list.")

    with pytest.raises(SchemaError, match=r"Undescribed\.name: no description"):
        schema(Undescribed)
    with pytest.raises(SchemaError, match=r"Union\.value: a value of types"):
        schema(Union)


def test_a_schema_is_made_afresh_each_time():
    """A reader may change what it gets (tests do) without changing the next one's."""
    first = schema(Outer)
    first["properties"]["size"]["anyOf"].clear()
    assert schema(Outer)["properties"]["size"]["anyOf"] == [{"type": "integer"}, {"type": "string"}]
