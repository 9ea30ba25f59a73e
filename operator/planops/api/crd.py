"""The CustomResourceDefinitions of planops, as data.

Why generated: the Plan spec schema appears three times (in Plan, in a Capsule's `plan` template,
in a ScheduledPlan's template), and every field needs a description (`kubectl explain
plan.spec.steps` must teach the language). One source: the schemas of api/plan_schema.py and
api/capsule_schema.py, built from api/schema_parts.py, assembled into CRDs here; `python -m
planops.api.crd DIR` writes `crds/*.yaml`, and tests/unit/test_crds.py checks the committed files
are current and cover every field of the pydantic models.

The API server enforces the cheap structural rules (types, enums, patterns, bounds, exactly one
step kind via CEL); the validator (planops.engine) judges the rest with the seed's codes.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

from planops.api import names
from planops.api.capsule_schema import capsule_spec_schema
from planops.api.documents import API_GROUP
from planops.api.plan_schema import (
    CONTROL_KINDS,
    MAX_STEPS,
    REFUSED_KINDS,
    SPEC_BUDGET,
    plan_spec_schema,
    plan_status_schema,
    step_schema,
)
from planops.api.schedule_models import LabelSelectorRequirement, ScheduledPlanSpec
from planops.api.schema_parts import Schema, array, bounds, integer, obj, text

#: what this module's readers take from it (the schemas' own modules hold the rest)
__all__ = [
    "CONTROL_KINDS",
    "MAX_STEPS",
    "REFUSED_KINDS",
    "SPEC_BUDGET",
    "bounds",
    "capsule_crd",
    "capsule_spec_schema",
    "plan_crd",
    "plan_report_crd",
    "plan_spec_schema",
    "render",
    "step_schema",
]

VERSION = names.VERSION


def _crd(
    plural: str,
    kind: str,
    short: list[str],
    spec: Schema,
    status: Schema | None,
    columns: list[dict[str, Any]],
    description: str,
) -> dict[str, Any]:
    props: dict[str, Schema] = {"spec": spec}
    if status is not None:
        props["status"] = status
    version: dict[str, Any] = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {
                "type": "object",
                "description": description,
                "properties": props,
                "required": ["spec"],
            }
        },
        "additionalPrinterColumns": columns,
    }
    if status is not None:
        version["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{API_GROUP}"},
        "spec": {
            "group": API_GROUP,
            "scope": "Namespaced",
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


def plan_crd() -> dict[str, Any]:
    return _crd(
        "plans",
        "Plan",
        ["pl"],
        plan_spec_schema("A set of steps and the order they may run in."),
        plan_status_schema(history=True),
        [
            {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
            {
                "name": "Steps",
                "type": "string",
                "jsonPath": ".status.progress",
                "description": "Steps settled / steps in the plan",
            },
            {
                "name": "Failed",
                "type": "string",
                "jsonPath": ".status.failedStep",
                "description": "The step that stopped the plan",
            },
            {"name": "Duration", "type": "string", "jsonPath": ".status.duration"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
            {
                "name": "Waiting",
                "type": "string",
                "jsonPath": ".status.queue.message",
                "description": "What a Plan waiting for a slot of its Capsule waits for",
                "priority": 1,
            },
        ],
        "A Plan: one run of a set of steps. planops validates it, runs each ready step as a Job, "
        "and writes the report to status.",
    )


def capsule_crd() -> dict[str, Any]:
    return _crd(
        "capsules",
        "Capsule",
        ["cap"],
        capsule_spec_schema(),
        None,
        [
            {"name": "Image", "type": "string", "jsonPath": ".spec.image"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
        "A Capsule: the policy and inventory Plans run under (images, binaries, tools, limits).",
    )


def _scheduled_spec(description: str, cluster: bool) -> Schema:
    props: dict[str, Schema] = {
        "schedule": text(
            "When to run, in cron syntax (minute hour day-of-month month day-of-week) "
            "or a macro: @yearly @monthly @weekly @daily @hourly.",
            **bounds(ScheduledPlanSpec, "schedule"),
        ),
        "timeZone": text(
            "IANA time zone of the schedule (Europe/Berlin). Default: UTC. When clocks "
            "go back, a schedule naming its hours runs once; see docs/schedules.md."
        ),
        "concurrencyPolicy": text(
            "What to do when a run is due while another is active: Allow "
            "(start it), Forbid (wait until the active run ends), Replace "
            "(stop the active run, start the new one).",
            **bounds(ScheduledPlanSpec, "concurrencyPolicy"),
            default="Allow",
        ),
        "startingDeadlineSeconds": integer(
            "A due time older than this is missed, not started late.",
            **bounds(ScheduledPlanSpec, "startingDeadlineSeconds"),
        ),
        "suspend": {
            "type": "boolean",
            "default": False,
            "description": "Start no new runs (due times pass and are reported missed).",
        },
        "successfulRunsHistoryLimit": integer(
            "Succeeded runs kept.",
            **bounds(ScheduledPlanSpec, "successfulRunsHistoryLimit"),
            default=3,
        ),
        "failedRunsHistoryLimit": integer(
            "Failed runs kept.", **bounds(ScheduledPlanSpec, "failedRunsHistoryLimit"), default=1
        ),
        "planTemplate": obj(
            "The Plan each run creates.",
            {
                "metadata": obj(
                    "Labels and annotations of each run.",
                    {
                        "labels": {
                            "type": "object",
                            "description": "Labels of each run.",
                            "additionalProperties": {"type": "string"},
                        },
                        "annotations": {
                            "type": "object",
                            "description": "Annotations of each run.",
                            "additionalProperties": {"type": "string"},
                        },
                    },
                ),
                "spec": plan_spec_schema("The spec of each run."),
            },
            required=["spec"],
        ),
    }
    required = ["schedule", "planTemplate"]
    if cluster:
        req = obj(
            "A label selector requirement.",
            {
                "key": text("The label key."),
                "operator": text(
                    "In, NotIn, Exists or DoesNotExist.",
                    **bounds(LabelSelectorRequirement, "operator"),
                ),
                "values": array("Values for In and NotIn.", {"type": "string"}),
            },
            required=["key", "operator"],
        )
        props["namespaceSelector"] = obj(
            "Namespaces to stamp a run into at each scheduled time (each run uses the Capsule of "
            "its own namespace).",
            {
                "matchLabels": {
                    "type": "object",
                    "description": "Labels a namespace must have.",
                    "additionalProperties": {"type": "string"},
                },
                "matchExpressions": array("Requirements a namespace must meet.", req),
            },
        )
        required.append("namespaceSelector")
    return obj(description, props, required=required)


def _scheduled_crd(cluster: bool) -> dict[str, Any]:
    kind = "ClusterScheduledPlan" if cluster else "ScheduledPlan"
    crd = _crd(
        kind.lower() + "s",
        kind,
        ["cspl"] if cluster else ["spl"],
        _scheduled_spec(
            f"A {kind}: runs a Plan on a schedule"
            + (" in every matching namespace." if cluster else "."),
            cluster,
        ),
        plan_status_schema(),
        [
            {"name": "Schedule", "type": "string", "jsonPath": ".spec.schedule"},
            {"name": "Suspend", "type": "boolean", "jsonPath": ".spec.suspend"},
            {"name": "Active", "type": "integer", "jsonPath": ".status.activeCount"},
            {"name": "Last Schedule", "type": "date", "jsonPath": ".status.lastScheduleTime"},
            {"name": "Next", "type": "string", "jsonPath": ".status.nextScheduleTime"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
        f"A {kind}: CronJob semantics for Plans.",
    )
    crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"][
        "description"
    ] = "Schedule history, written by the operator."
    if cluster:
        crd["spec"]["scope"] = "Cluster"
    return crd


def plan_report_crd() -> dict[str, Any]:
    """PlanReport: one chunk of a run's report (planops.reconciler.history.chunks). Written by the
    operator only, owned by its Plan, no spec and no status: its records are its data."""
    record = obj(
        "One settled step, as in the Plan's status.report.steps.",
        {
            "stepId": text(
                "The step (a body step: CONTROL.BRANCH-OR-ITEM.STEP, e.g. scan.3.probe)."
            ),
            "status": text("success, failed or skipped."),
            "output": text("The step's output, cut to its share of the report (docs/operator.md)."),
            "error": text("Why it failed or was skipped."),
            "stderr": text(
                "The last lines the step wrote on stderr (at most 4 KiB; never part of its "
                "output). Absent when it wrote none, or when the cluster cannot read a log's "
                "streams apart (docs/operator.md)."
            ),
            "attempts": integer("Attempts made."),
            "startedAt": text("RFC 3339."),
            "finishedAt": text("RFC 3339."),
        },
    )
    for key in ("output", "error", "stderr", "startedAt", "finishedAt"):
        record["properties"][key]["nullable"] = True
    crd = _crd(
        "planreports",
        "PlanReport",
        ["planrep"],
        {},
        None,
        [
            {"name": "Plan", "type": "string", "jsonPath": ".plan"},
            {"name": "Run", "type": "string", "jsonPath": ".run"},
            {"name": "Chunk", "type": "integer", "jsonPath": ".chunk"},
            {
                "name": "First",
                "type": "integer",
                "jsonPath": ".first",
                "description": "The run's record number of the chunk's first record",
            },
            {"name": "Records", "type": "integer", "jsonPath": ".count"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
        "One chunk of a Plan run's report: settled step records in the order they settled, "
        "written by the operator (the Plan's status keeps a summary). Owned by the Plan.",
    )
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    schema["properties"] = {
        "plan": text("The Plan's name."),
        "run": text("The run (the Plan's status.run.id)."),
        "chunk": integer("This chunk's index in the run (0, 1, ...).", minimum=0),
        "first": integer("The run's record number of this chunk's first record.", minimum=0),
        "count": integer("Records in this chunk.", minimum=0),
        "records": array("The records, in the order they settled.", record),
    }
    schema["required"] = ["plan", "run", "chunk", "first", "count", "records"]
    return crd


def render() -> dict[str, str]:
    """File name -> YAML text of every CRD."""
    head = (
        "# Generated by `python -m planops.api.crd`: edit operator/planops/api/ (crd.py and the\n"
        "# schemas it assembles).\n"
    )
    return {
        f"{crd['metadata']['name']}.yaml": head + yaml.safe_dump(crd, sort_keys=False, width=100)
        for crd in (
            plan_crd(),
            capsule_crd(),
            _scheduled_crd(False),
            _scheduled_crd(True),
            plan_report_crd(),
        )
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
