"""What the web page shows, as JSON: pure (no I/O, no Kubernetes), so it is unit-tested from a
recorded Plan, and the server only fetches and sends.

The page builds its DOM from these values with `textContent` and `setAttribute`, never as markup;
on top of that, `to_json` writes `<`, `>` and `&` as `\\u003c`... so that even a response read as
HTML by mistake holds no tag. Every value taken from a Plan (names, step ids, outputs, errors,
prompts: all written by users or by their steps) is passed through `text` first: a string, or
None, whatever type the status held.

The DAG is `cli.graph`'s model (the one `kubectl plan graph` draws): one node per top-level step
with its status, control-step bodies folded; the step records come with it for the details panel
(attempts, output, error), and the waiting `ask` steps with the commands that answer them, as
`kubectl plan describe` shows them.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from planops.api import PlanDocument, names, parse_document
from planops.cli import graph

#: The annotations the operator puts on a child Plan (kube.manifests.child_plan)
PARENT = names.LABEL_PARENT
STEP_ID = names.ANNOTATION_STEP_ID


def text(value: Any) -> str | None:
    """A value of the status as text for the page (None stays None; anything else is str)."""
    if value is None:
        return None
    return value if isinstance(value, str) else json.dumps(value)


def to_json(obj: Any) -> str:
    """JSON with `<`, `>`, `&` escaped: harmless however a browser came to read it."""
    out = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    return out.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def host_allowed(host: str | None, port: int) -> bool:
    """A request's Host header names this server on loopback: `127.0.0.1:PORT` or
    `localhost:PORT`. Anything else (a DNS name rebound to 127.0.0.1 by an attacker's page, no
    Host at all, another port) is refused: the page reads the user's cluster with their own
    credentials, so only pages the user opened from this address may read it."""
    if not host:
        return False
    return host.lower() in (f"127.0.0.1:{port}", f"localhost:{port}")


def _meta(plan: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = plan.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _status(plan: Mapping[str, Any]) -> Mapping[str, Any]:
    st = plan.get("status")
    return st if isinstance(st, Mapping) else {}


def parent_of(plan: Mapping[str, Any]) -> dict[str, str | None] | None:
    """The Plan and step that spawned this one (a capsule step's child Plan), or None."""
    ann = _meta(plan).get("annotations")
    if not isinstance(ann, Mapping) or not isinstance(ann.get(PARENT), str):
        return None
    return {"name": ann[PARENT], "step": text(ann.get(STEP_ID))}


def row(plan: Mapping[str, Any]) -> dict[str, Any]:
    """A line of the list of Plans (what `kubectl plan get` shows)."""
    meta, st = _meta(plan), _status(plan)
    return {
        "name": text(meta.get("name")),
        "phase": text(st.get("phase")) or "Pending",
        "progress": text(st.get("progress")),
        "failedStep": text(st.get("failedStep")),
        "duration": text(st.get("duration")),
        "created": text(meta.get("creationTimestamp")),
        "parent": parent_of(plan),
    }


def plan_list(namespace: str, plans: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    rows = sorted((row(p) for p in plans), key=lambda r: str(r["created"] or ""), reverse=True)
    return {"namespace": namespace, "items": rows}


def answer_commands(namespace: str, plan: str, ask: Mapping[str, Any]) -> dict[str, Any]:
    """The commands that answer a waiting ask step (as `kubectl plan describe` prints them),
    each word shell-quoted: a step id or field name is the user's text."""
    schema = ask.get("outputSchema")
    props = schema.get("properties") if isinstance(schema, Mapping) else None
    fields = [str(k) for k in props] if isinstance(props, Mapping) else []
    base = ["kubectl", "plan", "answer", plan, str(ask.get("stepId")), "-n", namespace]
    sets = [a for f in fields for a in ("--set", f"{f}=VALUE")] or ["--set", "KEY=VALUE"]
    return {
        "stepId": text(ask.get("stepId")),
        "prompt": text(ask.get("prompt")),
        "fields": fields,
        "since": text(ask.get("since")),
        "deadline": text(ask.get("deadline")),
        "whenUnanswered": text(ask.get("whenUnanswered")) or "fail",
        "rejected": text(ask.get("rejected")),
        "answer": shlex.join([*base, *sets]),
        "decline": shlex.join([*base, "--decline"]),
    }


def _node(node: graph.Node, after: Mapping[str, tuple[str, ...]]) -> dict[str, Any]:
    body = node.body
    return {
        "id": node.id,
        "kind": node.kind,
        "what": node.what,
        "deps": list(node.deps),
        # a finally step: drawn after the main steps (`after`: the edges that say so)
        "final": node.final,
        "after": list(after.get(node.id, ())),
        "status": node.status or "pending",
        "attempts": node.attempts,
        "detail": node.detail,
        "body": None
        if body is None
        else {
            "steps": {k: list(v) for k, v in body.steps.items()},
            "items": body.items,
            "counts": dict(body.counts),
            "branch": body.branch,
        },
    }


def _record(rec: Mapping[str, Any]) -> dict[str, Any]:
    attempts = rec.get("attempts")
    return {
        **{k: text(rec.get(k)) for k in ("stepId", "status", "startedAt", "finishedAt")},
        "attempts": attempts if isinstance(attempts, int) else 0,
        **{k: text(rec.get(k)) for k in ("output", "error", "stderr")},
    }


def run_list(plan: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The Plan's runs, newest first: its current run, then the earlier runs its status keeps
    (status.history), each with its phase, finish and failed step."""
    st = _status(plan)
    run = st.get("run") if isinstance(st.get("run"), Mapping) else {}
    history = st.get("history") if isinstance(st.get("history"), list) else []
    entries: list[tuple[Mapping[str, Any], bool]] = (
        [({**st, **(run or {})}, True)] if text((run or {}).get("id")) else []
    )
    entries += [(e, False) for e in history or [] if isinstance(e, Mapping) and text(e.get("id"))]
    return [
        {
            **{k: text(e.get(k)) for k in ("id", "phase", "finishedAt", "failedStep")},
            "current": current,
        }
        for e, current in entries
    ]


def plan_view(
    namespace: str,
    plan: Mapping[str, Any],
    children: Sequence[Mapping[str, Any]],
    earlier: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """One Plan for the page: its DAG with the status over it, every step record, the
    attempts in flight or refused, the waiting questions, its child Plans and its runs. With
    `earlier` (the Plan with an earlier run's status: cli.plan_report.run_report), that run
    is shown instead of the current one, and `runs` still lists them all."""
    runs = run_list(plan)
    plan = earlier if earlier is not None else plan
    meta, st = _meta(plan), _status(plan)
    name = str(meta.get("name") or "")
    doc, problems = parse_document(dict(plan))
    unreadable = None
    nodes: list[dict[str, Any]] = []
    if isinstance(doc, PlanDocument):
        drawn = graph.with_status(graph.from_spec(name, doc.spec), st)
        after = graph.runs_after(drawn)
        nodes = [_node(n, after) for n in drawn.nodes]
    else:
        unreadable = "; ".join(f"{p.path}: {p.message}" for p in problems[:3]) or "not a Plan"
    report = st.get("report") if isinstance(st.get("report"), Mapping) else {}
    records = [r for r in (report or {}).get("steps") or [] if isinstance(r, Mapping)]
    conds = st.get("conditions") if isinstance(st.get("conditions"), list) else []
    cond = conds[0] if conds and isinstance(conds[0], Mapping) else {}
    run = st.get("run") if isinstance(st.get("run"), Mapping) else {}
    return {
        "namespace": namespace,
        "name": name,
        "phase": text(st.get("phase")) or "Pending",
        "progress": text(st.get("progress")),
        "duration": text(st.get("duration")),
        "startedAt": text(st.get("startedAt")),
        "finishedAt": text(st.get("finishedAt")),
        "failedStep": text(st.get("failedStep")),
        "run": text((run or {}).get("id")),
        "reason": text(cond.get("reason")),
        # an earlier run that keeps only its summary says why it shows no records
        "message": " ".join(
            filter(None, (text(cond.get("message")), text(st.get("recordsDropped"))))
        ),
        "errors": [
            {k: text(e.get(k)) for k in ("code", "step", "path", "message")}
            for e in st.get("errors") or []
            if isinstance(e, Mapping)
        ],
        "unreadable": unreadable,
        "parent": parent_of(plan),
        "nodes": nodes,
        "records": [_record(r) for r in records],
        "inFlight": [
            {"stepId": text(f.get("stepId")), "attempt": text(f.get("attempt"))}
            for f in st.get("inFlight") or []
            if isinstance(f, Mapping)
        ],
        "refused": [
            {k: text(f.get(k)) for k in ("stepId", "attempt", "error")}
            for f in st.get("refusedAttempts") or []
            if isinstance(f, Mapping)
        ],
        "asks": [
            answer_commands(namespace, name, a)
            for a in st.get("asks") or []
            if isinstance(a, Mapping)
        ],
        "children": [
            {**row(c), "step": (parent_of(c) or {}).get("step")}
            for c in children
            if (parent_of(c) or {}).get("name") == name
        ],
        "runs": runs,
        "earlier": earlier is not None,
        # the cluster gave these outputs with their stderr (reconciler.run.step_logs)
        "stderrInOutput": (report or {}).get("stderrInOutput") is True,
    }
