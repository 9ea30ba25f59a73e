"""The names planops and the cluster share, written once: the API group and version, a Plan's
phases, and the label and annotation keys planops puts on the objects it makes.

At the bottom of the package (it imports nothing of planops), so the reconciler, the kopf
handlers, the CLI and the chart's tests all read the same spelling, and a phase that one part
counts as finished cannot be a running one for another.
"""

from __future__ import annotations

from enum import StrEnum

GROUP = "planops.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"


class Phase(StrEnum):
    """A Plan's `status.phase`."""

    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    #: refused by validation: nothing runs until the Plan (or its Capsule) changes
    INVALID = "Invalid"


#: phases in which nothing more happens by itself: `kubectl plan submit --wait` stops waiting,
#: and a ScheduledPlan's run no longer counts as active (an Invalid run runs nothing)
FINISHED = frozenset({Phase.SUCCEEDED, Phase.FAILED, Phase.INVALID})
#: phases no reconcile changes again: the run's result stands. Invalid is finished but not ended:
#: the reconciler judges an Invalid Plan again when its Capsule appears or changes, and then
#: runs it (a Plan applied before its Capsule runs once the Capsule exists)
ENDED = frozenset({Phase.SUCCEEDED, Phase.FAILED})


def finished(phase: object) -> bool:
    """Whether a status' phase (any value read from an object) is finished (FINISHED)."""
    return phase in FINISHED


def ended(phase: object) -> bool:
    """Whether a status' phase (any value read from an object) has ended for good (ENDED)."""
    return phase in ENDED


#: the prefix of every label and annotation key planops puts on an object (the operator's watch
#: cache keeps only these of an object's labels and annotations)
KEY_PREFIX = f"{GROUP}/"

LABEL_PLAN = f"{GROUP}/plan"
LABEL_RUN = f"{GROUP}/run"
LABEL_STEP = f"{GROUP}/step"
LABEL_ATTEMPT = f"{GROUP}/attempt"
LABEL_PARENT = f"{GROUP}/parent"
LABEL_DEPTH = f"{GROUP}/depth"
LABEL_CHUNK = f"{GROUP}/chunk"
LABEL_SCHEDULED_BY = f"{GROUP}/scheduled-by"
LABEL_CLUSTER_SCHEDULED_BY = f"{GROUP}/cluster-scheduled-by"
ANNOTATION_STEP_ID = f"{GROUP}/step-id"
ANNOTATION_LINEAGE = f"{GROUP}/lineage"
ANNOTATION_SPAWNED_BY = f"{GROUP}/spawned-by"
ANNOTATION_DELEGATION = f"{GROUP}/delegation-id"
ANNOTATION_OBJECTIVE = f"{GROUP}/objective"
ANNOTATION_RERUN = f"{GROUP}/rerun"
#: retry from the failure: `<token>[:from=STEP]` (reconciler.run.retrying has the rules)
ANNOTATION_RETRY = f"{GROUP}/retry"
ANNOTATION_CANCEL = f"{GROUP}/cancel"
#: a cancel that runs the finally steps after it (`kubectl plan cancel --run-finally`): what
#: runs then is a choice of what the Plan does, so writing it is an author's act (needs `use`)
ANNOTATION_CANCEL_RUN_FINALLY = f"{GROUP}/cancel-run-finally"
#: who last changed what a Plan or ScheduledPlan does, written by the API server (the chart's
#: record-author admission policy; reconciler.run.authors reads it)
ANNOTATION_AUTHOR = f"{GROUP}/author"
ANNOTATION_SCHEDULED_TIME = f"{GROUP}/scheduled-time"
#: a ScheduledPlan asked to run now (`kubectl plan submit --from scheduledplan/NAME`): a token;
#: each new token starts one run, as a scheduled one, for the schedule's recorded author
ANNOTATION_RUN_NOW = f"{GROUP}/run-now"
#: a template step's child Plan: the template it runs (JSON: kind, name, uid, generation)
ANNOTATION_TEMPLATE = f"{GROUP}/template"
#: the answer to an ask step: answer.planops.dev/<step> (reconciler.run.asks has the format)
ANNOTATION_ANSWER_PREFIX = f"answer.{GROUP}/"
#: an annotation planops never reads: writing it changes an object, and so records its writer as
#: the author (what the docs tell a user to run for an object written before authors were)
ANNOTATION_TOUCHED = f"{GROUP}/touched"

#: What only the operator writes on the Plans it manages (child Plans, scheduled runs): the
#: chart's admission policy (templates/admission-policy.yaml, kept equal by a unit test) lets only
#: holders of `manage` on plans create a Plan carrying any of them or change them.
RESERVED_LABELS = (
    LABEL_PARENT,
    LABEL_RUN,
    LABEL_STEP,
    LABEL_ATTEMPT,
    LABEL_DEPTH,
    LABEL_SCHEDULED_BY,
    LABEL_CLUSTER_SCHEDULED_BY,
)
RESERVED_ANNOTATIONS = (
    ANNOTATION_LINEAGE,
    ANNOTATION_SPAWNED_BY,
    ANNOTATION_DELEGATION,
    ANNOTATION_OBJECTIVE,
    ANNOTATION_STEP_ID,
    ANNOTATION_SCHEDULED_TIME,
    ANNOTATION_TEMPLATE,
    # the full values of labels that kube.manifests.label_value may shorten (full_value reads
    # them first)
    LABEL_PARENT,
    LABEL_SCHEDULED_BY,
    LABEL_CLUSTER_SCHEDULED_BY,
)

#: on a Plan whose run stores objects in an artifact repository: the operator deletes them
#: before the Plan goes (reconciler.history.deletion)
FINALIZER_ARTIFACTS = f"{GROUP}/artifacts"

#: the Events' reportingComponent (kube.events)
REPORTING_COMPONENT = f"{GROUP}/operator"

#: the PlanTrigger that started a Plan, and the delivery it started it for (written by the
#: trigger receiver as the trigger's author: informative, not reserved, as an author could
#: write them too; the Plan's name, derived from both, is what makes a replay fail)
LABEL_TRIGGER = f"{GROUP}/trigger"
ANNOTATION_DELIVERY = f"{GROUP}/delivery"
