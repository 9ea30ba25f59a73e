"""The plan that made one run hold gigabytes: a `map` over N items whose body is a `filter` over
an M-row input, so every body record's result is the whole input again.

    python bench/big_results.py [--items 2000] [--rows 1500] > big.yaml
    /usr/bin/time -v kubectl-plan run --local big.yaml -o json > /dev/null

With the defaults the plan is about 300 KB. Before runs had a budget of result bytes
(engine.budget), `run --local` of it reached 3.7 GiB RSS; docs/performance.md has the figures
with one.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any


def plan(items: int = 2000, rows: int = 1500, row_bytes: int = 200) -> dict[str, Any]:
    """A Plan manifest: `each` maps over `input.keys`; its body filters `input.rows`."""
    pad = "x" * max(0, row_bytes - 40)
    return {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": {"name": "big-results"},
        "spec": {
            "input": {
                "keys": list(range(items)),
                "rows": [{"n": n, "pad": pad} for n in range(rows)],
            },
            "steps": [
                {
                    "id": "each",
                    "map": {
                        "over": "{{input.keys}}",
                        "concurrency": min(items, 1000),
                        "do": {
                            "filter": {
                                "over": "{{input.rows}}",
                                "where": {"value": "{{item.n}}", "op": "gt", "to": -1},
                            }
                        },
                    },
                }
            ],
        },
    }


#: a Capsule that grants nothing: the plan runs no process
CAPSULE: dict[str, Any] = {
    "apiVersion": "planops.dev/v1alpha1",
    "kind": "Capsule",
    "metadata": {"name": "default"},
    "spec": {},
}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--items", type=int, default=2000)
    p.add_argument("--rows", type=int, default=1500)
    args = p.parse_args()
    # the Capsule, then the Plan: a multi-document YAML file (JSON documents are YAML)
    docs = [CAPSULE, plan(args.items, args.rows)]
    sys.stdout.write("\n---\n".join(json.dumps(d) for d in docs) + "\n")


if __name__ == "__main__":
    main()
