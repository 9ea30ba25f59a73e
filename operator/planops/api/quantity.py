"""Kubernetes resource quantities (`64Mi`, `500m`, `1.5G`) as numbers.

Hand-written because the one library that parses them (`kubernetes.utils.quantity`) may not be
imported by the pure layers (api, engine), and it takes more than the API server does (Python's
Decimal reads `1_000`, non-ASCII digits, `1e3Mi`); it is twenty lines of the documented grammar.
tests/unit/test_quantity_oracle.py holds it against that library.

Bounds: Kubernetes keeps a quantity as a 64-bit integer of nano-units, so nothing above
2^63-1 (about 9.2e18: `8Ei` is already beyond) and nothing below `1n` but zero means anything to
it. Such a quantity is refused with a ValueError, and so is a numeral longer than
`MAX_LENGTH` characters or with an exponent beyond `MAX_EXPONENT`, before any arithmetic: Python's
decimals would otherwise overflow (`1e999999999`) or silently become zero (`1e-999999999`).
"""

from __future__ import annotations

import re
from decimal import Decimal

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
#: The largest quantity Kubernetes can hold, in base units (bytes, cores).
MAXIMUM = Decimal(2**63 - 1)
#: The smallest non-zero one (`1n`).
MINIMUM = Decimal("1e-9")
#: No quantity needs a longer numeral (2^63-1 has 19 digits; `0.000000001` has 11 characters).
MAX_LENGTH = 64
#: Numbers whose most significant digit is beyond 10^±MAX_EXPONENT are refused unmultiplied.
MAX_EXPONENT = 40
_EXAMPLES = "e.g. 64Mi, 500m, 1G"
_BOUNDS = "Kubernetes holds quantities from 1n to about 9.2e18 (2^63-1), and zero"


#: Kubernetes' grammar: a signed number in ASCII digits, then at most one suffix (binary SI,
#: decimal SI, or a decimal exponent). Checked before Python's Decimal reads the number, which
#: would also take `1_000`, non-ASCII digits, surrounding spaces, `NaN` and `1e3Mi`, none of
#: which the API server takes.
_GRAMMAR = re.compile(
    r"(?P<number>[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))"
    r"(?P<suffix>[KMGTPE]i|[eE][+-]?[0-9]+|[numkMGTPE]|)",
    re.ASCII,
)


def parse(text: str | int | float) -> Decimal:
    """The quantity's value in base units (bytes, cores); raises ValueError when malformed or
    beyond what Kubernetes can hold (see the module's docstring)."""
    if isinstance(text, int) and abs(text) > MAXIMUM:
        raise ValueError(f"an integer of {text.bit_length()} bits is too large: {_BOUNDS}")
    s = str(text)
    if len(s) > MAX_LENGTH:
        raise ValueError(
            f"{s[:20]!r}... ({len(s)} characters) is not a Kubernetes quantity ({_EXAMPLES})"
        )
    match = _GRAMMAR.fullmatch(s)
    if match is None:
        raise ValueError(f"{text!r} is not a non-negative quantity ({_EXAMPLES})")
    number, suffix = match.groups()
    factor = _BINARY.get(suffix) or _DECIMAL.get(suffix)
    if factor is None:  # a decimal exponent (e3, E-2): part of the number
        return _bounded(_number(number + suffix, text), text)
    return _bounded(_number(number, text) * factor, text)


def _number(s: str, original: object) -> Decimal:
    value = Decimal(s)  # the grammar matched: a finite number
    if value < 0:
        raise ValueError(f"{original!r} is not a non-negative quantity")
    if value and abs(value.adjusted()) > MAX_EXPONENT:  # before any arithmetic (see above)
        size = "large" if value.adjusted() > 0 else "small"
        raise ValueError(f"{original!r} is too {size}: {_BOUNDS}")
    return value


def _bounded(value: Decimal, original: object) -> Decimal:
    if value > MAXIMUM:
        raise ValueError(f"{original!r} is too large: {_BOUNDS}")
    if 0 < value < MINIMUM:
        raise ValueError(f"{original!r} is too small: {_BOUNDS}")
    return value
