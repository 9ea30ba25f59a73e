"""The Plan spec's schema: its steps, their kinds and fields, with the text `kubectl explain` shows.

The same schema is a Plan's spec and a Capsule's `plan` template (api/capsule_schema.py), and a
ScheduledPlan's template (api/crd.py).
"""

from __future__ import annotations

from planops.api.models import (
    HISTORY_LIMIT,
    HISTORY_LIMIT_MAX,
    NEEDS_A_MODEL,
    POD_GC_POLICIES,
    STEP_KINDS,
    PlanSpec,
    RetryBackoff,
    Step,
)
from planops.api.schema_parts import Schema, array, bounds, integer, obj, resources, text

#: a Plan's spec as stored JSON: its status (planops.reconciler.run.status) shares the one object
SPEC_BUDGET = 768 << 10
#: literal steps: as many of the smallest steps (~26 bytes) as SPEC_BUDGET holds
MAX_STEPS = 30_000
#: finally steps are cleanup and reporting: a few (the bound keeps the CRD's CEL cost small)
MAX_FINALLY_STEPS = 100
MAX_DEPENDS_ON = 256

#: accepted by the schema so the validator can refuse them with the seed's code and a reason
REFUSED_KINDS = {k: "needs a language model: use a capsule step" for k in NEEDS_A_MODEL}

#: a body (then / else / do): a single call {tool|shell|capsule|ask|filter|exit, input, ...}
#: or a list of steps with ids, run in order
_BODY = (
    "a single call (a step without id: {tool: x, input: ...} or {shell: ...}) or a list of "
    "steps with ids, run in order; bodies may not contain decide, map or reduce"
)
CONTROL_KINDS = {
    "decide": "Seed 2: fork: {if: gate, then: body, else?: body}. Result {branch, verdict, "
    f"reason, result}}. A body is {_BODY}; exit is allowed in branches.",
    "map": "Seed 2: run a body per item: {over: template rendering to an array, do: body, "
    "concurrency?: max items in flight (default 1)}; {{item}}, {{index}}, {{length}} in the "
    f"body. Result {{count, results}} in input order. A body is {_BODY}.",
    "reduce": "Seed 2: fold a list: {over, do: body, initial?}; {{accumulator}} starts at "
    "initial (default null) and becomes each item's result. Result {count, result}.",
    "ask": "Seed 2: ask a person: {prompt, outputSchema: object of string/number/integer/"
    "boolean/enum fields, whenUnanswered?: fail|default, default?}. Answer with kubectl plan "
    "answer PLAN STEP --set k=v; past the step's timeout whenUnanswered applies. Result "
    "{answer, answered, reason?}.",
}


