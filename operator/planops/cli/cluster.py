"""The cluster verbs of `kubectl-plan`: submit --wait, get, describe, logs, trace, rerun, cancel.

kubectl habits: -n/--namespace (default: the kubeconfig context's namespace, else `default`),
--context, --kubeconfig, -o table|json|yaml. Everything goes through planops.kube (the only code
that talks to the API). Exit codes: 0 success, 1 the plan failed, 2 bad input or invalid plan,
3 the cluster could not be reached or refused the request.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from pathlib import Path
from typing import Any, TextIO

import yaml

from planops.api import (
    API_VERSION,
    CapsuleDocument,
    CapsuleSpec,
    PlanDocument,
    PlanSpec,
    parse_document,
)
from planops.cli import graph, render, timeline
from planops.cli.inputs import InputError, load, with_default_capsule
from planops.engine import control
from planops.engine.report import parse_rfc3339
from planops.kube import kubeconfig
from planops.kube.client import UNREACHABLE, ApiError, ConfigError, Kube
from planops.kube.manifests import (
    ANNOTATION_CANCEL,
    ANNOTATION_RERUN,
    CONTAINER,
    LABEL_ATTEMPT,
    PlanRef,
    answer_annotation,
    step_selector,
)
from planops.reconciler import reports

EXIT_OK, EXIT_FAILED, EXIT_INPUT, EXIT_CLUSTER = 0, 1, 2, 3
FINISHED = ("Succeeded", "Failed", "Invalid")
Verb = Callable[[Kube, argparse.Namespace, str], Awaitable[int]]


def namespace_of(args: argparse.Namespace) -> str:
    if args.namespace:
        return str(args.namespace)
    return kubeconfig.namespace(args.kubeconfig, args.context)


def run(args: argparse.Namespace, verb: Verb | None = None) -> int:
    """Run `verb` (default: the one named on the command line) with a connected client; the
    cluster's refusals, an unreachable server and an unusable kubeconfig as errors (exit 3)."""
    verb = verb or VERBS[args.command]

    async def main() -> int:
        kube = await Kube.connect(args.kubeconfig, args.context)
        try:
            return await verb(kube, args, namespace_of(args))
        finally:
            await kube.close()

    if problem := _kubeconfig_problem(args):
        sys.stderr.write(f"error: {problem}\n")
        return EXIT_CLUSTER
    try:
        return asyncio.run(main())
    except BrokenPipeError:
        raise  # stdout was closed (`| head`): kubectl-plan's main stops quietly
    except ApiError as e:
        hint = " (is the planops CRD installed? kubectl apply -f crds/)" if e.not_found else ""
        sys.stderr.write(f"error: the cluster answered {e.status} {e.reason}: {e.message}{hint}\n")
        return EXIT_CLUSTER
    except ConfigError as e:
        where = f"--kubeconfig {args.kubeconfig}" if args.kubeconfig else "the kubeconfig"
        if args.kubeconfig and str(e).startswith(f"{args.kubeconfig}:"):  # it names the file
            where = "--kubeconfig"
        sys.stderr.write(f"error: {where}: {e}\n")
        return EXIT_CLUSTER
    except UNREACHABLE as e:  # anything else is a bug: its traceback says where
        sys.stderr.write(f"error: cannot reach the cluster: {type(e).__name__}: {e}\n")
        return EXIT_CLUSTER


def _kubeconfig_problem(args: argparse.Namespace) -> str | None:
    """A kubeconfig that is named but missing: said plainly (the client library's message is
    "Expected key current-context", after it found no file)."""
    if args.kubeconfig:
        if not Path(args.kubeconfig).is_file():
            what = "is not a file" if Path(args.kubeconfig).exists() else "does not exist"
            return f"--kubeconfig {args.kubeconfig}: the file {what}"
        return None
    listed = kubeconfig.listed()
    in_cluster = "KUBERNETES_SERVICE_HOST" in os.environ  # a pod's own credentials come first
    if listed and not in_cluster and not any(Path(p).is_file() for p in listed):
        return f"KUBECONFIG={os.environ['KUBECONFIG']}: no such file"
    return None


