"""The CustomResourceDefinitions of planops, as data: `python -m planops.api.crd [DIR...]` writes
crds/*.yaml and the Helm chart's copy (tests/unit/test_crds.py keeps both current).

The spec schemas are made from the pydantic models (planops.api.structural): the models are the
one source of every field, bound and `kubectl explain` text, so the Plan spec that appears three
times (a Plan's spec, a Capsule's `plan` template, a ScheduledPlan's `planTemplate.spec`) is
written once. Here: what only a CRD has (names, short names, printer columns, the status
subresource, scope) and the status schemas, written by the operator and described for `kubectl
explain` (until the status has a model of its own).

The API server enforces the cheap structural rules (types, enums, patterns, bounds, exactly one
step kind via CEL); the validator (planops.engine) judges the rest with the seed's codes. No
runtime code imports this module (import-linter): what the runtime counts with is api.limits.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from planops.api import names, structural
from planops.api.capsule_models import CapsuleSpec
from planops.api.limits import HISTORY_ENTRIES_MAX
from planops.api.models import PlanSpec
from planops.api.schedule_models import ClusterScheduledPlanSpec, ScheduledPlanSpec
from planops.api.structural import Schema
from planops.api.template_models import CALLERS_ONLY, PlanTemplateSpec
from planops.api.trigger_models import PlanTriggerSpec

Column = dict[str, Any]


def _crd(
    kind: str,
    short: list[str],
    schema: Schema,
    columns: list[Column],
    *,
    status: bool = True,
    cluster: bool = False,
) -> dict[str, Any]:
    plural = kind.lower() + "s"
    version: dict[str, Any] = {
        "name": names.VERSION,
        "served": True,
        "storage": True,
        "schema": {"openAPIV3Schema": schema},
        "additionalPrinterColumns": columns,
    }
    if status:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{names.GROUP}"},
        "spec": {
            "group": names.GROUP,
            "scope": "Cluster" if cluster else "Namespaced",
            "names": {
                "plural": plural,
                "singular": kind.lower(),
                "kind": kind,
                "shortNames": short,
                "categories": ["planops"],
            },
            "versions": [version],
        },
    }


def _object(description: str, spec: Schema, status: Schema | None = None) -> Schema:
    """An object's root schema: its spec (required) and the status the operator writes."""
    props = {"spec": spec, **({"status": status} if status is not None else {})}
    return {"type": "object", "description": description, "properties": props, "required": ["spec"]}


def _column(name: str, kind: str, path: str, description: str = "", **kw: Any) -> Column:
    return {
        "name": name,
        "type": kind,
        "jsonPath": path,
        **({"description": description} if description else {}),
        **kw,
    }


AGE = _column("Age", "date", ".metadata.creationTimestamp")


def plan_crd() -> dict[str, Any]:
    return _crd(
        "Plan",
        ["pl"],
        _object(
            "A Plan: one run of a set of steps. planops validates it, runs each ready step as a "
            "Job, and writes the report to status.",
            structural.schema(PlanSpec),
            status_schema("The run's report, written by the operator.", history=True),
        ),
        [
            _column("Phase", "string", ".status.phase"),
            _column("Steps", "string", ".status.progress", "Steps settled / steps in the plan"),
            _column("Failed", "string", ".status.failedStep", "The step that stopped the plan"),
            _column("Duration", "string", ".status.duration"),
            AGE,
            _column(
                "Waiting",
                "string",
                ".status.queue.message",
                "What a Plan waiting for a slot of its Capsule waits for",
                priority=1,
            ),
        ],
    )


def capsule_crd() -> dict[str, Any]:
    return _crd(
        "Capsule",
        ["cap"],
        _object(
            "A Capsule: the policy and inventory Plans run under (images, binaries, tools, "
            "limits).",
            structural.schema(CapsuleSpec),
        ),
        [_column("Image", "string", ".spec.image"), AGE],
        status=False,
    )


def scheduled_crd(cluster: bool) -> dict[str, Any]:
    """A ScheduledPlan's CRD, or (cluster) a ClusterScheduledPlan's."""
    kind = "ClusterScheduledPlan" if cluster else "ScheduledPlan"
    spec = ClusterScheduledPlanSpec if cluster else ScheduledPlanSpec
    return _crd(
        kind,
        ["cspl"] if cluster else ["spl"],
        _object(
            f"A {kind}: CronJob semantics for Plans.",
            structural.schema(spec),
            status_schema("Schedule history, written by the operator."),
        ),
        [
            _column("Schedule", "string", ".spec.schedule"),
            _column("Suspend", "boolean", ".spec.suspend"),
            _column("Active", "integer", ".status.activeCount"),
            _column("Last Schedule", "date", ".status.lastScheduleTime"),
            _column("Next", "string", ".status.nextScheduleTime"),
            AGE,
        ],
        cluster=cluster,
    )


