"""The Hypothesis profiles of the suite: CI and a plain `pytest` are deterministic; the wide
random search is a developer's choice (`pytest --hypothesis-profile=wide`).

- `ci` (loaded by tests/conftest.py, so the default): derandomized (the examples are a function
  of the test's code and Hypothesis' version, pinned in the dev extras), a fixed example count
  per test, no deadline and no too-slow health check (both measure the wall clock of a shared
  machine), no example database (a failure found elsewhere is not replayed here).
- `wide`: random (each run searches anew), `WIDE` times each test's example count, and the
  example database under .hypothesis/ so that a failure it finds is tried first next time.

A property test asks for `examples(n)`: n examples under `ci`, n * WIDE under `wide`.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings

CI_PROFILE = "ci"
#: how many times more examples each property test tries under the wide profile
WIDE = 10
#: a property test that does not set its own count (`examples(n)`) tries this many under `ci`
CI_EXAMPLES = 100

settings.register_profile(
    CI_PROFILE,
    derandomize=True,
    max_examples=CI_EXAMPLES,
    deadline=None,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "wide",
    derandomize=False,
    max_examples=CI_EXAMPLES * WIDE,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def examples(n: int) -> int:
    """A property test's example count: `n` under the `ci` profile, `n * WIDE` under `wide`."""
    return n * WIDE if settings.get_current_profile_name() == "wide" else n
