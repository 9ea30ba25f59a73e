"""JSON Schemas written by users, evaluated safely: the one way planops checks a value against a
schema (a plan's `inputSchema`, the CLI's `--input` values through it, an ask's `outputSchema`
and its answers).

It is jsonschema's Draft 2020-12 validator with these changes, each closing a way for a plan
author to stall the operator (which judges every plan) or make it reach out:

- **Regexes run on RE2** (`pattern`, `patternProperties`, and `additionalProperties` /
  `unevaluatedProperties`, which re-match patternProperties): Python's `re` backtracks, so
  `^(a+)+$` against `"a" * 30 + "!"` takes minutes. RE2 takes linear time and has no
  backreferences or lookaround; a pattern it cannot compile is refused when the schema is
  checked (`schema_problems`), with its path. The semantics stay jsonschema's: `pattern` is a
  search (unanchored). RE2's `\\d`, `\\w`, `\\s` are ASCII, as in ECMA-262, the dialect JSON Schema
  names.
- **No remote references.** Stock jsonschema fetches any `$ref` URL it does not know (urllib, no
  timeout): from the operator, that is a request to any address the author names. Here `$ref`
  resolves inside the schema (and the published meta-schemas) only; anything else is
  `UnusableSchemaError`.
- **One dialect.** A `$schema` inside a subschema would switch stock jsonschema to that draft's
  validator (and its `re`); here every subschema is evaluated by this validator.
- **Linear bookkeeping**: `uniqueItems` hashes a canonical form (stock: pairwise, O(n^2) on
  objects: 3000 items took 13 s); `unevaluatedItems` / `unevaluatedProperties` keep the evaluated
  indexes and keys in sets (stock: lists, O(n^2)).
- **Budgets** (engine.schema_steps): `evaluate(..., tick=f)` calls `f()` before every keyword
  and subschema it evaluates (`f` may raise: the validator's time budget); `evaluate(...,
  steps=Steps(n))` counts weighted steps (keywords, subschemas applied, errors by the length of
  their messages) and raises `OverBudgetError` past `n`, the same verdict in every executor (a
  tool's input at dispatch, an answer to an ask). A schema's own check spends SCHEMA_STEPS at
  most.
- A schema whose evaluation recurses without end (`{"allOf": [{"$ref": "#"}]}`) is
  `UnusableSchemaError`, not a crash.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import attrs
import jsonschema
import re2
import referencing
import referencing.exceptions
from jsonschema import ValidationError
from jsonschema._utils import extras_msg, find_evaluated_item_indexes_by_schema

from planops.engine.schema_steps import (
    RUN_STEPS,
    STEPS,
    TICK,
    OverBudgetError,
    Steps,
    Tick,
    applying,
    ticking,
)

__all__ = [
    "RUN_STEPS",
    "SCHEMA_STEPS",
    "OverBudgetError",
    "Path",
    "Steps",
    "Tick",
    "UnusableSchemaError",
    "evaluate",
    "evaluator",
    "known_problems",
    "schema_problems",
]

Path = tuple[str | int, ...]

_BASE = jsonschema.Draft202012Validator
_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a refused pattern is reported to the author, not logged by RE2
#: what $ref may resolve to: the schema itself and the published meta-schemas, never a fetch
_REGISTRY: referencing.Registry[Any] = referencing.Registry()


class UnusableSchemaError(ValueError):
    """A schema that passed `schema_problems` but cannot be evaluated on this value (a `$ref` to
    something outside it, a reference cycle); the message says which."""


@functools.lru_cache(maxsize=1024)
def _compiled(pattern: str) -> Any:
    return re2.compile(pattern, _OPTIONS)


def _re2_error(pattern: str) -> str | None:
    try:
        _compiled(pattern)
    except re2.error as e:
        return e.args[0].decode() if e.args and isinstance(e.args[0], bytes) else str(e)
    return None


def _search(pattern: str, text: str) -> bool:
    try:
        return _compiled(pattern).search(text) is not None
    except re2.error:
        raise UnusableSchemaError(f"pattern {pattern!r}: {_re2_error(pattern)}") from None


# -- keywords whose stock versions use `re` or quadratic lists --------------------------------


def _pattern(validator: Any, patrn: Any, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and not _search(patrn, instance):
        yield ValidationError(f"{instance!r} does not match {patrn!r}")


def _pattern_properties(
    validator: Any, pattern_properties: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        for k, v in instance.items():
            if _search(pattern, k):
                yield from validator.descend(v, subschema, path=k, schema_path=pattern)


def _additional(instance: Mapping[str, Any], schema: Mapping[str, Any]) -> list[str]:
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    return [
        p
        for p in instance
        if p not in properties and not any(_search(pattern, p) for pattern in patterns)
    ]


def _additional_properties(
    validator: Any, ap: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    extras = set(_additional(instance, schema))
    if validator.is_type(ap, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], ap, path=extra)
    elif not ap and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            patterns = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {patterns}")
        else:
            error = "Additional properties are not allowed (%s %s unexpected)"
            yield ValidationError(error % extras_msg(sorted(extras, key=str)))


def _valid(errors: Iterator[ValidationError]) -> bool:
    return next(errors, None) is None


def _evaluated_keys(validator: Any, instance: Any, schema: Any) -> set[str]:
    """The keys of `instance` that `schema` evaluates (for unevaluatedProperties): jsonschema's
    own walk, with patterns on RE2 and a set instead of a list."""
    if validator.is_type(schema, "boolean"):
        return set()
    keys: set[str] = set()
    for keyword in ("$ref", "$dynamicRef"):
        ref = schema.get(keyword)
        if ref is not None:
            resolved = validator._resolver.lookup(ref)
            keys |= _evaluated_keys(
                validator.evolve(schema=resolved.contents, _resolver=resolved.resolver),
                instance,
                resolved.contents,
            )
    properties = schema.get("properties")
    if validator.is_type(properties, "object"):
        keys |= properties.keys() & instance.keys()
    for keyword in ("additionalProperties", "unevaluatedProperties"):
        if (subschema := schema.get(keyword)) is None:
            continue
        keys |= {k for k, v in instance.items() if _valid(validator.descend(v, subschema))}
    if "patternProperties" in schema:
        patterns = list(schema["patternProperties"])
        keys |= {p for p in instance if any(_search(pattern, p) for pattern in patterns)}
    if "dependentSchemas" in schema:
        for prop, subschema in schema["dependentSchemas"].items():
            if prop in instance:
                keys |= _evaluated_keys(validator, instance, subschema)
    for keyword in ("allOf", "oneOf", "anyOf"):
        for subschema in schema.get(keyword, []):
            if _valid(validator.descend(instance, subschema)):
                keys |= _evaluated_keys(validator, instance, subschema)
    if "if" in schema:
        if validator.evolve(schema=schema["if"]).is_valid(instance):
            keys |= _evaluated_keys(validator, instance, schema["if"])
            if "then" in schema:
                keys |= _evaluated_keys(validator, instance, schema["then"])
        elif "else" in schema:
            keys |= _evaluated_keys(validator, instance, schema["else"])
    return keys


def _unevaluated_properties(
    validator: Any, unevaluated: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    evaluated = _evaluated_keys(validator, instance, schema)
    bad = [
        p
        for p in instance
        if p not in evaluated
        and not _valid(validator.descend(instance[p], unevaluated, path=p, schema_path=p))
    ]
    if bad:
        if unevaluated is False:
            error = "Unevaluated properties are not allowed (%s %s unexpected)"
            yield ValidationError(error % extras_msg(sorted(bad, key=str)))
        else:
            error = (
                "Unevaluated properties are not valid under "
                "the given schema (%s %s unevaluated and invalid)"
            )
            yield ValidationError(error % extras_msg(bad))


def _unevaluated_items(
    validator: Any, unevaluated: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "array"):
        return
    evaluated = set(find_evaluated_item_indexes_by_schema(validator, instance, schema))
    items = [item for index, item in enumerate(instance) if index not in evaluated]
    if items:
        error = "Unevaluated items are not allowed (%s %s unexpected)"
        yield ValidationError(error % extras_msg(items))


def _canonical(value: Any) -> Any:
    """A hashable form under which two JSON values are equal exactly when JSON Schema says so:
    1 and 1.0 are equal, true and 1 are not, object keys are unordered."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, int | float):
        return ("n", value)
    if isinstance(value, str):
        return ("s", value)
    if isinstance(value, list | tuple):
        return ("l", tuple(_canonical(v) for v in value))
    if isinstance(value, Mapping):
        return ("o", frozenset((k, _canonical(v)) for k, v in value.items()))
    return ("z", value)


