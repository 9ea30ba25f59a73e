"""One set of dispatch rules: the cluster and `kubectl-plan run --local` start the same attempts,
refuse the same ones with the same words, and give them the same deadline, memory limit,
environment (planops' variables, the tool's own, nothing of the host's) and working directory
(their own, or the workspace).

Each case runs twice: through the reconciler's path (reconciler.run.attempt_objects: the Job or
child Plan it would create, or its refusal) and through the local runner (a real subprocess), and
both must come to the same outcome. The engine's rules (engine.dispatch) are also checked directly,
one by one."""

from __future__ import annotations

import asyncio
import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from planops.api import CapsuleSpec, PlanSpec
from planops.api.attempt_models import ResourceList, Resources
from planops.api.names import ANNOTATION_LINEAGE, LABEL_DEPTH, LABEL_RUN
from planops.api.quantity import parse
from planops.engine import Policy, Run
from planops.engine import dispatch as rules
from planops.kube.errors import kind_of
from planops.kube.manifests import PlanRef
from planops.reconciler.run import attempt_objects as dispatching
from planops.runners.local import LocalRunner

from .helpers import capsule, plan

PY = sys.executable
RLIMIT = f"{PY} -c 'import resource; print(resource.getrlimit(resource.RLIMIT_DATA)[0])'"


#: prints where it runs and what it finds there (the local runner's side of "cwd")
WHERE = f"{PY} -c 'import os; print(os.getcwd()); print(os.listdir()); print(os.environ[\"HOME\"])'"
#: a script that prints its environment (a shell sets PWD of its own: not the step's)
SCRIPT_ENV = "unset PWD OLDPWD\nexec env\n"
#: a script that prints where it runs, what it finds there and its HOME, as WHERE does
SCRIPT_WHERE = """pwd
if [ -z "$(ls -A)" ]; then echo '[]'; else ls -A; fi
echo "$HOME"
"""
#: in a pod, what the image and the container runtime add to the Job's env (PATH, HOME; the
#: clock's zone is the image's, UTC): locally, the runner's HOST_ENV and its own HOME and TZ
POD_ADDS = {"PATH", "HOME", "TZ"}
#: PLANOPS_WORKSPACE's value, /workspace in a pod, the run's directory locally
WORKSPACE = "<the workspace>"


def cap(**kw: Any) -> CapsuleSpec:
    base: dict[str, Any] = {
        "image": "busybox:1",
        "shell": {"allow": ["sleep", "true", "env", PY]},
        "tools": [
            {"name": "notes", "command": ["cat"]},
            {"name": "env", "command": ["env"], "env": [{"name": "MODE", "value": "fast"}]},
            {"name": "where", "command": shlex.split(WHERE)},
        ],
    }
    base.update(kw)
    return capsule(**base)


@dataclass
class Case:
    name: str
    step: dict[str, Any]
    capsule: CapsuleSpec
    expected: tuple[str, Any]
    #: the capsules of the plans above this one (a child Plan's lineage)
    above: tuple[str, ...] = ()
    policy: Policy = field(default_factory=Policy)
    #: the plan's other fields (its workspace)
    spec: dict[str, Any] = field(default_factory=dict)


