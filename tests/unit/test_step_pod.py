"""What a step's pod gets of its Capsule's pod grants (kube.step_pod), field by field: a security
profile's securityContext and host settings, services as native sidecars (ready by their probe
before the step's container starts), the Capsule's placement and labels, the Plan's propagated
labels; nothing at all for a step and Capsule that use none. And how such a pod is read back
(reconciler.run.observe, through the operator's cache): by its step container alone."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from pydantic import ValidationError

from planops.api import CapsuleSpec, Step, names
from planops.engine import Dispatch
from planops.kube import manifests
from planops.kube.cache import slim_run_object
from planops.kube.manifests import PlanRef
from planops.reconciler.run import identity as runs
from planops.reconciler.run import observe

from .helpers import capsule

PLAN_LABELS = (("app.kubernetes.io/name", "shop"), ("team", "payments"), ("env", "prod"))
REF = PlanRef("team-a", "ci", "uid-7", "r1", plan_labels=PLAN_LABELS)
PG = {
    "name": "pg",
    "image": "postgres:16",
    "command": ["docker-entrypoint.sh"],
    "args": ["postgres", "-c", "fsync=off"],
    "env": [{"name": "POSTGRES_PASSWORD", "value": "$(not-expanded) ci"}],
    "ports": [{"containerPort": 5432, "name": "pg"}],
    "readinessProbe": {"exec": {"command": ["pg_isready"]}, "periodSeconds": 2},
    "resources": {"limits": {"memory": "512Mi"}},
    "securityProfile": "pg-user",
}
GRANTS: dict[str, Any] = {
    "securityProfiles": [
        {"name": "root", "runAsUser": 0, "capabilities": ["CHOWN", "SETUID"]},
        {"name": "pg-user", "runAsUser": 999},
        {
            "name": "node",
            "hostNetwork": True,
            "privileged": True,
            "readOnlyRootFilesystem": True,
            "hostPaths": [{"path": "/var/cache/ci", "mountPath": "/cache", "readOnly": False}],
        },
    ],
    "services": [PG, {"name": "redis", "image": "redis:7"}],
}


def job(step: dict[str, Any], c: CapsuleSpec | None = None, ref: PlanRef = REF) -> dict[str, Any]:
    s = Step.model_validate({"id": "build", "shell": "make test", **step})
    d = Dispatch(s, 1, "shell", None, ["make", "test"])
    return manifests.job(ref, d, c or capsule(**GRANTS), "busybox", timeout_seconds=60)


def pod_of(j: dict[str, Any]) -> dict[str, Any]:
    return j["spec"]["template"]["spec"]  # type: ignore[no-any-return]


def test_a_step_that_uses_no_grant_keeps_todays_pod_byte_for_byte():
    """A Capsule's grants cost the steps that do not use them nothing."""
    plain = job({}, capsule())
    granted = job({}, capsule(**GRANTS))
    assert json.dumps(granted, sort_keys=True) == json.dumps(plain, sort_keys=True)
    pod = pod_of(plain)
    assert [c["name"] for c in pod["containers"]] == ["step"]
    for key in ("initContainers", "hostAliases", "hostNetwork", "volumes", "affinity"):
        assert key not in pod
    assert plain["spec"]["template"]["metadata"] == {"labels": plain["metadata"]["labels"]}


def test_a_profile_sets_the_step_containers_security_and_nothing_of_the_pods():
    pod = pod_of(job({"securityProfile": "root"}))
    (c,) = pod["containers"]
    assert c["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "SETUID"]},
        "runAsUser": 0,
        "runAsGroup": 0,
        "runAsNonRoot": False,
    }
    # the pod's own context stays restricted: the container's overrides it for this container
    assert pod["securityContext"]["runAsUser"] == 65534
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}


