"""The cluster verbs that steer a Plan: rerun, retry, cancel, answer. Each writes one annotation
on the Plan, which the operator acts on (it checks an answer and a retry again)."""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
from typing import Any

from planops.api.names import (
    ANNOTATION_CANCEL,
    ANNOTATION_CANCEL_RUN_FINALLY,
    ANNOTATION_RERUN,
    ANNOTATION_RETRY,
    LABEL_PARENT,
    LABEL_STEP,
)
from planops.cli.exit_codes import EXIT_INPUT, EXIT_OK
from planops.engine import control
from planops.kube.api import CliApi
from planops.kube.manifests import answer_annotation, full_value
from planops.reconciler import is_child_plan


class RefusedError(Exception):
    """Why a steering request is refused before anything is written (its message)."""


async def _annotate(kube: CliApi, ns: str, name: str, key: str, value: str) -> None:
    if await kube.get_plan(ns, name) is None:
        raise RefusedError(f"plan {name!r} not found in namespace {ns}")
    await kube.patch_plan(ns, name, {"metadata": {"annotations": {key: value}}})


async def _said(action: Any) -> int:
    """A steering request run for a CLI verb: its message on stdout (0), or its refusal on
    stderr (EXIT_INPUT)."""
    try:
        print(await action)
    except RefusedError as e:
        sys.stderr.write(f"error: {e}\n")
        return EXIT_INPUT
    return EXIT_OK


def request_token() -> str:
    """A re-run's or a retry's token: the time it was asked (readable in `kubectl get -o yaml`)
    and a random suffix, so that two requests in one second are two requests (the operator acts
    once per token: a re-run asked twice within a second would otherwise be one)."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(2)


def child_refusal(plan: dict[str, Any]) -> str | None:
    """Why a re-run or retry of this Plan is refused before anything is written: a capsule
    step's child Plan runs only as its parent starts it (the operator refuses the annotation
    too: reconciler.run.retrying.child_requests)."""
    if not is_child_plan(plan):
        return None
    meta = plan["metadata"]
    parent, step = full_value(meta, LABEL_PARENT), full_value(meta, LABEL_STEP)
    return (
        f"plan {meta['name']} is the child of step {step} of plan {parent}: its runs are its "
        f"parent's (kubectl plan rerun {parent}, or kubectl plan retry {parent} --from {step})"
    )


async def rerun(kube: CliApi, ns: str, name: str) -> str:
    """Ask for a new run of the Plan (the re-run annotation); what was asked."""
    plan = await kube.get_plan(ns, name)
    if plan is not None and (why := child_refusal(plan)) is not None:
        raise RefusedError(why)
    token = request_token()
    await _annotate(kube, ns, name, ANNOTATION_RERUN, token)
    return f"plan {name}: re-run {token} requested"


async def cmd_rerun(kube: CliApi, args: argparse.Namespace, ns: str) -> int:
    return await _said(rerun(kube, ns, args.name))


def retry_refusal(plan: dict[str, Any], from_step: str | None) -> str | None:
    """Why `retry` is refused before anything is written (the operator judges it again), or
    None: the Plan must have ended, a Succeeded one needs --from, and --from names a main step."""
    st = plan.get("status") or {}
    phase, name = st.get("phase"), plan["metadata"]["name"]
    if phase not in ("Failed", "Succeeded"):
        return (
            f"plan {name} is {phase or 'not started'}: a retry starts once a run has ended "
            f"(kubectl plan cancel {name}, or wait)"
        )
    if phase == "Succeeded" and from_step is None:
        return (
            f"plan {name} succeeded: nothing failed to retry (--from STEP runs a step again, "
            "and what depends on it)"
        )
    steps = [s.get("id") for s in (plan.get("spec") or {}).get("steps") or []]
    if from_step is not None and from_step not in steps:
        return (
            f"--from {from_step}: plan {name} has no such main step (its steps: {', '.join(steps)})"
        )
    return None


async def retry(kube: CliApi, ns: str, name: str, from_step: str | None) -> str:
    """Ask for a retry of the Plan's ended run (from a step: `from_step`); what was asked."""
    plan = await kube.get_plan(ns, name)
    if plan is None:
        raise RefusedError(f"plan {name!r} not found in namespace {ns}")
    why = child_refusal(plan) or retry_refusal(plan, from_step)
    if why is not None:
        raise RefusedError(why)
    value = request_token() + (f":from={from_step}" if from_step else "")
    await kube.patch_plan(ns, name, {"metadata": {"annotations": {ANNOTATION_RETRY: value}}})
    return f"plan {name}: retry {value} requested"


