"""The operator's image carries bytecode its Python uses as it is: a step pod's collector starts
from it instead of compiling every module it imports at each start (0.405 → 0.206 s of pod CPU
per artifact step: docs/artifacts.md, "In the cluster").

image/build writes its layers with mtime 0 (reproducible), and a timestamp-based .pyc records
its source's mtime: after the layer, no such .pyc matches, and the image may not write a new one
(PYTHONDONTWRITEBYTECODE, uid 65532). Unchecked hash-based bytecode is used whatever the mtime.
"""

from __future__ import annotations

import importlib.util
import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    ("mode", "used"),
    [
        (py_compile.PycInvalidationMode.TIMESTAMP, False),
        (py_compile.PycInvalidationMode.UNCHECKED_HASH, True),
    ],
)
def test_only_unchecked_hash_bytecode_survives_a_layer_written_with_mtime_0(
    tmp_path: Path, mode: py_compile.PycInvalidationMode, used: bool
) -> None:
    source = tmp_path / "probe.py"
    source.write_text("VALUE = 'from source'\n")
    cached = Path(importlib.util.cache_from_source(str(source)))
    py_compile.compile(str(source), cfile=str(cached), invalidation_mode=mode, doraise=True)
    # what the layer does to every file; then the source changes so that we can tell which ran
    source.write_text("VALUE = 'compiled again'\n")
    cached.write_bytes(cached.read_bytes())  # the .pyc as it was
    os.utime(source, (0, 0))
    probe = "import probe; print(probe.VALUE)"
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "PYTHONDONTWRITEBYTECODE": "1"}
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out == ("from source" if used else "compiled again")


def test_both_image_recipes_compile_planops_as_unchecked_hash() -> None:
    build = (ROOT / "image" / "build").read_text()
    # the base's Python, by the image's own interpreter, and planops' modules
    assert 'chroot "$r" python3 -m compileall -q -f --invalidation-mode unchecked-hash' in build
    assert '"$stage/app/usr/lib/planops/planops"' in build
    docker = (ROOT / "Dockerfile").read_text()
    assert "compileall -q --invalidation-mode unchecked-hash /usr/lib/planops/planops" in docker
