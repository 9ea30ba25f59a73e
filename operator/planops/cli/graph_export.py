"""`kubectl plan graph -o dot|mermaid`: the graph for Graphviz or Mermaid, which lay it out.

Untrusted text stays inside its label: DOT labels escape backslash and quote and use `\\n` only
for the line breaks made here; Mermaid labels encode every character outside a small safe set as
an entity (`#34;`), so no quote, bracket, `<script>` or newline can leave its label. Node names
are `n0`, `n1`, ..., never the step ids.
"""

from __future__ import annotations

import re

from planops.cli.graph_model import WHAT_WIDTH, Node, PlanGraph, clean, runs_after
from planops.cli.graph_text import MARKS, body_line, status_word

#: fill colours of DOT and Mermaid nodes
FILLS = {
    "success": "#c8e6c9",
    "failed": "#ffcdd2",
    "skipped": "#eeeeee",
    "running": "#fff59d",
    "waiting": "#e1bee7",
    "pending": "#ffffff",
    "not run": "#f5f5f5",
}


def _label_lines(node: Node) -> list[str]:
    lines = [clean(node.id), clean(f"{node.kind} {node.what}".strip(), WHAT_WIDTH)]
    if node.body is not None:
        lines.append(clean(body_line(node), WHAT_WIDTH + 20))
    if node.status is not None:
        lines.append(f"{MARKS.get(node.status, '?')} {status_word(node)}")
    return lines


def dot_string(text: str) -> str:
    """A DOT quoted string holding `text` literally: backslash and quote escaped, no line
    breaks (the caller joins lines with `\\n`, DOT's own line break in a label)."""
    return '"' + clean(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def dot(graph: PlanGraph) -> str:
    title = f"plan {graph.name}" + (f": {graph.phase}" if graph.phase else "")
    out = [
        "digraph plan {",
        f"  graph [label={dot_string(title)}, labelloc=t, rankdir=TB, fontname=Helvetica];",
        '  node [shape=box, style="rounded,filled", fillcolor="#ffffff", fontname=Helvetica];',
        '  edge [color="#607d8b"];',
    ]
    names = {n.id: f"n{i}" for i, n in reversed(list(enumerate(graph.nodes)))}
    for i, node in enumerate(graph.nodes):
        label = "\\n".join(dot_string(line)[1:-1] for line in _label_lines(node))
        fill = f', fillcolor="{FILLS[node.status]}"' if node.status in FILLS else ""
        shape = ", peripheries=2" if node.body is not None else ""
        out.append(f'  n{i} [label="{label}"{fill}{shape}];')
    for i, node in enumerate(graph.nodes):
        out += [f"  {names[d]} -> n{i};" for d in node.deps if d in names]
    finals = [f"n{i}" for i, n in enumerate(graph.nodes) if n.final]
    if finals:
        members = "; ".join(finals)
        out.append(f'  subgraph cluster_finally {{ label="finally"; style=dashed; {members}; }}')
        for step, after in runs_after(graph).items():
            out += [f"  {names[d]} -> {names[step]} [style=dashed];" for d in after]
    out.append("}")
    return "\n".join(out) + "\n"


_MERMAID_SAFE = re.compile(r"[A-Za-z0-9 _.,:/=+-]")


def mermaid_text(text: str) -> str:
    """`text` for inside a Mermaid label `["..."]`: every character outside a small safe set as
    an entity code (`#34;` for a quote), so nothing in it can end the label or be markup."""
    return "".join(c if _MERMAID_SAFE.fullmatch(c) else f"#{ord(c)};" for c in clean(text))


def mermaid(graph: PlanGraph) -> str:
    out = ["flowchart TD"]
    names = {n.id: f"n{i}" for i, n in reversed(list(enumerate(graph.nodes)))}
    for i, node in enumerate(graph.nodes):
        label = "<br/>".join(mermaid_text(line) for line in _label_lines(node))
        left, right = ("[[", "]]") if node.body is not None else ("[", "]")
        out.append(f'  n{i}{left}"{label}"{right}')
    for i, node in enumerate(graph.nodes):
        out += [f"  {names[d]} --> n{i}" for d in node.deps if d in names]
    finals = [f"n{i}" for i, n in enumerate(graph.nodes) if n.final]
    if finals:
        out += ["  subgraph finally", *(f"    {n}" for n in finals), "  end"]
        for step, after in runs_after(graph).items():
            out += [f"  {names[d]} -.-> {names[step]}" for d in after]
    by_status: dict[str, list[str]] = {}
    for i, node in enumerate(graph.nodes):
        if node.status in FILLS:
            by_status.setdefault(node.status, []).append(f"n{i}")
    for st, members in by_status.items():
        cls = st.replace(" ", "_")
        out.append(f"  classDef {cls} fill:{FILLS[st]},stroke:#455a64")
        out.append(f"  class {','.join(members)} {cls}")
    return "\n".join(out) + "\n"
