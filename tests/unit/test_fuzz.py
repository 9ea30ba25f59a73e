"""Bounded property-based fuzzing of what reads untrusted input: the validator, the CLI's readers,
and the reconciler's parsing of labels and annotations. Each only ever answers (errors, an
InputError, None for an object that is not ours); none raises. Examples are bounded so the file
runs in well under half a minute."""

from __future__ import annotations

import json
import os
import tempfile
from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from planops.api import PlanDocument, names, parse_document
from planops.api.names import LABEL_ATTEMPT, LABEL_PLAN, LABEL_STEP
from planops.cli import inputs
from planops.cli.inputs import InputError, Loaded, load
from planops.engine import PlanError, Policy, validate
from planops.kube import manifests
from planops.kube.cache import slim_run_object
from planops.kube.manifests import label_value
from planops.reconciler.run import asks
from planops.reconciler.run import identity as runs
from planops.reconciler.run.observe import (
    Observed,
    attempt_step,
    child_attempt,
    job_attempt,
    job_ended,
    owned,
    pods_by_job,
)

from ..hypothesis_profiles import examples
from .helpers import resolver

FUZZ = settings(
    max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow]
)

# -- values ------------------------------------------------------------------------------------

IDS = ["a", "b", "scan", "_x", "x-", "input", "item", "a" * 63, "é", ""]
#: valid most of the time, so that most documents get past the schema to the validator
ID = st.one_of(st.sampled_from(IDS[:3]), st.sampled_from(IDS))


def mostly(valid: st.SearchStrategy[Any], anything: st.SearchStrategy[Any]) -> Any:
    return st.one_of(valid, valid, valid, anything)


TRICKY = [
    "{{input.x}}",
    "{{a.output}}",
    "{{ b.json.0.k }}",
    "{{item}}",
    "{{",
    "}}",
    "{{a.}}",
    "{{{{x}}}}",
    "$a.output",
    "$b.status",
    "$nope.other",
    "$a.status == 'success' && $b.output != ''",
    "echo {{input.x}}",
    "sh -c 'echo hi'",
    "'unterminated",
    "\x00",
    "\udc80",
    "1e999999999",
    "1e-999999999",
    "NaN",
    "64Mi",
    "500m",
    "9" * 80,
    "#",
    "$ref",
]
text = st.one_of(st.text(max_size=30), st.sampled_from(TRICKY + IDS))
scalar = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.floats(allow_nan=False, allow_infinity=False),
    text,
)


def rarely(common: st.SearchStrategy[Any], rare: st.SearchStrategy[Any], one_in: int = 20) -> Any:
    """`rare` one time in `one_in`: a document with many values still mostly parses."""
    return st.integers(1, one_in).flatmap(lambda n: rare if n == 1 else common)


json_value = st.recursive(
    scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(text, inner, max_size=4)),
    max_leaves=12,
)


def nest(value: Any, depth: int, as_list: bool) -> Any:
    for _ in range(depth):
        value = [value] if as_list else {"k": value}
    return value


