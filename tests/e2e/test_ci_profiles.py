"""Issue 43's pod grants through the running operator, on the real node: a service (a native
sidecar) ready before the step and reachable from it, the step's output its own container's log
alone; a service that cannot start fails the attempt at once, naming it; a root profile refused
unless its Capsule grants it (and a profile past the operator's cap, a service the Capsule lacks:
Invalid, nothing runs) and granted when it does (`id -u` prints 0, in a namespace whose Pod
Security level is baseline); the Capsule's podMetadata and the Plan's propagated labels on the
step's Job and pod. The CRD's CEL rules refuse a Capsule's reserved keys at `kubectl apply`."""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.conftest import ROOT, Kube, cluster_lock
from tests.e2e.conftest import capsule, plan, steps, wait_plan
from tests.e2e.test_crd_rules import _capsule, _dry_run

pytestmark = [pytest.mark.cluster, pytest.mark.node, pytest.mark.cisteps]


@pytest.fixture(autouse=True)
def _these_crds(kube: Kube, crds: None) -> None:
    """This tree's CRDs, applied again when another session on the shared cluster replaced them
    with its own (without these fields) since this session applied them."""
    spec = kube.get("crd", "capsules.planops.dev")["spec"]["versions"][0]["schema"]
    if "securityProfiles" in spec["openAPIV3Schema"]["properties"]["spec"]["properties"]:
        return
    with cluster_lock(kube.kubeconfig, "crds"):
        kube.run("apply", "-f", str(ROOT / "crds"))
    kube.run("wait", "--for=condition=Established", "crd/capsules.planops.dev", "--timeout=60s")
    time.sleep(2)  # the API server's storage for the new schema (429 while it reinitializes)


#: a busybox "database": says `ready` to each connection, once listening (after a pause, so the
#: step would find nothing if it started before the probe passed); it writes to its own log too
DB_SCRIPT = "echo db-log-line; sleep 2; exec nc -ll -p 5432 -e echo ready"


def _db(busybox: str, **over: Any) -> dict[str, Any]:
    return {
        "name": "db",
        "image": busybox,
        "command": ["sh", "-c", DB_SCRIPT],
        "ports": [{"containerPort": 5432}],
        "readinessProbe": {"tcpSocket": {"port": 5432}},
        **over,
    }


def _capsule_allowing(busybox: str, *binaries: str, **spec: Any) -> dict[str, Any]:
    doc = capsule(busybox, **spec)
    doc["spec"]["shell"]["allow"] += list(binaries)
    return doc


def _jobs(kube: Kube, ns: str, name: str) -> list[dict[str, Any]]:
    return list(kube.get("jobs", "-n", ns, "-l", f"planops.dev/plan={name}")["items"])


def _pods(kube: Kube, ns: str, name: str) -> list[dict[str, Any]]:
    return list(kube.get("pods", "-n", ns, "-l", f"planops.dev/plan={name}")["items"])


def test_a_service_is_ready_before_the_step_and_reachable_from_it(
    kube: Kube, ns: str, busybox: str
):
    kube.apply(_capsule_allowing(busybox, "nc", services=[_db(busybox)]), "-n", ns)
    kube.apply(
        plan(
            "svc",
            # by the service's name and on localhost; no retry, no wait in the step
            {"id": "query", "shell": "sh -c 'nc db 5432 && nc 127.0.0.1 5432'", "services": ["db"]},
            {"id": "plain", "shell": "echo alone", "dependsOn": ["query"]},
        ),
        "-n",
        ns,
    )
    obj = wait_plan(kube, ns, "svc", timeout=180)
    s = steps(obj)
    assert obj["status"]["phase"] == "Succeeded", obj["status"]
    # the step's own container's log: nothing of the service's (db-log-line)
    assert s["query"]["output"] == "ready\nready", s["query"]
    assert s["plain"]["output"] == "alone"
    by_step = {p["metadata"]["labels"]["planops.dev/step"]: p for p in _pods(kube, ns, "svc")}
    pod = by_step["query"]
    (sidecar,) = pod["spec"]["initContainers"]
    assert (sidecar["name"], sidecar["restartPolicy"]) == ("db", "Always")
    assert [c["name"] for c in pod["status"]["containerStatuses"]] == ["step"]
    started = pod["status"]["initContainerStatuses"][0]["state"]
    step_started = pod["status"]["containerStatuses"][0]["state"]["terminated"]["startedAt"]
    service_started = (started.get("running") or started.get("terminated"))["startedAt"]
    assert step_started > service_started  # after its readiness (the 2 s pause), not before
    # a step that lists no service keeps today's one-container pod
    assert "initContainers" not in by_step["plain"]["spec"]
    # the kubelet stops the service once the step ended: the Job completes
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        (job,) = [
            j
            for j in _jobs(kube, ns, "svc")
            if j["metadata"]["labels"]["planops.dev/step"] == "query"
        ]
        if any(c["type"] == "Complete" for c in job["status"].get("conditions", [])):
            break
        time.sleep(1)
    else:
        raise AssertionError(f"the service's Job never completed: {job['status']}")


def test_a_service_that_cannot_start_fails_the_attempt_at_once_naming_it(
    kube: Kube, ns: str, busybox: str
):
    missing = busybox.rsplit(":", 1)[0] + ":no-such-tag"  # allowed (local/busybox:*), not there
    kube.apply(capsule(busybox, services=[_db(busybox, image=missing)]), "-n", ns)
    began = time.monotonic()
    kube.apply(plan("nodb", {"id": "query", "shell": "echo never", "services": ["db"]}), "-n", ns)
    obj = wait_plan(kube, ns, "nodb", timeout=120)
    took = time.monotonic() - began
    q = steps(obj)["query"]
    assert (obj["status"]["phase"], q["status"]) == ("Failed", "failed"), obj["status"]
    assert q["error"].startswith("service db cannot start: "), q["error"]
    assert "ErrImagePull" in q["error"] or "ImagePullBackOff" in q["error"], q["error"]
    assert took < 60, took  # not the step's deadline (an hour)


