"""Schema errors that point at the fix, and the rest of a document still judged.

An unknown field is most often a typo (`dependOn`): the message names the nearest field the
object does have ("did you mean `dependsOn`?"), found among the fields of the model at that
place (difflib's ratio, as Python's own "did you mean" suggestions). And a schema error need not
hide every other error: `salvage` drops the fields the schema refused (an unknown field, a value
of the wrong type for an optional field) and reads the document again, so the validator can
judge what is left; the schema errors are reported all the same, so the document stays refused.
"""

from __future__ import annotations

import difflib
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

#: how many times salvage drops fields and reads again (each round drops every refused field)
ROUNDS = 3


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (through Optional, unions, lists, dicts)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    origin = typing.get_origin(annotation)
    if origin is None:
        return []
    found = []
    for arg in typing.get_args(annotation):
        found += _models_in(arg)
    return found if origin in (typing.Union, types.UnionType, list, dict) else []


def _model_at(root: type[BaseModel], loc: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model of the object at `loc` (a pydantic error's location, the field excluded)."""
    model: type[BaseModel] | None = root
    for part in loc:
        if model is None:
            return None
        if isinstance(part, int):
            continue  # a list's item: the same annotation's model
        field = next((f for name, f in model.model_fields.items() if part in (name, f.alias)), None)
        if field is None:
            return None
        models = _models_in(field.annotation)
        model = models[0] if len(models) == 1 else None
    return model


def field_names(model: type[BaseModel]) -> list[str]:
    """The names an object of `model` may hold, as written in a manifest (camelCase)."""
    return [f.alias or name for name, f in model.model_fields.items()]


def nearest(name: str, names: list[str]) -> str | None:
    """The valid name closest to a mistyped one, when one is close enough to suggest."""
    lowered = {n.lower(): n for n in names}
    if name.lower() in lowered:  # only the case differs
        return lowered[name.lower()]
    close = difflib.get_close_matches(name, names, n=1, cutoff=0.6)
    return close[0] if close else None


def unknown_field_message(root: type[BaseModel], loc: tuple[int | str, ...]) -> str:
    """ "unknown field", with the nearest field of that object when one is close."""
    model = _model_at(root, loc[:-1])
    name = loc[-1] if loc else None
    if model is None or not isinstance(name, str):
        return "unknown field"
    guess = nearest(name, field_names(model))
    return f"unknown field: did you mean `{guess}`?" if guess else "unknown field"


def _drop(doc: Any, loc: tuple[int | str, ...]) -> bool:
    """Remove the value at `loc` from a copy-on-write tree; False if it cannot be removed."""
    parent = doc
    for part in loc[:-1]:
        try:
            parent = parent[part]
        except (KeyError, IndexError, TypeError):
            return False
    if isinstance(parent, dict) and loc and loc[-1] in parent:
        del parent[loc[-1]]
        return True
    return False


def _copy(value: Any) -> Any:
    """A copy of a document's dicts and lists (values are JSON: nothing else needs copying)."""
    stack: list[tuple[Any, Any]] = []
    top = _shallow(value)
    stack.append(top)
    while stack:
        original, made = stack.pop()
        items = original.items() if isinstance(original, dict) else enumerate(original)
        for key, child in items:
            if isinstance(child, dict | list):
                pair = _shallow(child)
                made[key] = pair[1]
                stack.append(pair)
    return top[1]


def _shallow(value: Any) -> tuple[Any, Any]:
    if isinstance(value, dict):
        return value, dict(value)
    if isinstance(value, list):
        return value, list(value)
    return value, value


def salvage(model: type[BaseModel], raw: Any, error: ValidationError) -> BaseModel | None:
    """`raw` read by `model` without the fields the schema refused, when that leaves a valid
    object (a required field missing or refused cannot be dropped: None)."""
    doc = _copy(raw)
    for _ in range(ROUNDS):
        for err in error.errors():
            loc = tuple(err["loc"])
            if err["type"] == "missing" or not _drop(doc, loc):
                return None
        try:
            return model.model_validate(doc)
        except ValidationError as again:
            error = again
    return None