def _unique_items(
    validator: Any, unique: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if unique and validator.is_type(instance, "array"):
        seen: set[Any] = set()
        for item in instance:
            key = _canonical(item)
            if key in seen:
                yield ValidationError(f"{instance!r} has non-unique elements")
                return
            seen.add(key)


_OVERRIDES: dict[str, Callable[..., Iterator[ValidationError]]] = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "additionalProperties": _additional_properties,
    "unevaluatedProperties": _unevaluated_properties,
    "unevaluatedItems": _unevaluated_items,
    "uniqueItems": _unique_items,
}


def _counting(cls: Any) -> Any:
    """`cls` with every subschema application counted (schema_steps.applying); `evolve` keeps
    the class."""
    cls.descend = applying(cls.descend, lambda _, a, kw: a[0] if a else kw.get("schema"))
    cls.iter_errors = applying(cls.iter_errors, lambda v, a, kw: a[0] if a else v.schema)
    cls.evolve = _evolve
    return cls


_Validator: Any = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
    _BASE,
    {k: ticking(k, _OVERRIDES.get(k) or fn) for k, fn in _BASE.VALIDATORS.items()},
)
_INIT_FIELDS = [(f.name, f.alias) for f in attrs.fields(_Validator) if f.init]


def _evolve(self: Any, **changes: Any) -> Any:
    """Stock `evolve` picks the validator class of a subschema's `$schema`; this one keeps it."""
    changes.setdefault("schema", self.schema)
    for name, alias in _INIT_FIELDS:
        if alias not in changes:
            changes[alias] = getattr(self, name)
    return type(self)(**changes)


