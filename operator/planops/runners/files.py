"""The local runner's artifact repository: a directory of this machine (`run --local --artifacts
DIR`, else a temporary one removed after the run), holding what a step pod's collector moves in
the cluster, under the same rules (engine.step_files):

    DIR/<plan>/<step>/<attempt>/results/NAME         what the step wrote ($PLANOPS_RESULTS)
    DIR/<plan>/<step>/<attempt>/artifacts/NAME       a file artifact, as the step left it
    DIR/<plan>/<step>/<attempt>/artifacts/NAME.tar   a directory artifact, archived

An artifact is written to a temporary name in its directory and renamed once complete (nothing
half-written is ever read), its sha256 computed as it is written and checked again as a later
step's input is placed; past its Capsule's artifacts.maxBytes the step fails, naming it. Paths
are the working directory's (a symbolic link leading out of it is refused), as in a pod, whose
collector sees that directory only.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import re
import tarfile
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import IO

from planops import collector
from planops.api import CapsuleSpec
from planops.engine import step_files
from planops.engine.facts import Dispatch
from planops.engine.report import ArtifactRecord
from planops.runners.processes import Result

_CHUNK = 1 << 20


#: an artifact or result that cannot be moved; the message says which and why
FileError = collector.MoveError


def _safe(name: str) -> str:
    """A plan's or step's name as one path component (a plan's name from a file may hold
    anything)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", name).strip(".") or "-"


@dataclass(frozen=True)
class LocalRepository:
    root: Path

    def attempt_dir(self, plan: str, d: Dispatch) -> Path:
        return self.root / _safe(plan) / _safe(d.step.id) / str(d.attempt)

    def results_dir(self, plan: str, d: Dispatch) -> Path:
        path = self.attempt_dir(plan, d) / "results"
        path.mkdir(parents=True, exist_ok=True)
        return path

    async def attempt(
        self,
        plan: str,
        d: Dispatch,
        capsule: CapsuleSpec,
        cwd: Path,
        env: dict[str, str],
        process: Callable[[dict[str, str]], Awaitable[Result]],
    ) -> Result:
        """An attempt of a step with results or artifacts: its inputs placed first, `process`
        run with $PLANOPS_RESULTS in `env`, its results read and its artifacts kept after, by
        the rules of the cluster's (engine.step_files)."""
        results_dir = self.results_dir(plan, d) if d.step.results else None
        if results_dir is not None:
            env = env | {step_files.RESULTS_ENV: str(results_dir)}
        try:
            await asyncio.to_thread(self.fetch, d, cwd)
        except (FileError, OSError, tarfile.TarError) as e:
            return Result("failed", None, f"input artifacts: {e}")
        result = await process(env)
        succeeded = result.status == "success"
        results, error = (  # a failed step passes none on (the cluster reads them only after)
            self.results(d, results_dir, True)
            if results_dir is not None and succeeded
            else (None, None)
        )
        artifacts: tuple[ArtifactRecord, ...] | None = None
        if succeeded and error is None and d.step.outputs is not None:
            bound = step_files.artifact_policy(capsule).max_bytes
            try:
                artifacts = await asyncio.to_thread(self.keep, plan, d, cwd, bound)
            except (FileError, OSError, tarfile.TarError) as e:
                error = str(e)
        if error is not None and succeeded:
            return replace(result, status="failed", error=error, results=results)
        return replace(result, results=results, artifacts=artifacts)

    # -- after the step ----------------------------------------------------------------------

    def results(
        self, d: Dispatch, directory: Path, succeeded: bool
    ) -> tuple[dict[str, str], str | None]:
        """The step's results from its files (engine.step_files.result_values)."""
        files: dict[str, bytes | None] = {}
        for decl in d.step.results:
            path = directory / decl.name
            try:
                with path.open("rb") as f:
                    files[decl.name] = f.read(step_files.read_limit)
            except FileNotFoundError:
                files[decl.name] = None
            except OSError as e:
                return {}, f"result {decl.name!r}: cannot be read: {e.strerror or e}"
        return step_files.result_values(d.step, files, succeeded)

    def keep(self, plan: str, d: Dispatch, cwd: Path, max_bytes: int) -> tuple[ArtifactRecord, ...]:
        """Store the step's output artifacts; raises FileError naming the one that cannot be."""
        declared = d.step.outputs.artifacts if d.step.outputs is not None else []
        if not declared:
            return ()
        where = self.attempt_dir(plan, d) / "artifacts"
        where.mkdir(parents=True, exist_ok=True)
        return tuple(self._keep_one(a.name, a.path, cwd, where, max_bytes) for a in declared)

    def _keep_one(
        self, name: str, path: str, cwd: Path, where: Path, max_bytes: int
    ) -> ArtifactRecord:
        source = _inside(cwd, path, f"artifact {name!r}")
        if not source.exists():
            raise FileError(f"artifact {name!r}: the step left nothing at {path}")
        directory = source.is_dir()
        target = where / (f"{name}.tar" if directory else name)
        fd, temp = tempfile.mkstemp(prefix=f".{name}.", dir=where)
        try:
            with os.fdopen(fd, "wb") as raw:
                out = collector.Bounded(raw, f"artifact {name!r}", max_bytes)
                collector.pack(source, out, directory)
            os.replace(temp, target)  # complete: only now under its name
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
        key = str(target.relative_to(self.root))
        return ArtifactRecord(name, key, out.sha256.hexdigest(), out.size, directory)

    # -- before the step ---------------------------------------------------------------------

    def fetch(self, d: Dispatch, cwd: Path) -> None:
        """Place the step's input artifacts in its working directory, each checked against its
        recorded sha256; raises FileError."""
        for record, path in d.fetch:
            stored = self._stored(record)
            what = f"input artifact {record.name!r} ({record.key})"
            target = _inside(cwd, path, what)
            target.parent.mkdir(parents=True, exist_ok=True)
            with stored.open("rb") as f:
                collector.check(what, _sha256(f), record.sha256)
                f.seek(0)
                collector.place(f, target, record.directory)

    def _stored(self, record: ArtifactRecord) -> Path:
        stored = (self.root / record.key).resolve()
        if not stored.is_relative_to(self.root.resolve()):
            raise FileError(f"artifact {record.name!r}: key {record.key!r} leaves the repository")
        if not stored.is_file():
            raise FileError(
                f"artifact {record.name!r} is not in {self.root} ({record.key}): a run kept "
                "from an earlier one reads its artifacts from the same --artifacts DIR"
            )
        return stored


def _inside(cwd: Path, path: str, what: str) -> Path:
    """`path` under the working directory (collector.inside), refused as the validator does
    when it is not a relative path (a record restored from a file may hold anything)."""
    problem = step_files.path_problem(path)
    if problem is not None:
        raise FileError(f"{what}: {problem}")
    return collector.inside(cwd, path, what)


def _sha256(f: IO[bytes]) -> str:
    h = hashlib.sha256()
    for chunk in iter(lambda: f.read(_CHUNK), b""):
        h.update(chunk)
    return h.hexdigest()