CASES = [
    Case(
        "a Capsule's maxTimeoutSeconds bounds a step that sets no timeout",
        {"id": "s", "shell": "sleep 30"},
        cap(maxTimeoutSeconds=5),
        ("timeout", 5),
    ),
    Case(
        "a Capsule's default timeout applies to a step that sets none",
        {"id": "s", "shell": "sleep 30"},
        cap(defaultTimeoutSeconds=1),
        ("timeout", 1),
    ),
    Case(
        "a step's own timeout wins under the maximum",
        {"id": "s", "shell": "sleep 30", "timeoutSeconds": 1},
        cap(maxTimeoutSeconds=5),
        ("timeout", 1),
    ),
    Case(
        "a step with no memory limit anywhere gets planops' default of 256Mi",
        {"id": "s", "shell": RLIMIT},
        cap(),
        ("memory", 256 << 20),
    ),
    Case(
        "a Capsule's memory limit applies to a step that sets none",
        {"id": "s", "shell": RLIMIT},
        cap(resources={"limits": {"memory": "300Mi"}}),
        ("memory", 300 << 20),
    ),
    Case(
        "a step's own memory limit wins over its Capsule's",
        {"id": "s", "shell": RLIMIT, "resources": {"limits": {"memory": "200Mi"}}},
        cap(resources={"limits": {"memory": "300Mi"}}),
        ("memory", 200 << 20),
    ),
    Case(
        "a capsule step whose target has no plan fails",
        {"id": "s", "capsule": "empty", "input": "x"},
        cap(spawn={"allow": ["empty"]}),
        ("refused", "capsule 'empty' does not exist or has no plan"),
    ),
    Case(
        "a binary no longer in shell.allow is denied",
        {"id": "s", "shell": "sleep 1"},
        cap(shell={"allow": ["true"]}),
        ("refused", "call denied: binary 'sleep' is not in the Capsule's shell.allow"),
    ),
    Case(
        "a tool no longer in the inventory is denied",
        {"id": "s", "tool": "gone"},
        cap(),
        ("refused", "call denied: tool 'gone' is not in the Capsule's inventory"),
    ),
    Case(
        "an image no longer allowed is denied",
        {"id": "s", "shell": "true"},
        cap(),
        (
            "refused",
            "call denied: the Capsule's image 'busybox:1' is not allowed by the operator's "
            "allowlist (policy.allowedImages)",
        ),
        policy=Policy(images=("registry.example/*",)),
    ),
    Case(
        "a capsule not in spawn.allow is denied",
        {"id": "s", "capsule": "other", "input": "x"},
        cap(),
        ("refused", "call denied: capsule 'other' is not in the Capsule's spawn.allow"),
    ),
    Case(
        "a capsule already running above the step is denied (a cycle)",
        {"id": "s", "capsule": "top", "input": "x"},
        cap(spawn={"allow": ["top"]}),
        (
            "refused",
            "call denied: capsule 'top' already runs above this step (cycle: top -> default -> "
            "top)",
        ),
        above=("top",),
    ),
    Case(
        "plans nest at most 8 deep",
        {"id": "s", "capsule": "deeper", "input": "x"},
        cap(spawn={"allow": ["deeper"]}),
        ("refused", "call denied: plans nest at most 8 deep"),
        above=tuple(f"c{i}" for i in range(7)),
    ),
    Case(
        "a shell step gets the plan, the step and the attempt, and nothing of the host's",
        {"id": "s", "shell": "env"},
        cap(),
        ("env", {"PLANOPS_PLAN": "p", "PLANOPS_STEP": "s", "PLANOPS_ATTEMPT": "1"}),
    ),
    Case(
        "a tool gets its JSON input and its own env",
        {"id": "s", "tool": "env", "input": {"n": 1}},
        cap(),
        (
            "env",
            {
                "PLANOPS_PLAN": "p",
                "PLANOPS_STEP": "s",
                "PLANOPS_ATTEMPT": "1",
                "PLANOPS_INPUT": '{"n": 1}',
                "MODE": "fast",
            },
        ),
    ),
    Case(
        "a step of a run with a workspace is told where it is",
        {"id": "s", "shell": "env"},
        cap(),
        (
            "env",
            {
                "PLANOPS_PLAN": "p",
                "PLANOPS_STEP": "s",
                "PLANOPS_ATTEMPT": "1",
                "PLANOPS_WORKSPACE": WORKSPACE,
            },
        ),
        spec={"workspace": {"size": "1Mi"}},
    ),
    Case(
        "a shell step without a workspace starts in a directory of its own",
        {"id": "s", "shell": WHERE},
        cap(),
        ("cwd", "its own"),
    ),
    Case(
        "a shell step of a run with a workspace starts in the workspace",
        {"id": "s", "shell": WHERE},
        cap(),
        ("cwd", "the workspace"),
        spec={"workspace": {"size": "1Mi"}},
    ),
    Case(
        "a tool starts in a directory of its own, even with a workspace",
        {"id": "s", "tool": "where"},
        cap(),
        ("cwd", "its own"),
        spec={"workspace": {"size": "1Mi"}},
    ),
    # a script step: run by an interpreter its Capsule allows, its env values as data
    Case(
        "a script step gets its env values rendered once, as data, and nothing of the host's",
        {
            "id": "s",
            "script": SCRIPT_ENV,
            "env": [
                {"name": "WHO", "value": "{{input.who}}"},
                {"name": "N", "value": "{{input.n}}"},
            ],
        },
        cap(scripts={"allow": ["sh"]}),
        (
            "env",
            {
                "PLANOPS_PLAN": "p",
                "PLANOPS_STEP": "s",
                "PLANOPS_ATTEMPT": "1",
                "WHO": "$(HOME) {{input.n}}; rm -rf /",  # rendered once: never again, nor expanded
                "N": "[1, 2]",  # a value that is no text: as JSON
            },
        ),
        spec={"input": {"who": "$(HOME) {{input.n}}; rm -rf /", "n": [1, 2]}},
    ),
    Case(
        "a script step without a workspace starts in a directory of its own",
        {"id": "s", "script": SCRIPT_WHERE},
        cap(scripts={"allow": ["sh"]}),
        ("cwd", "its own"),
    ),
    Case(
        "a script step of a run with a workspace starts in the workspace",
        {"id": "s", "script": SCRIPT_WHERE},
        cap(scripts={"allow": ["sh"]}),
        ("cwd", "the workspace"),
        spec={"workspace": {"size": "1Mi"}},
    ),
    Case(
        "a script under a Capsule that allows no interpreter is denied",
        {"id": "s", "script": "echo hi"},
        cap(),
        (
            "refused",
            "call denied: the Capsule allows no interpreter (its scripts.allow is empty): no "
            "script step may run under it",
        ),
    ),
    Case(
        "an interpreter no longer in scripts.allow is denied",
        {"id": "s", "script": "echo hi", "interpreter": "bash"},
        cap(scripts={"allow": ["sh"]}),
        (
            "refused",
            "call denied: interpreter 'bash' is not in the Capsule's scripts.allow (allowed: sh)",
        ),
    ),
    Case(
        "env from a Secret the Capsule does not list is denied",
        {
            "id": "s",
            "shell": "true",
            "env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "other", "key": "t"}}}],
        },
        cap(env={"secrets": ["ci"]}),
        (
            "refused",
            "call denied: env T reads Secret 'other', which the Capsule does not list in "
            "env.secrets (listed: ci)",
        ),
    ),
    Case(
        "a volume the Capsule does not declare is denied",
        {"id": "s", "shell": "true", "volumeMounts": [{"name": "gone", "mountPath": "/data"}]},
        cap(),
        (
            "refused",
            "call denied: volume 'gone' is not one of the Capsule's volumes (volumes: none)",
        ),
    ),
    Case(
        "a writable mount of a volume the Capsule marks readOnly is denied",
        {
            "id": "s",
            "script": "true",
            "volumeMounts": [{"name": "data", "mountPath": "/data", "readOnly": False}],
        },
        cap(
            scripts={"allow": ["sh"]},
            volumes=[
                {"name": "data", "persistentVolumeClaim": {"claimName": "d"}, "readOnly": True}
            ],
        ),
        (
            "refused",
            "call denied: volume 'data' may only be mounted read-only (the Capsule marks it "
            "readOnly): drop readOnly: false",
        ),
    ),
]


