"""What a step may consume: its requests and limits are Kubernetes quantities with no request
above its limit, its effective limits (its own, else the Capsule's defaults, else planops')
stay under the Capsule's maxResources and the operator's --max-cpu / --max-memory, and its
timeout under both maxima."""

from __future__ import annotations

from decimal import Decimal

from planops.api import quantity
from planops.api.models import Step
from planops.api.resources import resources as effective_resources
from planops.engine.validation.checker import Checker


def check_limits(c: Checker, step: Step, path: str) -> None:
    if step.resources is not None:
        _check_quantities(c, step, path)
    if step.shell is not None or step.tool is not None:  # steps that become a container
        for field_path, message in _over_ceilings(c, step):
            c.add("limits", step.id, f"{path}.{field_path}", message)
    if step.timeout_seconds is not None:
        ceiling = min(
            c.policy.max_timeout_seconds,
            (c.capsule.max_timeout_seconds if c.capsule else None) or c.policy.max_timeout_seconds,
        )
        if step.timeout_seconds > ceiling:
            c.add(
                "limits",
                step.id,
                f"{path}.timeoutSeconds",
                f"{step.timeout_seconds}s exceeds the maximum of {ceiling}s",
            )


def _ceilings(c: Checker) -> list[tuple[str, Decimal, str, str]]:
    if c.ceilings is None:
        found = []
        maxima = c.capsule.max_resources if c.capsule is not None else None
        for key in ("cpu", "memory"):
            for value, whose in (
                (
                    getattr(maxima, key) if maxima is not None else None,
                    f"Capsule {c.capsule_name!r}",
                ),
                (getattr(c.policy, f"max_{key}"), "the operator"),
            ):
                if value is None:
                    continue
                try:
                    found.append((key, quantity.parse(value), str(value), whose))
                except ValueError:
                    continue  # a Capsule's bad quantity is refused by the API server's schema
        c.ceilings = found
    return c.ceilings


def _over_ceilings(c: Checker, step: Step) -> list[tuple[str, str]]:
    """A step's effective limits above a ceiling, as (field path, message)."""
    ceilings = _ceilings(c)
    if not ceilings:
        return []
    if step.resources is None and c.default_verdict is not None:
        return c.default_verdict
    limits = effective_resources(step.resources, c.capsule.resources if c.capsule else None)[
        "limits"
    ]
    own = step.resources.limits if step.resources is not None else None
    out = []
    for key, ceiling, text, whose in ceilings:
        value = limits.get(key)
        try:
            over = value is not None and quantity.parse(value) > ceiling
        except ValueError:
            continue  # reported by _check_quantities
        if over:
            source = (
                ""
                if own is not None and getattr(own, key) is not None
                else (" (a default: set the step's resources.limits)")
            )
            out.append(
                (
                    f"resources.limits.{key}",
                    f"the {key} limit {value}{source} exceeds {whose}'s maximum of {text}",
                )
            )
    if step.resources is None:
        c.default_verdict = out
    return out


def _check_quantities(c: Checker, step: Step, path: str) -> None:
    """Requests and limits must be Kubernetes quantities, and a request not above its limit."""
    res = step.resources
    assert res is not None
    parsed: dict[tuple[str, str], Decimal] = {}
    for part in ("requests", "limits"):
        rl = getattr(res, part)
        for key in ("cpu", "memory"):
            value = getattr(rl, key) if rl is not None else None
            if value is None:
                continue
            try:
                parsed[part, key] = quantity.parse(value)
            except ValueError as e:
                c.add("limits", step.id, f"{path}.resources.{part}.{key}", str(e))
    for key in ("cpu", "memory"):
        req, lim = parsed.get(("requests", key)), parsed.get(("limits", key))
        if req is not None and lim is not None and req > lim:
            c.add(
                "limits",
                step.id,
                f"{path}.resources.requests.{key}",
                f"the request ({getattr(res.requests, key)}) exceeds the limit "
                f"({getattr(res.limits, key)})",
            )