def _emit(obj: Any, fmt: str, out: TextIO | None = None) -> None:
    out = out or sys.stdout  # looked up now: the stdout of the moment (redirected, captured)
    if fmt == "json":
        out.write(json.dumps(obj, indent=2) + "\n")
    else:
        out.write(yaml.safe_dump(obj, sort_keys=False))


def _age(ts: str | None) -> str:
    t = parse_rfc3339(ts)
    if t is None:
        return "-"
    s = int(time.time() - t)
    return f"{s}s" if s < 120 else f"{s // 60}m" if s < 7200 else f"{s // 3600}h"


def _row(p: dict[str, Any]) -> list[str]:
    st = p.get("status") or {}
    return [
        p["metadata"]["name"],
        st.get("phase", ""),
        st.get("progress", ""),
        st.get("failedStep", ""),
        st.get("duration", ""),
        _age(p["metadata"].get("creationTimestamp")),
    ]


async def full_report(kube: Kube, plan: dict[str, Any]) -> dict[str, Any]:
    """The Plan with its whole report in status.report.steps: the status holds a summary (the
    last records, their texts shortened), the run's PlanReport objects every record
    (planops.reconciler.reports). A status without report objects is returned as it is."""
    st = plan.get("status") or {}
    rep = st.get("report") or {}
    run = (st.get("run") or {}).get("id")
    if not rep.get("reportObjects") or not run:
        return plan
    meta = plan["metadata"]
    ref = PlanRef(meta["namespace"], meta["name"], meta["uid"], str(run))
    listed = await kube.list_plan_reports(ref.namespace, reports.selector(ref))
    steps = reports.records_json(listed, ref.uid, ref.run)
    if len(steps) < int(rep.get("records") or 0):
        sys.stderr.write(
            f"warning: plan {ref.name}: its report objects hold {len(steps)} of its "
            f"{rep.get('records')} records (kubectl get planreports -l {ref.selector()})\n"
        )
    whole = {**rep, "steps": steps, "stepsOmitted": 0}
    return {**plan, "status": {**st, "report": whole}}


async def cmd_get(kube: Kube, args: argparse.Namespace, ns: str) -> int:
    if args.name:
        plan = await kube.get_plan(ns, args.name)
        if plan is None:
            sys.stderr.write(f"error: plan {args.name!r} not found in namespace {ns}\n")
            return EXIT_INPUT
        plans = [await full_report(kube, plan) if args.output != "table" else plan]
    else:
        plans = await kube.list_plans(ns, "")
    if args.output != "table":
        _emit(
            plans[0] if args.name else {"apiVersion": "v1", "kind": "List", "items": plans},
            args.output,
        )
        return EXIT_OK
    if not plans:
        print(f"No plans in namespace {ns}.")
        return EXIT_OK
    render.table(
        [["NAME", "PHASE", "STEPS", "FAILED", "DURATION", "AGE"], *map(_row, plans)], sys.stdout
    )
    return EXIT_OK


