"""kopf in one module (planops.handlers.kopf_adapter): what it registers, and its corrections to
kopf's private modules, run against the kopf version pyproject.toml pins.

The cluster side of the namespace-discovery correction, kopf's own observer against a real API
server with a namespace created in the window the fix closes, is
tests/e2e/test_namespace_discovery.py; the JSON one is tests/unit/test_deep_json.py.
"""

from __future__ import annotations

import asyncio
import importlib
import re
import tomllib
from importlib import metadata
from pathlib import Path

from planops.handlers import kopf_adapter
from planops.handlers.kopf_adapter import REGISTRY, kopf

references = importlib.import_module("kopf._cogs.structs.references")  # after the adapter's
observation = importlib.import_module("kopf._core.reactor.observation")

ROOT = Path(__file__).resolve().parents[2]


def test_the_corrections_are_tested_against_the_pinned_kopf():
    """The patches reach into kopf's private modules: pyproject pins the one version they
    were written and tested against, and that is the one installed (an upgrade changes the pin,
    and this suite runs each patch against the new version)."""
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    (pin,) = [d for d in deps if re.match(r"kopf\b", d)]
    assert pin == f"kopf=={metadata.version('kopf')}", pin


def test_kopf_watches_only_the_planops_kinds_and_changes_nothing():
    """A run's Jobs and pods, and the namespaces, are the operator's own informers'
    (kube.informer): kopf's per-event machinery is for the planops kinds alone. Only on.event
    handlers: no change-detecting handler, hence no diff base (NoDiffBase), no annotations and
    no finalizers of kopf's."""
    watching = {
        (h.selector.group, h.selector.any_name) for h in REGISTRY._watching.get_all_handlers()
    }
    assert watching == {
        ("planops.dev", "plans"),
        ("planops.dev", "capsules"),
        ("planops.dev", "scheduledplans"),
        ("planops.dev", "clusterscheduledplans"),
    }
    assert list(REGISTRY._changing.get_all_handlers()) == []
    assert list(REGISTRY._spawning.get_all_handlers()) == []


def test_each_planops_event_reaches_the_operator_as_it_came():
    seen = []

    class Operator:
        def __getattr__(self, name):
            return lambda kind, obj: seen.append((name, kind, obj["metadata"]["name"]))

    memo = kopf.Memo(operator=Operator())
    for handler in REGISTRY._watching.get_all_handlers():
        obj = {"metadata": {"name": handler.selector.any_name, "namespace": "ns"}}
        asyncio.run(handler.fn(event={"type": "MODIFIED", "object": obj}, memo=memo))
    assert sorted(seen) == [
        ("capsule_event", "MODIFIED", "capsules"),
        ("cluster_scheduled_event", "MODIFIED", "clusterscheduledplans"),
        ("plan_event", "MODIFIED", "plans"),
        ("scheduled_event", "MODIFIED", "scheduledplans"),
    ]


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


def test_the_namespace_fix_applies_to_this_kopf_and_only_once():
    assert kopf_adapter.fix_namespace_discovery()
    patched = observation.process_discovered_namespace_event
    assert kopf_adapter.fix_namespace_discovery()
    assert observation.process_discovered_namespace_event is patched


def test_a_namespace_first_seen_in_a_watchs_listing_is_watched():
    kopf_adapter.fix_namespace_discovery()
    assert discovered([listing_event("team-a"), listing_event("other")]) == {"team-a"}


def test_watch_events_still_add_and_remove_namespaces():
    kopf_adapter.fix_namespace_discovery()
    added = {"type": "ADDED", "object": {"metadata": {"name": "team-b"}}}
    gone = {"type": "DELETED", "object": {"metadata": {"name": "team-b"}}}
    assert discovered([added]) == {"team-b"}
    assert discovered([added, gone]) == set()


def test_the_informers_watch_where_kopf_watches_the_planops_kinds(monkeypatch):
    """With --namespace patterns, a namespace's Jobs and pods are watched by kopf's own rule,
    so a run's objects are read exactly where its Plan is."""
    from planops.handlers.config import CONFIG  # noqa: PLC0415

    monkeypatch.setattr(CONFIG, "namespaces", ["team-*, !team-x", "ops"])
    assert [kopf_adapter.watched(n) for n in ("team-a", "team-x", "ops", "other")] == [
        True,
        False,
        True,
        False,
    ]
