"""Pure: what a step pod's collector says (its termination message, planops.collector) made the
attempt's results and artifacts, by the same rules as the local runner (engine.step_files).

An artifact's record keeps its key relative to the repository (`store.keys.RunKeys` without the
repository's key prefix), made here from the run's identity (the API server's namespace and
uid, the operator's run id) and the step's declaration: nothing a pod or its author writes
names a key. The operator adds the repository's prefix when it mints a URL for it
(reconciler.effects.files), and refuses a key outside the Plan's own prefix.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

from planops.api import PlanSpec
from planops.api.models import Step
from planops.engine import step_files
from planops.engine.facts import AttemptFact
from planops.engine.report import ArtifactRecord
from planops.kube import manifests
from planops.store import keys as keys_


def steps_moving_files(spec: PlanSpec) -> dict[str, Step]:
    """The Plan's top-level and finally steps with results or artifacts, by id."""
    return {s.id: s for s in (*spec.steps, *spec.finally_) if step_files.uses_files(s)}


def relative_keys(ref: manifests.PlanRef) -> keys_.RunKeys | None:
    """The run's keys without any repository's prefix (what an artifact's record holds); None
    when its identity cannot make a key (never for the API server's and the operator's)."""
    try:
        return keys_.RunKeys("", ref.namespace, ref.uid, ref.run)
    except keys_.BadKeyError:
        return None


def apply(
    fact: AttemptFact, step: Step, collected: str | None, keys: keys_.RunKeys | None
) -> AttemptFact:
    """`fact` (an attempt of `step`) with what its collector said; a success whose collector
    said nothing usable, or named a result past the bound, fails with why."""
    if fact.status != "success":
        return fact
    said = _message(collected)
    if said is None:
        return _fail(
            fact,
            "the step's collector left no readable message (its results and artifacts are unknown)",
        )
    if isinstance(said.get("error"), str):
        return _fail(fact, f"collect failed: {said['error']}")
    found = said.get("results")
    found = found if isinstance(found, dict) else {}
    files = {k: v.encode() for k, v in found.items() if isinstance(v, str)}
    results, error = step_files.result_values(step, files, succeeded=True)
    if isinstance(said.get("over"), str):
        error = step_files.over_bound(said["over"])
    if error is not None:
        return replace(_fail(fact, error), results=results)
    if keys is None:
        return _fail(fact, "the run's identity cannot make a storage key")
    artifacts = _records(step, said.get("artifacts"), keys)
    if artifacts is None:
        return _fail(fact, "the step's collector did not report every output artifact")
    return replace(fact, results=results if step.results else None, artifacts=artifacts or None)


def _records(step: Step, got: Any, keys: keys_.RunKeys) -> tuple[ArtifactRecord, ...] | None:
    declared = step.outputs.artifacts if step.outputs is not None else []
    if not isinstance(got, list) or len(got) != len(declared):
        return None
    out = []
    for a, entry in zip(declared, got, strict=True):
        if not (isinstance(entry, list) and len(entry) == 3):
            return None
        sha, size, directory = entry
        if not (isinstance(sha, str) and isinstance(size, int) and isinstance(directory, bool)):
            return None
        out.append(ArtifactRecord(a.name, keys.artifact(step.id, a.name), sha, size, directory))
    return tuple(out)


def _message(text: str | None) -> dict[str, Any] | None:
    try:
        said = json.loads(text or "")
    except ValueError:
        return None
    return said if isinstance(said, dict) else None


def _fail(fact: AttemptFact, error: str) -> AttemptFact:
    return replace(fact, status="failed", error=error)