async def cmd_describe(kube: Kube, args: argparse.Namespace, ns: str) -> int:
    plan = await kube.get_plan(ns, args.name)
    if plan is None:
        sys.stderr.write(f"error: plan {args.name!r} not found in namespace {ns}\n")
        return EXIT_INPUT
    plan = await full_report(kube, plan)
    st = plan.get("status") or {}
    cond = (st.get("conditions") or [{}])[0]
    print(
        f"Name:       {args.name}\nNamespace:  {ns}\n"
        f"Capsule:    {plan['spec'].get('capsule', 'default')}"
    )
    print(
        f"Phase:      {st.get('phase', '(not reconciled yet)')}  ({cond.get('reason', '')}: "
        f"{cond.get('message', '')})"
    )
    run = st.get("run") or {}
    print(
        f"Run:        {run.get('id', '-')} (generation {run.get('generation', '-')})  "
        f"started {st.get('startedAt', '-')}  duration {st.get('duration', '-')}"
    )
    if st.get("errors"):
        print(f"\nValidation errors ({st.get('errorCount', len(st['errors']))}):")
        for e in st["errors"]:
            where = f"step {e['step']!r}, " if e.get("step") else ""
            print(f"  - [{e['code']}] {where}{e['path']}: {e['message']}")
    for ask in st.get("asks") or []:
        fields = ", ".join((ask.get("outputSchema") or {}).get("properties") or {})
        print(
            f"\nWaiting for an answer: step {ask['stepId']}: {ask.get('prompt')}\n"
            f"  kubectl plan answer {args.name} {ask['stepId']} --set KEY=VALUE  (fields: "
            f"{fields}) or --decline; until {ask.get('deadline')}, then whenUnanswered: "
            f"{ask.get('whenUnanswered', 'fail')}"
        )
    report = st.get("report") or {}
    if report.get("steps"):
        print("\nSteps (in the order they settled):")
        rows = [["STEP", "STATUS", "ATTEMPTS", "STARTED", "FINISHED", "DETAIL"]]
        for s in report["steps"]:
            detail = (
                render.first_line(s.get("error"))
                if s.get("error")
                else render.first_line(s.get("output"))
            )
            rows.append(
                [
                    s["stepId"],
                    s["status"],
                    str(s.get("attempts", "")),
                    s.get("startedAt") or "-",
                    s.get("finishedAt") or "-",
                    detail,
                ]
            )
        render.table(rows, sys.stdout)
    events = timeline.order(await kube.list_events(ns, args.name), _spec(plan))[-10:]
    if events:
        print("\nRecent events:")
        render.table(
            [
                ["TYPE", "REASON", "MESSAGE"],
                *[
                    [
                        e.get("type", ""),
                        e.get("reason", ""),
                        render.first_line(e.get("message"), 90),
                    ]
                    for e in events
                ],
            ],
            sys.stdout,
        )
    return EXIT_OK


def _spec(plan: dict[str, Any] | None) -> PlanSpec | None:
    """The Plan's spec, when it can be read (it orders the Plan's events: cli/timeline.py)."""
    doc, _ = parse_document(plan) if plan is not None else (None, [])
    return doc.spec if isinstance(doc, PlanDocument) else None


async def cmd_trace(kube: Kube, args: argparse.Namespace, ns: str) -> int:
    plan = await kube.get_plan(ns, args.name)  # None: the Plan is gone, its events remain
    events = timeline.order(await kube.list_events(ns, args.name), _spec(plan))
    if args.output != "table":
        _emit(
            [{k: e.get(k) for k in ("eventTime", "type", "reason", "message")} for e in events],
            args.output,
        )
        return EXIT_OK
    rows = [["TIME", "TYPE", "REASON", "MESSAGE"]]
    rows += [
        [timeline.shown_time(e), e.get("type", ""), e.get("reason", ""), e.get("message", "")]
        for e in events
    ]
    render.table(rows, sys.stdout)
    return EXIT_OK


def newest_attempt(pod: dict[str, Any]) -> tuple[int, str]:
    """Sort key: the attempt (a label edited into a non-number counts as 0), then the age."""
    meta = pod.get("metadata") or {}
    attempt = str((meta.get("labels") or {}).get(LABEL_ATTEMPT, ""))
    number = int(attempt) if attempt.isascii() and attempt.isdigit() else 0
    return number, str(meta.get("creationTimestamp") or "")


async def cmd_logs(kube: Kube, args: argparse.Namespace, ns: str) -> int:
    pods = await kube.list_pods(ns, step_selector(args.name, args.step, args.attempt or None))
    if pods:
        pods.sort(key=newest_attempt)
        sys.stdout.write(await kube.read_log(ns, pods[-1]["metadata"]["name"], CONTAINER, 64 << 20))
        return EXIT_OK
    plan = await kube.get_plan(ns, args.name)  # the pod is gone: the recorded output remains
    plan = await full_report(kube, plan) if plan is not None else None
    for s in ((plan or {}).get("status") or {}).get("report", {}).get("steps", []):
        if s["stepId"] == args.step:
            sys.stderr.write(
                "note: the step's pod is gone; showing the output recorded in the report\n"
            )
            sys.stdout.write(s.get("output") or "")
            return EXIT_OK
    sys.stderr.write(
        f"error: no pod and no recorded output for step {args.step!r} of plan {args.name!r}\n"
    )
    return EXIT_INPUT


async def _annotate(kube: Kube, ns: str, name: str, key: str, value: str) -> int:
    if await kube.get_plan(ns, name) is None:
        sys.stderr.write(f"error: plan {name!r} not found in namespace {ns}\n")
        return EXIT_INPUT
    await kube.patch_plan(ns, name, {"metadata": {"annotations": {key: value}}})
    return EXIT_OK