def test_a_privileged_host_profile_gets_the_nodes_namespaces_and_paths():
    pod = pod_of(job({"securityProfile": "node"}))
    (c,) = pod["containers"]
    assert c["securityContext"]["privileged"] is True
    assert c["securityContext"]["allowPrivilegeEscalation"] is True  # Kubernetes requires it
    assert c["securityContext"]["readOnlyRootFilesystem"] is True
    assert (pod["hostNetwork"], pod["dnsPolicy"]) == (True, "ClusterFirstWithHostNet")
    assert "hostPID" not in pod and "hostIPC" not in pod
    assert pod["volumes"] == [{"name": "hostpath-0", "hostPath": {"path": "/var/cache/ci"}}]
    assert c["volumeMounts"] == [{"name": "hostpath-0", "mountPath": "/cache", "readOnly": False}]


def test_services_run_as_native_sidecars_ready_before_the_step_starts():
    j = job({"services": ["pg", "redis"]})
    pod = pod_of(j)
    assert [c["name"] for c in pod["containers"]] == ["step"]  # observe reads it alone
    pg, redis = pod["initContainers"]
    assert pg == {
        "name": "pg",
        "image": "postgres:16",
        "imagePullPolicy": "IfNotPresent",
        "restartPolicy": "Always",
        "command": ["docker-entrypoint.sh"],
        "args": ["postgres", "-c", "fsync=off"],
        # the Capsule owner's text: the kubelet's $(VAR) is theirs to use, as in a tool's env
        "env": [{"name": "POSTGRES_PASSWORD", "value": "$(not-expanded) ci"}],
        "ports": [{"containerPort": 5432, "name": "pg", "protocol": "TCP"}],
        # the kubelet starts the step's container only once every sidecar's startupProbe passed
        "startupProbe": {
            "exec": {"command": ["pg_isready"]},
            "initialDelaySeconds": 0,
            "periodSeconds": 2,
            "timeoutSeconds": 1,
            "failureThreshold": 120,
        },
        "resources": {
            "requests": {"cpu": "10m", "memory": "32Mi"},
            "limits": {"cpu": "1", "memory": "512Mi"},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsUser": 999,
            "runAsGroup": 999,
            "runAsNonRoot": True,
        },
    }
    assert redis["restartPolicy"] == "Always" and "startupProbe" not in redis
    assert redis["securityContext"] == {
        "allowPrivilegeEscalation": False,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": True,
    }
    # reached by name as on localhost; `kubectl logs POD` shows the step's container
    assert pod["hostAliases"] == [{"ip": "127.0.0.1", "hostnames": ["pg", "redis"]}]
    notes = j["spec"]["template"]["metadata"]["annotations"]
    assert notes == {"kubectl.kubernetes.io/default-container": manifests.CONTAINER}
    assert "annotations" not in j["metadata"]  # the Job's own metadata is not the pod's


AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["ci"]}]}
            ]
        }
    },
    "podAntiAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 50,
                "podAffinityTerm": {
                    "labelSelector": {"matchLabels": {"app": "db"}},
                    "namespaceSelector": {},  # {}: every namespace, as Kubernetes reads it
                    "topologyKey": "kubernetes.io/hostname",
                },
            }
        ]
    },
}


def test_placement_comes_from_the_capsule_in_kubernetes_shape():
    c = capsule(
        priorityClassName="ci-low", imagePullSecrets=[{"name": "registry"}], affinity=AFFINITY
    )
    pod = pod_of(job({}, c))
    assert pod["priorityClassName"] == "ci-low"
    assert pod["imagePullSecrets"] == [{"name": "registry"}]
    assert pod["affinity"] == AFFINITY  # as written: nothing added, nothing dropped


