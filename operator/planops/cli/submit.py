"""`kubectl plan submit [--wait]`: the Capsules given, then the Plans, then (with --wait) one
progress line per settled step and the verdict as the exit code."""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from typing import Any

from pydantic import ValidationError

from planops.api import API_VERSION, CapsuleDocument, CapsuleSpec, PlanDocument, PlanSpec, names
from planops.api.documents import problems_of
from planops.cli import render
from planops.cli.exit_codes import EXIT_FAILED, EXIT_INPUT, EXIT_OK
from planops.cli.inputs import (
    InputError,
    Loaded,
    given_inputs,
    load,
    unknown_inputs,
    with_default_capsule,
    with_inputs,
)
from planops.cli.plan_report import full_report
from planops.engine import capsules, validate
from planops.kube.api import CliApi
from planops.kube.client import ApiError

FINISHED = names.FINISHED


async def cmd_submit(kube: CliApi, args: argparse.Namespace, ns: str) -> int:
    """Capsules first (`_apply_capsules`), then the Plans; a plan naming no Capsule runs under
    the only Capsule given, as in `validate` and `run --local`."""
    try:
        loaded = _loaded(args)
        given = given_inputs(getattr(args, "input_file", None), getattr(args, "input", None) or [])
    except InputError as e:
        for line in e.lines:
            sys.stderr.write(f"error: {line}\n")
        return EXIT_INPUT
    plans = [with_default_capsule(p, loaded.capsules) for _, p in loaded.plans]
    if refused := input_refusals(plans, given, loaded.capsules):
        for line in refused:
            sys.stderr.write(f"error: {line}\n")
        return EXIT_INPUT
    plans = [with_inputs(p, given) for p in plans]
    if (rc := await _apply_capsules(kube, loaded.capsule_documents, ns)) != EXIT_OK:
        return rc
    names = []
    for doc in plans:
        body = plan_body(doc, ns, getattr(args, "generate_name", False))
        try:
            created = await kube.create_plan(doc.namespace or ns, body)
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
        name = (created.get("metadata") or {}).get("name") or doc.plan_id
        names.append((doc.namespace or ns, name))
        print(f"plan.planops.dev/{name} created")
    if not args.wait:
        return EXIT_OK
    results = [await wait(kube, pns, name, args.timeout) for pns, name in names]
    return max(results)


#: `submit --from KIND/NAME`: the kinds a template is named by
FROM_KINDS = {
    "plantemplate": "PlanTemplate",
    "plantemplates": "PlanTemplate",
    "pt": "PlanTemplate",
    "clustertemplate": "ClusterPlanTemplate",
    "clusterplantemplate": "ClusterPlanTemplate",
    "clusterplantemplates": "ClusterPlanTemplate",
    "cpt": "ClusterPlanTemplate",
}


def _loaded(args: argparse.Namespace) -> Loaded:
    """The files' Plans and Capsules, or (--from) one Plan that runs a template; raises
    InputError."""
    source = getattr(args, "from_template", None)
    if source is None:
        if not args.files:
            raise InputError(["submit needs FILE... or --from KIND/NAME"])
        return load(args.files)
    if args.files:
        raise InputError(["submit takes FILE... or --from KIND/NAME, not both"])
    return Loaded(plans=[("--from", from_template(source, getattr(args, "capsule_name", None)))])


def from_template(source: str, capsule: str | None) -> PlanDocument:
    """`--from plantemplate/NAME` (or clustertemplate/NAME): a Plan that runs it, under a name
    the cluster completes (generateName NAME-); its input is what --input gives."""
    kind, sep, name = source.partition("/")
    if not sep or kind.lower() not in FROM_KINDS or not name:
        kinds = "plantemplate/NAME or clustertemplate/NAME"
        raise InputError([f"--from {source!r}: expected {kinds}"])
    body: dict[str, Any] = {"templateRef": {"kind": FROM_KINDS[kind.lower()], "name": name}}
    if capsule:
        body["capsule"] = capsule
    try:
        spec = PlanSpec.model_validate(body)
    except ValidationError as e:
        why = [f"--from {source!r}: {p.path}: {p.message}" for p in problems_of(e)]
        raise InputError(why) from None
    return PlanDocument(f"{name[:52]}-", spec, generate_name=True)


def input_refusals(
    plans: list[PlanDocument], given: dict[str, Any], caps: dict[str, CapsuleSpec]
) -> list[str]:
    """Why the given inputs cannot run these plans, before anything is created: a key the
    inputSchema does not name, or the merged input refused by the validator (`input-schema`).
    Without given inputs the operator judges the plan, as it always has."""
    if not given:
        return []
    found = [line for p in plans for line in unknown_inputs(p, given)]
    resolver = capsules(caps)
    for p in plans:
        found += [
            f"plan {p.plan_id}: {e.path}: {e.message}"
            for e in validate(with_inputs(p, given).spec, resolver)
            if e.code == "input-schema"
        ]
    return found


def plan_body(doc: PlanDocument, ns: str, generate_name: bool = False) -> dict[str, Any]:
    """The Plan as the file gives it (labels and annotations kept); under a fresh name when the
    file has metadata.generateName or `--generate-name` asks for one."""
    meta: dict[str, Any] = {"namespace": doc.namespace or ns}
    if doc.generate_name:
        meta["generateName"] = doc.plan_id
    elif generate_name:
        meta["generateName"] = doc.plan_id.rstrip("-") + "-"
    else:
        meta["name"] = doc.plan_id
    if doc.labels:
        meta["labels"] = dict(doc.labels)
    if doc.annotations:
        meta["annotations"] = dict(doc.annotations)
    return {"apiVersion": API_VERSION, "kind": "Plan", "metadata": meta, "spec": doc.spec.dump()}


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


async def _apply_capsules(kube: CliApi, docs: list[tuple[str, CapsuleDocument]], ns: str) -> int:
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


async def wait(kube: CliApi, ns: str, name: str, timeout: float) -> int:
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
