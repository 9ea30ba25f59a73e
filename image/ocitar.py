"""Container images without Docker or a registry: docker-save style tarballs.

`ctr images import` (containerd) and `docker load` both accept the format: a `manifest.json`
naming the config and the layers, the config (with `rootfs.diff_ids`, the layers' sha256), and
each layer as an uncompressed tar. Used by `image/build` (the operator's image) and by
`tests/cluster/images.py` (the test node's busybox and pause images).

Everything is deterministic (mtime 0, owner 0, sorted entries): unchanged inputs give the same
digests, so a rebuilt image is recognised as the same image.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from pathlib import Path


def add(
    tar: tarfile.TarFile,
    name: str,
    *,
    data: bytes | None = None,
    mode: int = 0o644,
    kind: bytes = tarfile.REGTYPE,
    link: str = "",
) -> None:
    """One deterministic tar entry."""
    info = tarfile.TarInfo(name)
    info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
    info.mode, info.type, info.linkname = mode, kind, link
    if data is not None:
        info.size = len(data)
    tar.addfile(info, io.BytesIO(data) if data is not None else None)


def layer(entries: list[tuple[str, dict[str, object]]]) -> bytes:
    """A layer tar from (path, add() keywords) entries."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, kw in sorted(entries):
            add(tar, name, **kw)  # type: ignore[arg-type]
    return buf.getvalue()


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def image(out: Path, name: str, layers: list[bytes | Path], config: dict[str, object]) -> Path:
    """Write image `name` (layers bottom first: bytes, or a path to a layer tar) to a tarball in
    `out`; returns its path."""
    diff_ids = [
        "sha256:"
        + (_sha256_file(item) if isinstance(item, Path) else hashlib.sha256(item).hexdigest())
        for item in layers
    ]
    cfg = json.dumps(
        {
            "architecture": "amd64",
            "os": "linux",
            "config": config,
            "rootfs": {"type": "layers", "diff_ids": diff_ids},
        },
        sort_keys=True,
    ).encode()
    cfg_name = hashlib.sha256(cfg).hexdigest() + ".json"
    names = [f"{d.removeprefix('sha256:')}/layer.tar" for d in diff_ids]
    manifest = json.dumps([{"Config": cfg_name, "RepoTags": [name], "Layers": names}]).encode()
    path = out / (name.replace("/", "_").replace(":", "_") + ".tar")
    tmp = path.with_suffix(".tmp")
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        add(tar, "manifest.json", data=manifest)
        add(tar, cfg_name, data=cfg)
        for member, item in zip(names, layers, strict=True):
            if isinstance(item, Path):
                info = tarfile.TarInfo(member)
                info.mtime, info.mode, info.size = 0, 0o644, item.stat().st_size
                with item.open("rb") as f:
                    tar.addfile(info, f)
            else:
                add(tar, member, data=item)
    tmp.rename(path)
    return path


def main(argv: list[str]) -> None:
    """ocitar.py OUTDIR NAME CONFIG_JSON LAYER_TAR... -> prints the image tarball's path."""
    out, name, config, *layers = argv
    print(image(Path(out), name, [Path(p) for p in layers], json.loads(config)))


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
