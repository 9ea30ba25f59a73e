"""The artifact repository's key layout (planops.store.keys): every object of a run lies beneath
its namespace, Plan uid and run, and no part a Plan could influence can climb out of it."""

from __future__ import annotations

import pytest

from planops.store.keys import BadKeyError, RunKeys, check_prefix, parse, plan_prefix

UID = "3f2a8c1e-5b7d-4e2f-9a01-23456789abcd"


def keys(prefix: str = "planops") -> RunKeys:
    return RunKeys(prefix, "team-a", UID, "r1")


def test_layout_namespace_uid_run_step() -> None:
    k = keys()
    assert k.artifact("build", "out.tar") == f"planops/team-a/{UID}/r1/build/artifacts/out.tar"
    assert k.log("build", 2) == f"planops/team-a/{UID}/r1/build/logs/2.log"
    assert k.result("build", "digest") == f"planops/team-a/{UID}/r1/build/results/digest"
    assert k.run_prefix == f"planops/team-a/{UID}/r1/"
    assert k.plan_prefix == f"planops/team-a/{UID}/"
    assert keys("").artifact("s", "a") == f"team-a/{UID}/r1/s/artifacts/a"


@pytest.mark.parametrize(
    ("step", "name"),
    [
        ("..", "a"),
        ("s", ".."),
        ("s/../../team-b", "a"),
        ("s", "a/b"),
        ("s", "../../x"),
        ("", "a"),
        ("s", ""),
        ("s", "a\nb"),
        ("-s", "a"),
    ],
)
def test_a_plan_cannot_name_another_plans_objects(step: str, name: str) -> None:
    with pytest.raises(BadKeyError):
        keys().artifact(step, name)


@pytest.mark.parametrize(
    ("namespace", "uid", "run"),
    [
        ("Team-A", UID, "r1"),
        ("team-a/..", UID, "r1"),
        ("team-a", "../" + UID, "r1"),
        ("team-a", UID, "../r0"),
        ("team-a", UID, "r1/x"),
        ("team-a", "", "r1"),
        ("team-a", UID, ".."),
    ],
)
def test_every_part_is_checked(namespace: str, uid: str, run: str) -> None:
    with pytest.raises(BadKeyError):
        RunKeys("p", namespace, uid, run)


@pytest.mark.parametrize("prefix", ["/a", "a/", "a//b", "a/../b", "..", "a b", "a/" * 9 + "a"])
def test_bad_prefixes(prefix: str) -> None:
    with pytest.raises(BadKeyError):
        check_prefix(prefix)


@pytest.mark.parametrize("attempt", [-1, True, 10**6, "1"])
def test_bad_attempts(attempt: object) -> None:
    with pytest.raises(BadKeyError):
        keys().log("s", attempt)  # type: ignore[arg-type]


def test_parse_round_trips_and_ignores_foreign_keys() -> None:
    k = keys()
    got = parse(k.plan_prefix, k.artifact("build", "out.tar"))
    assert got is not None
    assert (got.run, got.step, got.kind, got.name) == ("r1", "build", "artifacts", "out.tar")
    assert parse(k.plan_prefix, k.plan_prefix + "stray") is None
    assert parse(k.plan_prefix, plan_prefix("planops", "team-b", UID) + "r1/s/logs/1.log") is None
