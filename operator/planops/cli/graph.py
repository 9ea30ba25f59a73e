"""`kubectl plan graph`: a plan's DAG as terminal text, Graphviz DOT or Mermaid. Pure: no I/O, no
Kubernetes; the CLI hands it a PlanSpec (a validated file, or a cluster Plan's spec) and, for a
Plan in the cluster, its `.status`.

The model: one `Node` per top-level step, in declaration order, with its dependencies (the
edges), its kind and what it runs, its status when there is one, and for the control steps that
carry bodies (decide, map, reduce: `engine.bodies.BODY_KINDS`) the body *folded* into one `Body`:
its steps, how many items (map/reduce) or which branch (decide), and how the items went.

Layout of the terminal text: steps by **topological level** (a step's level is one more than its
deepest dependency's), one line per step, its edges written out (`← a, b`). A picture of boxes and
routed lines was considered, with grandalf (Sugiyama layering and crossing reduction) doing the
layout: grandalf's last release is from January 2023, it yields float coordinates and no
character drawing (the edge routing on a character grid would still be hand-written here), and a
plan's level can be hundreds of steps wide (a fan-out of 200 shards), which boxes side by side
cannot show in 100 columns. Levels with written-out edges stay exact for any DAG and any width,
redraw cheaply under `--watch`, and cost no dependency; for a real picture, `-o dot` and
`-o mermaid` hand the layout to Graphviz or Mermaid, which do it well.

Untrusted text: step ids, commands, prompts, outputs and errors come from users and from the
steps themselves. The terminal text drops control characters (no escape sequence of a step's
output reaches the terminal); DOT labels escape backslash and quote and use `\\n` only for the
line breaks made here; Mermaid labels encode every character outside a small safe set as an
entity (`#34;`), so no quote, bracket, `<script>` or newline can leave its label. Node names in
DOT and Mermaid are `n0`, `n1`, ..., never the step ids.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from planops.api.models import PlanSpec, Step
from planops.engine import step_kind
from planops.engine.bodies import BODY_KINDS, BodyError
from planops.engine.bodies import bodies as body_specs
from planops.engine.bodies import parse as parse_body

#: Statuses a node can show: a settled record's, or what the status says of a step not settled.
SETTLED = ("success", "failed", "skipped")
FINISHED_PHASES = ("Succeeded", "Failed")
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
WHAT_WIDTH = 48
DETAIL_WIDTH = 60


@dataclass(frozen=True)
class Body:
    """A control step's bodies, folded: body steps by key (`do`, `then`, `else`), the number of
    items when known, and what the status says of the items (or, for decide, the branch)."""

    steps: dict[str, tuple[str, ...]]
    items: int | None = None
    counts: dict[str, int] = field(default_factory=dict)  # item status -> how many
    branch: str | None = None


@dataclass(frozen=True)
class Node:
    id: str
    kind: str
    what: str
    deps: tuple[str, ...]
    status: str | None = None  # None: no status (a file)
    attempts: int = 0
    detail: str = ""
    body: Body | None = None


@dataclass(frozen=True)
class PlanGraph:
    name: str
    nodes: tuple[Node, ...]
    phase: str | None = None
    progress: str | None = None
    duration: str | None = None
    errors: tuple[str, ...] = ()


# -- the model ------------------------------------------------------------------------------------


def clean(text: Any, width: int | None = None) -> str:
    """One line of `text` without control or format characters, cut to `width`."""
    line = " ".join(str(text).split())
    line = "".join("�" if unicodedata.category(c) in ("Cc", "Cf", "Co", "Cs") else c for c in line)
    if width is not None and len(line) > width:
        line = line[: width - 1] + "…"
    return line


def _input_items(over: Any, spec: PlanSpec) -> int | None:
    """How many items `over` holds, when that is known before the run: a literal list, or a
    whole-string `{{input.a.b}}` naming a list of the plan's input."""
    if isinstance(over, list):
        return len(over)
    m = (
        re.fullmatch(r"\{\{\s*input((?:\.[A-Za-z0-9_-]+)*)\s*\}\}", over or "")
        if isinstance(over, str)
        else None
    )
    if m is None:
        return None
    value: Any = spec.input or {}
    for part in m.group(1).split(".")[1:]:
        if isinstance(value, dict) and part in value:
            value = value[part]
        elif isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        else:
            return None
    return len(value) if isinstance(value, list) else None


def _what(step: Step, kind: str) -> str:
    """What a step runs, in a few words."""
    value = getattr(step, kind)
    if kind in ("shell", "tool", "capsule"):
        return clean(value, WHAT_WIDTH)
    if not isinstance(value, dict):
        return ""
    if kind in ("map", "reduce", "filter"):
        extra = f", concurrency {value['concurrency']}" if "concurrency" in value else ""
        over = value.get("over")
        return clean(
            f"over {over if isinstance(over, str) else json.dumps(over)}{extra}", WHAT_WIDTH
        )
    if kind == "decide":
        return clean(f"if {_gate(value.get('if'))}", WHAT_WIDTH)
    if kind == "exit":
        when = f" when {_gate(value['when'])}" if "when" in value else ""
        return clean(f"{value.get('status', '')}{when}", WHAT_WIDTH)
    if kind == "ask":
        return clean(value.get("prompt", ""), WHAT_WIDTH)
    return ""