#: Past every bound: Hypothesis raises Python's recursion limit by a few thousand frames while
#: it runs a test, so "past the limit" here means 5000 deep, not the 1000 of a plain process.
PAST_ANY_LIMIT = 5000
#: now and then a value nested past every bound (and around the limits of 64 and 80)
deep = st.builds(
    nest,
    json_value,
    st.sampled_from([0, 1, 63, 64, 65, 79, 81, 400, PAST_ANY_LIMIT]),
    st.booleans(),
)
value = rarely(json_value, st.one_of(deep, st.sampled_from([float("nan"), float("inf")])))
#: JSON text nested deeper than Python's json module itself can read (written, not dumped)
deep_json = st.builds(
    lambda v, n: "[" * n + json.dumps(v) + "]" * n,
    json_value,
    st.sampled_from([63, 65, 400, PAST_ANY_LIMIT]),
)
gate = st.fixed_dictionaries(
    {}, optional={"value": value, "op": st.sampled_from(["eq", "gt", "empty", "x"]), "to": value}
)
body_step = st.fixed_dictionaries(
    {},
    optional={
        "id": ID,
        "tool": st.sampled_from(["notes", "nope"]),
        "shell": text,
        "capsule": text,
        "input": value,
        "map": value,
    },
)
body = st.one_of(body_step, st.lists(body_step, max_size=3), value)
schema = mostly(
    st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from(["object", "string", "nope", 5]),
            "properties": st.dictionaries(text, st.one_of(value, st.just({"$ref": "#"}))),
            "$ref": st.sampled_from(["#", "#/$defs/a", "#/nope", "https://example.com/s"]),
            "$defs": st.just({"a": {"$ref": "#/$defs/a"}}),
            "required": value,
            "not": value,
            "$schema": text,
        },
    ),
    value,
)
quantity = st.one_of(text, st.integers(-5, 2**80), st.sampled_from(["1", "2Gi", "8Ei", "0.1n"]))
resources = st.fixed_dictionaries(
    {},
    optional={
        part: st.fixed_dictionaries({}, optional={"cpu": quantity, "memory": quantity})
        for part in ("requests", "limits")
    },
)
step = st.fixed_dictionaries(
    {"id": ID},
    optional={
        "tool": st.sampled_from(["notes", "echo-input", "submit-plan", "x"]),
        "shell": text,
        "capsule": text,
        "input": value,
        "exit": st.one_of(
            value,
            st.fixed_dictionaries(
                {"status": st.sampled_from(["success", "error", "x"])},
                optional={"when": gate, "message": value, "output": value},
            ),
        ),
        "filter": st.one_of(value, st.fixed_dictionaries({"over": value, "where": gate})),
        "decide": st.one_of(
            value,
            st.fixed_dictionaries({"if": gate, "then": body}, optional={"else": body}),
        ),
        "map": st.one_of(
            value,
            st.fixed_dictionaries({"over": value, "do": body}, optional={"concurrency": value}),
        ),
        "reduce": st.one_of(
            value,
            st.fixed_dictionaries({"over": value, "do": body}, optional={"initial": value}),
        ),
        "ask": st.one_of(
            value,
            st.fixed_dictionaries(
                {"prompt": text, "outputSchema": schema},
                optional={"default": value, "whenUnanswered": text},
            ),
        ),
        "agent": value,
        "dependsOn": st.lists(ID, max_size=3),
        "if": text,
        "onError": st.one_of(st.sampled_from(["fail", "skip", "continue"]), value),
        "retries": mostly(st.integers(0, 3), st.integers(-1, 101)),
        "timeoutSeconds": mostly(st.integers(1, 3600), st.integers(-1, 10**7)),
        "image": mostly(st.sampled_from(["local/busybox:1", "evil"]), text),
        "resources": resources,
    },
)
spec = st.fixed_dictionaries(
    {"steps": st.lists(step, max_size=5)},
    optional={
        "input": mostly(st.dictionaries(text, value, max_size=3), value),
        "output": mostly(st.dictionaries(text, value, max_size=3), value),
        "inputSchema": schema,
        "capsule": st.sampled_from(["default", "default", "missing"]),
        "parallelism": mostly(st.integers(1, 5), st.integers(-1, 5)),
    },
)
document = st.one_of(
    spec.map(lambda s: {"id": "p", **s}),
    spec.map(lambda s: {"id": "p", **s}),
    spec.map(
        lambda s: {
            "apiVersion": "planops.dev/v1alpha1",
            "kind": "Plan",
            "metadata": {"name": "p"},
            "spec": s,
        }
    ),
    st.fixed_dictionaries(
        {
            "identifier": text,
            "steps": st.lists(
                st.fixed_dictionaries(
                    {"id": ID, "tool_name": mostly(st.sampled_from(["map", "notes"]), text)},
                    optional={"input": value},
                ),
                max_size=4,
            ),
        },
        optional={"output": value, "solver": value},
    ),
    rarely(st.dictionaries(text, value, max_size=4), value, 2),
)


