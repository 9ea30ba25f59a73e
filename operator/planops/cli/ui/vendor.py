"""The vendored layout library of `kubectl plan ui` (@dagrejs/dagre, MIT): its published file is
kept in static/vendor/dagre/ with its LICENSE, and VENDOR.json records the version, the npm
tarball's integrity and each file's sha256, so the page needs no network at run time and what it
runs can be checked against what npm publishes.

    python -m planops.cli.ui.vendor             # check the committed files against VENDOR.json
    python -m planops.cli.ui.vendor --refetch   # fetch the recorded version again (npm pack),
                                                # check the tarball's integrity, compare the files
    python -m planops.cli.ui.vendor --update 3.2.0   # vendor another version, rewrite VENDOR.json

The fetch uses `npm pack` (npm's own client, which checks the registry's integrity itself; it is
checked again here against the recorded one).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import json
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).parent / "static" / "vendor" / "dagre"
RECORD = HERE / "VENDOR.json"


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def record() -> dict[str, Any]:
    return json.loads(RECORD.read_text())  # type: ignore[no-any-return]


def problems(directory: Path = HERE) -> list[str]:
    """What does not match VENDOR.json in the committed files (empty: all match)."""
    found = []
    for name, meta in record()["files"].items():
        path = directory / name
        if not path.is_file():
            found.append(f"{path}: missing")
        elif sha256(path.read_bytes()) != meta["sha256"]:
            found.append(f"{path}: sha256 differs from VENDOR.json")
    return found


def fetch(version: str, into: Path) -> tuple[Path, dict[str, bytes], str]:
    """`npm pack @dagrejs/dagre@VERSION` in `into`: the tarball, the recorded files from it, and
    its integrity (sha512, base64, as npm writes it)."""
    package = record()["package"]
    out = subprocess.run(
        ["npm", "pack", "--silent", f"{package}@{version}"],
        cwd=into,
        capture_output=True,
        text=True,
        check=True,
    )
    tarball = into / out.stdout.strip().splitlines()[-1]
    data = tarball.read_bytes()
    integrity = "sha512-" + base64.b64encode(hashlib.sha512(data).digest()).decode()
    files = {}
    with tarfile.open(tarball) as tar:
        for name, meta in record()["files"].items():
            member = tar.extractfile(meta["from"])
            if member is None:
                raise SystemExit(f"{tarball.name} holds no {meta['from']}")
            files[name] = member.read()
    return tarball, files, integrity


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m planops.cli.ui.vendor", description=__doc__)
    p.add_argument("--refetch", action="store_true", help="compare with the published files")
    p.add_argument("--update", metavar="VERSION", help="vendor this version instead")
    args = p.parse_args(argv)
    if not args.refetch and not args.update:
        bad = problems()
        for line in bad:
            print(f"error: {line}", file=sys.stderr)
        if not bad:
            print(f"{record()['package']} {record()['version']}: the files match VENDOR.json")
        return 1 if bad else 0
    rec = record()
    with tempfile.TemporaryDirectory() as tmp:
        _, files, integrity = fetch(args.update or rec["version"], Path(tmp))
    if args.update:
        for name, data in files.items():
            (HERE / name).write_bytes(data)
            rec["files"][name]["sha256"] = sha256(data)
        rec["version"], rec["tarball_integrity"] = args.update, integrity
        RECORD.write_text(json.dumps(rec, indent=2) + "\n")
        print(f"vendored {rec['package']} {args.update}; VENDOR.json rewritten")
        return 0
    bad = [] if integrity == rec["tarball_integrity"] else ["the tarball's integrity differs"]
    bad += [
        f"{name}: the published file differs from VENDOR.json"
        for name, data in files.items()
        if sha256(data) != rec["files"][name]["sha256"]
    ]
    bad += problems()
    for line in bad:
        print(f"error: {line}", file=sys.stderr)
    if not bad:
        print(f"{rec['package']} {rec['version']}: published, recorded and committed files agree")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
