"""kopf's namespace discovery, corrected (planops.handlers.kopf_fixes).

The cluster side, kopf's own observer against a real API server with a namespace created in
the window the fix closes, is tests/e2e/test_namespace_discovery.py.
"""

from __future__ import annotations

import asyncio

from planops.handlers import kopf_fixes
from planops.main import import_kopf

import_kopf()
import kopf  # noqa: E402
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


def test_kopf_remembers_no_job_or_pod_and_every_other_object_as_before():
    """kopf kept a memory (~1.2 KB) of every object it saw until its deletion: a 20,000-step
    plan's 40,000 finished Jobs and pods held ~50 MB of it. planops' Job and pod handlers read
    none of it, so those are recalled ephemerally; a Plan is remembered as kopf does."""
    from kopf._core.reactor.inventory import ResourceMemories  # noqa: PLC0415

    assert kopf_fixes.apply_memories()
    patched = ResourceMemories.recall
    assert kopf_fixes.apply_memories() and ResourceMemories.recall is patched  # only once
    memories = ResourceMemories()
    memobase = kopf.Memo(runs="the operator's")

    def body(api: str, kind: str, uid: str) -> dict[str, object]:
        return {"apiVersion": api, "kind": kind, "metadata": {"uid": uid, "name": uid}}

    async def recall_all() -> list[object]:
        got = []
        for b in (
            body("batch/v1", "Job", "j"),
            body("v1", "Pod", "p"),
            body("planops.dev/v1alpha1", "Plan", "plan"),
        ):
            got.append((await memories.recall(b, memobase=memobase)).memo)
        return got

    memos = asyncio.run(recall_all())
    assert [m.runs for m in memos] == ["the operator's"] * 3  # handlers still get the memo
    assert [m.memo for m in memories.iter_all_memories()] == [memos[2]]  # only the Plan's kept