@FUZZ
@given(document)
def test_the_validator_only_ever_returns_errors(doc):
    parsed, problems = parse_document(doc)
    assert all(isinstance(p.path, str) and p.message for p in problems)
    if isinstance(parsed, PlanDocument):
        errors = validate(parsed.spec, resolver(), Policy(max_cpu="4", max_memory="1Gi"))
        assert all(isinstance(e, PlanError) and e.code for e in errors)


# -- the CLI's readers --------------------------------------------------------------------------

YAML_BITS = [
    "a:", "- ", "&x ", "*x", "<<: *x", "!!set ", "!!binary ", "!!timestamp ", "!custom ",
    "{", "}", "[", "]", ", ", "\n", "  ", "2024-01-01", "12:30", "1e5", ".nan", "'", '"', "? ",
    ": ", "|\n", ">\n", "# c", "---\n", "...\n", "9" * 60, "%YAML 1.1\n", "=", "id: p\n",
    "steps: []\n", "input:\n", "kind: Plan\n", "\t", "\x85", "\ufeff", "\x00",
]  # fmt: skip
file_text = st.one_of(
    st.lists(st.sampled_from(YAML_BITS), max_size=30).map("".join),
    json_value.map(lambda v: yaml.safe_dump({"id": "p", "steps": [], "input": {"v": v}})),
    json_value.map(lambda v: json.dumps({"id": "p", "steps": [], "input": v})),
    st.sampled_from([79, 81, PAST_ANY_LIMIT]).map(lambda n: "x: " + "[" * n + "]" * n),
    st.sampled_from([79, 81, 600]).map(lambda n: "".join(" " * i + "a:\n" for i in range(n))),
    st.text(max_size=60),
)
file_bytes = st.one_of(file_text.map(lambda t: t.encode("utf-8", "surrogatepass")), st.binary())


@FUZZ
@given(file_bytes)
def test_the_cli_reader_loads_or_raises_input_error(content):
    fd, path = tempfile.mkstemp(suffix=".yaml")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        try:
            assert isinstance(load([path]), Loaded)
        except InputError as e:
            assert e.lines and all(line.startswith(path) for line in e.lines)
    finally:
        os.unlink(path)


@FUZZ
@given(st.one_of(text, json_value.map(json.dumps), deep_json))
def test_an_input_value_is_a_value_or_an_input_error(raw):
    try:
        inputs.input_value("k", raw)
    except InputError as e:
        assert e.lines[0].startswith("--input k")


# -- the reconciler's reading of objects ----------------------------------------------------------