def test_pod_metadata_and_the_plans_listed_labels_go_on_the_pod_ours_over_them():
    c = capsule(
        podMetadata={
            "labels": {"cost-center": "cc-42", "app.kubernetes.io/part-of": "shop"},
            "annotations": {"example.com/owner": "team-a"},
        },
        propagateLabels=["team", "app.kubernetes.io/name", "absent"],
    )
    j = job({}, c)
    ours = {
        names.LABEL_PLAN: "ci",
        names.LABEL_RUN: "r1",
        names.LABEL_STEP: "build",
        names.LABEL_ATTEMPT: "1",
        "app.kubernetes.io/managed-by": "planops",
    }
    plans = {"team": "payments", "app.kubernetes.io/name": "shop"}  # listed, present: not env
    assert j["metadata"]["labels"] == plans | ours
    template = j["spec"]["template"]["metadata"]
    assert template["labels"] == {"cost-center": "cc-42", "app.kubernetes.io/part-of": "shop"} | (
        plans | ours
    )
    assert template["annotations"] == {"example.com/owner": "team-a"}
    assert "annotations" not in j["metadata"]
    # the Job's selector labels are ours alone: the propagated ones only add to them
    assert manifests.PlanRef.selector(REF) == f"{names.LABEL_PLAN}=ci,{names.LABEL_RUN}=r1"


def test_a_plan_label_that_is_not_a_label_value_is_left_out():
    ref = PlanRef("ns", "ci", "u", "r", plan_labels=(("team", "not a value"),))
    j = job({}, capsule(propagateLabels=["team"]), ref)
    assert "team" not in j["metadata"]["labels"]


@pytest.mark.parametrize(
    ("spec", "why"),
    [
        ({"podMetadata": {"labels": {names.LABEL_STEP: "x"}}}, "is planops' own"),
        ({"podMetadata": {"labels": {"answer.planops.dev/x": "y"}}}, "is planops' own"),
        ({"podMetadata": {"annotations": {names.ANNOTATION_STEP_ID: "x"}}}, "is planops' own"),
        ({"podMetadata": {"labels": {"app.kubernetes.io/managed-by": "me"}}}, "planops' own"),
        ({"propagateLabels": [names.LABEL_RUN]}, "is planops' own"),
        ({"propagateLabels": ["batch.kubernetes.io/controller-uid"]}, "is Kubernetes' own"),
        ({"propagateLabels": ["controller-uid"]}, "the Job controller's label"),
        ({"podMetadata": {"labels": {"job-name": "x"}}}, "the Job controller's label"),
        (
            {
                "podMetadata": {
                    "annotations": {"container.apparmor.security.beta.kubernetes.io/step": "u"}
                }
            },
            "is Kubernetes' own",
        ),
        (
            {"podMetadata": {"annotations": {"seccomp.security.alpha.kubernetes.io/pod": "u"}}},
            "own",
        ),
        ({"podMetadata": {"labels": {"a b": "x"}}}, "is not a label key"),
        ({"podMetadata": {"labels": {"team": "a b"}}}, "is not a label value"),
        ({"propagateLabels": ["team", "team"]}, "propagateLabels key declared twice"),
        (
            {"podMetadata": {"labels": {"team": "a"}}, "propagateLabels": ["team"]},
            "in podMetadata.labels and in propagateLabels",
        ),
        (
            {
                "affinity": {
                    "nodeAffinity": {
                        "preferredDuringSchedulingIgnoredDuringExecution": [
                            {"weight": 0, "preference": {}}
                        ]
                    }
                }
            },
            "greater than or equal to 1",
        ),
        (
            {
                "affinity": {
                    "podAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": [
                            {
                                "topologyKey": "zone",
                                "labelSelector": {
                                    "matchExpressions": [{"key": "a", "operator": "In"}]
                                },
                            }
                        ]
                    }
                }
            },
            "operator In needs values",
        ),
        ({"affinity": {"nodeAffinity": {"requiredDuringScheduling": {}}}}, "Extra inputs"),
    ],
)
def test_a_capsule_cannot_set_keys_others_read_nor_malformed_placement(
    spec: dict[str, Any], why: str
):
    with pytest.raises(ValidationError) as e:
        capsule(**spec)
    assert why in str(e.value), str(e.value)