def step_schema() -> Schema:
    """A step's schema. It sets no `default`: the API server would store each default in
    every step (29 bytes a step for onError and retries, half the spec of a 20,000-step plan
    of short shell steps), and the models apply the same defaults when a spec is read."""
    one_kind = " + ".join(f"(has(self.{k}) ? 1 : 0)" for k in STEP_KINDS) + " == 1"
    return obj(
        "One step. Exactly one kind: tool, shell, capsule, or a control step (exit, filter, "
        "decide, map, reduce, ask).",
        {
            "id": text(
                "Unique within the plan; other steps name it in dependsOn and in "
                "$<id>.output / $<id>.status references. Letters, digits, _ and -.",
                **bounds(Step, "id"),
            ),
            "tool": text(
                "A tool of the Capsule's inventory (spec.tools of the Capsule). The tool "
                "receives the step's input as JSON. Tool steps of one plan run one at a time.",
                **bounds(Step, "tool"),
            ),
            "shell": text(
                "A command line, split into words (POSIX shell quoting rules) but never given "
                "to a shell. Its first word must be in the Capsule's shell.allow; a pipeline "
                "belongs in a tool (an interpreter such as sh in shell.allow allows anything).",
                **bounds(Step, "shell"),
            ),
            "capsule": text(
                "A Capsule in the plan's Capsule's spawn.allow; its plan runs as a child "
                "Plan given this step's task text as input.objective; the child's output (as "
                "JSON text), or else its last step's output, becomes this step's.",
                **bounds(Step, "capsule"),
            ),
            "input": {
                "description": "Handed to the step: a tool step gets it as JSON (env "
                "PLANOPS_INPUT); "
                "a capsule step's input is its task text, a string or {objective: <text>}; a shell "
                "step ignores it. A string that is exactly $<id>.output or $<id>.status, at any "
                "depth, is replaced by that step's result when this step is dispatched.",
                "x-kubernetes-preserve-unknown-fields": True,
            },
            "exit": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "description": "Seed 2: end the plan early: {when?: gate, status: success|"
                "error, message?, output?}. Evaluated by planops (no Job).",
            },
            "filter": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "description": "Seed 2: partition a list: {over: template, where: gate with "
                "{{item}} and {{index}}}. Evaluated by planops (no Job).",
            },
            **{
                k: {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "description": why,
                }
                for k, why in CONTROL_KINDS.items()
            },
            **{
                k: {
                    "type": "object",
                    "x-kubernetes-preserve-unknown-fields": True,
                    "description": f"Seed 2 {k}: refused ({why}).",
                }
                for k, why in REFUSED_KINDS.items()
            },
            "dependsOn": array(
                "Steps that must settle (succeed, fail or be skipped) before this one "
                "is dispatched. Omitted: the step is ready immediately.",
                {"type": "string", "maxLength": 63},
                maxItems=MAX_DEPENDS_ON,
            ),
            "if": text(
                "A condition over references, the plan's input ($input.NAME) and quoted "
                "literals: == != > < (text comparison), && (binds tighter) and ||, e.g. "
                "\"$test.status == 'failed' || $input.env == 'prod'\". Never rendered: no "
                "{{...}} (use a decide step). False settles the step skipped without running it.",
                **bounds(Step, "if"),
            ),
            "onError": text(
                "What a failed step (after its retries) does to the plan: fail (settles "
                "failed, stops the plan), skip (settles skipped, continues), continue "
                "(settles failed, continues). Default: fail.",
                enum=["fail", "skip", "continue"],
            ),
            "retries": integer(
                "Extra dispatches after a failure: retries: 2 runs the step up to three "
                "times. Each attempt is its own Job. Default: 0.",
                **bounds(Step, "retries"),
            ),
            "retryBackoff": retry_backoff(
                "The pause before each retry: attempt n+1 starts duration x factor^(n-1) after "
                "attempt n failed, at most maxDuration. Default: the Capsule's, else none."
            ),
            "timeoutSeconds": integer(
                "Deadline of each attempt (the Job's activeDeadlineSeconds). Default: "
                "the Capsule's defaultTimeoutSeconds.",
                **bounds(Step, "timeoutSeconds"),
            ),
            "image": text(
                "Container image of a shell step; must match the Capsule's images. Default: "
                "the Capsule's image.",
                **bounds(Step, "image"),
            ),
            "resources": resources(
                "Requests and limits of the step's container. Default: the "
                "Capsule's resources; bounded by its maxResources."
            ),
        },
        required=["id"],
        **{
            "x-kubernetes-validations": [
                {
                    "rule": one_kind,
                    "message": "a step declares exactly one of tool, shell, capsule, exit, filter, "
                    "decide, map, reduce, ask",
                }
            ]
        },
    )


def plan_spec_schema(description: str) -> Schema:
    return obj(
        description,
        {
            "capsule": text(
                "The Capsule (policy and inventory) this plan runs under, in the plan's "
                "namespace. Default: default. No such Capsule: the plan is Invalid.",
                **bounds(PlanSpec, "capsule"),
            ),
            "parallelism": integer(
                "The most steps in flight at once. Default: no cap.",
                **bounds(PlanSpec, "parallelism"),
            ),
            "workspace": obj(
                "One volume shared by every step of a run, mounted at /workspace, "
                "the working directory of shell steps (tools start in a private one).",
                {
                    "size": text("Size of a new claim made for the run (1Gi)."),
                    "storageClassName": text("Storage class of that claim."),
                    "claimName": text("Use this existing PersistentVolumeClaim instead."),
                },
            ),
            "inputSchema": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "description": "JSON Schema (Draft 2020-12) the input must satisfy before any step "
                "runs (seed 2); every violation is reported with its path.",
            },
            "input": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "description": "Values for {{input.*}} templates in steps and output.",
            },
            "output": {
                "type": "object",
                "x-kubernetes-preserve-unknown-fields": True,
                "description": "A template map rendered into the report's output (status.report."
                "output) once every step settled, e.g. {count: '{{list.json.count}}'}.",
            },
            "activeDeadlineSeconds": integer(
                "The longest the main steps may run, in seconds from the run's start: past it, "
                "those running are stopped, the finally steps run (within "
                "finallyTimeoutSeconds) and the plan fails (condition reason DeadlineExceeded). "
                "Default: no deadline.",
                **bounds(PlanSpec, "activeDeadlineSeconds"),
            ),
            "finallyTimeoutSeconds": integer(
                "The finally steps' budget, in seconds from the moment the main steps were "
                "over or stopped (a failure, an exit, activeDeadlineSeconds, a cancel with "
                "--run-finally): each attempt's deadline is its end, and past it those running "
                "are stopped and the plan fails (reason DeadlineExceeded). Default: 600.",
                **bounds(PlanSpec, "finallyTimeoutSeconds"),
            ),
            "historyLimit": integer(
                "Earlier runs kept in status.history, newest first, each with its PlanReports "
                "(kubectl plan get NAME --run ID shows one): a re-run or a new generation "
                "makes the run it replaces the first entry, and an entry past the limit is "
                "deleted with its PlanReports (while the archive is on, only once archived). "
                f"Default {HISTORY_LIMIT}; 0 keeps none.",
                **bounds(PlanSpec, "historyLimit"),
            ),
            "ttlSecondsAfterFinished": integer(
                "Delete the Plan (with its Jobs, pods and PlanReports) this many seconds after "
                "its run finished, Succeeded or Failed (not Invalid). With the archive on, not "
                "before the run is archived. Ignored on a capsule step's child Plan (it goes with "
                "its parent). Default: the operator's --ttl-seconds-after-finished (none).",
                **bounds(PlanSpec, "ttlSecondsAfterFinished"),
            ),
            "podGC": text(
                "When the steps' Jobs and their pods are deleted: OnStepCompletion (as each "
                "step settles), OnPlanCompletion (once the run finished), OnPlanSuccess (once it "
                "succeeded; a failed run keeps them), Never (the default). The report and each "
                "step's recorded output stay (kubectl plan get / logs).",
                enum=list(POD_GC_POLICIES),
            ),
            "steps": array(
                "The steps. An empty list is a plan that completes having done nothing.",
                step_schema(),
                maxItems=MAX_STEPS,
            ),
            "finally": array(
                "Steps that run once the main steps are over, whatever their outcome (after a "
                "failure, an exit or activeDeadlineSeconds too; after kubectl plan cancel only "
                "with --run-finally), within finallyTimeoutSeconds. They read "
                "every step's $id.status/$id.output and the main steps' outcome as $plan.status "
                "(success or failed); dependsOn may name other finally steps. They follow the main "
                "steps in the report, and fail the plan only when one fails with onError: fail.",
                step_schema(),
                maxItems=MAX_FINALLY_STEPS,
            ),
        },
        required=["steps"],
    )


