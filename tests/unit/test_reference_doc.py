"""docs/reference.md is generated from the CRDs: it names every field and no other."""

from __future__ import annotations

from pathlib import Path

from planops import reference
from planops.api import crd

DOC = Path(__file__).resolve().parents[2] / "docs" / "reference.md"


def test_the_committed_reference_is_current():
    assert DOC.read_text() == reference.render(), (
        "docs/reference.md is stale: python -m planops.reference"
    )


def test_every_plan_field_has_a_row_with_seed_and_example():
    plan = crd.plan_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]
    text = DOC.read_text()
    for path, _ in reference.fields(plan):
        assert f"| `{path}` |" in text, path
    for path in reference.SEED:
        assert path in reference.EXAMPLE, path
    rows = {
        line.split("|")[1].strip().strip("`")
        for line in text.splitlines()
        if line.startswith("| `")
    }
    known = {p for p, _ in reference.fields(plan)}
    cap = crd.capsule_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"][
        "spec"
    ]
    known |= {p for p, _ in reference.fields(cap)}
    sched = crd.scheduled_crd(True)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    known |= {p for p, _ in reference.fields(sched["properties"]["spec"])}
    known.add("planTemplate.metadata` / `planTemplate.spec")
    report = crd.plan_report_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    known |= {p for p, _ in reference.fields(report)}
    status = crd.plan_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]
    history = status["status"]["properties"]["history"]["items"]
    known |= {p for p, _ in reference.fields(history)}
    trigger = crd.trigger_crd()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    known |= {p for p, _ in reference.fields(trigger["properties"]["spec"])}
    assert rows <= known, rows - known  # no row for a field that does not exist