def in_the_cluster(case: Case, spec: PlanSpec) -> tuple[str, Any]:
    (d,) = Run("p", spec).decide(0.0).dispatch
    ref = PlanRef("ns", "p", "uid", "run", depth=len(case.above), lineage=case.above)
    claim = "claim" if spec.workspace is not None else None
    if d.kind == "capsule":
        target = {"spec": {}}  # the cases' targets have no plan (or are refused before)
        made = dispatching.admit(ref, d, case.capsule, spec, case.policy) or dispatching.child(
            ref, d, spec, target
        )
    else:
        made = dispatching.job(ref, d, case.capsule, spec, case.policy, claim)
    if isinstance(made, str):
        return ("refused", made)
    pod = made["spec"]["template"]["spec"]
    container = pod["containers"][0]
    if case.expected[0] == "timeout":
        return ("timeout", pod["activeDeadlineSeconds"])
    if case.expected[0] == "env":  # the kubelet turns $$ back into $
        env = {e["name"]: e["value"].replace("$$", "$") for e in container["env"]}
        if env.get("PLANOPS_WORKSPACE") == "/workspace":
            env["PLANOPS_WORKSPACE"] = WORKSPACE
        return ("env", env)
    if case.expected[0] == "cwd":  # none: the image's, in the pod's own filesystem
        workdir = container.get("workingDir")
        return ("cwd", "the workspace" if workdir == "/workspace" else "its own")
    return ("memory", int(parse(pod["containers"][0]["resources"]["limits"]["memory"])))