def retry_backoff(description: str) -> Schema:
    duration = {
        "x-kubernetes-int-or-string": True,
        "anyOf": [{"type": "integer"}, {"type": "string"}],
    }
    return obj(
        description,
        {
            "duration": {**duration, "description": "The first pause: 10s, 1m30s, 500ms."},
            "factor": {
                "type": "number",
                **bounds(RetryBackoff, "factor"),
                "description": "Each further pause is the previous one times this. Default 2.",
            },
            "maxDuration": {**duration, "description": "The longest pause. Default: none."},
        },
        required=["duration"],
    )


#: status.history's entries at most: historyLimit's bound twice (runs waiting for the archive)
HISTORY_ENTRIES_MAX = 2 * HISTORY_LIMIT_MAX


def plan_status_schema(*, history: bool = False) -> Schema:
    """The status written by the operator; a Plan's with its `history` described."""
    return {
        "type": "object",
        "description": "The run's report, written by the operator.",
        "x-kubernetes-preserve-unknown-fields": True,
        **({"properties": {"history": history_schema()}} if history else {}),
    }


def history_schema() -> Schema:
    """status.history, described for `kubectl explain plan.status.history`."""
    return array(
        "Earlier runs of this Plan, newest first (spec.historyLimit bounds them). A re-run or a "
        "new generation adds the run it replaces; each run's records stay in its PlanReports "
        "(label planops.dev/run=<id>): kubectl plan get NAME --run ID.",
        obj(
            "One earlier run as it ended.",
            {
                "id": text("The run id (its PlanReports' planops.dev/run label)."),
                "generation": integer("The Plan generation the run ran."),
                "rerun": text("The re-run annotation's value that started it, if any."),
                "capsule": text("The Capsule it ran under (as it started)."),
                "phase": text("Succeeded or Failed (a run replaced while running: Failed)."),
                "reason": text(
                    "Why it ended: the Succeeded condition's reason (Replaced: a new run "
                    "stopped it before it ended)."
                ),
                "message": text("The Succeeded condition's message."),
                "startedAt": text("When it started (RFC 3339)."),
                "finishedAt": text("When it ended, or was stopped (RFC 3339)."),
                "failedStep": text("The step that failed the run, if any."),
                "completed": {"type": "boolean", "description": "Every step settled as it should."},
                "counts": obj(
                    "Settled records by outcome.",
                    {
                        "success": integer("Records of steps that succeeded."),
                        "failed": integer("Records of steps that failed."),
                        "skipped": integer("Records of steps skipped."),
                    },
                ),
                "records": integer("Records the run settled (all in its PlanReports)."),
                "reportObjects": integer("Its PlanReport objects."),
                "reportBytes": integer(
                    "Bytes of its PlanReport objects (as JSON) when it was last counted."
                ),
                "recordsKept": {
                    "type": "boolean",
                    "description": "False once its PlanReports were deleted to keep the earlier "
                    "runs' PlanReports of this Plan within the history byte budget (16 MiB, "
                    "newest first; never before the archive, when on, has the run): its summary "
                    "stays, --run shows no records.",
                },
                "archived": {
                    "type": "boolean",
                    "description": "Written to the archive (PostgreSQL), when it is on.",
                },
            },
            required=["id"],
            **{"x-kubernetes-preserve-unknown-fields": True},
        ),
        maxItems=HISTORY_ENTRIES_MAX,
    )
