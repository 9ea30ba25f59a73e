"""The pod of a step that moves files (kube.files_pod): the step as the init container `step`,
unchanged, a `fetch` before it only for input artifacts, the collector after it with presigned
URLs and never a credential; a step without results or artifacts keeps today's pod, byte for
byte. And what the collector says made the attempt's record (reconciler.run.moved)."""

from __future__ import annotations

import asyncio
import copy
import json
from datetime import timedelta
from functools import partial
from typing import Any

from planops.api import CapsuleSpec, PlanSpec, Step
from planops.engine import Dispatch
from planops.engine.facts import AttemptFact
from planops.engine.report import ArtifactRecord
from planops.kube import files_pod, manifests
from planops.kube.manifests import PlanRef
from planops.reconciler.effects.actuator import Actuator, StatusWriter
from planops.reconciler.effects.files import FileMover
from planops.reconciler.effects.intents import Create, CreateAnswer
from planops.reconciler.run import moved

from .fakekube import FakeKube
from .helpers import capsule

REF = PlanRef("team-a", "ci", "0a7", "r1")
IMAGE = "ghcr.io/planops/operator:0.1.0"
RECORD = ArtifactRecord("dist", "team-a/0a7/r1/a/artifacts/dist", "ab" * 32, 10, True)


def dispatch(step: dict[str, Any], fetch: tuple[Any, ...] = ()) -> Dispatch:
    s = Step.model_validate({"id": "build", "shell": "make", **step})
    return Dispatch(s, 1, "shell", None, ["make"], fetch=fetch)


def job(d: Dispatch, c: CapsuleSpec | None = None, claim: str | None = None) -> dict[str, Any]:
    return manifests.job(
        REF, d, c or capsule(), "busybox", timeout_seconds=60, workspace_claim=claim
    )


def test_the_step_becomes_the_init_container_step_unchanged_and_the_collector_follows():
    d = dispatch(
        {"results": [{"name": "v"}], "outputs": {"artifacts": [{"name": "dist", "path": "d"}]}}
    )
    plain = job(d)
    step = copy.deepcopy(plain["spec"]["template"]["spec"]["containers"][0])
    urls = files_pod.Urls(puts=("https://s3/put-dist?X-Amz-Signature=x",))
    pod = files_pod.with_files(job(d), d, IMAGE, urls, 1000)["spec"]["template"]["spec"]
    (init,) = pod["initContainers"]
    (collect,) = pod["containers"]
    assert init["name"] == "step" and init["image"] == "busybox"
    assert init["command"] == step["command"] and init["resources"] == step["resources"]
    assert init["workingDir"] == "/planops/work"
    assert {"name": "PLANOPS_RESULTS", "value": "/planops/results"} in init["env"]
    assert collect["name"] == "collect" and collect["image"] == IMAGE
    assert collect["command"] == ["python3", "-m", "planops.collector", "collect"]
    (env,) = collect["env"]
    config = json.loads(env["value"])
    assert config["workdir"] == "/planops/work"
    assert config["results"] == {"dir": "/planops/results", "names": ["v"], "bound": 3072}
    assert config["outputs"] == [
        {"name": "dist", "path": "d", "url": urls.puts[0], "maxBytes": 1000}
    ]
    mounted = {m["mountPath"] for m in collect["volumeMounts"]}
    assert mounted == {"/planops/work", "/planops/results"}
    assert "SECRET" not in json.dumps(pod).upper()  # no credential, only the URLs


