"""A cluster Plan with its whole report: the status holds a bounded summary, the run's PlanReport
objects every record (planops.reconciler.history.chunks). Every verb that shows records reads
this."""

from __future__ import annotations

import sys
from typing import Any

from planops.kube.api import CliApi
from planops.kube.manifests import PlanRef
from planops.reconciler import earlier_run, records_json, reports_selector, run_ids


async def full_report(kube: CliApi, plan: dict[str, Any]) -> dict[str, Any]:
    """The Plan with its whole report in status.report.steps: the status holds a summary (the
    last records, their texts shortened), the run's PlanReport objects every record
    (planops.reconciler.history.chunks). A status without report objects is returned as it is."""
    st = plan.get("status") or {}
    rep = st.get("report") or {}
    run = (st.get("run") or {}).get("id")
    if not rep.get("reportObjects") or not run:
        return plan
    meta = plan["metadata"]
    ref = PlanRef(meta["namespace"], meta["name"], meta["uid"], str(run))
    listed = await kube.list_plan_reports(ref.namespace, reports_selector(ref))
    steps = records_json(listed, ref.uid, ref.run)
    if len(steps) < int(rep.get("records") or 0):
        sys.stderr.write(
            f"warning: plan {ref.name}: its report objects hold {len(steps)} of its "
            f"{rep.get('records')} records (kubectl get planreports -l {ref.selector()})\n"
        )
    whole = {**rep, "steps": steps, "stepsOmitted": 0}
    return {**plan, "status": {**st, "report": whole}}


async def run_report(kube: CliApi, plan: dict[str, Any], run: str) -> dict[str, Any] | str:
    """The Plan as it was at the end of its run `run` (`get`/`describe --run ID`): its current
    run with the whole report, or an earlier one from status.history and its PlanReports
    (planops.reconciler.history.replacing). A run the Plan does not keep: the error, naming those it
    keeps."""
    st = plan.get("status") or {}
    if (st.get("run") or {}).get("id") == run:
        return await full_report(kube, plan)
    earlier = await earlier_run(kube, plan, run)
    if earlier is not None:
        return {**plan, "status": earlier}
    name, known = plan["metadata"]["name"], run_ids(st)
    return f"plan {name} keeps no run {run!r}; " + (
        f"its runs, newest first: {', '.join(known)} (kubectl plan history {name})"
        if known
        else "it has not run yet"
    )
