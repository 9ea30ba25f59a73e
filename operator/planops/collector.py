"""The step pod's file mover: what carries a step's results and artifacts in and out of its pod,
run from the operator's own image so that nothing is asked of the step's image (no shell, no
binary injected), with the Python standard library only: no S3 library, no credentials. The
operator mints a presigned URL for exactly each object key the attempt may read or write
(docs/artifacts.md), and hands them to it in env PLANOPS_COLLECT (JSON):

    {"workdir": "/planops/work",
     "results": {"dir": "/planops/results", "names": ["version"], "bound": 3072},
     "outputs": [{"name": "dist", "path": "dist", "url": "<presigned PUT>", "maxBytes": N}],
     "inputs": [{"name": "dist", "path": "in", "url": "<presigned GET>", "sha256": "...",
                 "directory": true}],
     "timeout": 60}

- `fetch` (an init container, before the step): each input downloaded to a temporary file, its
  sha256 checked against the one recorded when it was stored, then placed (a directory
  unpacked with tarfile's `data` filter: nothing outside its path, no devices, no links out).
  A wrong checksum or a failed download fails the container: the step never starts.
- `collect` (after the step): each result file read (at most `bound` + 1 bytes: the operator's
  engine applies the rule, engine.step_files), each output artifact archived or copied to a
  temporary file while hashed and counted (refused past maxBytes), then PUT whole to its URL:
  an S3 PUT is atomic, so the key never holds half an artifact. What it found goes to its
  termination message (4096 bytes; /dev/termination-log), as one JSON object:
  `{"results": {...}, "artifacts": [[sha256, size, directory], ...], "error": "..."}`.

Every network call has a timeout: a store that stops mid-run fails the container with a message
naming the artifact and the store's answer, never a hang.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import IO, Any

_CHUNK = 1 << 20
MESSAGE = "/dev/termination-log"
#: a termination message's bound (the kubelet keeps 4096 bytes of it)
MESSAGE_BYTES = 4096


class MoveError(Exception):
    """A file that cannot be moved; the message names it and why."""


def inside(workdir: Path, path: str, what: str) -> Path:
    """`path` under the working directory, symbolic links resolved; MoveError when it leads
    out of it (validated paths hold no `..`, but a link the step made may)."""
    resolved = (workdir / path).resolve()
    if not resolved.is_relative_to(workdir.resolve()):
        raise MoveError(f"{what}: {path} leads out of the step's working directory")
    return resolved


def _request(
    url: str, method: str, what: str, timeout: float, body: IO[bytes] | None = None, size: int = 0
) -> Any:
    # imported here: a step with results alone never pays for urllib (http, email, ssl: 50 ms
    # of CPU at each start, measured: docs/artifacts.md)
    import urllib.error  # noqa: PLC0415
    import urllib.request  # noqa: PLC0415

    request = urllib.request.Request(url, data=body, method=method)
    if body is not None:
        request.add_header("Content-Length", str(size))
        request.add_header("Content-Type", "application/octet-stream")
    try:
        return urllib.request.urlopen(request, timeout=timeout)
    except urllib.error.HTTPError as e:
        detail = e.read(300).decode(errors="replace").strip()
        raise MoveError(
            f"{what}: the artifact repository answered {e.code} {e.reason}: {detail}"
        ) from None
    except (urllib.error.URLError, OSError) as e:
        reason = getattr(e, "reason", e)
        raise MoveError(f"{what}: the artifact repository cannot be reached: {reason}") from None


def fetch(config: dict[str, Any]) -> None:
    """Place every input artifact; raises MoveError."""
    workdir = Path(config["workdir"])
    timeout = float(config.get("timeout", 60))
    for item in config.get("inputs", []):
        what = f"input artifact {item['name']!r}"
        target = inside(workdir, item["path"], what)
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=target.parent) as temp:
            digest = hashlib.sha256()
            try:
                with _request(item["url"], "GET", what, timeout) as response:
                    for chunk in iter(lambda: response.read(_CHUNK), b""):
                        digest.update(chunk)
                        temp.write(chunk)
            except OSError as e:  # the connection dropped or timed out mid-body
                raise MoveError(f"{what}: the download stopped: {e}") from None
            check(what, digest.hexdigest(), item["sha256"])
            temp.seek(0)
            place(temp, target, bool(item.get("directory")))


def check(what: str, digest: str, recorded: str) -> None:
    """Nothing is placed unless it is what was stored."""
    if digest != recorded:
        raise MoveError(
            f"{what}: its sha256 is {digest}, not the {recorded} recorded when it was stored: "
            "not placed"
        )


def place(stored: IO[bytes], target: Path, directory: bool) -> None:
    """An artifact's bytes at `target`: a directory unpacked (tarfile's `data` filter: nothing
    outside `target`, no devices, no links out), a file copied."""
    if directory:
        import tarfile  # noqa: PLC0415 - only a directory needs it

        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(fileobj=stored) as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(target, filter="data")
            else:  # a Python before PEP 706 (Debian bookworm's 3.11.2: the operator's image)
                _extract_checked(tar, target)
    else:
        with target.open("wb") as out:
            shutil.copyfileobj(stored, out, _CHUNK)


def _extract_checked(tar: Any, target: Path) -> None:
    """What tarfile's `data` filter does, for a Python without it: every member inside
    `target`, only files, directories and links that stay inside it, no special bits."""
    root = target.resolve()
    for member in tar.getmembers():
        where = (root / member.name).resolve()
        if not where.is_relative_to(root):
            raise MoveError(f"{member.name}: leads out of the artifact's directory: not placed")
        if not (member.isfile() or member.isdir() or member.issym() or member.islnk()):
            raise MoveError(f"{member.name}: not a file, a directory or a link: not placed")
        if member.issym() or member.islnk():
            base = where.parent if member.issym() else root
            if os.path.isabs(member.linkname) or not (
                (base / member.linkname).resolve().is_relative_to(root)
            ):
                raise MoveError(f"{member.name}: a link out of the artifact: not placed")
        member.mode = (member.mode & 0o755) | (0o700 if member.isdir() else 0o600)
        member.uid = member.gid = 0
        member.uname = member.gname = ""
        tar.extract(member, root, set_attrs=not member.issym(), numeric_owner=True)


def results(config: dict[str, Any]) -> dict[str, Any]:
    """The result files as text (undecodable bytes replaced: the engine judges them), at most
    `bound` + 1 bytes each; the first that takes them past `bound` is named, not read on."""
    spec = config.get("results") or {}
    directory, bound = Path(spec.get("dir", "/planops/results")), int(spec.get("bound", 3072))
    found: dict[str, str] = {}
    for name in spec.get("names", []):
        try:
            with (directory / name).open("rb") as f:
                data = f.read(bound + 1)
        except FileNotFoundError:
            continue
        found[name] = data.decode(errors="replace")
        if len(json.dumps(found, ensure_ascii=False, separators=(",", ":")).encode()) > bound:
            del found[name]
            return {"results": found, "over": name}
    return {"results": found}


class Bounded:
    """A writer that hashes and counts what passes, and refuses past `bound` bytes."""

    def __init__(self, raw: IO[bytes], what: str, bound: int) -> None:
        self.raw, self.what, self.bound = raw, what, bound
        self.sha256, self.size = hashlib.sha256(), 0

    def write(self, data: bytes) -> int:
        self.size += len(data)
        if self.size > self.bound:
            raise MoveError(
                f"{self.what} holds more than its Capsule's artifacts.maxBytes "
                f"({self.bound} bytes): not stored"
            )
        self.sha256.update(data)
        return self.raw.write(data)

    def flush(self) -> None:
        self.raw.flush()


def store(config: dict[str, Any]) -> list[list[Any]]:
    """Archive or copy each output artifact, then PUT it whole; [sha256, size, directory]
    each, in the order declared. Raises MoveError."""
    workdir = Path(config["workdir"])
    timeout = float(config.get("timeout", 60))
    kept = []
    for item in config.get("outputs", []):
        what = f"artifact {item['name']!r}"
        source = inside(workdir, item["path"], what)
        if not source.exists():
            raise MoveError(f"{what}: the step left nothing at {item['path']}")
        directory = source.is_dir()
        with tempfile.TemporaryFile() as temp:
            out = Bounded(temp, what, int(item["maxBytes"]))
            pack(source, out, directory)
            temp.flush()
            temp.seek(0)
            with _request(item["url"], "PUT", what, timeout, temp, out.size) as response:
                response.read()
        kept.append([out.sha256.hexdigest(), out.size, directory])
    return kept


def pack(source: Path, out: Bounded, directory: bool) -> None:
    """A file's bytes, or a directory as a tar archive (links kept as links), into `out`."""
    if directory:
        import tarfile  # noqa: PLC0415 - only a directory needs it

        with tarfile.open(fileobj=out, mode="w|") as tar:  # type: ignore[call-overload]
            tar.add(source, arcname=".", recursive=True)
    else:
        with source.open("rb") as f:
            shutil.copyfileobj(f, out, _CHUNK)