def _gate(gate: Any) -> str:
    if isinstance(gate, dict):
        to = f" {json.dumps(gate['to'])}" if "to" in gate else ""
        return f"{json.dumps(gate.get('value'))} {gate.get('op', '')}{to}"
    return json.dumps(gate)


def _body(step: Step, kind: str, spec: PlanSpec) -> Body | None:
    if kind not in BODY_KINDS:
        return None
    steps: dict[str, tuple[str, ...]] = {}
    for key, raw in body_specs(kind, getattr(step, kind)).items():
        try:
            parsed = parse_body(raw)
        except BodyError:
            steps[key] = ()
            continue
        steps[key] = tuple(
            clean(f"{step_kind(s)} {_what(s, step_kind(s))}".strip()) if s.id == "call" else s.id
            for s in parsed
        )
    value = getattr(step, kind)
    items = _input_items(value.get("over"), spec) if isinstance(value, dict) else None
    return Body(steps, items if kind != "decide" else None)


def from_spec(name: str, spec: PlanSpec) -> PlanGraph:
    """The plan as written (a file, before anything runs)."""
    nodes = []
    for step in spec.steps:
        kind = step_kind(step)
        nodes.append(
            Node(
                step.id,
                kind,
                _what(step, kind),
                tuple(dict.fromkeys(step.depends_on)),
                body=_body(step, kind, spec),
            )
        )
    return PlanGraph(name, tuple(nodes))


def _json_object(text: str | None) -> dict[str, Any]:
    try:
        value = json.loads(text or "")
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _item_status(statuses: list[str], flying: bool) -> str:
    if "failed" in statuses:
        return "failed"
    if flying:
        return "running"
    return "success" if statuses else "pending"


def with_status(graph: PlanGraph, status: Mapping[str, Any]) -> PlanGraph:
    """The graph with a cluster Plan's `.status` over it (reconciler/status.py shapes it): each
    settled record, the attempts in flight (`inFlight`), the questions waiting (`asks`), and
    each body's records (`<control>.<key>.<step>`) counted per item."""
    report = status.get("report") or {}
    records: dict[str, Mapping[str, Any]] = {}
    for rec in report.get("steps") or []:
        if isinstance(rec, Mapping) and isinstance(rec.get("stepId"), str):
            records[rec["stepId"]] = rec
    flying: dict[str, int] = {}
    for f in status.get("inFlight") or []:
        if isinstance(f, Mapping) and isinstance(f.get("stepId"), str):
            flying[f["stepId"]] = (
                int(f.get("attempt") or 0) if str(f.get("attempt")).isdigit() else 0
            )
    waiting = {
        a["stepId"]
        for a in status.get("asks") or []
        if isinstance(a, Mapping) and isinstance(a.get("stepId"), str)
    }
    phase = status.get("phase") if isinstance(status.get("phase"), str) else None
    finished = phase in FINISHED_PHASES
    nodes = []
    for node in graph.nodes:
        rec = records.get(node.id)
        body = _body_status(node, records, flying) if node.body is not None else None
        if rec is not None:
            st = str(rec.get("status"))
            attempts = int(rec.get("attempts") or 0) if str(rec.get("attempts")).isdigit() else 0
            detail = rec.get("error") or ""
            nodes.append(
                replace(node, status=st, attempts=attempts, detail=clean(detail, 200), body=body)
            )
        elif node.id in waiting:
            nodes.append(replace(node, status="waiting", detail="waiting for an answer", body=body))
        elif node.id in flying:
            n = flying[node.id]
            nodes.append(replace(node, status="running", attempts=n, body=body))
        elif body is not None and (body.counts or body.branch):
            nodes.append(replace(node, status="running", body=body))
        else:
            nodes.append(replace(node, status="not run" if finished else "pending", body=body))
    errors = tuple(
        clean(f"[{e.get('code')}] {e.get('path')}: {e.get('message')}")
        for e in status.get("errors") or []
        if isinstance(e, Mapping)
    )
    return replace(
        graph,
        nodes=tuple(nodes),
        phase=phase or "Pending",
        progress=_text(status.get("progress")),
        duration=_text(status.get("duration")),
        errors=errors,
    )


def _text(value: Any) -> str | None:
    return None if value is None else clean(value)


