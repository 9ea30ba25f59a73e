"""Pure: a Plan from a template (spec.templateRef) in the cluster: which template object it
reads, what its run records of it, and its author's right to read it.

- A run snapshots what it runs: as it starts, `status.template` records the template of a Plan
  from a template (its kind, name, uid, generation and resourceVersion with its spec, for that
  run id), and `status.templates` every other template it runs (those its template steps name,
  transitively); every later reconcile of the run judges and runs that snapshot, and a template
  step's child Plan is made from it, so a template edited (or deleted) during a run never
  changes it. A new run (a new generation, a re-run) reads the templates again.
- Using a template is the author's act: the Plan's recorded author (run.authors) must be
  allowed `get` on it (a SubjectAccessReview, asked by effects.reads) before a run starts;
  otherwise no run starts, and the status and an Event say which template and why.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from planops.api.documents import problems_of
from planops.api.template_models import PlanTemplateSpec
from planops.api.template_ref import TemplateRef, as_ref
from planops.engine import PlanError, bodies
from planops.engine.plan_templates import Key, TemplateResolver, templates
from planops.reconciler.run import authors

Obj = dict[str, Any]
#: the plural of each template kind (the API's path, RBAC's resource)
PLURALS = {"PlanTemplate": "plantemplates", "ClusterPlanTemplate": "clusterplantemplates"}
#: the Event and condition reason of a run refused because its author may not read a template
REASON = "TemplateNotAllowed"


def ref_of(plan: Obj) -> TemplateRef | None:
    """The template a Plan object names (spec.templateRef), None when none or unreadable (the
    judge refuses an unreadable one through the schema)."""
    raw = (plan.get("spec") or {}).get("templateRef")
    if not isinstance(raw, dict):
        return None
    try:
        return TemplateRef.model_validate(raw)
    except ValidationError:
        return None


#: templates one judgement reads at most (a plan's, and those their template steps name)
MAX_TEMPLATES = 32


def wanted(spec: Any) -> set[Key]:
    """The templates a spec (a Plan's, a template's) names: its templateRef, and the templates
    of its template steps (main and finally, and in their decide/map/reduce bodies), as (kind,
    name); what cannot be read is left to
    the judge's refusal."""
    if not isinstance(spec, dict):
        return set()
    found: set[Key] = set()
    ref = ref_of({"spec": spec})
    if ref is not None:
        found.add((ref.kind, ref.name))
    for key in ("steps", "finally"):
        steps = spec.get(key)
        for step in steps if isinstance(steps, list) else ():
            for each in (step, *_body_steps(step)):
                if not isinstance(each, dict) or each.get("template") is None:
                    continue
                try:
                    named = TemplateRef.model_validate(as_ref(each["template"]))
                except ValidationError:
                    continue
                found.add((named.kind, named.name))
    return found


def _body_steps(step: Any) -> list[Any]:
    """The raw steps of a step's decide/map/reduce bodies (a single call or a list)."""
    if not isinstance(step, dict):
        return []
    found: list[Any] = []
    for kind in bodies.BODY_KINDS:
        for body in bodies.bodies(kind, step.get(kind)).values():
            found += body if isinstance(body, list) else [body]
    return found


def _records(status: Obj, run_id: str) -> list[Obj]:
    """The template records of the run `run_id` in a status: status.template (a Plan from a
    template's) and status.templates (the others it runs)."""
    found = status.get("template")
    listed = status.get("templates")
    records = [found] + (listed if isinstance(listed, list) else [])
    return [r for r in records if isinstance(r, dict) and r.get("run") == run_id]


def snapshot(plan: Obj, run_id: str) -> dict[Key, Obj | None] | None:
    """The templates the run `run_id` recorded as it started (status.template and
    status.templates), as the objects they were read as; None when the status records none for
    that run."""
    found: dict[Key, Obj | None] = {}
    for rec in _records(plan.get("status") or {}, run_id):
        kind, name = rec.get("kind"), rec.get("name")
        if not isinstance(kind, str) or not isinstance(name, str):
            continue
        meta = {k: rec.get(k) for k in ("uid", "generation", "resourceVersion")}
        found[(kind, name)] = {"metadata": {"name": name, **meta}, "spec": rec.get("spec")}
    return found or None


def record(run_id: str, key: Key, objs: dict[Key, Obj | None]) -> Obj | None:
    """The record of the template `key` for the run `run_id` (None: not read)."""
    kind, name = key
    obj = objs.get(key)
    if obj is not None:
        meta = obj.get("metadata") or {}
        return {
            "kind": kind,
            "name": name,
            "uid": meta.get("uid"),
            "generation": meta.get("generation"),
            "resourceVersion": meta.get("resourceVersion"),
            "run": run_id,
            "spec": obj.get("spec"),
        }
    return None


def recorded(previous: Obj, plan: Obj, run_id: str, objs: dict[Key, Obj | None]) -> Obj:
    """The status a run's writes build on, with every template the run runs recorded (kept once
    recorded): a Plan from a template's in status.template, the others (those its template
    steps name, transitively) in status.templates. Their size is judged with the spec's
    (run.judging: a run whose templates would not fit is refused before it starts)."""
    ref, out = ref_of(plan), previous
    main = (ref.kind, ref.name) if ref is not None else None
    found = previous.get("template")
    if main is not None and not (isinstance(found, dict) and found.get("run") == run_id):
        rec = record(run_id, main, objs)
        out = out if rec is None else {**out, "template": rec}
    listed = previous.get("templates")
    if isinstance(listed, list) and any(
        isinstance(r, dict) and r.get("run") == run_id for r in listed
    ):
        return out
    others = [record(run_id, key, objs) for key in sorted(objs) if key != main]
    kept = [r for r in others if r is not None]
    return {**out, "templates": kept} if kept else out


def template_object(status: Obj, run_id: str, key: Key) -> Obj | None:
    """The template `key` as the run `run_id` recorded it (what its template step runs)."""
    return (snapshot({"status": status}, run_id) or {}).get(key)


def resolver(objs: dict[Key, Obj | None]) -> tuple[TemplateResolver, list[PlanError]]:
    """The templates read, for the validator; one that cannot be read as a template refuses
    the plan saying why (never taken for a missing one)."""
    found: dict[Key, PlanTemplateSpec] = {}
    errors: list[PlanError] = []
    for (kind, name), obj in objs.items():
        if obj is None:
            continue
        try:
            found[(kind, name)] = PlanTemplateSpec.model_validate(obj.get("spec") or {})
        except ValidationError as e:
            why = "; ".join(f"{p.path}: {p.message}" for p in problems_of(e, "spec"))
            errors.append(
                PlanError(
                    "no-template", None, "templateRef", f"{kind} {name!r} cannot be used: {why}"
                )
            )
    return templates(found), errors


def refusal(author: authors.Author, ref: Key, namespace: str, why: str) -> authors.Refusal:
    """The run's refusal: its author may not `get` the template."""
    kind, name = ref
    where = f" in namespace {namespace}" if kind == "PlanTemplate" else ""
    return authors.Refusal(
        REASON,
        f"{author.username}, who last changed what this Plan does, may not read {kind} {name}"
        f'{where} (RBAC verb "get" on {PLURALS[kind]}.planops.dev'
        + (f": {why}" if why else "")
        + "): a template is run only for an author who may read it; grant it, or name another",
    )
