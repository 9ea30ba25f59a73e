"""What CEL sees of a delivery, and how: its headers (lower-case names, a header the
authentication reads refused when repeated), how deep its JSON nests (bounded: the conversion
recurses), and the filter and the mapping evaluated on one cost meter (triggers.cel). Pure:
the receiver hands in what it read.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from planops.api.trigger_models import PlanTriggerSpec
from planops.triggers import cel
from planops.triggers.verify import Refused

Obj = dict[str, Any]

#: the headers a source's authentication reads: a second copy of one is refused (a proxy and
#: this receiver could each read a different one)
SIGNED_HEADERS = frozenset(
    {
        "x-hub-signature-256",
        "x-github-delivery",
        "x-github-event",
        "x-gitlab-token",
        "x-gitlab-event-uuid",
        "x-gitlab-event",
        "content-length",
        "content-type",
        "content-encoding",
    }
)


def header_map(headers: Mapping[str, str]) -> dict[str, str]:
    """The delivery's headers as the expressions see them: lower-case names, a repeated header's
    values joined by ", " (RFC 9110); Refused when a header the authentication reads repeats."""
    out: dict[str, str] = {}
    for key, value in headers.items():
        name = key.lower()
        if name in out:
            if name in SIGNED_HEADERS:
                raise Refused("DuplicateHeader", f"the header {name} is given more than once", 400)
            out[name] += ", " + value
        else:
            out[name] = value
    return out


def map_delivery(spec: PlanTriggerSpec, body: Any, headers: dict[str, str]) -> Obj | None:
    """The template's input for a delivery, or None when the filter says no; Refused when an
    expression fails or runs past the cost limit (one meter for all of them)."""
    activation = {"body": cel.to_cel(body), "headers": cel.to_cel(headers)}
    meter = cel.Meter()
    if spec.filter:
        passed = _run("filter", spec.filter, activation, meter)
        if not isinstance(passed, bool):
            raise Refused(
                "FilterFailed", f"the filter gave {type(passed).__name__}, not a bool", 422
            )
        if not passed:
            return None
    return {key: _run(f"input {key}", text, activation, meter) for key, text in spec.input.items()}


def _run(what: str, text: str, activation: Obj, meter: cel.Meter) -> Any:
    try:
        return cel.evaluate(text, activation, meter)
    except cel.CostExceeded as e:
        raise Refused("CostExceeded", f"{what}: {e}", 422) from None
    except cel.CelError as e:
        reason = "FilterFailed" if what == "filter" else "MappingFailed"
        raise Refused(reason, f"{what}: {e}", 422) from None


#: the deepest payload the expressions see (CEL's conversion recurses; GitHub's nest about 6)
PAYLOAD_DEPTH = 64


def depth(value: Any) -> int:
    """How deep a JSON value nests (without recursion: the value is the sender's)."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        node, level = stack.pop()
        deepest = max(deepest, level)
        if isinstance(node, dict):
            stack += [(v, level + 1) for v in node.values()]
        elif isinstance(node, list):
            stack += [(v, level + 1) for v in node]
    return deepest