_counting(_Validator)

#: the same validator where `integer` is a Python int (2.0 is not one, as JSON Schema says it
#: is): for planops' own schemas of its fields, whose values the engine uses as Python values
_PythonTypesValidator: Any = jsonschema.validators.extend(  # type: ignore[no-untyped-call]
    _Validator,
    type_checker=_BASE.TYPE_CHECKER.redefine(
        "integer", lambda _, v: isinstance(v, int) and not isinstance(v, bool)
    ),
)
_counting(_PythonTypesValidator)

# -- checking a schema ---------------------------------------------------------------------------

_FORMATS = jsonschema.FormatChecker(formats=())
_FORMATS.checkers = dict(_BASE.FORMAT_CHECKER.checkers)


@_FORMATS.checks("regex", raises=re2.error)
def _is_re2(instance: object) -> bool:
    if isinstance(instance, str):
        _compiled(instance)
    return True


#: the meta-schema's validator, counted and ticking as every evaluation here (a schema is a
#: plan author's value too: stock jsonschema took 10 s for `allOf: [{}, ...]` of 240 KB, under
#: no budget, in the admission webhook and for every answer to an ask)
_META = _Validator(_BASE.META_SCHEMA, format_checker=_FORMATS, registry=_REGISTRY)
#: the steps checking one schema against the meta-schema may spend, in every executor (about
#: 125 per subschema: a 10-field outputSchema takes ~1,600, one of 600 patterns ~77,000; the
#: limit is ~0.4 s of CPU)
SCHEMA_STEPS = 250_000


