"""What a step declares of the files it passes on: its results (small values it writes to
`$PLANOPS_RESULTS/NAME`) and its artifacts (files or directories moved through the artifact
repository), and what a Capsule bounds of them.

Apart from the plan models (api.models) because the same declarations are read by the validator
(engine.validation.file_checks), by dispatch and by both executors (engine.step_files holds the
rules: the bounds, how a result's bytes become its value, where an artifact's path may lie).
"""

from __future__ import annotations

from pydantic import Field

from planops.api.base import Model

#: a result's or an artifact's name: a file name and a template path part alike (no dot: a
#: template path splits on dots), the pattern of a step id
FILE_NAME_PATTERN = r"^[A-Za-z_][A-Za-z0-9_-]{0,62}$"
#: the most results and artifacts one step declares (each a file the executor reads)
MAX_RESULTS = 16
MAX_ARTIFACTS = 16

_PATH = (
    "A path relative to the step's working directory (its workspace, else a directory of its "
    "own): no leading /, no `..`."
)


class ResultDecl(Model):
    """A result: a small value the step writes to the file $PLANOPS_RESULTS/NAME."""

    name: str = Field(
        pattern=FILE_NAME_PATTERN,
        max_length=63,
        description="The result's name: its file under $PLANOPS_RESULTS and, in later steps, "
        "{{<id>.results.NAME}}. Letters, digits, _ and -.",
    )
    description: str | None = Field(
        default=None, max_length=1024, description="What the value is, for readers."
    )


class OutputArtifact(Model):
    """A file or directory the step leaves behind, kept in the artifact repository."""

    name: str = Field(
        pattern=FILE_NAME_PATTERN,
        max_length=63,
        description="The artifact's name: later steps name it {{<id>.artifacts.NAME}}.",
    )
    path: str = Field(min_length=1, max_length=1024, description=_PATH)


class InputArtifact(Model):
    """An artifact of an earlier step, placed before the step's command starts."""

    from_: str = Field(
        alias="from",
        min_length=1,
        max_length=256,
        description="Exactly one template {{<id>.artifacts.NAME}} of a step this step depends on.",
    )
    path: str = Field(min_length=1, max_length=1024, description=_PATH)


class StepOutputs(Model):
    """What a step leaves for later steps besides its output and results."""

    artifacts: list[OutputArtifact] = Field(
        default_factory=list,
        max_length=MAX_ARTIFACTS,
        description="Files or directories (archived with tar) kept in the artifact repository "
        "once the step succeeds; each within its Capsule's artifacts.maxBytes, with a sha256 "
        "recorded in the step's report record.",
    )


class StepInputs(Model):
    """What a step takes of earlier steps' files before its command starts."""

    artifacts: list[InputArtifact] = Field(
        default_factory=list,
        max_length=MAX_ARTIFACTS,
        description="Artifacts of earlier steps, fetched (their sha256 checked) and placed at "
        "path before the step's command starts.",
    )


class ArtifactPolicy(Model):
    """What a Capsule bounds of its steps' artifacts (the repository itself is
    artifactRepository, or the operator's default)."""

    max_bytes: int = Field(
        default=64 * 1024 * 1024,
        ge=0,
        le=2**40,
        description="The most bytes one artifact may hold (a directory: its tar archive). An "
        "artifact past it fails its step, naming the artifact and the bound. Default 64 MiB.",
    )
