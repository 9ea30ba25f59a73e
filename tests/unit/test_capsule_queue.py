"""A Capsule's queue (reconciler.Standing) kept in order as its Plans change: the verdict
it gives equals the module's rule read over every Plan (a brute-force reading, here), whatever
the Plans (holding a slot, waiting, children exempt or not, re-runs) and however they changed;
and a resync of a long queue costs linearly many calls (each verdict sorted the whole queue
before: 5,000 waiting Plans took ~2 CPU-minutes every resync; bench/capsule_queue.py).

The growth test counts function calls, not time (tests/unit/test_linear_growth.py's way): a
queue four times longer costs about four times the calls; the sort per verdict cost ~16x."""

from __future__ import annotations

import asyncio
import copy
import random
from typing import Any

import pytest

from planops.api import names
from planops.kube.cache import WatchCache
from planops.reconciler.queue import slots
from planops.reconciler.queue.standing import Standing

from .test_capsule_concurrency import cluster
from .test_linear_growth import BOUND, counted

CAPSULES = ("a", "b", "c")


def _plan(rng: random.Random, k: int) -> dict[str, Any]:
    """A random Plan of namespace `ns` on Capsule `default`: started or waiting (with its own
    queuedAt or not), finished, being deleted, a child (its lineage among CAPSULES, a re-run of
    it or not), or posing as one by its label alone."""
    meta: dict[str, Any] = {
        "name": f"p{rng.randrange(40):02d}",
        "namespace": "ns",
        "uid": f"uid-{k}",
        "creationTimestamp": f"2027-01-15T08:00:{rng.randrange(8):02d}Z",
    }
    status: dict[str, Any] = {"phase": rng.choice(["Pending", "Running", "Succeeded", None])}
    if rng.random() < 0.5:
        status["queue"] = {"queuedAt": f"2027-01-15T08:00:{rng.randrange(8):02d}Z"}
    if rng.random() < 0.05:
        meta["deletionTimestamp"] = "2027-01-15T09:00:00Z"
    if rng.random() < 0.4:
        meta["labels"] = {names.LABEL_PARENT: "parent"}
        if rng.random() < 0.8:
            meta["ownerReferences"] = [
                {"apiVersion": "planops.dev/v1alpha1", "kind": "Plan", "controller": True}
            ]
        above = rng.sample(CAPSULES, rng.randrange(1, 3))
        meta["annotations"] = {names.ANNOTATION_LINEAGE: ",".join([*above, "default"])}
        if rng.random() < 0.2:
            meta["annotations"][names.ANNOTATION_RERUN] = "1"
    return {"metadata": meta, "spec": {"capsule": "default"}, "status": status}


def _oracle(
    plan: dict[str, Any],
    limit: int,
    plans: list[dict[str, Any]],
    limited: set[str],
    joined: str | None,
) -> tuple[bool, tuple[str, ...], int, tuple[str, ...], int]:
    """The rule read over every Plan: those counted (live, not exempt, not `plan`) holding a
    slot, and those waiting ahead of `plan`, each in queue order."""
    me, mine = plan["metadata"]["uid"], slots.order(plan, joined)
    others = [p for p in plans if slots.counted(p, limited) and p["metadata"]["uid"] != me]
    running = sorted((p for p in others if slots.started(p)), key=slots.order)
    ahead = sorted(
        (p for p in others if not slots.started(p) and slots.order(p) < mine), key=slots.order
    )
    shown = slots.NAMES_LISTED
    return (
        len(ahead) < limit - len(running),
        tuple(p["metadata"]["name"] for p in running[:shown]),
        len(running),
        tuple(p["metadata"]["name"] for p in ahead[:shown]),
        len(ahead),
    )


def _said(v: slots.Verdict) -> tuple[bool, tuple[str, ...], int, tuple[str, ...], int]:
    return v.admitted, v.running, v.running_count, v.ahead, v.ahead_count


@pytest.mark.parametrize("seed", range(30))
def test_the_kept_queue_gives_the_verdict_the_rule_gives_over_every_plan(seed: int):
    """Plans put, changed and removed in a random order (as watch events come); after each
    change, a random Plan's verdict (one of them, or a newcomer) under random limits."""
    rng = random.Random(seed)
    cache = WatchCache(index=slots.capsule_key, group=Standing)
    for k in range(120):
        p = _plan(rng, k)
        cache.seen("DELETED" if rng.random() < 0.15 else "MODIFIED", p)
        held = cache.values()
        standing = cache.grouped(("ns", "default"))
        assert isinstance(standing, Standing)
        judged = rng.choice(held) if held and rng.random() < 0.7 else _plan(rng, 1000 + k)
        limit = rng.randrange(1, 4)
        limited = set(rng.sample(CAPSULES, rng.randrange(0, 3)))
        joined = rng.choice([None, f"2027-01-15T08:00:{rng.randrange(8):02d}Z"])
        live = [p for p in held if slots.live(p)]
        assert _said(standing.verdict(judged, limit, limited, joined)) == _oracle(
            judged, limit, live, limited, joined
        ), (seed, k)
        assert len(standing) == len(live)


def test_the_names_shown_are_the_first_twenty_and_the_counts_all():
    standing = Standing.of(
        {
            "metadata": {
                "name": f"w{k:03d}",
                "namespace": "ns",
                "uid": f"u{k}",
                "creationTimestamp": f"2027-01-15T08:{k // 60:02d}:{k % 60:02d}Z",
            },
            "status": {"phase": "Pending", "queue": {"capsule": "default"}},
        }
        for k in range(100)
    )
    last = standing.values()[-1]
    v = standing.verdict(last, 1, set())
    assert v.ahead_count == 99 and v.position == 100
    assert v.ahead == tuple(f"w{k:03d}" for k in range(slots.NAMES_LISTED))
    assert slots.message("default", v).endswith(f"and {99 - slots.NAMES_LISTED} more")


SMALL, LARGE = 100, 400


def _resync_calls(waiting: int) -> tuple[int, int]:
    """Calls of the burst (each Plan's first reconcile: one starts, the others join) and of one
    resync after it (each reconciled again), one slot and `waiting` Plans waiting for it, the
    Plans' cache kept as the operator keeps it."""
    c = cluster(limit=1)
    everyone = [c.new_plan(f"p{k:04d}", 0)["metadata"]["name"] for k in range(waiting + 1)]
    plans = WatchCache(index=slots.capsule_key, group=Standing)
    for obj in c.kube.of("plan"):
        plans.seen("ADDED", copy.deepcopy(obj))
    c.reconciler = c.operator(plans=plans)

    async def each() -> None:
        for name in everyone:
            await c.reconciler.reconcile("ns", name)

    burst = counted(lambda: asyncio.run(each()))
    assert c.running() == {"p0000"}
    assert c.status(everyone[-1])["queue"]["position"] == waiting
    return burst, counted(lambda: asyncio.run(each()))


def test_a_long_queue_costs_linearly_many_calls_per_resync():
    (small_burst, small), (large_burst, large) = _resync_calls(SMALL), _resync_calls(LARGE)
    assert large / small < BOUND, (small, large)
    assert large_burst / small_burst < BOUND, (small_burst, large_burst)