def schema_problems(schema: Any, tick: Tick | None = None) -> list[tuple[Path, str]]:
    """Why `schema` cannot be used, as (path inside the schema, message); [] when it can.
    Raises what `tick` raises (a validator's time budget).

    Every pattern RE2 cannot compile is one problem at its own path (a patternProperties key:
    the path ends with the key); any other fault, jsonschema's best match, as
    `check_schema` would raise it. A schema whose check takes more than SCHEMA_STEPS steps
    cannot be used either (the same verdict in every executor)."""
    try:
        errors = _errors(_META, schema, tick, Steps(SCHEMA_STEPS, messages=False))
    except UnusableSchemaError:  # the meta-schema's evaluation recursed too deeply
        return [((), "the schema is nested too deeply to be checked")]
    except OverBudgetError:
        return [
            (
                (),
                f"the schema takes more than {SCHEMA_STEPS} steps to check against the JSON "
                "Schema meta-schema (each subschema costs ~125): write a smaller one",
            )
        ]
    problems: list[tuple[Path, str]] = []
    rest = []
    for e in errors:
        if e.validator == "format" and e.validator_value == "regex":
            path: Path = tuple(e.absolute_path)
            if path and path[-1] == "patternProperties":
                path = (*path, str(e.instance))
            problems.append(
                (
                    path,
                    f"{e.instance!r} is not linear-time regex syntax (RE2): "
                    f"{_re2_error(str(e.instance))}; planops evaluates schema patterns with "
                    "RE2 (no backreferences, no lookaround) so that no pattern can take "
                    "exponential time",
                )
            )
        else:
            rest.append(e)
    if rest:
        best = jsonschema.exceptions.best_match(rest)
        assert best is not None
        problems.append((tuple(best.absolute_path), f"not a valid JSON Schema: {best.message}"))
    return problems


def known_problems(schema: Any) -> list[tuple[Path, str]]:
    """`schema_problems`, remembered by the schema's text: for a schema checked again and again
    (a tool's inputSchema at each dispatch, an ask's outputSchema at each answer)."""
    return list(_known_problems(json.dumps(schema, sort_keys=True)))


@functools.lru_cache(maxsize=256)
def _known_problems(schema_json: str) -> tuple[tuple[Path, str], ...]:
    return tuple(schema_problems(json.loads(schema_json)))


def evaluate(
    schema: Any,
    instance: Any,
    tick: Tick | None = None,
    *,
    python_types: bool = False,
    steps: Steps | None = None,
) -> list[ValidationError]:
    """Every violation of `schema` (which passed `schema_problems`) by `instance`, in
    jsonschema's order; raises UnusableSchemaError, OverBudgetError (past `steps`), or whatever
    `tick` raises. With `python_types`, an `integer` is an int, never a float such as 2.0."""
    return evaluator(schema, python_types=python_types)(instance, tick, steps)


def evaluator(
    schema: Any, *, python_types: bool = False
) -> Callable[[Any, Tick | None, Steps | None], list[ValidationError]]:
    """`evaluate` for one schema, its validator built once: for a schema that judges many values
    (a tool's inputSchema, once per step)."""
    validator = (_PythonTypesValidator if python_types else _Validator)(schema, registry=_REGISTRY)
    return functools.partial(_errors, validator)


def _errors(
    validator: Any, instance: Any, tick: Tick | None = None, steps: Steps | None = None
) -> list[ValidationError]:
    token, counted = TICK.set(tick), STEPS.set(steps)
    try:
        return list(validator.iter_errors(instance))
    except referencing.exceptions.Unresolvable as e:
        raise UnusableSchemaError(
            f"{e}: a $ref resolves only inside the schema (planops never retrieves schemas)"
        ) from None
    except RecursionError:
        raise UnusableSchemaError(
            "evaluating the schema recursed too deeply (a $ref cycle that never descends into "
            "the value?)"
        ) from None
    finally:
        TICK.reset(token)
        STEPS.reset(counted)
