"""A Job's planops annotations only complete its labels (kube.manifests.full_value): an
annotation that disagrees with the label it completes is not read, so nobody with `edit` in the
namespace can make a finished Job of one step pass for an attempt of another by annotating it
(`kubectl annotate job <build's Job> planops.dev/step-id=tests`: the running `tests` would settle
with build's log, and `deploy` start while the real tests still ran). The admission policy
refuses the annotation in the cluster (tests/e2e/test_tenancy.py); this is the operator's side,
for a cluster without the policy."""

from __future__ import annotations

from planops.api.names import ANNOTATION_STEP_ID, LABEL_PARENT, LABEL_PLAN, LABEL_STEP
from planops.kube import manifests
from planops.kube.manifests import full_value, label_value

from .test_retry_reconcile import world

CHAIN = [
    {"id": "build", "shell": "true"},
    {"id": "tests", "shell": "true", "dependsOn": ["build"]},
    {"id": "deploy", "shell": "true", "dependsOn": ["tests"]},
]


def test_a_finished_jobs_step_id_annotated_to_a_running_step_settles_nothing():
    w = world(CHAIN)
    w.reconciled()
    w.finish("build", ok=True)
    w.reconciled()
    assert set(w.step_jobs()) == {"build", "tests"}
    build = w.step_jobs()["build"]
    build["metadata"].setdefault("annotations", {})[ANNOTATION_STEP_ID] = "tests"
    status = w.reconciled()
    assert set(w.step_jobs()) == {"build", "tests"}, "deploy started on a forged success"
    assert [f["stepId"] for f in status["inFlight"]] == ["tests"]
    assert [s["stepId"] for s in status["report"]["steps"]] == ["build"]
    w.finish("tests", ok=True)  # the real tests settle the step, and deploy starts
    w.reconciled()
    assert set(w.step_jobs()) == {"build", "tests", "deploy"}


LONG = "x" * 80  # longer than a label value: shortened, the full value in the annotation


def test_an_annotation_counts_only_when_shortening_it_gives_the_label():
    short = label_value(LONG)
    assert short != LONG
    meta = {"labels": {LABEL_STEP: short}, "annotations": {ANNOTATION_STEP_ID: LONG}}
    assert full_value(meta, LABEL_STEP) == LONG
    # another step's id, a value that fits a label, or an annotation without its label
    for forged in ("tests", "y" * 80, short + "z"):
        meta["annotations"][ANNOTATION_STEP_ID] = forged
        assert full_value(meta, LABEL_STEP) == short, forged
    assert full_value({"annotations": {ANNOTATION_STEP_ID: "tests"}}, LABEL_STEP) is None
    assert full_value({"labels": {LABEL_STEP: "build"}, "annotations": {}}, LABEL_STEP) == "build"
    # the Plan's and the parent's full values likewise (their annotation is the label's key)
    for label in (LABEL_PLAN, LABEL_PARENT):
        meta = {"labels": {label: label_value(LONG)}, "annotations": {label: LONG}}
        assert full_value(meta, label) == LONG
        meta["annotations"][label] = "another-plan"
        assert full_value(meta, label) == label_value(LONG)


def test_every_annotation_the_operator_writes_agrees_with_its_label():
    ref = manifests.PlanRef("ns", LONG, "uid", "run")
    for step in ("build", "_x", "scan." + LONG):
        meta = {"labels": ref.labels(step, 1), "annotations": ref.annotations(step)}
        assert full_value(meta, LABEL_STEP) == step
        assert full_value(meta, LABEL_PLAN) == LONG
