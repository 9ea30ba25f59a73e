"""`kubectl plan graph`: a plan's DAG as terminal text, Graphviz DOT or Mermaid. Pure: no I/O, no
Kubernetes; the CLI hands it a PlanSpec (a validated file, or a cluster Plan's spec) and, for a
Plan in the cluster, its `.status`.

The model is graph_model.py (the steps as nodes, a status laid over them, topological levels);
the drawings are graph_text.py (levels with written-out edges: why not boxes, there) and
graph_export.py (DOT and Mermaid, every untrusted label escaped). This module is what callers
use: the model's constructors and `render`.
"""

from __future__ import annotations

from planops.cli.graph_export import dot, mermaid, mermaid_text
from planops.cli.graph_model import (
    Body,
    Node,
    PlanGraph,
    clean,
    from_spec,
    levels,
    runs_after,
    with_status,
)
from planops.cli.graph_text import text

__all__ = [
    "Body",
    "Node",
    "PlanGraph",
    "clean",
    "dot",
    "from_spec",
    "levels",
    "mermaid",
    "mermaid_text",
    "render",
    "runs_after",
    "text",
    "with_status",
]

RENDERERS = {"dot": dot, "mermaid": mermaid}


def render(graph: PlanGraph, output: str, colour: bool = False) -> str:
    if output == "text":
        return text(graph, colour)
    return RENDERERS[output](graph)
