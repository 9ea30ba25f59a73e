"""docs/reference.md, generated from the CRD schemas (planops.api.crd), so the reference can never
miss a field or describe one that does not exist: `python -m planops.reference`.

Each field gets its path, type, the seed it comes from, and its description (the same text
`kubectl explain` shows); the plan language's fields also get an example. A field added to the
CRD without a seed or an example here fails the generator (and tests/unit/test_reference_doc.py).

Outside planops.api because its limits section quotes the engine's (a run's budgets): the plan
language's package imports nothing of the engine. No runtime code imports it (import-linter).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from planops.api import crd, limits, names
from planops.api.limits import HISTORY_ENTRIES_MAX
from planops.engine import budget
from planops.engine.bodies import MAX_RECORDS

Schema = dict[str, Any]

#: where each plan-language field comes from: seed 1 ("Plans"), seed 2 ("Plan file schema"),
#: or planops (Kubernetes needs it)
SEED: dict[str, str] = {
    "capsule": "planops",
    "parallelism": "planops",
    "activeDeadlineSeconds": "planops",
    "finallyTimeoutSeconds": "planops",
    "historyLimit": "planops",
    "ttlSecondsAfterFinished": "planops",
    "podGC": "planops",
    "templateRef": "2 (templates)",
    "workspace": "1 (workdir)",
    "inputSchema": "2",
    "input": "2",
    "output": "2",
    "steps": "1",
    "finally": "planops",
    "steps[].id": "1",
    "steps[].tool": "1",
    "steps[].shell": "1",
    "steps[].capsule": "1",
    "steps[].script": "planops",
    "steps[].interpreter": "planops",
    "steps[].env": "planops",
    "steps[].volumeMounts": "planops",
    "steps[].input": "1",
    "steps[].exit": "2",
    "steps[].filter": "2",
    "steps[].decide": "2",
    "steps[].map": "2",
    "steps[].reduce": "2",
    "steps[].ask": "2",
    "steps[].agent": "2 (refused)",
    "steps[].infer": "2 (refused)",
    "steps[].dependsOn": "1",
    "steps[].if": "1",
    "steps[].onError": "1",
    "steps[].retries": "1",
    "steps[].retryBackoff": "planops",
    "steps[].timeoutSeconds": "planops",
    "steps[].image": "planops",
    "steps[].resources": "planops",
    "steps[].results": "planops (Tekton's results)",
    "steps[].outputs": "planops (Argo's outputs.artifacts)",
    "steps[].inputs": "planops (Argo's inputs.artifacts)",
}
EXAMPLE: dict[str, Any] = {
    "capsule": "default",
    "parallelism": 10,
    "activeDeadlineSeconds": 3600,
    "finallyTimeoutSeconds": 300,
    "historyLimit": 10,
    "ttlSecondsAfterFinished": 86400,
    "podGC": "OnPlanSuccess",
    "templateRef": {"kind": "ClusterPlanTemplate", "name": "build-and-test"},
    "workspace": {"size": "1Gi"},
    "inputSchema": {
        "type": "object",
        "required": ["env"],
        "properties": {"env": {"enum": ["dev", "prod"]}},
    },
    "input": {"env": "dev"},
    "output": {"count": "{{scan.count}}"},
    "steps": [{"id": "hello", "shell": "echo hello"}],
    "finally": [{"id": "notify", "tool": "notes", "input": {"outcome": "$plan.status"}}],
    "steps[].id": "build",
    "steps[].tool": "repo-files",
    "steps[].shell": "make test",
    "steps[].capsule": "release",
    "steps[].script": "set -eu\nmake test 2>&1 | tee test.log\n",
    "steps[].interpreter": "bash",
    "steps[].env": [
        {"name": "TARGET", "value": "{{input.env}}"},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "ci", "key": "token"}}},
    ],
    "steps[].volumeMounts": [{"name": "cache", "mountPath": "/cache"}],
    "steps[].input": {"path": "$list.output", "env": "{{input.env}}"},
    "steps[].exit": {
        "when": {"value": "{{input.dry}}", "op": "eq", "to": True},
        "status": "success",
    },
    "steps[].filter": {
        "over": "{{input.hosts}}",
        "where": {"value": "{{item}}", "op": "ne", "to": "db"},
    },
    "steps[].decide": {
        "if": {"value": "{{input.env}}", "op": "eq", "to": "prod"},
        "then": {"shell": "echo prod"},
    },
    "steps[].map": {
        "over": "{{live.items}}",
        "concurrency": 2,
        "do": {"shell": "ping -c1 {{item}}"},
    },
    "steps[].reduce": {
        "over": "{{scan.results}}",
        "initial": 0,
        "do": {"tool": "add", "input": {"a": "{{accumulator}}", "b": "{{item}}"}},
    },
    "steps[].ask": {
        "prompt": "Deploy?",
        "outputSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
    },
    "steps[].agent": {"prompt": "(refused: use a capsule step)"},
    "steps[].infer": "(refused: use a capsule step)",
    "steps[].dependsOn": ["build"],
    "steps[].if": "$test.status == 'failed'",
    "steps[].onError": "continue",
    "steps[].retries": 2,
    "steps[].retryBackoff": {"duration": "10s", "factor": 2, "maxDuration": "5m"},
    "steps[].timeoutSeconds": 600,
    "steps[].image": "registry.example/tools:1.4",
    "steps[].resources": {"limits": {"memory": "512Mi"}},
    "steps[].results": [{"name": "version", "description": "the tag built"}],
    "steps[].outputs": {"artifacts": [{"name": "dist", "path": "dist"}]},
    "steps[].inputs": {"artifacts": [{"from": "{{build.artifacts.dist}}", "path": "dist"}]},
}


def _type(s: Schema) -> str:
    if s.get("x-kubernetes-int-or-string"):
        return "integer or string"
    if s.get("x-kubernetes-preserve-unknown-fields") and "properties" not in s:
        return "object (free)" if s.get("type") == "object" else "any"
    t = s.get("type", "any")
    if t == "array":
        return f"list of {_type(s.get('items', {}))}"
    if "enum" in s:
        return " \\| ".join(map(str, s["enum"]))
    return str(t)


def fields(schema: Schema, prefix: str = "") -> list[tuple[str, Schema]]:
    """(path, schema) of every field, depth first, in declaration order."""
    out = []
    for name, sub in (schema.get("properties") or {}).items():
        path = f"{prefix}{name}"
        out.append((path, sub))
        if sub.get("type") == "array" and "properties" in (sub.get("items") or {}):
            out += fields(sub["items"], f"{path}[].")
        elif "properties" in sub:
            out += fields(sub, f"{path}.")
    return out


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def table(schema: Schema, seeds: bool) -> list[str]:
    head = ["| Field | Type | Seed | Example | Description |", "|---|---|---|---|---|"]
    if not seeds:
        head = ["| Field | Type | Description |", "|---|---|---|"]
    rows = []
    for path, sub in fields(schema):
        desc = _cell(sub.get("description", ""))
        if seeds:
            key = path if path in SEED or "." not in path else None
            if key is None:  # a nested field of the plan language (workspace.size, resources...)
                rows.append(f"| `{path}` | {_type(sub)} | | | {desc} |")
                continue
            if path not in SEED or path not in EXAMPLE:
                raise KeyError(
                    f"plan field {path!r} has no seed or example in planops.api.reference"
                )
            example = _cell(json.dumps(EXAMPLE[path]))
            rows.append(f"| `{path}` | {_type(sub)} | {SEED[path]} | `{example}` | {desc} |")
        else:
            rows.append(f"| `{path}` | {_type(sub)} | {desc} |")
    return head + rows


def trigger_section() -> list[str]:
    """PlanTrigger: its spec, and the status the trigger receiver writes (docs/triggers.md)."""
    schema = crd.trigger_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return [
        "## PlanTrigger (`plantriggers.planops.dev`, short name `ptr`): `spec`",
        "",
        "Starts a Plan from a template for each accepted webhook delivery, as the trigger's "
        "author (docs/triggers.md).",
        "",
        *table(schema["properties"]["spec"], seeds=False),
        "",
        "Its `status` (written by the trigger receiver): `accepted`, `filtered`, `refused` "
        "(counts) and `lastAccepted`,",
        "`lastFiltered`, `lastRefused` (`time`, `reason`, `message`, `delivery`, and `plan` for "
        "an accepted one).",
        "",
    ]


#: a template's fields shown in its own table (the rest are a Plan's, in the Plan's)
_TEMPLATE_OWN = ("inputSchema", "input", "output")


def render() -> str:
    plan = crd.plan_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    cap = crd.capsule_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][
        "spec"
    ]
    sched = crd.scheduled_crd(False)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    csched = crd.scheduled_crd(True)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    cap = {**cap, "properties": {k: v for k, v in cap["properties"].items() if k != "plan"}}
    report = crd.plan_report_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    status = crd.plan_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    history = status["status"]["properties"]["history"]["items"]
    template = crd.template_crd(False)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    template = template["properties"]["spec"]
    template = {
        **template,
        "properties": {k: v for k, v in template["properties"].items() if k in _TEMPLATE_OWN},
    }

    def spec_of(s: Schema) -> Schema:
        sp = s["properties"]["spec"]
        return {
            **sp,
            "properties": {k: v for k, v in sp["properties"].items() if k != "planTemplate"},
        }

    lines = [
        "# Reference: every field of the planops resources",
        "",
        "Generated from the CRD schemas by `python -m planops.reference` (a test keeps it",
        "current); the descriptions are what `kubectl explain plan.spec.steps` shows. Seed: the",
        "layer of the language a field comes from (1 = the core: steps, dependsOn, onError,",
        "references, the report; 2 = input schema, templates, control steps, output; planops =",
        "what Kubernetes needs). The language itself, with examples and rules: "
        "[plan-language.md](plan-language.md).",
        "",
        "## Plan (`plans.planops.dev`, short name `pl`): `spec`",
        "",
        *table(plan, seeds=True),
        "",
        "A Capsule's `spec.plan` and a ScheduledPlan's `spec.planTemplate.spec` take the same "
        "fields.",
        "",
        "## Capsule (`capsules.planops.dev`, short name `cap`): `spec`",
        "",
        *table(cap, seeds=False),
        "| `plan` | object | What runs when another plan's capsule step spawns this Capsule: "
        "a Plan `spec`. |",
        "",
        "## ScheduledPlan (`scheduledplans.planops.dev`): `spec`",
        "",
        *table(spec_of(sched), seeds=False),
        "| `planTemplate.metadata` / `planTemplate.spec` | object | Labels/annotations and the "
        "Plan `spec` of each run. |",
        "",
        "## ClusterScheduledPlan (`clusterscheduledplans.planops.dev`, cluster-scoped): `spec`",
        "",
        "Everything a ScheduledPlan has, plus:",
        "",
        *[
            row
            for row in table(spec_of(csched), seeds=False)
            if row.startswith("| `namespaceSelector")
            or row.startswith("| Field")
            or row.startswith("|---")
        ],
        "",
        "## PlanTemplate (`plantemplates.planops.dev`, short name `pt`) and ClusterPlanTemplate "
        "(`clusterplantemplates.planops.dev`, cluster-scoped, `cpt`): `spec`",
        "",
        "A Plan `spec` run by Plans (`spec.templateRef`) and `template` steps under the caller's "
        "Capsule (docs/templates.md); it declares none of the caller's fields:",
        "",
        *table(template, seeds=False),
        "",
        *trigger_section(),
        "## PlanReport (`planreports.planops.dev`, short name `planrep`): written by the operator",
        "",
        "One chunk of a run's report: the Plan's `status.report` is a summary (its last records,",
        "counts, the failed step's record), every record is in its PlanReports, in the order they",
        "settled; a run whose status repeats every record unshortened has none",
        '(`status.report.reportObjects: 0`; docs/operator.md, "Reports"). No spec: these are its',
        "fields. A re-run or a new generation keeps the run it replaces in the Plan's",
        "`status.history` (below), and that run's PlanReports with it; they are deleted when its",
        "entry falls off `spec.historyLimit`.",
        "",
        *table(report, seeds=False),
        "",
        "## Plan `status.history`: written by the operator",
        "",
        "The runs before the Plan's current one (`status.run`), newest first, at most",
        "`spec.historyLimit` (while the archive is on, runs not archived yet stay past it, up to",
        f"{HISTORY_ENTRIES_MAX}). `kubectl plan get|describe NAME --run ID` shows one whole; "
        "`kubectl plan history NAME` lists them.",
        "",
        *table(history, seeds=False),
        "",
        "## Annotations that steer a Plan",
        "",
        "Written by `kubectl plan rerun|retry|cancel|answer`, or by any tool that may update "
        "the Plan. A re-run and a",
        "cancel change nothing the Plan does: they need no `use` on its Capsule (before a "
        "re-run starts on the recorded",
        "author's behalf, the operator asks whether they still may). A retry (it picks what "
        "runs again), a cancel",
        "that runs the finally steps and an answer are author's acts, like a spec change: "
        "they need `use`, and record",
        "their writer as the author.",
        "",
        f"- `{names.ANNOTATION_RERUN}: TOKEN`: a fresh run of the same spec, each time the "
        "value changes (removed too), under",
        "  a new run id (`status.run.serial` counts the runs): a value used before starts a new "
        "run, never an earlier one again.",
        "  A capsule step's child Plan takes no re-run and no retry (a `RerunRefused` event): "
        "re-run or retry its parent.",
        f'- `{names.ANNOTATION_RETRY}: "TOKEN[:from=STEP]"`: a new run that keeps what '
        "the last run's succeeded steps recorded",
        "  and runs again what failed, what that stopped and what never ran (with `from`, STEP "
        "and what depends on it",
        "  too); once per token, after the run under way ended. `status.run.retry`, "
        "`retryOf` and `retryFrom` say",
        '  which retry a run is (docs/runs.md, "Retry from the failure").',
        f"- `{names.ANNOTATION_CANCEL}: REASON`: stop the run; what runs is stopped (finally "
        "steps too), the plan ends Failed",
        "  (Cancelled).",
        f"- `{names.ANNOTATION_CANCEL_RUN_FINALLY}: REASON`: stop the main steps, then run the "
        "finally steps (within",
        "  `spec.finallyTimeoutSeconds`); the plan ends Failed (Cancelled). A plain cancel "
        "written too wins.",
        f"- `{names.ANNOTATION_ANSWER_PREFIX}STEP: JSON`: the answer to a waiting ask step "
        "(docs/cli.md, `answer`): it names the run",
        "  and the question (`status.asks[].question`, written when the step asks), and answers "
        "that one question only.",
        "",
        "## Limits",
        "",
        f"- A Plan has at most {limits.MAX_STEPS:,} literal steps (`spec.steps` maxItems), and its "
        f"`spec` takes at most {limits.SPEC_BUDGET >> 10} KiB",
        "  as stored JSON: the status shares the object, and etcd stores at most 1.5 MiB.",
        f"- A run records at most {MAX_RECORDS:,} steps, body steps included, and writes at most "
        f"{budget.RUN_REPORT_BYTES >> 20} MiB of PlanReports, which comes first for small "
        "records (a `map` of one-step bodies fails at about 48,800 items: below).",
        f"- A run keeps at most {budget.RUN_TEXT_BUDGET >> 20} MiB of record text (outputs, "
        "stderr, errors and the results the operator computes: filter, map, reduce...), body",
        f"  steps included, and one record at most {budget.RECORD_TEXT_LIMIT >> 20} MiB (its "
        f"error first, at most {budget.ERROR_TEXT_LIMIT >> 10} KiB); a record is cut as it "
        "settles, and what later steps see",
        "  of it is the cut text: its head and its tail around `[planops: K of N bytes cut "
        "here (the run's result budget)]`. Once the",
        "  run's budget is spent a record keeps only that mark. `status.report.cut` (and "
        "`cut` in `run --local -o json`)",
        "  counts every record whose text was cut (by this budget, the Capsule's "
        "outputLimitBytes or its share of the report)",
        "  and the bytes it had in full.",
        f"- A run writes at most {budget.RUN_REPORT_BYTES >> 20} MiB of PlanReports: its "
        f"{budget.RUN_TEXT_BUDGET >> 20} MiB of record text, and "
        f"{budget.RUN_FRAME_BUDGET >> 20} MiB for the rest of its records",
        "  (id, status, attempts, times: about 250 bytes a record, with room for a cut mark and "
        f"an error's first {budget.ERROR_FLOOR} bytes). Once that",
        "  is spent a `map` or `reduce` starts no further item and fails with "
        "`[ReportBytesExceeded]` (a `map` over about 48,000",
        "  items whose body runs no Job, one body step each).",
        f"- One decide starts at most {budget.ITEMS_PER_DECIDE} body items (more once a run "
        "was restored from many records: an eighth of them);",
        "  the rest follow at once, in the next reconcile, so a long map never holds the "
        "operator for its whole length.",
        "- A control step's first 20 body steps get an Event each; past them one "
        "`BodyStepsSettled` Event per 500 body",
        "  records sums them up, and a whole run's body steps get at most 200 Events of "
        "their own (every step keeps",
        "  its line in the operator's log).",
        "- A check of a JSON Schema made while a plan runs (a tool's input at dispatch, an "
        "answer to an",
        "  ask) takes at most 10,000 evaluation steps (`engine.jsonschemas.RUN_STEPS`, counted "
        "the same by",
        "  every executor), and a tool's input is at most 131,057 bytes as JSON (Linux refuses "
        "a longer",
        "  `PLANOPS_INPUT`): past either the attempt is `call denied`, the answer rejected",
        "  ([plan language](plan-language.md#a-tools-input-its-inputschema)).",
        "- `kubectl-plan validate` and `run --local` take plans of any size.",
        "",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    if any(arg.startswith("-") for arg in sys.argv[1:]) or len(sys.argv) > 2:
        # an option is never a file: `--help` once left a file named --help behind
        sys.exit("usage: python -m planops.reference [FILE] (default: docs/reference.md)")
    out = Path(sys.argv[1] if len(sys.argv) > 1 else "docs/reference.md")
    out.write_text(render())
    print(out)