def locally(case: Case, spec: PlanSpec) -> tuple[str, Any]:
    records: list[dict[str, Any]] = []
    runner = LocalRunner({"default": case.capsule}, policy=case.policy, observer=records.append)
    report = asyncio.run(runner.run("p", spec, case.above))
    (record,) = report.steps
    error = record.error or ""
    if error.startswith("timed out after "):
        return ("timeout", int(error.removeprefix("timed out after ").removesuffix("s")))
    if error:
        return ("refused", error)
    (workspace,) = [r.get("workspace") for r in records if r["event"] == "plan_start"]
    if case.expected[0] == "env":
        lines = (record.output or "").splitlines()
        env = dict(line.split("=", 1) for line in lines)
        assert env["TZ"] == "UTC" and env["PATH"] == os.environ["PATH"]
        assert env["HOME"] != os.environ["HOME"] and not Path(env["HOME"]).exists()
        if workspace is not None and env.get("PLANOPS_WORKSPACE") == workspace:
            env["PLANOPS_WORKSPACE"] = WORKSPACE
        return ("env", {k: v for k, v in env.items() if k not in POD_ADDS})
    if case.expected[0] == "cwd":
        cwd, found, home = (record.output or "").splitlines()
        if cwd == workspace:
            return ("cwd", "the workspace")
        # the attempt's own directory (its HOME too): fresh, empty, removed after it
        assert cwd == home and found == "[]" and not Path(cwd).exists(), (cwd, found, home)
        return ("cwd", "its own")
    return ("memory", int(record.output or "0"))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_cluster_and_the_local_runner_apply_the_same_dispatch_rules(
    case: Case, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "the user's own")  # must reach no step
    spec = plan(case.step, **case.spec)
    assert in_the_cluster(case, spec) == case.expected
    assert locally(case, spec) == case.expected


def test_the_local_runner_needs_no_image_but_the_cluster_does():
    spec = plan({"id": "s", "shell": "true"})
    (d,) = Run("p", spec).decide(0.0).dispatch
    bare = capsule(shell={"allow": ["true"]})
    kw: dict[str, Any] = {"lineage": ("default",), "depth": 0}
    assert rules.admit(d, bare, Policy(), needs_image=False, **kw) is None
    assert rules.admit(d, bare, Policy(), needs_image=True, **kw) == (
        "call denied: no image for this step (set the Capsule's image or the step's image)"
    )


def test_the_operators_maximum_bounds_every_timeout():
    step = plan({"id": "s", "shell": "true", "timeoutSeconds": 100}).steps[0]
    assert rules.timeout_seconds(step, cap(), Policy(max_timeout_seconds=7)) == 7
    # a Capsule cannot widen the operator's bound
    assert (
        rules.timeout_seconds(step, cap(maxTimeoutSeconds=50), Policy(max_timeout_seconds=7)) == 7
    )
    assert rules.timeout_seconds(step, cap(maxTimeoutSeconds=50), Policy()) == 50
    assert rules.timeout_seconds(step, cap(), Policy()) == 100
    bare = plan({"id": "s", "shell": "true"}).steps[0]
    assert rules.timeout_seconds(bare, cap(), Policy()) == rules.DEFAULT_TIMEOUT_SECONDS == 3600


def test_a_plan_one_level_above_the_cap_may_still_spawn():
    spec = plan({"id": "s", "capsule": "deeper", "input": "x"})
    (d,) = Run("p", spec).decide(0.0).dispatch
    allow = cap(spawn={"allow": ["deeper"]})
    assert rules.admit(d, allow, Policy(), lineage=("a",), depth=6, needs_image=True) is None
    assert rules.admit(d, allow, Policy(), lineage=("a",), depth=7, needs_image=True)


def test_an_ask_is_always_admitted():
    spec = plan(
        {"id": "q", "ask": {"prompt": "ok?", "outputSchema": {"type": "object"}}},
    )
    (d,) = Run("p", spec).decide(0.0).dispatch
    assert d.kind == "ask"
    assert rules.admit(d, capsule(), Policy(), lineage=(), depth=9, needs_image=True) is None


def test_a_bad_memory_quantity_of_a_capsule_is_an_error_not_a_limit():
    step = plan({"id": "s", "shell": "true"}).steps[0]
    lots = Resources.model_construct(limits=ResourceList.model_construct(memory="lots"))
    bad = cap().model_copy(update={"resources": lots})
    with pytest.raises(ValueError):
        rules.memory_limit_bytes(step, bad)


