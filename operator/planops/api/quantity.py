"""Kubernetes resource quantities (`64Mi`, `500m`, `1.5G`) as numbers.

Hand-written because the one library that parses them (`kubernetes.utils.quantity`) may not be
imported by the pure layers (api, engine); it is twenty lines of the documented grammar.
"""

from __future__ import annotations

from decimal import Decimal, InvalidOperation

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}


#: Kubernetes: "no quantity may represent a number greater than 2^63-1 in magnitude"
MAX = Decimal(2**63 - 1)


def parse(text: str | int | float) -> Decimal:
    """The quantity's value in base units (bytes, cores); raises ValueError when malformed or
    beyond what Kubernetes accepts (2^63-1)."""
    try:
        value = _parse(text)
    except ArithmeticError:  # decimal.Overflow: `1e999999999` times a suffix, beyond any context
        raise ValueError(f"{text!r} is far beyond the largest Kubernetes quantity") from None
    if value > MAX:
        raise ValueError(f"{text!r} exceeds 2^63-1, the largest Kubernetes quantity")
    return value


def _parse(text: str | int | float) -> Decimal:
    s = str(text).strip()
    for suffix, factor in _BINARY.items():
        if s.endswith(suffix):
            return _number(s[: -len(suffix)], text) * factor
    suffix = s[-1:] if s[-1:] in _DECIMAL else ""  # "" is also a key: a plain number
    return _number(s[: len(s) - len(suffix)], text) * _DECIMAL[suffix]


def _number(s: str, original: object) -> Decimal:
    try:
        value = Decimal(s)
    except InvalidOperation:
        raise ValueError(
            f"{original!r} is not a Kubernetes quantity (e.g. 64Mi, 500m, 1G)"
        ) from None
    if not value.is_finite() or value < 0:
        raise ValueError(f"{original!r} is not a non-negative quantity")
    return value