def _body_status(
    node: Node, records: Mapping[str, Mapping[str, Any]], flying: Mapping[str, int]
) -> Body:
    assert node.body is not None
    prefix = f"{node.id}."
    per_key: dict[str, list[str]] = {}
    keys_flying: set[str] = set()
    for sid, rec in records.items():
        if sid.startswith(prefix) and sid.count(".") >= 2:
            per_key.setdefault(sid[len(prefix) :].split(".")[0], []).append(str(rec.get("status")))
    for sid in flying:
        if sid.startswith(prefix) and sid.count(".") >= 2:
            key = sid[len(prefix) :].split(".")[0]
            per_key.setdefault(key, [])
            keys_flying.add(key)
    own = records.get(node.id)
    result = _json_object(own.get("output")) if own is not None else {}
    if node.kind == "decide":
        branch = result.get("branch") if isinstance(result.get("branch"), str) else None
        branch = branch or next(iter(per_key), None)
        return replace(node.body, branch=branch)
    counts: dict[str, int] = {}
    for key, statuses in per_key.items():
        st = _item_status(statuses, key in keys_flying)
        if st == "success" and len(statuses) < max(1, len(node.body.steps.get("do", ()))):
            st = "running"  # some of the item's body steps are still to run
        counts[st] = counts.get(st, 0) + 1
    items = result.get("count") if isinstance(result.get("count"), int) else node.body.items
    return replace(node.body, items=items, counts=counts)


# -- levels ---------------------------------------------------------------------------------------


def levels(graph: PlanGraph) -> tuple[list[list[Node]], list[Node]]:
    """Steps by topological level (declaration order within a level), and the steps Kahn's
    algorithm cannot order: those on or after a dependency cycle (a Plan the cluster refused)."""
    index = {n.id: i for i, n in reversed(list(enumerate(graph.nodes)))}
    deps = [[index[d] for d in n.deps if d in index] for n in graph.nodes]
    dependents: list[list[int]] = [[] for _ in graph.nodes]
    for i, row in enumerate(deps):
        for d in row:
            dependents[d].append(i)
    remaining = [len(row) for row in deps]
    level = [0] * len(graph.nodes)
    queue = [i for i, r in enumerate(remaining) if r == 0]
    for v in queue:  # Kahn's algorithm; the queue grows while it is walked
        for w in dependents[v]:
            level[w] = max(level[w], level[v] + 1)
            remaining[w] -= 1
            if remaining[w] == 0:
                queue.append(w)
    placed = set(queue)
    top = max((level[i] for i in placed), default=-1)
    out: list[list[Node]] = [[] for _ in range(top + 1)]
    for i in sorted(placed):
        out[level[i]].append(graph.nodes[i])
    return out, [graph.nodes[i] for i in range(len(graph.nodes)) if i not in placed]


# -- terminal text --------------------------------------------------------------------------------


def _paint(text: str, status: str | None, colour: bool) -> str:
    code = COLOURS.get(status or "")
    return f"\x1b[{code}m{text}\x1b[0m" if colour and code else text


def _status_word(node: Node) -> str:
    st = node.status or ""
    if st in ("running", *SETTLED) and node.attempts > 1:
        return f"{st} ({node.attempts} attempts)"
    return st


def _body_line(node: Node) -> str:
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
    status_width = max((len(_status_word(n)) for n in graph.nodes), default=0)
    titled = [(f"level {n}", row) for n, row in enumerate(rows, 1)]
    if stuck:
        titled.append(("on or after a dependency cycle", stuck))
    for title, row in titled:
        lines.append(f"── {title} " + "─" * max(3, 40 - len(title)))
        for node in row:
            st = node.status if node.status is not None else "pending"
            mark = _paint(MARKS.get(st, "?"), st, colour)
            cells = [f"  {mark} {clean(node.id).ljust(id_width)}"]
            if graph.phase is not None:
                cells.append(_paint(_status_word(node).ljust(status_width), st, colour))
            cells.append(f"{clean(node.kind).ljust(kind_width)}  {clean(node.what)}".rstrip())
            line = "  ".join(cells)
            if node.deps:
                line += "   ← " + ", ".join(clean(d) for d in node.deps)
            lines.append(line.rstrip())
            if node.body is not None:
                lines.append(f"      └ {_body_line(node)}")
            if node.detail:
                lines.append(f"      {_paint(clean(node.detail, DETAIL_WIDTH), st, colour)}")
    if not graph.nodes:
        lines.append("  (no steps)")
    return "\n".join(lines) + "\n"


# -- DOT and Mermaid ------------------------------------------------------------------------------


def _label_lines(node: Node) -> list[str]:
    lines = [clean(node.id), clean(f"{node.kind} {node.what}".strip(), WHAT_WIDTH)]
    if node.body is not None:
        lines.append(clean(_body_line(node), WHAT_WIDTH + 20))
    if node.status is not None:
        lines.append(f"{MARKS.get(node.status, '?')} {_status_word(node)}")
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
    by_status: dict[str, list[str]] = {}
    for i, node in enumerate(graph.nodes):
        if node.status in FILLS:
            by_status.setdefault(node.status, []).append(f"n{i}")
    for st, members in by_status.items():
        cls = st.replace(" ", "_")
        out.append(f"  classDef {cls} fill:{FILLS[st]},stroke:#455a64")
        out.append(f"  class {','.join(members)} {cls}")
    return "\n".join(out) + "\n"


RENDERERS = {"dot": dot, "mermaid": mermaid}


def render(graph: PlanGraph, output: str, colour: bool = False) -> str:
    if output == "text":
        return text(graph, colour)
    return RENDERERS[output](graph)