def trigger_crd() -> dict[str, Any]:
    """A PlanTrigger's CRD: its status is written by the trigger receiver (planops.triggers)."""
    return _crd(
        "PlanTrigger",
        ["ptr"],
        _object(
            "A PlanTrigger: starts a Plan from a template for each accepted webhook delivery.",
            structural.schema(PlanTriggerSpec),
            status_schema("Deliveries accepted and refused, written by the trigger receiver."),
        ),
        [
            _column("Source", "string", ".spec.webhook.type"),
            _column("Template", "string", ".spec.templateRef.name"),
            _column("Suspend", "boolean", ".spec.suspend"),
            _column("Accepted", "integer", ".status.accepted"),
            _column("Refused", "integer", ".status.refused"),
            _column("Last Plan", "string", ".status.lastAccepted.plan"),
            AGE,
            _column(
                "Last Refusal",
                "string",
                ".status.lastRefused.reason",
                "Why the last refused delivery was refused",
                priority=1,
            ),
        ],
    )


def template_crd(cluster: bool) -> dict[str, Any]:
    """A PlanTemplate's CRD, or (cluster) a ClusterPlanTemplate's: a Plan spec without the
    caller's fields (api.template_models)."""
    kind = "ClusterPlanTemplate" if cluster else "PlanTemplate"
    spec = structural.schema(PlanTemplateSpec)
    for own in CALLERS_ONLY:
        spec["properties"].pop(own, None)
    spec["x-kubernetes-validations"] = [
        v for v in spec.get("x-kubernetes-validations", []) if "templateRef" not in v["rule"]
    ] or None
    if spec["x-kubernetes-validations"] is None:
        del spec["x-kubernetes-validations"]
    where = "any namespace's Plans" if cluster else "Plans of its namespace"
    return _crd(
        kind,
        ["cpt"] if cluster else ["pt"],
        _object(
            f"A {kind}: a plan written once with typed input (inputSchema) and an output, run "
            f"by {where} (spec.templateRef, a template step) under the caller's Capsule; it "
            "grants nothing.",
            spec,
        ),
        [
            _column("Generation", "integer", ".metadata.generation"),
            AGE,
        ],
        status=False,
        cluster=cluster,
    )


def _node(kind: str, description: str, **kw: Any) -> Schema:
    return {"type": kind, "description": description, **kw}


def _text(description: str, **kw: Any) -> Schema:
    return _node("string", description, **kw)


def _integer(description: str, **kw: Any) -> Schema:
    return _node("integer", description, **kw)


def _flag(description: str) -> Schema:
    return _node("boolean", description)


def status_schema(description: str, *, history: bool = False) -> Schema:
    """The status written by the operator, its fields kept whatever they are; a Plan's with its
    `history` described (`kubectl explain plan.status.history`)."""
    return {
        "type": "object",
        "description": description,
        "x-kubernetes-preserve-unknown-fields": True,
        **({"properties": {"history": history_schema()}} if history else {}),
    }


def history_schema() -> Schema:
    """status.history, described for `kubectl explain plan.status.history`."""
    entry = {
        "id": _text(f"The run id (its PlanReports' {names.LABEL_RUN} label)."),
        "generation": _integer("The Plan generation the run ran."),
        "rerun": _text("The re-run annotation's value that started it, if any."),
        "capsule": _text("The Capsule it ran under (as it started)."),
        "phase": _text("Succeeded or Failed (a run replaced while running: Failed)."),
        "reason": _text(
            "Why it ended: the Succeeded condition's reason (Replaced: a new run stopped it "
            "before it ended)."
        ),
        "message": _text("The Succeeded condition's message."),
        "startedAt": _text("When it started (RFC 3339)."),
        "finishedAt": _text("When it ended, or was stopped (RFC 3339)."),
        "failedStep": _text("The step that failed the run, if any."),
        "completed": _flag("Every step settled as it should."),
        "counts": _node(
            "object",
            "Settled records by outcome.",
            properties={
                "success": _integer("Records of steps that succeeded."),
                "failed": _integer("Records of steps that failed."),
                "skipped": _integer("Records of steps skipped."),
            },
        ),
        "records": _integer("Records the run settled (all in its PlanReports)."),
        "reportObjects": _integer("Its PlanReport objects."),
        "reportBytes": _integer(
            "Bytes of its PlanReport objects (as JSON) when it was last counted."
        ),
        "recordsKept": _flag(
            "False once its PlanReports were deleted to keep the earlier runs' PlanReports of "
            "this Plan within the history byte budget (16 MiB, newest first; never before the "
            "archive, when on, has the run): its summary stays, --run shows no records."
        ),
        "archived": _flag("Written to the archive (PostgreSQL), when it is on."),
    }
    return _node(
        "array",
        "Earlier runs of this Plan, newest first (spec.historyLimit bounds them). A re-run or a "
        "new generation adds the run it replaces; each run's records stay in its PlanReports "
        f"(label {names.LABEL_RUN}=<id>): kubectl plan get NAME --run ID.",
        items=_node(
            "object",
            "One earlier run as it ended.",
            properties=entry,
            required=["id"],
            **{"x-kubernetes-preserve-unknown-fields": True},
        ),
        maxItems=HISTORY_ENTRIES_MAX,
    )


