"""The model of `kubectl plan graph`: a plan's DAG as data. Pure: no I/O, no Kubernetes.

One `Node` per top-level step, in declaration order, with its dependencies (the edges), its kind
and what it runs, its status when there is one (a cluster Plan's `.status` laid over it), and
for the control steps that carry bodies (decide, map, reduce: `engine.bodies.BODY_KINDS`) the
body *folded* into one `Body`: its steps, how many items (map/reduce) or which branch (decide),
and how the items went. The drawings (planops.cli.graph_text, graph_export) only read it.

Untrusted text: step ids, commands, prompts, outputs and errors come from users and from the
steps themselves; `clean` makes each one line without control or format characters.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from planops.api import names
from planops.api.models import PlanSpec, Step
from planops.engine import plan_templates, step_kind
from planops.engine.bodies import BODY_KINDS, BodyError
from planops.engine.bodies import bodies as body_specs
from planops.engine.bodies import parse as parse_body

#: Statuses a node can show: a settled record's, or what the status says of a step not settled.
SETTLED = ("success", "failed", "skipped")
FINISHED_PHASES = names.ENDED
WHAT_WIDTH = 48


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
    #: a finally step: runs once the main steps are over (drawn after them)
    final: bool = False


@dataclass(frozen=True)
class PlanGraph:
    name: str
    nodes: tuple[Node, ...]
    phase: str | None = None
    progress: str | None = None
    duration: str | None = None
    errors: tuple[str, ...] = ()


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
    if kind in ("shell", "script", "tool", "capsule"):
        return clean(value, WHAT_WIDTH)
    if kind == "template":
        ref = plan_templates.template_of(step)
        return clean(ref if isinstance(ref, str) else ref.label(), WHAT_WIDTH)
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
    main = {s.id for s in spec.steps}
    for final, steps in ((False, spec.steps), (True, spec.finally_)):
        for step in steps:
            kind = step_kind(step)
            deps = [d for d in step.depends_on if not (final and d in main)]  # always true
            nodes.append(
                Node(
                    step.id,
                    kind,
                    _what(step, kind),
                    tuple(dict.fromkeys(deps)),
                    body=_body(step, kind, spec),
                    final=final,
                )
            )
    return PlanGraph(name, tuple(nodes))


def runs_after(graph: PlanGraph) -> dict[str, tuple[str, ...]]:
    """The finally steps that wait for no other finally step, each with the main steps no main
    step waits for: the edges that draw "once the main steps are over"."""
    main = [n for n in graph.nodes if not n.final]
    waited = {d for n in main for d in n.deps}
    last = tuple(n.id for n in main if n.id not in waited)
    return {n.id: last for n in graph.nodes if n.final and not n.deps}


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
    """The graph with a cluster Plan's `.status` over it (reconciler/run/status.py shapes it): each
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
    algorithm cannot order: those on or after a dependency cycle (a Plan the cluster refused).
    Finally steps come in levels of their own after the main steps' (each row is one or the
    other)."""
    main, stuck = _levels([n for n in graph.nodes if not n.final])
    final, stuck_final = _levels([n for n in graph.nodes if n.final])
    return main + final, stuck + stuck_final


def _levels(nodes: list[Node]) -> tuple[list[list[Node]], list[Node]]:
    index = {n.id: i for i, n in reversed(list(enumerate(nodes)))}
    deps = [[index[d] for d in n.deps if d in index] for n in nodes]
    dependents: list[list[int]] = [[] for _ in nodes]
    for i, row in enumerate(deps):
        for d in row:
            dependents[d].append(i)
    remaining = [len(row) for row in deps]
    level = [0] * len(nodes)
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
        out[level[i]].append(nodes[i])
    return out, [nodes[i] for i in range(len(nodes)) if i not in placed]
