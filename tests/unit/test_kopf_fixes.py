"""kopf's namespace discovery, corrected (planops.handlers.kopf_fixes).

The cluster side, kopf's own observer against a real API server with a namespace created in
the window the fix closes, is tests/e2e/test_namespace_discovery.py.
"""

from __future__ import annotations

import asyncio

from planops.handlers import kopf_fixes
from planops.main import import_kopf

import_kopf()
from kopf._cogs.structs import references  # noqa: E402
from kopf._core.reactor import observation  # noqa: E402


def listing_event(name: str) -> dict[str, object]:
    return {"type": None, "object": {"metadata": {"name": name}}}


def discovered(events: list[dict[str, object]]) -> set[str | None]:
    insights = references.Insights()

    async def feed() -> None:
        for event in events:
            await observation.process_discovered_namespace_event(
                raw_event=event,
                namespaces=["team-*"],
                insights=insights,
                stream_pressure=None,
            )

    asyncio.run(feed())
    return set(insights.namespaces)


def test_the_fix_applies_to_this_kopf_and_only_once():
    assert kopf_fixes.apply()
    patched = observation.process_discovered_namespace_event
    assert kopf_fixes.apply()
    assert observation.process_discovered_namespace_event is patched


def test_a_namespace_first_seen_in_a_watchs_listing_is_watched():
    kopf_fixes.apply()
    assert discovered([listing_event("team-a"), listing_event("other")]) == {"team-a"}


def test_watch_events_still_add_and_remove_namespaces():
    kopf_fixes.apply()
    added = {"type": "ADDED", "object": {"metadata": {"name": "team-b"}}}
    gone = {"type": "DELETED", "object": {"metadata": {"name": "team-b"}}}
    assert discovered([added]) == {"team-b"}
    assert discovered([added, gone]) == set()