def plan_report_crd() -> dict[str, Any]:
    """PlanReport: one chunk of a run's report (planops.reconciler.history.chunks). Written by the
    operator only, owned by its Plan, no spec and no status: its records are its data."""
    record = {
        "stepId": _text("The step (a body step: CONTROL.BRANCH-OR-ITEM.STEP, e.g. scan.3.probe)."),
        "status": _text("success, failed or skipped."),
        "output": _text(
            "The step's output, cut to its share of the report (docs/operator.md).", nullable=True
        ),
        "error": _text("Why it failed or was skipped.", nullable=True),
        "stderr": _text(
            "The last lines the step wrote on stderr (at most 4 KiB; never part of its output). "
            "Absent when it wrote none, or when the cluster cannot read a log's streams apart "
            "(docs/operator.md).",
            nullable=True,
        ),
        "results": _node(
            "object",
            "The results the step wrote ($PLANOPS_RESULTS/NAME), by name: present when it "
            "declares results.",
            additionalProperties={"type": "string"},
        ),
        "artifacts": _node(
            "array",
            "The artifacts the step left: present when it declares output artifacts.",
            items=_node(
                "object",
                "One artifact: its name, its key in the repository, its sha256 and size.",
                properties={
                    "name": _text("The artifact's name."),
                    "key": _text("Its object key in the artifact repository."),
                    "sha256": _text("The sha256 of what was stored (a directory: its tar)."),
                    "size": _integer("Bytes stored."),
                    "directory": _flag("A directory, stored as a tar archive."),
                },
            ),
        ),
        "attempts": _integer("Attempts made."),
        "startedAt": _text("RFC 3339.", nullable=True),
        "finishedAt": _text("RFC 3339.", nullable=True),
    }
    schema = _node(
        "object",
        "One chunk of a Plan run's report: settled step records in the order they settled, "
        "written by the operator (the Plan's status keeps a summary). Owned by the Plan.",
        properties={
            "plan": _text("The Plan's name."),
            "run": _text("The run (the Plan's status.run.id)."),
            "chunk": _integer("This chunk's index in the run (0, 1, ...).", minimum=0),
            "first": _integer("The run's record number of this chunk's first record.", minimum=0),
            "count": _integer("Records in this chunk.", minimum=0),
            "records": _node(
                "array",
                "The records, in the order they settled.",
                items=_node("object", "One settled step, as in the Plan's status.report.steps.")
                | {"properties": record},
            ),
        },
        required=["plan", "run", "chunk", "first", "count", "records"],
    )
    return _crd(
        "PlanReport",
        ["planrep"],
        schema,
        [
            _column("Plan", "string", ".plan"),
            _column("Run", "string", ".run"),
            _column("Chunk", "integer", ".chunk"),
            _column(
                "First", "integer", ".first", "The run's record number of the chunk's first record"
            ),
            _column("Records", "integer", ".count"),
            AGE,
        ],
        status=False,
    )


class _Dumper(yaml.SafeDumper):
    """YAML without anchors and aliases: each node written out where it is (a reader of the
    file sees every field's schema in place)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def render() -> dict[str, str]:
    """File name -> YAML text of every CRD."""
    head = (
        "# Generated by `python -m planops.api.crd` from the models (operator/planops/api/):\n"
        "# edit those, not this file.\n"
    )
    crds = (
        plan_crd(),
        capsule_crd(),
        scheduled_crd(False),
        scheduled_crd(True),
        template_crd(False),
        template_crd(True),
        trigger_crd(),
    )
    return {
        f"{crd['metadata']['name']}.yaml": head
        + yaml.dump(crd, Dumper=_Dumper, sort_keys=False, width=100)
        for crd in (*crds, plan_report_crd())
    }


#: where the CRDs are written: kubectl apply -f crds/, and the Helm chart's copy (its templates
#: render them, so `helm upgrade` upgrades them)
OUTPUTS = ("crds", "charts/planops/files/crds")

if __name__ == "__main__":
    if any(arg.startswith("-") for arg in sys.argv[1:]):
        # an option is never a directory: `--help` once left a directory named --help behind
        sys.exit("usage: python -m planops.api.crd [DIRECTORY...] (default: crds/ and the chart)")
    for where in sys.argv[1:] or OUTPUTS:
        out = Path(where)
        out.mkdir(parents=True, exist_ok=True)
        for name, yaml_text in render().items():
            (out / name).write_text(yaml_text)
            print(out / name)