def test_input_artifacts_are_fetched_before_the_step_into_the_workspace():
    d = dispatch(
        {"inputs": {"artifacts": [{"from": "{{a.artifacts.dist}}", "path": "in"}]}},
        fetch=((RECORD, "in"),),
    )
    urls = files_pod.Urls(gets=("https://s3/get-dist",))
    built = files_pod.with_files(job(d, claim="ws"), d, IMAGE, urls, 1000)
    pod = built["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == ["fetch", "step"]
    fetch = pod["initContainers"][0]
    config = json.loads(fetch["env"][0]["value"])
    assert config["workdir"] == "/workspace"
    assert config["inputs"] == [
        {
            "name": "dist",
            "path": "in",
            "url": urls.gets[0],
            "sha256": RECORD.sha256,
            "directory": True,
        }
    ]
    assert [m["mountPath"] for m in fetch["volumeMounts"]] == ["/workspace"]
    annotations = built["spec"]["template"]["metadata"]["annotations"]
    assert annotations["kubectl.kubernetes.io/default-container"] == "step"


def test_a_step_with_services_keeps_them_before_the_step():
    c = capsule(services=[{"name": "redis", "image": "redis:7"}])
    d = dispatch({"services": ["redis"], "results": [{"name": "v"}]})
    pod = files_pod.with_files(job(d, c), d, IMAGE, files_pod.Urls(), 1)["spec"]["template"]
    assert [i["name"] for i in pod["spec"]["initContainers"]] == ["redis", "step"]


def fact(status: str = "success") -> AttemptFact:
    return AttemptFact("build", 1, 0.0, status, 1.0, "out")  # type: ignore[arg-type]


STEP = Step.model_validate(
    {
        "id": "build",
        "shell": "make",
        "results": [{"name": "v"}],
        "outputs": {"artifacts": [{"name": "dist", "path": "d"}]},
    }
)


def test_the_collectors_message_makes_the_records_with_keys_of_the_run_alone():
    said = json.dumps({"results": {"v": "1.2\n"}, "artifacts": [["cd" * 32, 5, False]]})
    got = moved.apply(fact(), STEP, said, moved.relative_keys(REF))
    assert got.status == "success" and got.results == {"v": "1.2"}
    assert got.artifacts == (
        ArtifactRecord("dist", "team-a/0a7/r1/build/artifacts/dist", "cd" * 32, 5, False),
    )


def test_a_collector_message_missing_or_short_fails_the_step_saying_why():
    keys = moved.relative_keys(REF)
    assert moved.apply(fact(), STEP, None, keys).status == "failed"
    short = json.dumps({"results": {"v": "1"}, "artifacts": []})
    assert "every output artifact" in (moved.apply(fact(), STEP, short, keys).error or "")
    unwritten = json.dumps({"results": {}, "artifacts": [["cd" * 32, 5, False]]})
    assert "was not written" in (moved.apply(fact(), STEP, unwritten, keys).error or "")
    over = json.dumps({"results": {}, "over": "v", "artifacts": []})
    assert "past their bound" in (moved.apply(fact(), STEP, over, keys).error or "")
    assert moved.apply(fact("failed"), STEP, None, keys) == fact("failed")


def creates(step: dict[str, Any], mover: FileMover | None) -> tuple[FakeKube, CreateAnswer]:
    kube = FakeKube()
    act = Actuator(kube, StatusWriter(kube), files=mover)
    spec = PlanSpec.model_validate({"steps": [{"id": "build", "shell": "make", **step}]})
    d = dispatch(step)
    cap = capsule()
    build = partial(manifests.job, REF, d, cap, "busybox", timeout_seconds=60)
    (answer,) = asyncio.run(act.create(REF, [Create(d, "job", build, cap)], spec))
    return kube, answer


def test_the_actuator_creates_the_collectors_pod_of_a_step_with_results():
    kube, answer = creates({"results": [{"name": "v"}]}, FileMover(IMAGE))
    assert answer.created is not None and answer.refusal is None
    (job,) = [o for (k, _, _), o in kube.objects.items() if k == "job"]
    pod = job["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["collect"]
    assert pod["containers"][0]["image"] == IMAGE


def test_a_step_with_artifacts_and_no_repository_fails_saying_so_and_creates_nothing():
    step = {"outputs": {"artifacts": [{"name": "dist", "path": "d"}]}}
    kube, answer = creates(step, FileMover(IMAGE))
    assert answer.refusal is not None and "no artifact repository" in answer.refusal
    assert not [k for (k, _, _) in kube.objects if k == "job"]
    _, answer = creates({"results": [{"name": "v"}]}, None)
    assert answer.refusal is not None and "does not move results" in answer.refusal


class _Store:
    """A repository client that signs nothing it should not (effects.files asks it)."""

    class repo:  # noqa: N801 - the attribute Store has
        key_prefix = "pre"

    def __init__(self) -> None:
        self.signed: list[tuple[str, str, timedelta]] = []

    def presign_get(self, key: str, expires: timedelta) -> str:
        self.signed.append(("GET", key, expires))
        return f"https://s3/{key}"

    def presign_put(self, key: str, expires: timedelta) -> str:
        self.signed.append(("PUT", key, expires))
        return f"https://s3/{key}"


class _Stored:
    def __init__(self, store: _Store) -> None:
        self.store = store

    async def store_for(self, namespace: str, capsule_name: str, capsule: CapsuleSpec) -> _Store:
        return self.store


def mint(record: ArtifactRecord) -> tuple[_Store, Any]:
    store = _Store()
    mover = FileMover(IMAGE, _Stored(store))  # type: ignore[arg-type]
    step = {
        "inputs": {"artifacts": [{"from": "{{a.artifacts.dist}}", "path": "in"}]},
        "outputs": {"artifacts": [{"name": "out", "path": "o"}]},
    }
    d = dispatch(step, fetch=((record, "in"),))
    made = asyncio.run(mover.pod(REF, d, capsule(), "default", job(d)))
    return store, made


def test_an_input_key_outside_the_plans_own_is_never_signed():
    store, made = mint(RECORD._replace(key="team-a/0a7/r0/a/artifacts/dist"))
    assert isinstance(made, dict)
    assert [(m, k) for m, k, _ in store.signed] == [
        ("PUT", "pre/team-a/0a7/r1/build/artifacts/out"),
        ("GET", "pre/team-a/0a7/r0/a/artifacts/dist"),  # an earlier run of the same Plan
    ]
    for key in (
        "team-b/0a7/r1/a/artifacts/dist",
        "team-a/0b8/r1/a/artifacts/dist",
        "team-a/0a7/../../team-b/x",
    ):
        store, made = mint(RECORD._replace(key=key))
        assert isinstance(made, str) and "is not this Plan's" in made, key
        assert not [k for m, k, _ in store.signed if m == "GET"]


def test_urls_live_as_long_as_the_jobs_deadline():
    store, made = mint(RECORD._replace(key="team-a/0a7/r1/a/artifacts/dist"))
    deadline = made["spec"]["activeDeadlineSeconds"]
    assert {e for _, _, e in store.signed} == {timedelta(seconds=deadline, minutes=10)}