def test_a_root_profile_is_refused_unless_granted_and_runs_as_root_when_it_is(
    kube: Kube, ns: str, busybox: str
):
    # refused: the Capsule grants no profile; a profile past the operator's cap; a service the
    # Capsule lacks. Invalid, and nothing of it runs
    kube.apply(
        _capsule_allowing(
            busybox,
            "id",
            securityProfiles=[{"name": "everything", "privileged": True}],
            services=[_db(busybox)],
        ),
        "-n",
        ns,
    )
    kube.apply(
        plan(
            "refused",
            {"id": "build", "shell": "id -u", "securityProfile": "root"},
            {"id": "priv", "shell": "id -u", "securityProfile": "everything"},
            {"id": "test", "shell": "echo", "services": ["postgres"]},
        ),
        "-n",
        ns,
    )
    obj = wait_plan(kube, ns, "refused", timeout=60)
    assert obj["status"]["phase"] == "Invalid", obj["status"]
    errors = {(e["code"], e["step"], e["path"]): e["message"] for e in obj["status"]["errors"]}
    assert set(errors) == {
        ("security-profile", "build", "steps[0].securityProfile"),
        ("security-profile", "priv", "steps[1].securityProfile"),
        ("service", "test", "steps[2].services[0]"),
    }, errors
    assert (
        "'root' is not one of the Capsule's securityProfiles"
        in errors[("security-profile", "build", "steps[0].securityProfile")]
    )
    assert (
        "a privileged container (allowPrivileged is false)"
        in errors[("security-profile", "priv", "steps[1].securityProfile")]
    )
    assert _jobs(kube, ns, "refused") == []

    # granted: the Capsule declares it; the namespace's Pod Security level admits root
    kube.run("label", "namespace", ns, "pod-security.kubernetes.io/enforce=baseline")
    granted = _capsule_allowing(busybox, "id", securityProfiles=[{"name": "root", "runAsUser": 0}])
    kube.apply(granted, "-n", ns)
    kube.apply(
        plan(
            "granted",
            {"id": "build", "shell": "id -u", "securityProfile": "root"},
            {"id": "plain", "shell": "id -u"},
        ),
        "-n",
        ns,
    )
    obj = wait_plan(kube, ns, "granted", timeout=120)
    s = steps(obj)
    assert obj["status"]["phase"] == "Succeeded", obj["status"]
    assert (s["build"]["output"], s["plain"]["output"]) == ("0", "65534")


def test_pod_metadata_and_the_plans_listed_labels_are_on_the_steps_job_and_pod(
    kube: Kube, ns: str, busybox: str
):
    kube.apply(
        capsule(
            busybox,
            podMetadata={
                "labels": {"cost-center": "cc-42"},
                "annotations": {"example.com/owner": "team-a"},
            },
            propagateLabels=["team", "app.kubernetes.io/name"],
        ),
        "-n",
        ns,
    )
    doc = plan("labelled", {"id": "a", "shell": "true"})
    doc["metadata"]["labels"] = {"team": "payments", "app.kubernetes.io/name": "shop", "x": "y"}
    kube.apply(doc, "-n", ns)
    obj = wait_plan(kube, ns, "labelled", timeout=120)
    assert obj["status"]["phase"] == "Succeeded", obj["status"]
    (job,) = _jobs(kube, ns, "labelled")
    (pod,) = _pods(kube, ns, "labelled")
    plans = {"team": "payments", "app.kubernetes.io/name": "shop"}
    assert plans.items() <= job["metadata"]["labels"].items()
    assert "x" not in job["metadata"]["labels"] and "cost-center" not in job["metadata"]["labels"]
    labels = pod["metadata"]["labels"]
    assert (plans | {"cost-center": "cc-42"}).items() <= labels.items() and "x" not in labels
    assert labels["planops.dev/step"] == "a"  # planops' own, as always
    assert pod["metadata"]["annotations"]["example.com/owner"] == "team-a"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        (
            {"podMetadata": {"labels": {"planops.dev/step": "x"}}},
            "no key of planops' (planops.dev/) or Kubernetes' own domains",
        ),
        (
            {
                "podMetadata": {
                    "annotations": {"container.apparmor.security.beta.kubernetes.io/step": "u"}
                }
            },
            "no key of planops' (planops.dev/) or Kubernetes' own domains",
        ),
        ({"propagateLabels": ["controller-uid"]}, "no key of planops'"),
        (
            {
                "services": [
                    {
                        "name": "db",
                        "image": "x",
                        "readinessProbe": {"exec": {"command": ["x"]}, "tcpSocket": {"port": 1}},
                    }
                ]
            },
            "a probe is exactly one of exec, tcpSocket, httpGet",
        ),
    ],
)
def test_the_api_server_refuses_a_capsules_reserved_keys_as_the_model_does(
    kube: Kube, crds: None, spec: dict[str, Any], message: str
):
    doc = _capsule(**spec)
    accepted, refusal, _ = _dry_run(kube, doc)
    assert not accepted and message in refusal, refusal
    ok, _, _ = _dry_run(kube, _capsule(podMetadata={"labels": {"app.kubernetes.io/part-of": "x"}}))
    assert ok
