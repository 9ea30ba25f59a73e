#!/usr/bin/env python3
"""Builds the test node's container images without a registry or Docker.

Each image is one filesystem layer, written as a docker-save style tarball by image/ocitar.py
(the writer the operator's image uses too) that `ctr -n k8s.io images import` accepts:

- local/busybox:<version>  from Debian's busybox-static: /bin/busybox plus a symlink per applet,
                           /etc/passwd and /etc/group with `nobody` (65534), /tmp, /workspace.
- local/pause:<hash>       the pod sandbox process built from tests/cluster/pause.c.

Tarballs are deterministic (mtime 0, owner 0, sorted entries), so an unchanged input gives the
same image digest. Usage: images.py OUTDIR PAUSE_BINARY -> prints "name<TAB>tarball" lines.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import tarfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "image"))
from ocitar import image, layer  # the shared tarball writer (image/ocitar.py)

BUSYBOX = Path("/bin/busybox")


def busybox_version() -> str:
    out = subprocess.run(
        ["dpkg-query", "-W", "-f=${Version}", "busybox-static"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return out.split(":", 1)[-1].split("-", 1)[0]  # 1:1.35.0-4+deb12u1 -> 1.35.0


def busybox_image(out: Path) -> tuple[str, Path]:
    applets = subprocess.run(
        [str(BUSYBOX), "--list-full"], capture_output=True, text=True, check=True
    ).stdout.split()
    entries: list[tuple[str, dict[str, object]]] = [
        (d, {"kind": tarfile.DIRTYPE, "mode": 0o755})
        for d in ("bin", "etc", "sbin", "usr", "usr/bin", "usr/sbin", "workspace")
    ]
    entries.append(("tmp", {"kind": tarfile.DIRTYPE, "mode": 0o1777}))
    entries.append(("bin/busybox", {"data": BUSYBOX.read_bytes(), "mode": 0o755}))
    for applet in applets:
        if applet != "bin/busybox":
            entries.append(
                (applet, {"kind": tarfile.SYMTYPE, "link": "/bin/busybox", "mode": 0o777})
            )
    entries.append(
        (
            "etc/passwd",
            {
                "data": b"root:x:0:0:root:/root:/bin/sh\n"
                b"nobody:x:65534:65534:nobody:/nonexistent:/bin/false\n"
            },
        )
    )
    entries.append(("etc/group", {"data": b"root:x:0:\nnogroup:x:65534:\n"}))
    name = f"local/busybox:{busybox_version()}"
    return name, image(
        out,
        name,
        [layer(entries)],
        {
            "Env": ["PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"],
            "Cmd": ["sh"],
            "WorkingDir": "/",
        },
    )


def pause_image(out: Path, binary: Path) -> tuple[str, Path]:
    data = binary.read_bytes()
    name = f"local/pause:{hashlib.sha256(data).hexdigest()[:12]}"
    return name, image(
        out,
        name,
        [layer([("pause", {"data": data, "mode": 0o755})])],
        {"Entrypoint": ["/pause"], "User": "65535:65535"},
    )


def main() -> None:
    out, pause = Path(sys.argv[1]), Path(sys.argv[2])
    out.mkdir(parents=True, exist_ok=True)
    for name, path in (busybox_image(out), pause_image(out, pause)):
        print(f"{name}\t{path}")


if __name__ == "__main__":
    main()
