"""The rules of the files a step passes on (its results and artifacts), one set for every
executor: the validator, dispatch, the local runner and the cluster's collector all ask here.

- **Results**: a step declares `results: [{name}]` and writes `$PLANOPS_RESULTS/NAME`. Each
  value is the file's text (UTF-8) without one trailing line end, as an output is
  (engine.outputs.drop_line_end). A step's results travel together as one compact JSON object
  `{name: value}` (in the cluster, in a container's termination message: 4096 bytes a
  container), and that object may take at most RESULTS_BOUND bytes: past it the step fails,
  naming the result that crossed the bound and the bound. A declared result the step did not
  write fails a step that succeeded (a later step would read nothing); a failed step passes
  none on (the cluster's collector runs only once the step exited 0: every executor drops them).
- **Artifacts**: `outputs.artifacts: [{name, path}]` and `inputs.artifacts: [{from, path}]`;
  a path is relative to the step's working directory (the one directory an executor shares
  with what moves files: a pod's volume, the local runner's directory), never absolute and
  never through `..`. A directory travels as a tar archive; each artifact within its Capsule's
  `artifacts.maxBytes`; its sha256 is recorded in the step's report record and checked again
  before a later step reads it. Steps reach a repository only when one is granted: the
  Capsule's artifactRepository, else the operator's default (Policy.artifact_repository).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from typing import Any

from planops.api.capsule_models import CapsuleSpec
from planops.api.file_models import ArtifactPolicy
from planops.api.models import Step
from planops.engine import templates
from planops.engine.outputs import drop_line_end
from planops.engine.report import ArtifactRecord

#: the most bytes a step's results take, as the JSON object they travel in: a termination
#: message holds 4096 bytes, and the rest is the artifacts' records (checksum, size)
RESULTS_BOUND = 3072
#: where a step finds its results directory (a pod: RESULTS_DIR; locally: one of its own)
RESULTS_ENV = "PLANOPS_RESULTS"
#: the results directory in a step pod
RESULTS_DIR = "/planops/results"
#: `{{<id>.artifacts.NAME}}`, the one form an input artifact's `from` takes
_FROM = re.compile(
    r"^\{\{\s*([A-Za-z_][A-Za-z0-9_-]*)\.artifacts\.([A-Za-z_][A-Za-z0-9_-]*)\s*\}\}$"
)


def uses_files(step: Step) -> bool:
    """Whether the step declares results or artifacts (else its pod is today's, unchanged)."""
    return bool(step.results) or uses_artifacts(step)


def uses_artifacts(step: Step) -> bool:
    return bool(
        (step.outputs is not None and step.outputs.artifacts)
        or (step.inputs is not None and step.inputs.artifacts)
    )


def encoded_results(results: Mapping[str, str]) -> str:
    """The JSON object a step's results travel in (and are measured as)."""
    return json.dumps(dict(results), ensure_ascii=False, separators=(",", ":"))


def result_values(
    step: Step, files: Mapping[str, bytes | None], succeeded: bool
) -> tuple[dict[str, str], str | None]:
    """A step's results from the bytes of its files (None: not written), and why the step
    fails because of them (None: it does not). `files` may hold one byte more than the bound
    of each file: an executor never reads more (`read_limit`)."""
    values: dict[str, str] = {}
    for decl in step.results:
        data = files.get(decl.name)
        if data is None:
            if succeeded:
                return values, (
                    f"result {decl.name!r} was not written: the step must write the file "
                    f"${RESULTS_ENV}/{decl.name}"
                )
            continue
        try:
            text = data.decode()
        except UnicodeDecodeError:
            return values, f"result {decl.name!r} is not UTF-8 text"
        values[decl.name] = drop_line_end(text)
        if len(encoded_results(values).encode()) > RESULTS_BOUND:
            return {k: v for k, v in values.items() if k != decl.name}, over_bound(decl.name)
    return values, None


def over_bound(name: str) -> str:
    return (
        f"result {name!r} takes the step's results past their bound of {RESULTS_BOUND} bytes "
        "(all of a step's results together, as JSON): pass bigger values as an artifact"
    )


#: the most bytes of one result file an executor reads (one more than any value may hold)
read_limit = RESULTS_BOUND + 1


def path_problem(path: str) -> str | None:
    """Why an artifact's path cannot be used (None: it can): relative to the working
    directory, never leaving it."""
    if path.startswith("/"):
        return (
            f"{path}: an absolute path; an artifact's path is relative to the step's working "
            "directory (the one directory what moves files shares with the step)"
        )
    parts = path.split("/")
    if ".." in parts:
        return f"{path}: `..` leaves the step's working directory"
    if not any(p not in ("", ".") for p in parts):
        return f"{path}: names the working directory itself; name a file or directory in it"
    if "\x00" in path:
        return f"{path!r}: a path cannot hold a NUL byte"
    return None


def source(text: str) -> tuple[str, str] | None:
    """(step id, artifact name) of an input artifact's `from`, or None when it is not exactly
    one {{<id>.artifacts.NAME}}."""
    m = _FROM.match(text)
    return (m.group(1), m.group(2)) if m else None


def inputs_of(step: Step, lookup: Callable[[str], Any]) -> tuple[tuple[ArtifactRecord, str], ...]:
    """A step's input artifacts at dispatch: each `from` rendered to the record of the artifact
    it names (a TemplateError when it cannot be: its step failed without leaving it), with the
    path it is placed at."""
    out = []
    for a in step.inputs.artifacts if step.inputs is not None else ():
        found = templates.render(a.from_, lookup)
        record = ArtifactRecord.from_json(found)
        if record is None:
            raise templates.TemplateError(f"{a.from_}: not an artifact")
        out.append((record, a.path))
    return tuple(out)


def artifact_policy(capsule: CapsuleSpec) -> ArtifactPolicy:
    return capsule.artifacts or ArtifactPolicy()


def repository_refusal(capsule: CapsuleSpec, operator_default: bool) -> str | None:
    """Why a step may not move artifacts under `capsule` (None: it may): a repository must be
    granted, the Capsule's own (artifactRepository) or the operator's default."""
    if operator_default or capsule.artifact_repository is not None:
        return None
    return (
        "artifacts move through an artifact repository, and none is granted: the Capsule "
        "declares no artifactRepository and the operator has no default repository"
    )
