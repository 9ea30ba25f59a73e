"""What a script step, a step's env and its volumes become: in the cluster, the Job of the attempt
(still one container; a step that asks none of them gets today's pod, byte for byte), and
locally, the process `kubectl-plan run --local` starts (a script by its interpreter on this
machine; a value from a Secret or ConfigMap, and a volume, refused clearly, naming what)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from planops.api import CapsuleSpec, PlanSpec
from planops.cli import main as cli
from planops.engine import Policy, Run
from planops.kube.manifests import PlanRef
from planops.reconciler.run import attempt_objects as dispatching
from planops.runners.local import LocalRunner

from .helpers import capsule, plan

REF = PlanRef("team-a", "ci", "uid-7", "r0123456789")
CAP = capsule(
    image="busybox:1",
    scripts={"allow": ["sh", "bash"]},
    env={"secrets": ["ci"], "configMaps": ["settings"]},
    volumes=[
        {"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}},
        {"name": "src", "persistentVolumeClaim": {"claimName": "src"}, "readOnly": True},
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "cfg", "configMap": {"name": "settings"}},
        {"name": "keys", "secret": {"secretName": "deploy-keys"}},
    ],
)
SECRET = {"secretKeyRef": {"name": "ci", "key": "token"}}


def job_of(spec: PlanSpec, cap: CapsuleSpec = CAP, claim: str | None = None) -> dict[str, Any]:
    (d,) = Run("ci", spec).decide(0.0).dispatch
    made = dispatching.job(REF, d, cap, spec, Policy(), claim)
    assert not isinstance(made, str), made
    return made


def pod_of(*steps: dict[str, Any], **kw: Any) -> dict[str, Any]:
    spec = kw.pop("spec", {})
    return dict(job_of(plan(*steps, **spec), **kw)["spec"]["template"]["spec"])


# -- the Job -------------------------------------------------------------------------------


def test_a_script_step_is_one_container_running_its_interpreter_on_the_script():
    script = 'set -e\necho "$HOME" $(date) | tr a-z A-Z\n'
    pod = pod_of({"id": "s", "script": script})
    (container,) = pod["containers"]
    # the first interpreter the Capsule allows; every $ doubled, so the kubelet expands nothing
    assert container["command"] == ["sh", "-c", script.replace("$", "$$")]
    assert "args" not in container and "initContainers" not in pod and "volumes" not in pod
    pod = pod_of({"id": "s", "script": "echo $BASH_VERSION", "interpreter": "bash"})
    assert pod["containers"][0]["command"] == ["bash", "-c", "echo $$BASH_VERSION"]


def test_a_step_without_the_new_fields_keeps_todays_pod():
    plain = plan({"id": "s", "shell": "echo hi"})
    job = job_of(plain, cap=CAP)  # a Capsule that grants everything changes nothing here
    assert job == job_of(plain, cap=capsule(image="busybox:1"))
    pod = job["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert "volumes" not in pod and "volumeMounts" not in container
    assert [e["name"] for e in container["env"]] == [
        "PLANOPS_PLAN",
        "PLANOPS_STEP",
        "PLANOPS_ATTEMPT",
    ]


def test_a_steps_env_follows_planops_own_its_values_exactly_its_keys_for_the_kubelet():
    pod = pod_of(
        {
            "id": "s",
            "script": 'echo "$WHO"',
            "env": [
                {"name": "WHO", "value": "{{input.who}}"},
                {"name": "TOKEN", "valueFrom": SECRET},
                {
                    "name": "MODE",
                    "valueFrom": {
                        "configMapKeyRef": {"name": "settings", "key": "m", "optional": True}
                    },
                },
                {"name": "N", "value": "{{input.n}}"},
            ],
        },
        spec={"input": {"who": "$(TOKEN) {{input.n}}", "n": {"a": 1}}},
    )
    env = pod["containers"][0]["env"]
    assert [e["name"] for e in env][:3] == ["PLANOPS_PLAN", "PLANOPS_STEP", "PLANOPS_ATTEMPT"]
    assert env[3:] == [
        # rendered once: the template it yields is text, the kubelet's $(TOKEN) escaped
        {"name": "WHO", "value": "$$(TOKEN) {{input.n}}"},
        {
            "name": "TOKEN",
            "valueFrom": {"secretKeyRef": {"name": "ci", "key": "token", "optional": False}},
        },
        {
            "name": "MODE",
            "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "m", "optional": True}},
        },
        {"name": "N", "value": '{"a": 1}'},  # a value that is no text: as JSON
    ]


def test_volumes_are_mounted_by_name_read_only_where_the_step_or_the_capsule_says():
    pod = pod_of(
        {
            "id": "s",
            "shell": "echo",
            "volumeMounts": [
                {"name": "cache", "mountPath": "/cache"},
                {"name": "src", "mountPath": "/src"},
                {"name": "src", "mountPath": "/again"},  # one volume, two mounts
                {"name": "data", "mountPath": "/data"},
                {"name": "data", "mountPath": "/data-ro", "readOnly": True},
                {"name": "cfg", "mountPath": "/etc/app"},
                {"name": "keys", "mountPath": "/keys"},
            ],
        }
    )
    assert pod["volumes"] == [
        {"name": "vol-cache", "emptyDir": {"sizeLimit": "1Gi"}},
        {"name": "vol-src", "persistentVolumeClaim": {"claimName": "src", "readOnly": True}},
        {"name": "vol-data", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "vol-cfg", "configMap": {"name": "settings"}},
        {"name": "vol-keys", "secret": {"secretName": "deploy-keys", "defaultMode": 0o440}},
    ]
    assert pod["containers"][0]["volumeMounts"] == [
        {"name": "vol-cache", "mountPath": "/cache", "readOnly": False},
        {"name": "vol-src", "mountPath": "/src", "readOnly": True},
        {"name": "vol-src", "mountPath": "/again", "readOnly": True},
        {"name": "vol-data", "mountPath": "/data", "readOnly": False},
        {"name": "vol-data", "mountPath": "/data-ro", "readOnly": True},
        {"name": "vol-cfg", "mountPath": "/etc/app", "readOnly": True},
        {"name": "vol-keys", "mountPath": "/keys", "readOnly": True},
    ]


def test_a_steps_volumes_sit_beside_the_runs_workspace():
    pod = pod_of(
        {"id": "s", "script": "true", "volumeMounts": [{"name": "cache", "mountPath": "/cache"}]},
        spec={"workspace": {"size": "1Mi"}},
        claim="ws",
    )
    assert [v["name"] for v in pod["volumes"]] == ["vol-cache", "workspace"]
    mounts = pod["containers"][0]["volumeMounts"]
    assert [m["mountPath"] for m in mounts] == ["/cache", "/workspace"]
    assert pod["containers"][0]["workingDir"] == "/workspace"


def test_a_capsule_volume_cannot_take_planops_own_volume_names():
    # a Capsule's volume named like planops' own (workspace, secret-0) is apart in the pod
    cap = capsule(image="busybox:1", volumes=[{"name": "workspace", "emptyDir": {}}])
    spec = plan(
        {"id": "s", "shell": "echo", "volumeMounts": [{"name": "workspace", "mountPath": "/w"}]},
        workspace={"size": "1Mi"},
    )
    pod = job_of(spec, cap=cap, claim="ws")["spec"]["template"]["spec"]
    assert [v["name"] for v in pod["volumes"]] == ["vol-workspace", "workspace"]


def test_an_unsettled_env_template_fails_the_attempt_like_any_template():
    spec = plan(
        {"id": "a", "shell": "echo"},
        {
            "id": "b",
            "shell": "echo",
            "env": [{"name": "X", "value": "{{a.json.k}}"}],
            "dependsOn": ["a"],
        },
    )
    run = Run("ci", spec)
    (a,) = run.decide(0.0).dispatch
    assert a.step.id == "a"
    run.finish_attempt("a", 1, "success", "not json", None, 1.0)
    decision = run.decide(2.0)
    assert decision.dispatch == ()
    (rec,) = [r for r in decision.settled if r.step_id == "b"]
    assert rec.status == "failed" and "is not JSON" in (rec.error or "")


def test_an_env_value_no_process_could_be_started_with_fails_the_attempt_saying_so():
    big = {"id": "a", "shell": "echo"}
    spec = plan(
        big,
        {
            "id": "b",
            "script": "true",
            "env": [{"name": "X", "value": "{{input.v}}"}],
            "onError": "continue",
        },
        {"id": "c", "script": "true", "env": [{"name": "Y", "value": "{{input.z}}"}]},
        input={"v": "x" * (128 * 1024), "z": "a\x00b"},
    )
    decision = Run("ci", spec).decide(0.0)
    assert [d.step.id for d in decision.dispatch] == ["a"]  # b and c failed, nothing started
    errors = {r.step_id: r.error for r in decision.settled}
    assert errors["b"] == (
        "env X renders to 131075 bytes: a variable holds at most 131072 bytes of text without "
        "NUL (what a process can be started with); pass a big value through the workspace"
    )
    assert (errors["c"] or "").startswith("env Y holds a NUL byte")


# -- the local runner ------------------------------------------------------------------------


def run_local(*steps: dict[str, Any], cap: CapsuleSpec = CAP, **spec: Any):
    records: list[dict[str, Any]] = []
    runner = LocalRunner({"default": cap}, observer=records.append)
    report = asyncio.run(runner.run("p", plan(*steps, **spec)))
    return {r.step_id: r for r in report.steps}, records


#: a script with a pipe that fails under `set -e` on line 3: lines 1 and 2 ran, 4 never does
FAILS_ON_LINE_3 = """set -eu
echo one | tr a-z A-Z
ls /no/such/dir | wc -l
echo never
"""


def test_a_script_runs_by_its_interpreter_here_and_fails_on_the_line_that_failed():
    cap = capsule(scripts={"allow": ["bash"]})  # bash: `set -o pipefail` on the pipe
    rec = run_local({"id": "s", "script": "set -o pipefail\n" + FAILS_ON_LINE_3}, cap=cap)[0]["s"]
    assert rec.status == "failed" and rec.error == "exit code 2"
    assert rec.output == "ONE\n0"  # the pipe's wc ran; nothing after the failing line did
    assert "/no/such/dir" in (rec.stderr or "")


def test_a_scripts_env_is_data_a_template_it_yields_is_never_rendered_again():
    got, _ = run_local(
        {"id": "a", "shell": "echo {{input.x}}-$HOME"},  # prints a template, as text
        {
            "id": "b",
            "script": 'printf "%s|%s" "$V" "$W"',
            "env": [{"name": "V", "value": "{{a.output}}"}, {"name": "W", "value": "$(HOME)"}],
            "dependsOn": ["a"],
        },
        input={"x": "{{input.x}}"},
    )
    assert got["b"].output == "{{input.x}}-$HOME|$(HOME)"


def test_a_value_from_a_secret_is_refused_locally_and_an_optional_one_left_unset():
    got, records = run_local(
        {"id": "s", "script": "echo ran", "env": [{"name": "T", "valueFrom": SECRET}]},
        {
            "id": "o",
            "script": 'echo "[${M-unset}]"',
            "env": [
                {
                    "name": "M",
                    "valueFrom": {
                        "configMapKeyRef": {"name": "settings", "key": "m", "optional": True}
                    },
                }
            ],
        },
    )
    assert got["s"].status == "failed" and got["s"].output is None
    assert got["s"].error == (
        "step 's': env T comes from Secret 'ci' (key 'token'), which a local run cannot read "
        "(run the plan in a cluster, or give it a value in a plan file for local runs)"
    )
    assert got["o"].output == "[unset]"
    notices = [r["message"] for r in records if r["event"] == "notice" and r.get("stepId") == "o"]
    assert notices == [
        "step 'o': env M is left unset: its value is optional, from ConfigMap 'settings' (key "
        "'m'), and a local run reads no ConfigMap"
    ]


def test_a_volume_is_refused_locally_naming_it():
    rec = run_local(
        {
            "id": "s",
            "shell": "echo ran",
            "volumeMounts": [
                {"name": "cache", "mountPath": "/cache"},
                {"name": "cfg", "mountPath": "/etc/app"},
            ],
        }
    )[0]["s"]
    assert rec.status == "failed" and rec.output is None
    assert rec.error == (
        "step 's' mounts emptyDir volume 'cache' at /cache, which a local run cannot (run the "
        "plan in a cluster); step 's' mounts configMap volume 'cfg' at /etc/app, which a local "
        "run cannot (run the plan in a cluster)"
    )


def test_an_interpreter_missing_on_this_machine_fails_saying_so():
    cap = capsule(scripts={"allow": ["ruby"]})
    rec = run_local({"id": "s", "script": "puts 1"}, cap=cap)[0]["s"]
    if rec.status == "success":  # this machine has ruby
        pytest.skip("ruby is installed here")
    assert rec.error == "'ruby': binary not found on PATH"


def test_run_local_refuses_before_anything_runs_what_the_capsule_does_not_grant(tmp_path, capsys):
    f = tmp_path / "p.yaml"
    f.write_text(
        json.dumps(
            {
                "apiVersion": "planops.dev/v1alpha1",
                "kind": "Capsule",
                "metadata": {"name": "default"},
                "spec": {"scripts": {"allow": ["sh"]}},
            }
        )
        + "\n---\n"
        + json.dumps(
            {
                "id": "p",
                "steps": [
                    {"id": "s", "script": "touch ran", "env": [{"name": "T", "valueFrom": SECRET}]}
                ],
            }
        )
    )
    assert cli.main(["run", "--local", str(f), "-o", "json"]) == 2
    (e,) = json.loads(capsys.readouterr().out)["errors"]
    assert (e["code"], e["path"]) == (
        "env-not-allowed",
        "steps[0].env[0].valueFrom.secretKeyRef.name",
    )
    assert not (tmp_path / "ran").exists()


def test_run_local_refuses_the_path_that_made_an_allowed_binary_any_program(tmp_path, capsys):
    """Under `shell.allow: [cp, echo]` a first step copied sh into the workspace as `echo` and
    a second, with PATH set to the workspace, ran `echo -c 'CODE'`: sh ran the author's code
    (before the model refused PATH, run --local printed what the code printed)."""
    work = tmp_path / "ws"
    f = tmp_path / "p.yaml"
    cap = {"apiVersion": "planops.dev/v1alpha1", "kind": "Capsule", "metadata": {"name": "default"}}
    steps = [
        {"id": "plant", "shell": "cp /bin/sh ./echo"},
        {
            "id": "run",
            "shell": "echo -c 'touch escaped'",
            "dependsOn": ["plant"],
            "env": [{"name": "PATH", "value": str(work)}],
        },
    ]
    spec = {"id": "p", "workspace": {"size": "1Gi"}, "steps": steps}
    f.write_text(json.dumps(cap | {"spec": {"shell": {"allow": ["cp", "echo"]}}}) + "\n---\n")
    f.write_text(f.read_text() + json.dumps(spec))
    code = cli.main(["run", "--local", str(f), "--workdir", str(work), "-o", "json"])
    out = capsys.readouterr()
    assert code == 2, out
    assert "PATH is the image's" in out.out + out.err
    assert not (work / "echo").exists() and not (work / "escaped").exists()


def test_a_repeated_key_is_read_as_kubectl_reads_it_and_the_one_read_is_judged(tmp_path, capsys):
    """`env:` written twice in one step: kubectl keeps the last (`kubectl create --dry-run`
    showed it on a 1.36 API server), and so does kubectl-plan; the one kept is what is judged,
    so an env hidden behind an innocent first one is refused all the same."""
    f = tmp_path / "p.yaml"
    f.write_text(
        "apiVersion: planops.dev/v1alpha1\nkind: Capsule\nmetadata: {name: default}\n"
        "spec: {shell: {allow: [echo]}}\n---\n"
        "id: p\nsteps:\n- id: s\n  shell: echo hi\n  env: []\n"
        "  env: [{name: P, valueFrom: {secretKeyRef: {name: prod-db, key: password}}}]\n"
    )
    assert cli.main(["validate", str(f), "-o", "json"]) == 1
    (e,) = json.loads(capsys.readouterr().out)["errors"]
    assert (e["code"], e["path"]) == (
        "env-not-allowed",
        "steps[0].env[0].valueFrom.secretKeyRef.name",
    )
