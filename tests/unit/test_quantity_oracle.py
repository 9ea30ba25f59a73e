"""planops' quantity parser (api/quantity.py) against the Kubernetes client's own,
`kubernetes.utils.parse_quantity`, as the oracle: on every quantity Kubernetes' grammar makes
they agree on the value (or planops refuses it as beyond what Kubernetes holds, or negative),
and whatever text planops accepts the oracle accepts with the same value. Where the oracle takes
more than the API server does (it reads the number with Python's Decimal), planops refuses."""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from kubernetes.utils import parse_quantity

from planops.api import quantity

digits = st.text("0123456789", min_size=1, max_size=12)
number = st.one_of(
    digits,
    st.builds(lambda a, b: f"{a}.{b}", digits, digits),
    st.builds(lambda a: f"{a}.", digits),
    st.builds(lambda b: f".{b}", digits),
)
suffix = st.one_of(
    st.sampled_from(["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei", "n", "u", "m", "k", "M", "G", "T"]),
    st.sampled_from(["P", "E"]),
    st.builds(lambda e, n: f"{e}{n}", st.sampled_from(["e", "E", "e+", "e-", "E-"]), digits),
)
#: Kubernetes' grammar: <signedNumber><suffix> (negative ones: planops refuses them)
grammar = st.builds(lambda s, n, x: f"{s}{n}{x}", st.sampled_from(["", "+", "-"]), number, suffix)


@given(grammar)
@example("64Mi")
@example("1E")  # exa, not an exponent
@example("1E3")  # an exponent
@example("0.000000001")
@example("9223372036854775807")  # 2^63-1: the largest
@example("9223372036854775808")  # one more
def test_every_quantity_of_the_grammar_means_what_the_oracle_says(text):
    expected = parse_quantity(text)
    if expected < 0 or expected > quantity.MAXIMUM or 0 < expected < quantity.MINIMUM:
        with pytest.raises(ValueError, match=r"non-negative|Kubernetes holds"):
            quantity.parse(text)
    else:
        assert quantity.parse(text) == expected


@given(st.one_of(st.text(max_size=12), st.text("0123456789.+-eEKMGTPinumk _ ", max_size=10)))
@example(" 1")
@example("1Ki ")
@example("1_000")
@example("\u0661")  # ARABIC-INDIC DIGIT ONE
@example("1e3Mi")
@example("1K")
def test_what_planops_accepts_the_oracle_accepts_with_the_same_value(text):
    try:
        mine = quantity.parse(text)
    except ValueError:
        return
    assert parse_quantity(text) == mine


@pytest.mark.parametrize("text", [" 1", "1_000", "\u0661", "1e3Mi", "1.5e3k"])
def test_what_the_oracle_takes_and_the_api_server_does_not_is_refused(text):
    """The oracle reads these through Python's Decimal; Kubernetes' grammar has none of them."""
    assert isinstance(parse_quantity(text), Decimal)
    with pytest.raises(ValueError, match="not a non-negative quantity"):
        quantity.parse(text)


def test_the_bounds_are_inclusive_and_refusals_quote_the_text():
    """Mutation survivors of api/quantity.py (docs/quality.md): the largest integer and the
    longest numeral are quantities; each refusal names what was written."""
    assert quantity.parse(2**63 - 1) == quantity.MAXIMUM
    assert quantity.parse("0" * (quantity.MAX_LENGTH - 1) + "1") == 1
    for text in ("1e30", "8Ei", "-1", "-1e3", "1e-30"):
        with pytest.raises(ValueError, match=repr(text)):
            quantity.parse(text)