async def cmd_rerun(kube: Kube, args: argparse.Namespace, ns: str) -> int:
    token = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    rc = await _annotate(kube, ns, args.name, ANNOTATION_RERUN, token)
    if rc == EXIT_OK:
        print(f"plan {args.name}: re-run {token} requested")
    return rc


async def cmd_cancel(kube: Kube, args: argparse.Namespace, ns: str) -> int:
    rc = await _annotate(
        kube,
        ns,
        args.name,
        ANNOTATION_CANCEL,
        f"kubectl plan cancel at {time.strftime('%H:%M:%SZ', time.gmtime())}",
    )
    if rc == EXIT_OK:
        print(f"plan {args.name}: cancel requested")
    return rc


async def cmd_answer(kube: Kube, args: argparse.Namespace, ns: str) -> int:
    """Check the answer against the waiting question's schema here (exit 2 with the reason),
    then write it as an annotation naming the run; the operator checks it again."""
    plan = await kube.get_plan(ns, args.name)
    if plan is None:
        sys.stderr.write(f"error: plan {args.name!r} not found in namespace {ns}\n")
        return EXIT_INPUT
    st = plan.get("status") or {}
    waiting = {a["stepId"]: a for a in st.get("asks") or []}
    ask = waiting.get(args.step)
    if ask is None:
        what = ", ".join(waiting) or "none"
        sys.stderr.write(
            f"error: step {args.step!r} of plan {args.name} is not waiting for an answer "
            f"(waiting: {what})\n"
        )
        return EXIT_INPUT
    value: dict[str, Any] = {"run": (st.get("run") or {}).get("id")}
    if args.decline:
        value["declined"] = True
    else:
        schema = ask.get("outputSchema") or {}
        answer: dict[str, Any] = {}
        for item in args.set:
            key, sep, text = item.partition("=")
            try:
                if not sep:
                    raise ValueError(f"--set {item!r}: expected KEY=VALUE")
                answer[key] = control.coerce_answer(schema, key, text)
            except ValueError as e:
                sys.stderr.write(f"error: {e}\n")
                return EXIT_INPUT
        problem = control.answer_problem(schema, answer)
        if problem:
            sys.stderr.write(f"error: the answer does not fit the question: {problem}\n")
            return EXIT_INPUT
        value["answer"] = answer
    await kube.patch_plan(
        ns,
        args.name,
        {"metadata": {"annotations": {answer_annotation(args.step): json.dumps(value)}}},
    )
    print(f"plan {args.name}: step {args.step} " + ("declined" if args.decline else "answered"))
    return EXIT_OK


async def cmd_submit(kube: Kube, args: argparse.Namespace, ns: str) -> int:
    """Capsules first (`_apply_capsules`), then the Plans; a plan naming no Capsule runs under
    the only Capsule given, as in `validate` and `run --local`."""
    try:
        loaded = load(args.files)
    except InputError as e:
        for line in e.lines:
            sys.stderr.write(f"error: {line}\n")
        return EXIT_INPUT
    if (rc := await _apply_capsules(kube, loaded.capsule_documents, ns)) != EXIT_OK:
        return rc
    names = []
    for _, given in loaded.plans:
        doc = with_default_capsule(given, loaded.capsules)
        body = {
            "apiVersion": API_VERSION,
            "kind": "Plan",
            "metadata": {"name": doc.plan_id, "namespace": doc.namespace or ns},
            "spec": doc.spec.dump(),
        }
        try:
            await kube.create_plan(doc.namespace or ns, body)
        except ApiError as e:
            if e.already_exists:
                sys.stderr.write(
                    f"error: plan {doc.plan_id!r} already exists in {doc.namespace or ns}: "
                    f"`kubectl plan rerun {doc.plan_id}` runs it again\n"
                )
                return EXIT_INPUT
            if e.status in (400, 422):
                sys.stderr.write(f"error: the cluster refused plan {doc.plan_id!r}: {e.message}\n")
                return EXIT_INPUT
            raise
        names.append((doc.namespace or ns, doc.plan_id))
        print(f"plan.planops.dev/{doc.plan_id} created")
    if not args.wait:
        return EXIT_OK
    results = [await _wait(kube, pns, name, args.timeout) for pns, name in names]
    return max(results)


