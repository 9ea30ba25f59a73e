"""`run --local --retry REPORT.json [--from STEP]`: an earlier run's report read back, checked to
be a report of this very plan, and made into the records the retried run keeps (engine.retry
decides which; the local runner starts from them).

REPORT (JSON or YAML) is what planops printed: `run --local -o json` (the report, in the seed's
shape) or `kubectl plan get NAME -o json` (the Plan object: its spec, and its whole report in
status.report). A report is refused when it is not of this plan: another plan id, steps the
plan does not have, or, for a Plan object, another spec (the spec digests differ: a retry runs
the plan that failed, not an edited one); and when it is a summary that lacks records. The
seed's report names no spec, so a local report of an edited plan whose step ids are unchanged
is taken as this plan's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError

from planops.api import PlanSpec
from planops.cli import yamljson
from planops.engine import CapsuleResolver, StepRecord
from planops.engine.retry import Retry, RetryRefused, plan_retry, spec_digest


def read(
    path: Path,
    plan_id: str,
    spec: PlanSpec,
    from_step: str | None,
    capsules: CapsuleResolver | None = None,
) -> Retry:
    """The retry of the run `path` reports (`capsules`: the Capsules given, whose plans a capsule
    step's child runs). Raises RetryRefused (the reason) for anything that cannot be retried,
    unreadable files included."""
    try:
        docs = yamljson.parse(str(path), path.read_text())
    except OSError as e:
        raise RetryRefused(f"cannot read it: {e.strerror or e}") from None
    except yamljson.InputError as e:
        raise RetryRefused(
            f"{e.lines[0]} (give what `run --local -o json` or `kubectl plan get NAME -o json` "
            "printed)"
        ) from None
    if len(docs) != 1:
        raise RetryRefused(f"it holds {len(docs)} documents; a report is one")
    doc = docs[0]
    report, digest = _report_of(doc)
    if report.get("planId") != plan_id:
        raise RetryRefused(
            f"it is a report of plan {report.get('planId')!r}, not of plan {plan_id!r}"
        )
    if digest is not None and digest != spec_digest(spec):
        raise RetryRefused(
            "the plan is not the one that ran (its spec digest differs: a step, the input or "
            "another field changed); a retry runs the same plan again. Run the changed plan "
            "without --retry"
        )
    if int(report.get("stepsOmitted") or 0):
        raise RetryRefused(
            f"it holds a summary, {report['stepsOmitted']} records omitted (`kubectl plan get "
            "NAME -o json` prints them all)"
        )
    try:
        records = [StepRecord.from_json(s) for s in report.get("steps") or []]
    except (KeyError, TypeError, ValueError, AttributeError):
        raise RetryRefused("its steps are not a planops report's records") from None
    return plan_retry(
        spec,
        records,
        completed=bool(report.get("completed")),
        exited=report.get("exit") is not None,
        from_step=from_step,
        capsules=capsules,
    )


def _report_of(doc: Any) -> tuple[dict[str, Any], str | None]:
    """(the report, the digest of the spec that ran, when the file says)."""
    if not isinstance(doc, dict):
        raise RetryRefused("not a planops report (a JSON object)")
    if doc.get("kind") == "Plan":  # kubectl plan get NAME -o json
        report = (doc.get("status") or {}).get("report")
        if not isinstance(report, dict):
            raise RetryRefused("the Plan has no report yet (it never ran)")
        try:
            ran = PlanSpec.model_validate(doc.get("spec"))
        except ValidationError:
            raise RetryRefused("the Plan's spec cannot be read") from None
        return report, spec_digest(ran)
    if "steps" not in doc or "planId" not in doc:
        raise RetryRefused("not a planops report (no planId and steps)")
    return doc, None