def test_kubernetes_recommended_labels_and_the_autoscalers_annotations_are_allowed():
    c = capsule(
        podMetadata={
            "labels": {"app.kubernetes.io/component": "ci"},
            "annotations": {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"},
        },
        propagateLabels=["app.kubernetes.io/instance"],
    )
    assert c.pod_metadata is not None and c.propagate_labels == ["app.kubernetes.io/instance"]
    with pytest.raises(ValidationError):  # a label there is Kubernetes' own
        capsule(podMetadata={"labels": {"cluster-autoscaler.kubernetes.io/x": "y"}})


# -- read back -------------------------------------------------------------------------------


def pod(step_state: dict[str, Any], *services: dict[str, Any], phase: str = "Running") -> Any:
    return {
        "metadata": {"name": "p", "ownerReferences": []},
        "status": {
            "phase": phase,
            "containerStatuses": [{"name": "step", "state": step_state}],
            "initContainerStatuses": list(services),
        },
    }


def seen(p: dict[str, Any]) -> observe.Observed | None:
    """What observe reads of a running Job and its pod, from the whole pod and from the
    operator's cache of it alike."""
    j = job({"services": ["pg"]})
    j["status"] = {}
    whole = observe.job_attempt(copy.deepcopy(j), p)
    slim = observe.job_attempt(slim_run_object("job", j), slim_run_object("pod", p))
    assert slim == whole
    return whole


RUNNING = {"name": "pg", "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}


def test_a_step_with_services_settles_when_its_own_container_exited_0():
    """The kubelet stops the sidecars once the step's container ended (SIGTERM, then SIGKILL
    after the grace period): the attempt settles on the step's container, not on them."""
    done = {"terminated": {"exitCode": 0, "finishedAt": "2026-01-01T00:00:05Z"}}
    o = seen(pod(done, RUNNING))
    assert o is not None and o.status == "success"
    waiting = seen(pod({"waiting": {"reason": "PodInitializing"}}, RUNNING))
    assert waiting is not None and waiting.status is None


@pytest.mark.parametrize(
    ("state", "error"),
    [
        (
            {"waiting": {"reason": "ImagePullBackOff", "message": "no such image"}},
            "service pg cannot start: ImagePullBackOff: no such image",
        ),
        (
            {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 10s"}},
            "service pg keeps crashing before it is ready: CrashLoopBackOff: back-off 10s",
        ),
    ],
)
def test_a_service_that_cannot_start_fails_the_attempt_at_once_naming_it(
    state: dict[str, Any], error: str
):
    p = pod({"waiting": {"reason": "PodInitializing"}}, {"name": "pg", "state": state})
    o = seen(p)
    assert o is not None and (o.status, o.error, o.stuck) == ("failed", error, True)
    assert observe.pod_event_matters("MODIFIED", p)


def test_a_service_crashing_after_the_step_started_is_the_steps_business():
    crashing = {"name": "pg", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}
    o = seen(pod({"running": {"startedAt": "2026-01-01T00:00:00Z"}}, crashing))
    assert o is not None and o.status is None


def test_planops_labels_win_even_over_a_capsule_that_skipped_its_checks():
    """Defense in depth: a Capsule object the model never judged (reserved keys refused there)
    still cannot make a Job pass for another step's attempt."""
    forged = capsule().model_copy(update={"propagate_labels": [names.LABEL_STEP, names.LABEL_RUN]})
    ref = PlanRef("ns", "ci", "u", "r1", plan_labels=((names.LABEL_STEP, "deploy"),))
    j = job({}, forged, ref)
    assert j["metadata"]["labels"][names.LABEL_STEP] == "build"
    assert j["spec"]["template"]["metadata"]["labels"][names.LABEL_STEP] == "build"


def test_the_reconcilers_plan_ref_holds_the_plans_labels():
    meta = {"uid": "u", "labels": {"team": "payments", "odd": 3}}
    assert runs.plan_ref("ns", "ci", meta, "r1").plan_labels == (("team", "payments"),)
    assert runs.plan_ref("ns", "ci", {"uid": "u", "labels": None}, "r1").plan_labels == ()