def collect(config: dict[str, Any]) -> dict[str, Any]:
    """What the step left: its results and artifacts, or the error that stopped the move."""
    message = results(config)
    try:
        message["artifacts"] = store(config)
    except _move_errors() as e:
        message["error"] = str(e)[:1000]
    return message


def _move_errors() -> tuple[type[Exception], ...]:
    """What a move may raise: a TarError only once tarfile was imported (a directory moved)."""
    tar = sys.modules.get("tarfile")
    return (MoveError, OSError) if tar is None else (MoveError, OSError, tar.TarError)


def _write_message(message: dict[str, Any], path: str) -> None:
    text = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode()
    if len(text) > MESSAGE_BYTES:  # cannot happen within the bounds; say so rather than cut
        text = json.dumps({"error": f"the collector's message took {len(text)} bytes"}).encode()
    with open(path, "wb") as f:
        f.write(text)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1 or args[0] not in ("fetch", "collect"):
        sys.stderr.write("usage: python3 -m planops.collector fetch|collect\n")
        return 2
    config = json.loads(os.environ["PLANOPS_COLLECT"])
    path = os.environ.get("PLANOPS_MESSAGE", MESSAGE)
    if args[0] == "fetch":
        try:
            fetch(config)
        except _move_errors() as e:
            _write_message({"error": str(e)[:1000]}, path)
            sys.stderr.write(f"{e}\n")
            return 1
        return 0
    message = collect(config)
    _write_message(message, path)
    if "error" in message:
        sys.stderr.write(f"{message['error']}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