async def cmd_retry(kube: CliApi, args: argparse.Namespace, ns: str) -> int:
    return await _said(retry(kube, ns, args.name, args.from_step))


async def cancel(kube: CliApi, ns: str, name: str, run_finally: bool, by: str) -> str:
    """A cancel: the plain one (no finally step runs, those running stop), or one that runs the
    finally steps (`run_finally`: its own annotation, since choosing what runs is an author's
    act the cluster's admission policy checks; docs/security.md). `by`: who asks (the value
    says so, e.g. `kubectl plan cancel`)."""
    key = ANNOTATION_CANCEL_RUN_FINALLY if run_finally else ANNOTATION_CANCEL
    how = " --run-finally" if run_finally else ""
    at = time.strftime("%H:%M:%SZ", time.gmtime())
    await _annotate(kube, ns, name, key, f"{by}{how} at {at}")
    then = "; its finally steps run after its steps stop" if run_finally else ""
    return f"plan {name}: cancel requested{then}"


async def cmd_cancel(kube: CliApi, args: argparse.Namespace, ns: str) -> int:
    return await _said(cancel(kube, ns, args.name, args.run_finally, "kubectl plan cancel"))


def checked_answer(ask: dict[str, Any], items: list[str]) -> dict[str, Any]:
    """`--set KEY=VALUE`s typed by the waiting ask's outputSchema and judged against it by the
    engine's JSON Schema code, before anything is written: a field the schema does not name, a
    value of the wrong type, or an answer the schema refuses raises ValueError (the reason)."""
    schema = ask.get("outputSchema") or {}
    answer: dict[str, Any] = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep:
            raise ValueError(f"--set {item!r}: expected KEY=VALUE")
        answer[key] = control.coerce_answer(schema, key, text)
    problem = control.answer_problem(schema, answer)
    if problem:
        raise ValueError(f"the answer does not fit the question: {problem}")
    return answer


async def answer(kube: CliApi, ns: str, name: str, step: str, items: list[str] | None) -> str:
    """Check the answer (`items`: KEY=VALUE; None: decline) against the waiting question's
    schema here (Refused with the reason), then write it as an annotation naming the run and the
    question (reconciler.run.asks: an answer answers that one question); the operator checks it
    again."""
    plan = await kube.get_plan(ns, name)
    if plan is None:
        raise RefusedError(f"plan {name!r} not found in namespace {ns}")
    st = plan.get("status") or {}
    waiting = {a["stepId"]: a for a in st.get("asks") or []}
    ask = waiting.get(step)
    if ask is None:
        what = ", ".join(waiting) or "none"
        raise RefusedError(
            f"step {step!r} of plan {name} is not waiting for an answer (waiting: {what})"
        )
    value: dict[str, Any] = {"run": (st.get("run") or {}).get("id")}
    if ask.get("question"):  # (an operator before questions had ids wrote none)
        value["question"] = ask["question"]
    if items is None:
        value["declined"] = True
    else:
        try:
            value["answer"] = checked_answer(ask, items)
        except ValueError as e:
            raise RefusedError(str(e)) from None
    annotations = {answer_annotation(step): json.dumps(value)}
    await kube.patch_plan(ns, name, {"metadata": {"annotations": annotations}})
    return f"plan {name}: step {step} " + ("declined" if items is None else "answered")


async def cmd_answer(kube: CliApi, args: argparse.Namespace, ns: str) -> int:
    items = None if args.decline else args.set
    return await _said(answer(kube, ns, args.name, args.step, items))