label_keys = st.sampled_from(
    [LABEL_STEP, LABEL_ATTEMPT, LABEL_PLAN, "batch.kubernetes.io/job-name", "job-name", "x"]
)
label_text = st.one_of(
    st.text(max_size=20), st.sampled_from(["1", "2", "0", "-1", "one", "٣", "1_0", " 3", "9" * 30])
)
labels = st.one_of(
    st.dictionaries(label_keys, st.one_of(label_text, scalar), max_size=5), st.none(), value
)
annotations = st.one_of(
    st.dictionaries(
        st.sampled_from([names.ANNOTATION_STEP_ID, LABEL_PLAN, "x"]),
        st.one_of(label_text, scalar),
        max_size=3,
    ),
    st.none(),
    value,
)
condition = st.fixed_dictionaries(
    {},
    optional={
        "type": st.sampled_from(["Complete", "Failed", "x"]),
        "status": st.sampled_from(["True", "False"]),
        "reason": st.one_of(st.sampled_from(["DeadlineExceeded", "BackoffLimitExceeded"]), value),
        "lastTransitionTime": st.one_of(
            st.sampled_from(["2024-01-01T00:00:00Z", "yesterday", "", "2024-13-45T99:00:00Z"]),
            scalar,
        ),
        "message": value,
    },
)
metadata = st.fixed_dictionaries(
    {},
    optional={
        "name": st.one_of(st.text(max_size=10), scalar),
        "labels": labels,
        "annotations": annotations,
        "creationTimestamp": st.one_of(st.sampled_from(["2024-01-01T00:00:00Z", "x"]), scalar),
    },
)
job = st.fixed_dictionaries(
    {"metadata": metadata},
    optional={
        "spec": st.one_of(value, st.just({"template": {"spec": {"containers": [{}]}}})),
        "status": st.one_of(value, st.fixed_dictionaries({"conditions": st.lists(condition)})),
    },
)
container_state = st.fixed_dictionaries(
    {},
    optional={
        "terminated": st.one_of(
            value, st.fixed_dictionaries({}, optional={"reason": value, "exitCode": value})
        ),
        "waiting": st.one_of(
            value, st.fixed_dictionaries({"reason": st.sampled_from(["ErrImagePull", "x"])})
        ),
    },
)
pod = st.fixed_dictionaries(
    {"metadata": metadata},
    optional={
        "status": st.one_of(
            value,
            st.fixed_dictionaries(
                {"containerStatuses": st.lists(st.fixed_dictionaries({"state": container_state}))},
                optional={"reason": st.sampled_from(["DeadlineExceeded", "x"])},
            ),
        ),
        "spec": value,
    },
)
child = st.fixed_dictionaries(
    {"metadata": metadata},
    optional={
        "status": st.one_of(
            value,
            st.fixed_dictionaries(
                {},
                optional={
                    "phase": st.sampled_from(["Succeeded", "Failed", "Invalid", "Running"]),
                    "report": st.one_of(
                        value, st.fixed_dictionaries({"steps": value, "failedStep": value})
                    ),
                    "errors": value,
                    "finishedAt": st.one_of(text, scalar),
                },
            ),
        )
    },
)


@FUZZ
@given(job, st.one_of(st.none(), pod))
def test_a_job_and_its_pod_are_an_attempt_or_not_ours(j, p):
    observed = job_attempt(j, p)
    assert observed is None or (isinstance(observed, Observed) and observed.attempt >= 1)


#: a run's Jobs and pods with every field the operator's cache keeps or drops: mostly shaped as
#: the API server writes them (else observe reads nothing past the first odd field), at times not
def shaped(common: st.SearchStrategy[Any]) -> Any:
    return rarely(common, value, one_in=8)


