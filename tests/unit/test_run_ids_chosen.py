"""A run's id is ten hex digits of a hash: 40 bits. While an author's own text went into it (the
re-run value, the retry token), an author could search for a value that names a run id the Plan
already had: ~2^40 / N hashes against N earlier runs (hours on one CPU core for the current run,
minutes on a GPU, far less against a Plan archived many times). Such a run was taken for the
earlier one: `ON CONFLICT DO NOTHING` kept it out of the archive and `status.archived` said it was
archived (so a spec changed for one evil run together with a searched re-run value left no row),
its PlanReports mixed with the earlier run's, and a re-run naming the current run's id was
silently ignored. Now a run's id hashes only what the operator counts (the Plan's uid, the
generation, `status.run.serial`; a retry's also the run it retries), so nothing an author writes
chooses it; and a new run never takes an id the Plan already had (its current run, its history):
the serial moves on past it."""

from __future__ import annotations

from typing import Any

import pytest

from planops.api import names
from planops.kube import manifests
from planops.reconciler.run import retrying

UID = "0b5e3c1a-1111-4c4c-9d9d-0123456789ab"


def meta(rerun: str = "", retry: str = "") -> dict[str, Any]:
    notes = {names.ANNOTATION_RERUN: rerun} if rerun else {}
    if retry:
        notes[names.ANNOTATION_RETRY] = retry
    return {"uid": UID, "generation": 3, "annotations": notes}


#: a Plan whose current run (serial 7, re-run value "a") failed, with two earlier runs
PREVIOUS = {
    "phase": "Failed",
    "run": {"id": "c0ffee0007", "generation": 3, "rerun": "a", "serial": 7},
    "history": [{"id": "c0ffee0006"}, {"id": "c0ffee0005"}],
}


def test_no_rerun_value_or_retry_token_chooses_the_next_runs_id():
    values = ["b", "", "x" * 300, "searched-9f8e7d", "/retry-of/c0ffee0007/t1"]
    rerun_ids = {retrying.choose(meta(v), PREVIOUS, 3, v).rid for v in values}
    assert len(rerun_ids) == 1, "the re-run value an author writes chooses the run id"
    (rerun_id,) = rerun_ids
    tokens = ["t1", "t2", "searched-0a1b2c", "t3:from=b"]
    retried = {retrying.choose(meta("a", t), PREVIOUS, 3, "a").rid for t in tokens}
    assert len(retried) == 1, "the retry token an author writes chooses the id"
    assert retried.isdisjoint({rerun_id, "c0ffee0007"})
    # a new generation (a spec changed) is another input, but no text of the author's either
    assert (
        retrying.choose(meta("z"), PREVIOUS, 4, "z").rid
        == retrying.choose(meta("y"), PREVIOUS, 4, "y").rid
    )


@pytest.mark.parametrize("taken", ["c0ffee0007", "c0ffee0006"], ids=["current", "in-history"])
def test_a_new_run_never_takes_an_id_the_plan_already_had(monkeypatch, taken: str):
    """Ten hex digits collide by chance too (one in 2^40 per pair): the serial moves past an id
    the status knows, for a re-run and a retry alike."""
    real = manifests.run_id
    collide = {8: taken}  # the next serial would name a run the Plan had

    def run_id(uid: str, generation: int, serial: int) -> str:
        return collide.get(serial) or real(uid, generation, serial)

    monkeypatch.setattr(manifests, "run_id", run_id)
    choice = retrying.choose(meta("b"), PREVIOUS, 3, "b")
    assert choice.rid not in ("c0ffee0007", "c0ffee0006", "c0ffee0005")
    assert choice.info["serial"] == 9 and choice.rid == real(UID, 3, 9)
    real_retry = retrying.retry_run_id

    def retry_run_id(uid: str, generation: int, of_run: str, serial: int) -> str:
        return taken if serial == 8 else real_retry(uid, generation, of_run, serial)

    monkeypatch.setattr(retrying, "retry_run_id", retry_run_id)
    retry = retrying.choose(meta("a", "t1"), PREVIOUS, 3, "a")
    assert retry.request is not None and retry.request.of_run == "c0ffee0007"
    assert retry.rid == real_retry(UID, 3, "c0ffee0007", 9) and retry.info["serial"] == 9