def capsule_body(doc: CapsuleDocument, ns: str) -> dict[str, Any]:
    return {
        "apiVersion": API_VERSION,
        "kind": "Capsule",
        "metadata": {"name": doc.name, "namespace": doc.namespace or ns},
        "spec": doc.spec.dump(),
    }


def _same_capsule(existing: dict[str, Any], doc: CapsuleDocument) -> bool:
    try:
        return CapsuleSpec.model_validate(existing.get("spec") or {}).dump() == doc.spec.dump()
    except ValueError:  # pydantic's ValidationError: not even a Capsule we can read
        return False


async def _apply_capsules(kube: Kube, docs: list[tuple[str, CapsuleDocument]], ns: str) -> int:
    """The Capsules given with the plans, before any Plan: one that is there with the same spec
    is left as it is; one that is there with another spec is refused (a Capsule is policy that
    other Plans run under: `submit` never changes one; `kubectl apply` does, for who may); a
    missing one is created, when the user may (else the API server's refusal, said plainly).
    Every refusal comes before anything is created."""
    missing = []
    for path, doc in docs:
        where = doc.namespace or ns
        existing = await kube.get_capsule(where, doc.name)
        if existing is None:
            missing.append((path, doc))
        elif _same_capsule(existing, doc):
            print(f"capsule.planops.dev/{doc.name} unchanged")
        else:
            sys.stderr.write(
                f"error: capsule {doc.name!r} already exists in {where} with another spec; submit "
                f"never changes a Capsule (Plans run under it): `kubectl apply -f {path}` does, "
                "if you may, or submit the plan files alone to use the Capsule that is there\n"
            )
            return EXIT_INPUT
    for path, doc in missing:
        where = doc.namespace or ns
        try:
            await kube.create_capsule(where, capsule_body(doc, ns))
        except ApiError as e:
            if e.status not in (400, 403, 422):
                raise
            why = (
                "you may not create Capsules there; a namespace's admin applies them "
                f"(`kubectl apply -f {path}`), then submit the plan files alone"
                if e.status == 403
                else "fix it and submit again"
            )
            sys.stderr.write(
                f"error: the cluster refused capsule {doc.name!r} in {where} ({e.status} "
                f"{e.reason}: {e.message}); no plan was submitted: {why}\n"
            )
            return EXIT_INPUT
        print(f"capsule.planops.dev/{doc.name} created")
    return EXIT_OK


async def _wait(kube: Kube, ns: str, name: str, timeout: float) -> int:
    """Progress lines while the plan runs (one per settled step), then the verdict."""
    deadline = time.monotonic() + timeout if timeout else None
    shown = 0
    while True:
        plan = await kube.get_plan(ns, name)
        st = (plan or {}).get("status") or {}
        rep = st.get("report") or {}
        steps, first = rep.get("steps") or [], int(rep.get("stepsOmitted") or 0)
        if plan is not None and first > shown:  # settled past the status's window: read them
            steps, first = (await full_report(kube, plan))["status"]["report"]["steps"], 0
        for s in steps[shown - first :]:
            mark = {"success": "✔", "failed": "✘", "skipped": "↷"}.get(s["status"], "?")
            why = f": {render.first_line(s.get('error'))}" if s.get("error") else ""
            sys.stderr.write(f"  {mark} {s['stepId']} {s['status']}{why}\n")
        shown = first + len(steps)
        phase = st.get("phase")
        if phase in FINISHED:
            if phase == "Invalid":
                sys.stderr.write(
                    f"plan {name}: refused, {st.get('errorCount')} error(s) (nothing ran):\n"
                )
                for e in st.get("errors") or []:
                    sys.stderr.write(f"  - [{e['code']}] {e['path']}: {e['message']}\n")
                return EXIT_INPUT
            print(f"plan {name}: {phase} ({st.get('progress')} steps, {st.get('duration')})")
            return EXIT_OK if phase == "Succeeded" else EXIT_FAILED
        if deadline is not None and time.monotonic() > deadline:
            sys.stderr.write(f"plan {name}: still {phase or 'pending'} after {timeout:.0f}s\n")
            return EXIT_FAILED
        await asyncio.sleep(0.5)


