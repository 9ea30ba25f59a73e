"""While the hand-built CRD schemas (api.crd_handbuilt) and the ones made from the models
(api.crd) both exist: the two agree field by field, in every CRD, at every depth (every keyword
of every node: type, description, bounds, enum, pattern, required, defaults, CEL rules,
printer columns, names). What differs is listed with its reason; a listed difference that no
longer exists fails too."""

from __future__ import annotations

from typing import Any

import yaml

from planops.api import crd, crd_handbuilt

#: (file, path): why the generated CRD differs from the hand-built one there
DIFFERENCES: dict[tuple[str, str], str] = {}


def _walk(old: Any, new: Any, path: str):
    """(path, old value, new value) of every leaf where the two differ (key order aside, and
    the order of `required`)."""
    if isinstance(old, dict) and isinstance(new, dict):
        for key in [*old, *(k for k in new if k not in old)]:
            if key not in old or key not in new:
                yield f"{path}/{key}", old.get(key, "<absent>"), new.get(key, "<absent>")
            else:
                yield from _walk(old[key], new[key], f"{path}/{key}")
    elif path.endswith("/required") and isinstance(old, list) and isinstance(new, list):
        if sorted(old) != sorted(new):
            yield path, old, new
    elif isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            yield from _walk(a, b, f"{path}[{i}]")
    elif old != new:
        yield path, old, new


def _differences() -> dict[tuple[str, str], tuple[Any, Any]]:
    old, new = crd_handbuilt.render(), crd.render()
    assert set(old) == set(new)
    found = {}
    for name in old:
        for path, a, b in _walk(yaml.safe_load(old[name]), yaml.safe_load(new[name]), ""):
            found[(name, path)] = (a, b)
    return found


def test_the_generated_crds_are_the_hand_built_ones():
    unexplained = {k: v for k, v in _differences().items() if k not in DIFFERENCES}
    assert unexplained == {}, "(file, path): (hand-built, generated)"


def test_every_listed_difference_still_exists():
    assert set(DIFFERENCES) - set(_differences()) == set()


def test_the_comparison_sees_a_changed_bound_deep_inside():
    """The walk is no formality: a bound of a finally step's retryBackoff is found."""
    old = yaml.safe_load(crd_handbuilt.render()["plans.planops.dev.yaml"])
    new = yaml.safe_load(crd.render()["plans.planops.dev.yaml"])
    spec = new["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    step = spec["properties"]["finally"]["items"]["properties"]
    step["retryBackoff"]["properties"]["factor"]["maximum"] = 99
    found = list(_walk(old, new, ""))
    assert [(p.rsplit("/", 4)[-4:], a, b) for p, a, b in found] == [
        (["retryBackoff", "properties", "factor", "maximum"], 100, 99)
    ]
