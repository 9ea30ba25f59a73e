"""The test control plane is a real Kubernetes: the behaviours a fake API server gets wrong.

CRD structural schemas and CEL rules, the status subresource, Job -> Pod, owner-reference garbage
collection, RBAC for service accounts (with a real token), and watch semantics including 410 Gone.
"""

from __future__ import annotations

import json
import time
import uuid

import pytest
from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from tests.cluster.etcd import compact
from tests.conftest import Kube

pytestmark = pytest.mark.cluster


def eventually(fn, timeout=60.0, interval=0.25):
    deadline = time.monotonic() + timeout
    while True:
        try:
            result = fn()
            if result:
                return result
        except AssertionError:
            if time.monotonic() > deadline:
                raise
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s")
        time.sleep(interval)


def test_server_reports_the_pinned_release(kube: Kube):
    version = json.loads(kube.run("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"] == version["clientVersion"]["gitVersion"]
    assert version["serverVersion"]["gitVersion"].startswith("v1.36.")


def _widget_crd(group: str) -> dict:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "scope": "Namespaced",
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {
                                        "min": {"type": "integer"},
                                        "max": {"type": "integer"},
                                    },
                                    "x-kubernetes-validations": [
                                        {
                                            "rule": "self.min <= self.max",
                                            "message": "min must not exceed max",
                                        }
                                    ],
                                },
                                "status": {
                                    "type": "object",
                                    "properties": {"phase": {"type": "string"}},
                                },
                            },
                        }
                    },
                }
            ],
        },
    }


def test_crd_structural_schema_cel_rule_and_status_subresource(kube: Kube, namespace: str):
    group = f"g{uuid.uuid4().hex[:8]}.planops.test"
    kube.apply(_widget_crd(group))
    try:
        kube.run("wait", "--for=condition=Established", f"crd/widgets.{group}", "--timeout=30s")
        ok = {
            "apiVersion": f"{group}/v1",
            "kind": "Widget",
            "metadata": {"name": "ok", "namespace": namespace},
            "spec": {"min": 1, "max": 2},
        }
        eventually(
            lambda: kube.run("apply", "-f", "-", input=json.dumps(ok), check=False).returncode == 0
        )

        bad = {
            **ok,
            "metadata": {"name": "bad", "namespace": namespace},
            "spec": {"min": 5, "max": 2},
        }
        r = kube.run("apply", "-f", "-", input=json.dumps(bad), check=False)
        assert r.returncode != 0 and "min must not exceed max" in r.stderr

        wrong_type = {
            **ok,
            "metadata": {"name": "typed", "namespace": namespace},
            "spec": {"min": "one", "max": 2},
        }
        r = kube.run("apply", "-f", "-", input=json.dumps(wrong_type), check=False)
        assert r.returncode != 0 and "spec.min" in r.stderr

        # status is ignored by a main-resource update, and set through /status
        with_status = {**ok, "status": {"phase": "Done"}}
        kube.run("replace", "-f", "-", input=json.dumps(with_status))
        assert "status" not in kube.get("widgets." + group, "ok", "-n", namespace)
        kube.run(
            "patch",
            f"widgets.{group}",
            "ok",
            "-n",
            namespace,
            "--subresource=status",
            "--type=merge",
            "-p",
            '{"status": {"phase": "Done"}}',
        )
        assert kube.get("widgets." + group, "ok", "-n", namespace)["status"] == {"phase": "Done"}
    finally:
        kube.run("delete", "crd", f"widgets.{group}", "--wait=false", check=False)


def test_job_controller_creates_the_pod_and_gc_deletes_it_with_the_job(kube: Kube, namespace: str):
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": namespace},
        "spec": {
            "backoffLimit": 0,
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "c",
                            "image": "local/busybox:1.35.0",
                            "imagePullPolicy": "Never",
                            "command": ["true"],
                        }
                    ],
                }
            },
        },
    }
    kube.apply(job)
    pods = eventually(lambda: kube.get("pods", "-n", namespace, "-l", "job-name=j")["items"])
    (pod,) = pods
    owner = pod["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["controller"]) == ("Job", "j", True)

    kube.run("delete", "job", "j", "-n", namespace, "--cascade=background")
    eventually(lambda: kube.get("pods", "-n", namespace, "-l", "job-name=j")["items"] == [])


def test_a_service_account_is_denied_until_a_role_binding_allows_it(kube: Kube, namespace: str):
    kube.run("create", "serviceaccount", "reader", "-n", namespace)
    token = kube.run("create", "token", "reader", "-n", namespace, "--duration=10m").stdout.strip()
    r = kube.run("get", "configmaps", "-n", namespace, token=token, check=False)
    assert r.returncode != 0 and "Forbidden" in r.stderr
    assert f"system:serviceaccount:{namespace}:reader" in r.stderr

    kube.run(
        "create", "role", "cm-reader", "-n", namespace, "--verb=get,list", "--resource=configmaps"
    )
    kube.run(
        "create",
        "rolebinding",
        "cm-reader",
        "-n",
        namespace,
        "--role=cm-reader",
        f"--serviceaccount={namespace}:reader",
    )
    eventually(
        lambda: (
            kube.run("get", "configmaps", "-n", namespace, token=token, check=False).returncode == 0
        )
    )
    # and nothing more than the role grants
    r = kube.run("get", "secrets", "-n", namespace, token=token, check=False)
    assert r.returncode != 0 and "Forbidden" in r.stderr


def _core(kubeconfig: str) -> client.CoreV1Api:
    return client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig))


def test_a_watch_sees_added_modified_deleted_in_order(kubeconfig: str, namespace: str):
    core = _core(kubeconfig)
    start_rv = core.list_namespaced_config_map(namespace).metadata.resource_version
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="w"), data={"k": "1"})
    core.create_namespaced_config_map(namespace, body)
    core.patch_namespaced_config_map("w", namespace, {"data": {"k": "2"}})
    core.delete_namespaced_config_map("w", namespace)

    seen = []
    w = watch.Watch()
    for event in w.stream(
        core.list_namespaced_config_map, namespace, resource_version=start_rv, timeout_seconds=10
    ):
        obj = event["object"]
        if obj.metadata.name == "w":
            seen.append((event["type"], (obj.data or {}).get("k")))
        if event["type"] == "DELETED":
            w.stop()
    assert seen == [("ADDED", "1"), ("MODIFIED", "2"), ("DELETED", "2")]


def test_a_watch_from_a_compacted_resource_version_gets_410_gone(kubeconfig: str, namespace: str):
    """PodTemplates are watched from etcd (see tests/cluster/up): compaction answers 410."""
    core = _core(kubeconfig)
    template = client.V1PodTemplate(
        metadata=client.V1ObjectMeta(name="old", labels={"n": "0"}),
        template=client.V1PodTemplateSpec(
            spec=client.V1PodSpec(
                containers=[client.V1Container(name="c", image="local/busybox:1.35.0")]
            )
        ),
    )
    old_rv = core.create_namespaced_pod_template(namespace, template).metadata.resource_version
    for i in range(1, 4):
        core.patch_namespaced_pod_template(
            "old", namespace, {"metadata": {"labels": {"n": str(i)}}}
        )
    compact(kubeconfig)
    with pytest.raises(ApiException) as gone:
        for _ in watch.Watch().stream(
            core.list_namespaced_pod_template,
            namespace,
            resource_version=old_rv,
            timeout_seconds=10,
        ):
            pass
    assert gone.value.status == 410