def _plan_graph(plan: dict[str, Any], name: str) -> graph.PlanGraph | str:
    """A cluster Plan's graph with its status, or why its spec cannot be read."""
    doc, problems = parse_document(plan)
    if not isinstance(doc, PlanDocument):
        where = "; ".join(f"{p.path}: {p.message}" for p in problems[:3]) or "not a Plan"
        return f"plan {name!r}: its spec cannot be read: {where}"
    return graph.with_status(graph.from_spec(name, doc.spec), plan.get("status") or {})


class _Screen:
    """Where frames go: on a terminal each one replaces the last; elsewhere (a pipe, a log)
    each changed frame follows the one before, after a blank line."""

    def __init__(self, out: TextIO, output: str) -> None:
        self.out, self.output = out, output
        self.tty = out.isatty()
        self.colour = output == "text" and self.tty and not os.environ.get("NO_COLOR")
        self.last: str | None = None

    def show(self, drawn: graph.PlanGraph) -> None:
        frame = graph.render(drawn, self.output, self.colour)
        if frame == self.last:
            return
        if self.tty and self.last is not None:
            self.out.write("\x1b[H\x1b[2J")
        elif self.last is not None:
            self.out.write("\n")
        self.out.write(frame)
        self.out.flush()
        self.last = frame


def _phase_exit(plan: dict[str, Any]) -> int | None:
    """`graph --watch` ends as `submit --wait` does: 0 Succeeded, 1 Failed, 2 Invalid."""
    phase = (plan.get("status") or {}).get("phase")
    return {"Succeeded": EXIT_OK, "Failed": EXIT_FAILED, "Invalid": EXIT_INPUT}.get(phase or "")


async def cmd_graph(kube: Kube, args: argparse.Namespace, ns: str) -> int:
    """The Plan's DAG with its status; --watch redraws on each change the API server sends
    (a watch on this one Plan, resumed from the last resourceVersion when the server ends it)."""
    name = args.target
    plan = await kube.get_plan(ns, name)
    if plan is None:
        sys.stderr.write(f"error: plan {name!r} not found in namespace {ns}\n")
        return EXIT_INPUT
    screen = _Screen(sys.stdout, args.output)
    while True:
        omitted = ((plan.get("status") or {}).get("report") or {}).get("stepsOmitted")
        drawn = _plan_graph(await full_report(kube, plan) if omitted else plan, name)
        if isinstance(drawn, str):
            sys.stderr.write(f"error: {drawn}\n")
            return EXIT_INPUT
        screen.show(drawn)
        done = _phase_exit(plan)
        if not args.watch:
            return EXIT_OK
        if done is not None:
            return done
        changed = await next_version(kube, ns, name, plan)
        if changed is None:
            sys.stderr.write(f"plan {name}: deleted\n")
            return EXIT_FAILED
        plan = changed


async def next_version(
    kube: Kube, ns: str, name: str, plan: dict[str, Any]
) -> dict[str, Any] | None:
    """The Plan's next version (None: it was deleted): the watch's next ADDED or MODIFIED
    event; a watch the server ended is started again from the last version seen, and one
    whose version is too old (410 Gone) from a fresh read."""
    version = (plan.get("metadata") or {}).get("resourceVersion")
    while True:
        try:
            async with aclosing(kube.watch_plan(ns, name, version)) as events:
                async for kind, obj in events:
                    meta = obj.get("metadata") or {}
                    if kind == "DELETED":
                        return None
                    if kind in ("ADDED", "MODIFIED") and meta.get("name") == name:
                        return obj
                    version = meta.get("resourceVersion") or version  # BOOKMARK
        except ApiError as e:
            if e.status != 410:
                raise
            fresh = await kube.get_plan(ns, name)
            if fresh is None or fresh != plan:
                return fresh
            version = (fresh.get("metadata") or {}).get("resourceVersion")


VERBS: dict[str, Verb] = {
    "submit": cmd_submit,
    "get": cmd_get,
    "describe": cmd_describe,
    "logs": cmd_logs,
    "trace": cmd_trace,
    "rerun": cmd_rerun,
    "cancel": cmd_cancel,
    "answer": cmd_answer,
    "graph": cmd_graph,
}
