"""The side-by-side bench's former name, kept so that the commands of the earlier rounds
(docs/performance.md) still run: bench/vs_peers.py with the sides those rounds had (planops and
Argo Workflows, defaults and tuned). `--sides` still chooses any, Tekton included.

    .venv/bin/python bench/vs_argo.py [--chain 20] [--burst 100] [--fanout 50] [-o json]
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.vs_peers import main

if __name__ == "__main__":
    main(sides="planops,argo,argo_tuned")