def test_a_job_runs_in_the_tools_image_else_the_steps_else_the_capsules():
    c = cap(
        images=["registry.example/*", "alpine:*"],
        tools=[
            {"name": "own", "image": "registry.example/own:1", "command": ["own"]},
            {"name": "plain", "command": ["plain"]},
        ],
    )
    ref = PlanRef("ns", "p", "uid", "run")

    def image(step: dict[str, Any]) -> str:
        spec = plan(step)
        (d,) = Run("p", spec).decide(0.0).dispatch
        job = dispatching.job(ref, d, c, spec, Policy(), None)
        assert not isinstance(job, str), job
        return str(job["spec"]["template"]["spec"]["containers"][0]["image"])

    assert image({"id": "s", "tool": "own"}) == "registry.example/own:1"
    assert image({"id": "s", "tool": "plain"}) == "busybox:1"
    assert image({"id": "s", "shell": "true", "image": "alpine:3"}) == "alpine:3"
    assert image({"id": "s", "shell": "true"}) == "busybox:1"
    # a Job runs in an image: without one anywhere, the cluster refuses what a laptop runs
    spec = plan({"id": "s", "shell": "true"})
    (d,) = Run("p", spec).decide(0.0).dispatch
    bare = capsule(shell={"allow": ["true"]})
    assert dispatching.job(ref, d, bare, spec, Policy(), None) == (
        "call denied: no image for this step (set the Capsule's image or the step's image)"
    )
    # the run's workspace is mounted
    job = dispatching.job(ref, d, c, spec, Policy(), "ws-claim")
    assert not isinstance(job, str)
    volumes = job["spec"]["template"]["spec"]["volumes"]
    assert {"name": "workspace", "persistentVolumeClaim": {"claimName": "ws-claim"}} in volumes


def test_a_capsule_step_becomes_a_child_plan_one_level_deeper_with_its_lineage():
    spec = plan({"id": "s", "capsule": "worker", "input": "do it"}, capsule="boss")
    (d,) = Run("p", spec).decide(0.0).dispatch
    ref = PlanRef("ns", "p", "uid", "run", depth=2, lineage=("root", "mid"))
    target = {"spec": {"plan": {"steps": [{"id": "inner", "shell": "true"}]}}}
    child = dispatching.child(ref, d, spec, target)
    assert not isinstance(child, str), child
    meta = child["metadata"]
    assert meta["labels"][LABEL_DEPTH] == "3"
    # the capsules above the child, its own last
    assert meta["annotations"][ANNOTATION_LINEAGE] == "root,mid,boss,worker"
    assert child["spec"]["capsule"] == "worker"
    assert child["spec"]["steps"] == [{"id": "inner", "shell": "true"}]
    assert meta["ownerReferences"][0]["uid"] == "uid"
    assert meta["namespace"] == "ns" and meta["labels"][LABEL_RUN] == "run"


def test_what_the_api_servers_answer_to_a_create_means():
    def answer(kind: str, status: int, reason: str, causes: Any = ()) -> str:
        return dispatching.create_refused(kind, kind_of(status, reason, causes), "m")

    assert answer("shell", 409, "AlreadyExists") == "adopt"
    admission = "refused by the cluster's admission policy: m"
    assert answer("shell", 400, "") == admission  # a webhook's denial: no reason of its own
    assert answer("shell", 403, "") == admission
    assert answer("shell", 422, "Invalid", [("", "")]) == admission  # a ValidatingAdmissionPolicy
    assert answer("shell", 403, "Forbidden", [("", "")]) == admission
    refused = [(400, "BadRequest"), (403, "Forbidden"), (422, "Invalid"), (413, "")]
    for status, reason in refused:  # the request itself is refused: retrying cannot help
        assert answer("tool", status, reason) == "the cluster refused the step's Job: m"
        assert answer("capsule", status, reason) == "the cluster refused the step's child Plan: m"
    field = [("FieldValueInvalid", "spec.template")]
    assert answer("tool", 422, "Invalid", field) == "the cluster refused the step's Job: m"
    passing = [(401, "Unauthorized"), (404, "NotFound"), (409, "Conflict"), (429, "")]
    passing += [(500, "InternalError"), (503, "ServiceUnavailable"), (504, "Timeout")]
    for status, reason in passing:  # transient: the reconcile is retried
        assert answer("shell", status, reason) == "retry"


def test_an_object_squatting_an_attempts_name_is_named_and_never_adopted():
    ref = PlanRef("ns", "p", "uid", "run")

    def owned_by(uid: str) -> dict[str, Any]:
        ref = {"apiVersion": "planops.dev/v1", "kind": "Plan", "uid": uid, "controller": True}
        return {"metadata": {"ownerReferences": [ref]}}

    assert dispatching.squatter(ref, "shell", "n", owned_by("other")) == (
        "a Job named n already exists and is not this Plan's (its controller is another "
        "object): planops does not adopt it; delete it and re-run the plan"
    )
    capsule_step = dispatching.squatter(ref, "capsule", "n", owned_by("other"))
    assert capsule_step is not None and capsule_step.startswith("a Plan named n already exists")
    assert dispatching.squatter(ref, "shell", "n", owned_by("uid")) is None  # ours: adopted
    assert dispatching.squatter(ref, "shell", "n", None) is None  # gone again