owner_ref = st.fixed_dictionaries(
    {
        "apiVersion": st.sampled_from(["batch/v1", "planops.dev/v1alpha1", "v1"]),
        "kind": st.sampled_from(["Job", "Plan", "x"]),
        "uid": st.sampled_from(["uid", "job-uid", "other"]),
        "controller": shaped(st.booleans()),
    },
    optional={"name": text, "blockOwnerDeletion": st.booleans()},
)
attempt_labels = rarely(
    st.just({LABEL_STEP: "a", LABEL_ATTEMPT: "1", LABEL_PLAN: "p", "x": "y"}), labels, one_in=6
)
run_meta = st.fixed_dictionaries(
    {"labels": attempt_labels, "name": rarely(st.sampled_from(["j", "j-x"]), scalar)},
    optional={
        "uid": st.sampled_from(["uid", "job-uid", "other"]),
        "annotations": annotations,
        "creationTimestamp": shaped(
            st.sampled_from(["2024-01-01T00:00:00Z", "2024-01-01T00:00:01Z"])
        ),
        "deletionTimestamp": shaped(st.just("2024-01-01T00:00:02Z")),
        "ownerReferences": shaped(st.lists(shaped(owner_ref), max_size=3)),
        "managedFields": value,
        "resourceVersion": st.sampled_from(["1", "2"]),
    },
)
pod_condition = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["DisruptionTarget", "Ready"]),
        "status": st.sampled_from(["True", "False"]),
    },
    optional={"reason": shaped(text), "message": shaped(text), "lastProbeTime": value},
)
job_condition = st.fixed_dictionaries(
    {"type": st.sampled_from(["Complete", "Failed", "FailureTarget"]), "status": st.just("True")},
    optional={
        "reason": shaped(st.sampled_from(["DeadlineExceeded", "BackoffLimitExceeded"])),
        "message": shaped(text),
        "lastTransitionTime": shaped(st.just("2024-01-01T00:00:04Z")),
        "lastProbeTime": value,
    },
)
terminated = st.fixed_dictionaries(
    {"exitCode": shaped(st.sampled_from([0, 1, 137])), "message": shaped(text)},
    optional={
        "signal": shaped(st.sampled_from([9, 0])),
        "reason": shaped(st.sampled_from(["OOMKilled", "StartError", "Completed"])),
        "finishedAt": shaped(st.just("2024-01-01T00:00:03Z")),
        "containerID": text,
    },
)
waiting = st.fixed_dictionaries(
    {
        "reason": st.sampled_from(
            ["ErrImagePull", "ContainerCreating", "PodInitializing", "CrashLoopBackOff"]
        )
    },
    optional={"message": shaped(text)},
)
run_state = st.one_of(
    st.fixed_dictionaries({"terminated": shaped(terminated)}),
    st.fixed_dictionaries({"waiting": shaped(waiting)}),
    st.fixed_dictionaries(
        {}, optional={"terminated": shaped(terminated), "waiting": waiting, "running": value}
    ),
)
job_spec = st.fixed_dictionaries(
    {},
    optional={
        "activeDeadlineSeconds": shaped(st.just(60)),
        "backoffLimit": value,
        "template": shaped(
            st.fixed_dictionaries(
                {
                    "spec": shaped(
                        st.fixed_dictionaries(
                            {
                                "containers": shaped(
                                    st.lists(
                                        shaped(
                                            st.fixed_dictionaries(
                                                {"name": st.just("step")},
                                                optional={
                                                    "resources": shaped(
                                                        st.fixed_dictionaries(
                                                            {},
                                                            optional={
                                                                "limits": shaped(
                                                                    st.just({"memory": "1Mi"})
                                                                ),
                                                                "requests": value,
                                                            },
                                                        )
                                                    ),
                                                    "image": text,
                                                },
                                            )
                                        ),
                                        max_size=2,
                                    )
                                ),
                                "volumes": value,
                            }
                        )
                    )
                }
            )
        ),
    },
)
run_job = st.fixed_dictionaries(
    {"metadata": shaped(run_meta), "spec": shaped(job_spec)},
    optional={
        "status": shaped(
            st.fixed_dictionaries(
                {"conditions": shaped(st.lists(shaped(job_condition), max_size=3))},
                optional={"active": value},
            )
        ),
    },
)
container_status = st.fixed_dictionaries({"state": shaped(run_state)}, optional={"name": text})
pod_status = st.fixed_dictionaries(
    {
        "phase": st.sampled_from(["Succeeded", "Failed", "Running", "Pending"]),
        "containerStatuses": shaped(st.lists(shaped(container_status), min_size=1, max_size=2)),
    },
    optional={
        "reason": st.sampled_from(["DeadlineExceeded", "x"]),
        "conditions": shaped(st.lists(shaped(pod_condition), max_size=3)),
        "hostIP": text,
        # a step's services (sidecars: init containers)
        "initContainerStatuses": shaped(st.lists(shaped(container_status), max_size=2)),
    },
)
run_pod = st.fixed_dictionaries(
    {"metadata": run_meta, "status": shaped(pod_status)},
    optional={
        "spec": shaped(
            st.fixed_dictionaries(
                {},
                optional={
                    "nodeName": shaped(st.just("n1")),
                    "activeDeadlineSeconds": shaped(st.just(30)),
                    "volumes": value,
                },
            )
        )
    },
)


