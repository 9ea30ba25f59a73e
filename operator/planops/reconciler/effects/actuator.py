"""The reconcile's imperative shell: carries out what reconciler.core decided, through KubeApi.

It creates the attempts' objects (at most CREATE_CONCURRENCY at once) and reads the API
server's answer to each as an `Answer` the decision takes back (reconciler.dispatching says
what an error means: adopt our own object, fail the attempt, or retry the reconcile); deletes a
stopped run's objects; hands the Events to the Recorder and applies the metric updates. It
decides nothing itself.
"""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client import Counter, Histogram

from planops import metrics
from planops.api import PlanSpec
from planops.kube import manifests
from planops.kube.api import KubeApi
from planops.kube.cache import RunObjects
from planops.kube.client import ApiError
from planops.kube.events import Recorder
from planops.reconciler.effects.intents import Answer, Create, Delete, MetricName, Told
from planops.reconciler.run import attempt_objects as dispatching
from planops.reconciler.run.reading import bounded

#: Jobs / child Plans created at once by one reconcile (a wide fan-out must not be created one by
#: one: the last step's dispatch latency would grow with the width of the plan).
CREATE_CONCURRENCY = 16

COUNTERS: Mapping[MetricName, Counter] = {
    "plans": metrics.plans,
    "steps": metrics.steps,
    "retries": metrics.retries,
    "calls_denied": metrics.calls_denied,
}
HISTOGRAMS: Mapping[MetricName, Histogram] = {
    "plan_duration": metrics.plan_duration,
    "step_duration": metrics.step_duration,
    "dispatch_latency": metrics.dispatch_latency,
}


async def create(
    kube: KubeApi,
    ref: manifests.PlanRef,
    creates: list[Create],
    spec: PlanSpec,
    seen: RunObjects | None,
    limit: int = CREATE_CONCURRENCY,
) -> list[Answer]:
    """Create each object; the answers in the same order. A transient error (a conflict,
    throttling, a server error) raises: the queue retries the reconcile, and the objects
    created meanwhile are adopted then (deterministic names)."""
    return await bounded([_create(kube, ref, c, spec, seen) for c in creates], limit)


async def _create(
    kube: KubeApi,
    ref: manifests.PlanRef,
    c: Create,
    spec: PlanSpec,
    seen: RunObjects | None,
) -> Answer:
    d = c.dispatch
    body = c.body
    if body is None:  # a child Plan: from its target Capsule's `plan`, read now
        target = await kube.get_capsule(ref.namespace, d.step.capsule or "")
        built = dispatching.child(ref, d, spec, target)
        if isinstance(built, str):
            return Answer(d, refusal=built)
        body = built
    name = body["metadata"]["name"]
    try:
        if c.kind == "plan":
            await kube.create_plan(ref.namespace, body)
        else:
            job = await kube.create_job(ref.namespace, body)
            if seen is not None:  # the next reconcile sees it even before the watch
                seen.seen("job", "ADDED", job)
    except ApiError as e:
        answer = dispatching.create_refused(d.kind, e.kind, e.message)
        if answer == "retry":
            raise
        if answer != "adopt":
            return Answer(d, refusal=answer)
        get = kube.get_plan if c.kind == "plan" else kube.get_job
        refusal = dispatching.squatter(ref, d.kind, name, await get(ref.namespace, name))
        return Answer(d, refusal=refusal)  # ours (made before a restart): adopted, or squatted
    return Answer(d, created=name)


async def delete(kube: KubeApi, namespace: str, deletes: tuple[Delete, ...]) -> None:
    for d in deletes:
        remove = kube.delete_job if d.kind == "job" else kube.delete_plan
        await remove(namespace, d.name)


def tell(events: Recorder, told: Told) -> None:
    """The decision's Events to the Recorder (posted at its flush), its metrics updated."""
    for e in told.events:
        events(e.reason, e.message, e.warning, e.post, **e.fields)
    for m in told.metrics:
        if m.observe:
            histogram = HISTOGRAMS[m.name]
            (histogram.labels(*m.labels) if m.labels else histogram).observe(m.value)
        else:
            counter = COUNTERS[m.name]
            (counter.labels(*m.labels) if m.labels else counter).inc(m.value)
