"""The terminal text of `kubectl plan graph`: steps by topological level, one line per step,
its edges written out (`← a, b`), colour only when asked (a terminal without NO_COLOR).

A picture of boxes and routed lines was considered, with grandalf (Sugiyama layering and
crossing reduction) doing the layout: grandalf's last release is from January 2023, it yields
float coordinates and no character drawing (the edge routing on a character grid would still be
hand-written here), and a plan's level can be hundreds of steps wide (a fan-out of 200 shards),
which boxes side by side cannot show in 100 columns. Levels with written-out edges stay exact for
any DAG and any width, redraw cheaply under `--watch`, and cost no dependency; for a real
picture, `-o dot` and `-o mermaid` hand the layout to Graphviz or Mermaid, which do it well.

Every untrusted text goes through `graph_model.clean`: no escape sequence of a step's output
reaches the terminal.
"""

from __future__ import annotations

from planops.cli.graph_model import SETTLED, Node, PlanGraph, clean, levels

MARKS = {
    "success": "✔",
    "failed": "✘",
    "skipped": "↷",
    "running": "◐",
    "waiting": "?",
    "pending": "○",
    "not run": "·",
}
#: ANSI SGR colours of the terminal text (only when stdout is a terminal and NO_COLOR is unset)
COLOURS = {
    "success": "32",
    "failed": "31",
    "skipped": "90",
    "running": "33",
    "waiting": "35",
    "pending": "2",
    "not run": "2",
}
DETAIL_WIDTH = 60


def _paint(text: str, status: str | None, colour: bool) -> str:
    code = COLOURS.get(status or "")
    return f"\x1b[{code}m{text}\x1b[0m" if colour and code else text


def status_word(node: Node) -> str:
    st = node.status or ""
    if st in ("running", *SETTLED) and node.attempts > 1:
        return f"{st} ({node.attempts} attempts)"
    return st


def body_line(node: Node) -> str:
    """`do: tool echo-input; 3 items [✔ 2  ◐ 1]`, `then: a → b; else: shell echo no; ran then`."""
    body = node.body
    assert body is not None
    parts = [
        f"{key}: " + (" → ".join(clean(s) for s in steps) if steps else "?")
        for key, steps in body.steps.items()
    ]
    if node.kind == "decide":
        return "; ".join([*parts, *([f"ran {clean(body.branch)}"] if body.branch else [])])
    count = (
        "? items" if body.items is None else f"{body.items} item{'s' if body.items != 1 else ''}"
    )
    tally = "  ".join(
        f"{MARKS[s]} {body.counts[s]}"
        for s in ("success", "failed", "running", "pending")
        if body.counts.get(s)
    )
    return "; ".join([*parts, count]) + (f" [{tally}]" if tally else "")


def text(graph: PlanGraph, colour: bool = False) -> str:
    """The terminal picture: a header, then the steps level by level."""
    head = f"plan {clean(graph.name)}"
    if graph.phase is not None:
        facts = [graph.phase]
        if graph.progress:
            facts.append(f"{clean(graph.progress)} steps")
        if graph.duration:
            facts.append(clean(graph.duration))
        head += ": " + ", ".join(facts)
    else:
        head += f": {len(graph.nodes)} step{'s' if len(graph.nodes) != 1 else ''} (as validated)"
    lines = [head]
    lines += [f"  ✘ {e}" for e in graph.errors]
    rows, stuck = levels(graph)
    id_width = min(32, max((len(clean(n.id)) for n in graph.nodes), default=0))
    kind_width = max((len(n.kind) for n in graph.nodes), default=0)
    status_width = max((len(status_word(n)) for n in graph.nodes), default=0)
    mains = sum(1 for row in rows if not row[0].final)
    titled = [
        (f"finally {n - mains}" if row[0].final else f"level {n}", row)
        for n, row in enumerate(rows, 1)
    ]
    if stuck:
        titled.append(("on or after a dependency cycle", stuck))
    for title, row in titled:
        lines.append(f"── {title} " + "─" * max(3, 40 - len(title)))
        for node in row:
            st = node.status if node.status is not None else "pending"
            mark = _paint(MARKS.get(st, "?"), st, colour)
            cells = [f"  {mark} {clean(node.id).ljust(id_width)}"]
            if graph.phase is not None:
                cells.append(_paint(status_word(node).ljust(status_width), st, colour))
            cells.append(f"{clean(node.kind).ljust(kind_width)}  {clean(node.what)}".rstrip())
            line = "  ".join(cells)
            if node.deps:
                line += "   ← " + ", ".join(clean(d) for d in node.deps)
            lines.append(line.rstrip())
            if node.body is not None:
                lines.append(f"      └ {body_line(node)}")
            if node.detail:
                lines.append(f"      {_paint(clean(node.detail, DETAIL_WIDTH), st, colour)}")
    if not graph.nodes:
        lines.append("  (no steps)")
    return "\n".join(lines) + "\n"