@settings(max_examples=examples(500), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(run_job, min_size=1, max_size=2), st.lists(run_pod, max_size=3))
def test_the_cache_keeps_of_a_run_object_all_that_observe_reads(jobs, pods):
    """kube.cache.slim_run_object keeps only what observe reads, and whatever the objects hold
    (well formed or not), observe reads the slim objects exactly as the whole ones."""
    slim_jobs = [slim_run_object("job", j) for j in jobs]
    slim_pods = [slim_run_object("pod", p) for p in pods]
    assert [o is j for o, j in zip(owned(slim_jobs, "uid"), slim_jobs, strict=False)] == [
        o is j for o, j in zip(owned(jobs, "uid"), jobs, strict=False)
    ]
    assert len(owned(slim_jobs, "uid")) == len(owned(jobs, "uid"))
    whole_pods, slim_by_job = pods_by_job(pods, jobs), pods_by_job(slim_pods, slim_jobs)
    assert set(whole_pods) == set(slim_by_job)
    for whole, slim in zip(jobs, slim_jobs, strict=True):
        assert attempt_step(slim) == attempt_step(whole)
        assert job_ended(slim) == job_ended(whole)
        for p, sp in zip([None, *pods], [None, *slim_pods], strict=True):
            assert job_attempt(slim, sp) == job_attempt(whole, p)


@FUZZ
@given(child)
def test_a_child_plan_is_an_attempt_or_not_ours(c):
    observed = child_attempt(c)
    assert observed is None or isinstance(observed, Observed)


@FUZZ
@given(st.lists(pod, max_size=5), st.lists(job, max_size=3))
def test_pods_are_grouped_by_job_whatever_their_fields(pods, jobs):
    assert all(isinstance(name, str) for name in pods_by_job(pods, jobs))
    assert all(isinstance(o, dict) for o in owned(pods, "uid"))


def test_an_attempt_label_that_is_no_attempt_number_is_not_an_attempt():
    for bad in ["one", "0", "-1", "٣", "1_0", " 3", "", "1e3"]:
        j = {"metadata": {"name": "j", "labels": {LABEL_STEP: "a", LABEL_ATTEMPT: bad}}}
        assert job_attempt(j, None) is None, bad
    good = {"metadata": {"name": "j", "labels": {LABEL_STEP: "a", LABEL_ATTEMPT: "3"}}}
    observed = job_attempt(good, None)
    assert observed is not None and (observed.step_id, observed.attempt) == ("a", 3)


@FUZZ
@given(st.one_of(text, st.text(max_size=200)))
def test_label_value_is_always_a_label_value(raw):
    made = label_value(raw)
    assert len(made) <= 63 and manifests.LABEL_VALUE.fullmatch(made)
    fits = len(raw) <= 63 and manifests.LABEL_VALUE.fullmatch(raw) is not None
    assert (made == raw) == fits


@FUZZ
@given(st.one_of(label_text, scalar, st.none()))
def test_the_depth_label_never_stops_a_reconcile(raw):
    assert runs.depth(raw) >= 0


@FUZZ
@given(st.one_of(text, json_value.map(json.dumps), deep_json))
def test_an_answer_annotation_is_an_outcome_a_rejection_or_nothing(raw):
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}}
    w = asks.Waiting("q", 1, {"prompt": "?", "outputSchema": schema}, 0.0, 10.0, question="q1")
    answer = '{"run": "r", "question": "q1", "answer": {"ok": true, "extra": %s}}' % raw  # noqa: UP031
    for annotation in (raw, answer):
        outcome = asks.judge(w, {manifests.answer_annotation("q"): annotation}, "r", 1.0)
        assert outcome is None or isinstance(outcome, str | asks.Outcome)
