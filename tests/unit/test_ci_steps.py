"""Script steps, a step's own env and volumes: powers a Capsule's owner grants and a plan's
author only chooses among. Each rule is refused before anything runs, by the validator (so by
`kubectl-plan validate`, the admission webhook and the reconciler), and again at dispatch in the
same words (engine.step_grants: one rule); what only a model can say (reserved names, paths,
volume types) is refused on reading. test_dispatch_rules.py runs the dispatch side through both
executors; test_ci_steps_run.py checks the Job and the local process they make."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import ValidationError

from planops.api import CapsuleSpec, PlanSpec, parse_document
from planops.engine import Policy, Run, validate
from planops.engine import dispatch as rules
from planops.engine.shell_hints import shell_warnings
from planops.handlers import webhook
from planops.handlers.kopf_adapter import kopf
from planops.reconciler import Reconciler

from .fakekube import FakeKube
from .helpers import capsule, plan, resolver
from .test_schedule_webhook import webhook_handlers

GRANTS: dict[str, Any] = {
    "image": "busybox:1",
    "scripts": {"allow": ["sh", "bash"]},
    "env": {"secrets": ["ci"], "configMaps": ["settings"]},
    "volumes": [
        {"name": "cache", "emptyDir": {"sizeLimit": "1Gi"}},
        {"name": "src", "persistentVolumeClaim": {"claimName": "src"}, "readOnly": True},
        {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
        {"name": "cfg", "configMap": {"name": "settings"}},
        {"name": "keys", "secret": {"secretName": "deploy-keys"}},
    ],
}


def granting(**kw: Any) -> CapsuleSpec:
    return capsule(**(GRANTS | kw))


def errors(*steps: dict[str, Any], cap: CapsuleSpec | None = None, **spec: Any):
    return validate(plan(*steps, **spec), resolver(default=cap or granting()))


def codes(*steps: dict[str, Any], cap: CapsuleSpec | None = None, **spec: Any):
    return [(e.code, e.path) for e in errors(*steps, cap=cap, **spec)]


SECRET = {"secretKeyRef": {"name": "ci", "key": "token"}}


def test_a_step_using_every_grant_its_capsule_gives_is_valid():
    assert (
        errors(
            {
                "id": "build",
                "script": "set -eu\nmake 2>&1 | tee build.log\n",
                "interpreter": "bash",
                "image": "busybox:1",
                "env": [
                    {"name": "TARGET", "value": "{{input.env}}"},
                    {"name": "TOKEN", "valueFrom": SECRET},
                    {
                        "name": "MODE",
                        "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "m"}},
                    },
                ],
                "volumeMounts": [
                    {"name": "cache", "mountPath": "/cache"},
                    {"name": "src", "mountPath": "/src"},
                    {"name": "src", "mountPath": "/src2", "readOnly": True},
                    {"name": "data", "mountPath": "/data", "readOnly": False},
                    {"name": "cfg", "mountPath": "/etc/app"},
                ],
            },
            {
                "id": "after",
                "shell": "echo x",
                "env": [{"name": "OUT", "value": "{{build.output}}"}],
                "dependsOn": ["build"],
            },
            input={"env": "dev"},
        )
        == []
    )


# -- scripts --------------------------------------------------------------------------------


def test_a_script_under_a_capsule_that_allows_no_interpreter_is_refused():
    (e,) = errors({"id": "s", "script": "echo hi"}, cap=granting(scripts={"allow": []}))
    assert (e.code, e.step, e.path) == ("script-not-allowed", "s", "steps[0].script")
    assert e.message == (
        "the Capsule allows no interpreter (its scripts.allow is empty): no script step may run "
        "under it"
    )


def test_an_interpreter_the_capsule_does_not_allow_is_refused_naming_those_it_does():
    (e,) = errors({"id": "s", "script": "puts 1", "interpreter": "ruby"})
    assert (e.code, e.path) == ("script-not-allowed", "steps[0].interpreter")
    assert (
        e.message == "interpreter 'ruby' is not in the Capsule's scripts.allow (allowed: sh, bash)"
    )
    (e,) = errors({"id": "s", "script": "x", "interpreter": "tclsh"})
    assert "nor one planops knows" in e.message


def test_a_capsule_may_allow_only_interpreters_planops_can_hand_a_script_to():
    with pytest.raises(ValidationError) as e:
        CapsuleSpec.model_validate({"scripts": {"allow": ["sh", "tclsh"]}})
    assert "'sh', 'bash', 'python3', 'python', 'node', 'perl' or 'ruby'" in str(e.value)


def test_a_template_in_a_script_is_refused_pointing_at_env():
    (e,) = errors({"id": "s", "script": 'echo "deploying {{input.env}}"\n'}, input={"env": "x"})
    assert (e.code, e.path) == ("template", "steps[0].script")
    assert e.message.startswith("{{input.env}} in a script is never rendered")
    assert "through env, e.g. env: [{name: ENV, value: '{{input.env}}'}]" in e.message
    # any {{, even one that is no template of ours (a Go template of a CLI) is the same refusal
    (e,) = errors({"id": "s", "script": "docker inspect -f '{{.Id}}' x"})
    assert e.code == "template" and e.message.startswith("{{.Id}} in a script")
    # written apart, as the refusal says, it is a script like any other
    assert errors({"id": "s", "script": "docker inspect -f '{''{.Id}}' x"}) == []


def test_a_script_holds_no_nul_byte_and_is_bounded():
    with pytest.raises(ValidationError, match="a script cannot hold a NUL byte"):
        plan({"id": "s", "script": "echo \x00"})
    with pytest.raises(ValidationError, match="at most 32000 characters"):
        plan({"id": "s", "script": "#" * 32_001})
    assert errors({"id": "s", "script": "#" * 32_000}) == []


def test_interpreter_is_a_script_steps_field():
    assert codes({"id": "s", "shell": "echo x", "interpreter": "sh"}) == [
        ("step-kind", "steps[0].interpreter")
    ]


def test_a_step_is_one_kind_a_script_included():
    (e,) = errors({"id": "s", "script": "true", "shell": "echo x"})
    assert e.code == "step-kind" and "(found shell and script)" in e.message


def test_a_script_step_may_name_its_image_as_a_shell_step_does():
    assert errors({"id": "s", "script": "true", "image": "busybox:1"}) == []
    (e,) = errors({"id": "s", "script": "true", "image": "evil:1"})
    assert (e.code, e.path) == ("image-not-allowed", "steps[0].image")


def test_the_multi_line_shell_warning_points_at_the_script_step():
    (w,) = shell_warnings(plan({"id": "s", "shell": "echo one\necho two\n"}))
    assert w.code == "shell-lines" and "Write a script step (script:" in w.message
    assert shell_warnings(plan({"id": "s", "script": "echo one | wc -l\necho two\n"})) == []


# -- env --------------------------------------------------------------------------------------


def test_env_from_a_secret_or_configmap_the_capsule_does_not_list_is_refused():
    got = errors(
        {
            "id": "s",
            "shell": "echo x",
            "env": [
                {"name": "A", "valueFrom": {"secretKeyRef": {"name": "prod-db", "key": "p"}}},
                {"name": "B", "valueFrom": {"configMapKeyRef": {"name": "other", "key": "k"}}},
                {"name": "C", "valueFrom": SECRET},
            ],
        }
    )
    assert [(e.code, e.path, e.message) for e in got] == [
        (
            "env-not-allowed",
            "steps[0].env[0].valueFrom.secretKeyRef.name",
            "env A reads Secret 'prod-db', which the Capsule does not list in env.secrets "
            "(listed: ci)",
        ),
        (
            "env-not-allowed",
            "steps[0].env[1].valueFrom.configMapKeyRef.name",
            "env B reads ConfigMap 'other', which the Capsule does not list in env.configMaps "
            "(listed: settings)",
        ),
    ]


def test_a_capsule_that_lists_nothing_grants_no_secret_not_even_a_tools():
    tool = {"name": "deploy", "command": ["deploy"], "env": [{"name": "T", "valueFrom": SECRET}]}
    cap = capsule(tools=[tool])  # the tool's credentials are the tool's
    (e,) = errors(
        {"id": "s", "shell": "echo x", "env": [{"name": "T", "valueFrom": SECRET}]}, cap=cap
    )
    assert e.code == "env-not-allowed" and e.message.endswith("(listed: none)")


@pytest.mark.parametrize("name", ["PLANOPS_INPUT", "PLANOPS_STEP", "PLANOPS_X"])
def test_planops_names_are_reserved(name: str):
    with pytest.raises(
        ValidationError, match=f"{name}: names starting with PLANOPS_ are set by planops"
    ):
        plan({"id": "s", "shell": "echo", "env": [{"name": name, "value": "x"}]})


IMAGE_ENV = ["PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "GCONV_PATH", "BASH_ENV"]
IMAGE_ENV += ["ENV", "SHELLOPTS", "BASHOPTS", "PS4"]


@pytest.mark.parametrize("name", IMAGE_ENV)
@pytest.mark.parametrize("kind", [{"shell": "echo hi"}, {"script": "echo hi"}])
def test_a_step_sets_no_variable_that_chooses_the_program_it_runs(name: str, kind: dict[str, str]):
    """`env: [{name: PATH, value: /workspace}]` beside `shell: echo -c 'CODE'` under
    `shell.allow: [cp, echo]`, after a step ran `cp /bin/sh echo` in the workspace: `echo`
    was looked up there and ran sh on the author's code (run --local showed it). LD_PRELOAD
    loads any file into any program; BASH_ENV, SHELLOPTS=xtrace with PS4='$(CODE)' run code in
    any shell script. Refused on reading (the model: validate, the webhook, the reconciler,
    run --local), a script step too."""
    with pytest.raises(ValidationError, match=f"{name} is the image's: it chooses which program"):
        plan({"id": "s", **kind, "env": [{"name": name, "value": "/workspace"}]})


@pytest.mark.parametrize(
    "name", ["CI", "\uff43i", "ci ", "ci\u200b", "c\u0131", ".ci", "{{input.secret}}", "ci/x"]
)
def test_a_secret_spelled_otherwise_is_no_name_at_all(name: str):
    """The Capsule lists `ci`: a name spelled in capitals, fullwidth, with a space, a zero-width
    or dotless i, or as a template reaches nothing (object names are lowercase DNS names,
    compared exactly; a valueFrom is never rendered)."""
    ref = {"secretKeyRef": {"name": name, "key": "token"}}
    with pytest.raises(ValidationError, match=r"secretKeyRef\.name"):
        plan({"id": "s", "shell": "echo", "env": [{"name": "T", "valueFrom": ref}]})


@pytest.mark.parametrize("name", ["/bin/sh", "SH", "sh ", "./sh", "busybox"])
def test_an_interpreter_is_named_exactly_as_the_capsule_lists_it(name: str):
    (e,) = errors({"id": "s", "script": "id", "interpreter": name})
    assert (e.code, e.path) == ("script-not-allowed", "steps[0].interpreter")


def test_names_like_the_images_variables_stay_the_authors():
    env = [{"name": n, "value": "1"} for n in ("path", "MYPATH", "LDFLAGS", "OLD_PATH", "PS1")]
    assert errors({"id": "s", "shell": "echo hi", "env": env}) == []
    tool = {"name": "t", "command": ["t"], "env": [{"name": "PATH", "value": "/opt/t/bin"}]}
    assert capsule(tools=[tool]).tools[0].env[0].name == "PATH"  # a tool's env is its owner's


def test_an_env_entry_is_a_value_or_a_key_and_each_name_once():
    with pytest.raises(ValidationError, match="exactly one of value or valueFrom"):
        plan(
            {"id": "s", "shell": "echo", "env": [{"name": "A", "value": "x", "valueFrom": SECRET}]}
        )
    with pytest.raises(ValidationError, match="env name declared twice: A"):
        plan(
            {
                "id": "s",
                "shell": "echo",
                "env": [{"name": "A", "value": "1"}, {"name": "A", "value": "2"}],
            }
        )
    with pytest.raises(ValidationError, match="String should match pattern"):
        plan({"id": "s", "shell": "echo", "env": [{"name": "A-B", "value": "1"}]})


def test_env_templates_are_judged_as_a_steps_input_is():
    got = codes(
        {"id": "a", "shell": "echo a"},
        {"id": "b", "shell": "echo b", "env": [{"name": "X", "value": "v={{a.output}}"}]},
        {"id": "c", "script": "true", "env": [{"name": "Y", "value": "{{nope.output}}"}]},
        {"id": "d", "shell": "echo", "env": [{"name": "Z", "value": "{{input.undeclared}}"}]},
    )
    assert got == [
        ("template", "steps[1].env[0].value"),  # a result of a step it does not wait for
        ("template", "steps[2].env[0].value"),  # no such step
        ("template", "steps[3].env[0].value"),  # an input the plan does not declare
    ]


@pytest.mark.parametrize("field", ["env", "volumeMounts"])
@pytest.mark.parametrize(
    "kind",
    [
        {"tool": "notes"},
        {"capsule": "other", "input": "x"},
        {"filter": {"over": [1], "where": {"value": 1, "op": "eq", "to": 1}}},
    ],
    ids=["tool", "capsule", "filter"],
)
def test_env_and_volumes_are_a_shell_or_script_steps_alone(field: str, kind: dict[str, Any]):
    value = (
        [{"name": "A", "value": "1"}] if field == "env" else [{"name": "cache", "mountPath": "/c"}]
    )
    got = errors({"id": "s", **kind, field: value}, cap=granting(spawn={"allow": ["other"]}))
    steps_kind = [e for e in got if e.code == "step-kind"]
    assert [e.path for e in steps_kind] == [f"steps[0].{field}"], got
    if "tool" in kind:  # a tool is its Capsule owner's program, with its credentials
        assert "a tool's env and files are its own, in the Capsule" in steps_kind[0].message


# -- volumes ----------------------------------------------------------------------------------


def test_a_volume_the_capsule_does_not_declare_is_refused():
    (e,) = errors(
        {"id": "s", "shell": "echo", "volumeMounts": [{"name": "host", "mountPath": "/h"}]}
    )
    assert (e.code, e.path) == ("volume-not-allowed", "steps[0].volumeMounts[0].name")
    assert e.message == (
        "volume 'host' is not one of the Capsule's volumes (volumes: cache, src, data, cfg, keys)"
    )


@pytest.mark.parametrize(
    ("volume", "why"),
    [
        ("src", "the Capsule marks it readOnly"),
        ("cfg", "a configMap volume: the kubelet mounts it read-only"),
        ("keys", "a secret volume: the kubelet mounts it read-only"),
    ],
)
def test_a_read_only_volume_cannot_be_mounted_writable(volume: str, why: str):
    mount = {"name": volume, "mountPath": "/v", "readOnly": False}
    (e,) = errors({"id": "s", "script": "true", "volumeMounts": [mount]})
    assert (e.code, e.path) == ("volume-not-allowed", "steps[0].volumeMounts[0].readOnly")
    assert (
        e.message
        == f"volume {volume!r} may only be mounted read-only ({why}): drop readOnly: false"
    )


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/workspace", "/workspace is reserved"),
        ("/workspace/out", "/workspace is reserved"),
        ("/planops", "/planops is reserved"),
        ("/planops/tool", "/planops is reserved"),
        ("/proc/self", "/proc is reserved"),
        ("/sys", "/sys is reserved"),
        ("/dev/shm", "/dev is reserved"),
        ("relative", "an absolute, normalized path"),
        ("/", "an absolute, normalized path"),
        ("/a/../workspace", "an absolute, normalized path"),
        ("/a/./b", "an absolute, normalized path"),
        ("//workspace", "an absolute, normalized path"),
        ("/cache/", "an absolute, normalized path"),
        ("/cache\n/etc", "an absolute, normalized path"),
    ],
)
def test_a_mount_path_is_absolute_normalized_and_outside_what_is_reserved(path: str, why: str):
    with pytest.raises(ValidationError, match=why.replace("/", "/")):
        plan({"id": "s", "shell": "echo", "volumeMounts": [{"name": "cache", "mountPath": path}]})


@pytest.mark.parametrize(
    "path",
    [
        *("/bin", "/usr/bin", "/usr/local/bin", "/usr", "/usr/lib/x86_64-linux-gnu", "/lib64"),
        *("/sbin", "/usr/share/perl5", "/etc", "/etc/alternatives", "/usr/local", "/libx32"),
    ],
)
def test_no_volume_goes_over_the_images_programs(path: str):
    """A claim an earlier step wrote (`cp /bin/sh /data/echo` under `shell.allow: [cp, echo]`)
    mounted at /bin made the allowed `echo` the shell, as PATH did; at /etc it brings its own
    ld.so.preload, at /etc/alternatives its own awk or java. Refused on reading (the model and
    the admission webhook and the reconciler read it so)."""
    with pytest.raises(ValidationError, match="are the image's: a volume there would change"):
        plan({"id": "s", "shell": "echo", "volumeMounts": [{"name": "data", "mountPath": path}]})


def test_a_volume_goes_anywhere_else_sources_config_and_caches_included():
    paths = ["/usr/src/app", "/usr/local/src", "/etc/ssl/certs", "/etc/app", "/opt/cache"]
    paths += ["/root/.m2", "/home/ci/.cache", "/binaries", "/usrdata", "/etc2", "/var/lib/x"]
    mounts = [{"name": "data", "mountPath": p} for p in paths]
    assert errors({"id": "s", "shell": "echo hi", "volumeMounts": mounts}) == []


def test_two_mounts_at_one_path_are_refused_one_volume_at_two_paths_is_not():
    with pytest.raises(ValidationError, match="volumeMounts mountPath declared twice: /c"):
        plan(
            {
                "id": "s",
                "shell": "echo",
                "volumeMounts": [
                    {"name": "cache", "mountPath": "/c"},
                    {"name": "src", "mountPath": "/c"},
                ],
            }
        )


@pytest.mark.parametrize("kind", ["hostPath", "nfs", "csi", "projected"])
def test_a_capsule_declares_no_volume_but_the_four_kinds(kind: str):
    with pytest.raises(ValidationError, match=f"volume 'x': {kind} volumes are never allowed"):
        CapsuleSpec.model_validate({"volumes": [{"name": "x", kind: {"path": "/"}}]})


def test_a_capsule_volume_is_one_kind_with_a_name_of_its_own():
    with pytest.raises(ValidationError, match="exactly one of configMap, secret, emptyDir"):
        CapsuleSpec.model_validate(
            {"volumes": [{"name": "x", "emptyDir": {}, "configMap": {"name": "c"}}]}
        )
    with pytest.raises(ValidationError, match="volume name declared twice: x"):
        CapsuleSpec.model_validate({"volumes": [{"name": "x", "emptyDir": {}}] * 2})
    with pytest.raises(ValidationError, match="'Cache_1': a DNS label"):
        CapsuleSpec.model_validate({"volumes": [{"name": "Cache_1", "emptyDir": {}}]})
    with pytest.raises(ValidationError, match="sizeLimit"):
        CapsuleSpec.model_validate({"volumes": [{"name": "x", "emptyDir": {"sizeLimit": "lots"}}]})


# -- bodies and finally steps: judged as any step ----------------------------------------------


def test_body_and_finally_steps_are_judged_the_same():
    got = codes(
        {
            "id": "each",
            "map": {
                "over": [1, 2],
                "do": {"script": "echo $ITEM", "env": [{"name": "ITEM", "value": "{{item}}"}]},
            },
        },
        {"id": "bad", "map": {"over": [1], "do": {"script": "echo {{item}}"}}},
        finally_=[
            {
                "id": "f",
                "script": "true",
                "env": [{"name": "T", "valueFrom": {"secretKeyRef": {"name": "x", "key": "k"}}}],
            }
        ],
    )
    assert got == [
        ("template", "steps[1].map.do.script"),  # {{item}} in a body's script: never rendered
        ("env-not-allowed", "finally[0].env[0].valueFrom.secretKeyRef.name"),
    ]  # and {{item}} in a body step's env is rendered for each item


# -- one rule: the validator's words are dispatch's ---------------------------------------------


@dataclass
class Grant:
    name: str
    step: dict[str, Any]
    #: the Capsule that does not grant it (over GRANTS)
    refusing: dict[str, Any]
    #: one that grants it (None: no Capsule grants a writable mount of a read-only volume)
    granting: dict[str, Any] | None


CONFIG_KEY = {"configMapKeyRef": {"name": "c", "key": "k"}}
GRANT_CASES = [
    Grant("no interpreter", {"script": "true"}, {"scripts": {"allow": []}}, {}),
    Grant(
        "interpreter",
        {"script": "true", "interpreter": "bash"},
        {"scripts": {"allow": ["sh"]}},
        {"scripts": {"allow": ["sh", "bash"]}},
    ),
    Grant(
        "secret",
        {"shell": "echo", "env": [{"name": "A", "valueFrom": SECRET}]},
        {"env": {}},
        {"env": {"secrets": ["ci"]}},
    ),
    Grant(
        "configmap",
        {"script": "true", "env": [{"name": "A", "valueFrom": CONFIG_KEY}]},
        {},
        {"env": {"configMaps": ["c"]}},
    ),
    Grant(
        "volume",
        {"shell": "echo", "volumeMounts": [{"name": "nope", "mountPath": "/n"}]},
        {},
        {"volumes": [{"name": "nope", "emptyDir": {}}]},
    ),
    Grant(
        "read-only",
        {"shell": "echo", "volumeMounts": [{"name": "src", "mountPath": "/s", "readOnly": False}]},
        {},
        None,
    ),
    Grant(
        "every one at once",
        {
            "script": "true",
            "interpreter": "perl",
            "env": [{"name": "A", "valueFrom": SECRET}],
            "volumeMounts": [{"name": "cfg", "mountPath": "/s", "readOnly": False}],
        },
        {"env": {}},
        None,
    ),
]


@pytest.mark.parametrize("case", GRANT_CASES, ids=[c.name for c in GRANT_CASES])
def test_what_the_validator_refuses_dispatch_refuses_in_the_same_words(case: Grant):
    spec = plan({"id": "s", **case.step})
    (d,) = Run("p", spec).decide(0.0).dispatch

    def judged(cap: CapsuleSpec) -> tuple[list[str], str | None]:
        refused = [e.message for e in validate(spec, resolver(default=cap))]
        return refused, rules.admit(
            d, cap, Policy(), lineage=("default",), depth=0, needs_image=True
        )

    refused, denied = judged(granting(**case.refusing))
    assert refused and denied == rules.DENIED + "; ".join(refused)
    if case.granting is not None:  # the Capsule that grants it: valid, and admitted
        assert judged(granting(**case.granting)) == ([], None)


def test_a_step_that_uses_no_grant_is_admitted_under_a_capsule_that_gives_none():
    spec = plan({"id": "s", "shell": "echo hi"})
    (d,) = Run("p", spec).decide(0.0).dispatch
    bare = capsule(image="busybox:1")
    assert rules.admit(d, bare, Policy(), lineage=("default",), depth=0, needs_image=True) is None
    assert validate(spec, resolver(default=bare)) == []


# -- the admission webhook: the same judgement, at kubectl apply ----------------------------------


def _admit(*steps: dict[str, Any]) -> list[str]:
    """The Plan webhook's handler, registered as main registers it: its warnings, or raises
    kopf.AdmissionError with the refusal."""
    handler = webhook_handlers()[webhook.PATH_ID]
    kube = FakeKube()
    spec = GRANTS | {"shell": {"allow": ["echo"]}}
    kube.put("capsule", {"metadata": {"name": "default", "namespace": "ns"}, "spec": spec})

    body = {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": {"name": "p", "namespace": "ns", "uid": "u", "generation": 1},
        "spec": {"steps": list(steps)},
    }
    warnings: list[str] = []
    memo = kopf.Memo(operator=kopf.Memo(reconciler=Reconciler(kube)))  # its judge: the webhook's
    asyncio.run(handler.fn(body=body, memo=memo, operation="CREATE", warnings=warnings))
    return warnings


def test_the_webhook_refuses_a_secret_the_capsule_does_not_list_and_admits_one_it_does():
    with pytest.raises(kopf.AdmissionError) as e:
        _admit(
            {
                "id": "s",
                "script": "echo",
                "env": [{"name": "P", "valueFrom": {"secretKeyRef": {"name": "prod", "key": "p"}}}],
            }
        )
    where = "[env-not-allowed] step 's': steps[0].env[0].valueFrom.secretKeyRef.name: "
    assert where + "env P reads Secret 'prod'" in str(e.value)
    assert _admit({"id": "s", "script": "echo", "env": [{"name": "P", "valueFrom": SECRET}]}) == []


def test_the_webhook_refuses_a_script_with_a_template_and_a_writable_read_only_volume():
    with pytest.raises(kopf.AdmissionError) as e:
        _admit(
            {"id": "s", "script": "echo {{input.x}}"},
            {
                "id": "t",
                "shell": "echo",
                "volumeMounts": [{"name": "src", "mountPath": "/s", "readOnly": False}],
            },
        )
    text = str(e.value)
    assert "plan refused, 2 error(s)" in text
    assert "[template] step 's': steps[0].script" in text
    assert "[volume-not-allowed] step 't': steps[1].volumeMounts[0].readOnly" in text


def test_a_plan_document_with_a_reserved_name_is_refused_as_a_schema_error():
    doc = {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": {"name": "p"},
        "spec": {
            "steps": [{"id": "s", "shell": "echo", "env": [{"name": "PLANOPS_PLAN", "value": "x"}]}]
        },
    }
    _, problems = parse_document(doc)
    assert [p.path for p in problems] == ["spec.steps[0].env[0]"]
    assert "PLANOPS_PLAN: names starting with PLANOPS_ are set by planops" in problems[0].message


def test_a_plan_spec_round_trips_with_its_new_fields():
    spec = plan(
        {
            "id": "s",
            "script": "true",
            "interpreter": "sh",
            "env": [{"name": "A", "value": "1"}, {"name": "T", "valueFrom": SECRET}],
            "volumeMounts": [{"name": "cache", "mountPath": "/c", "readOnly": True}],
        }
    )
    assert PlanSpec.model_validate(spec.dump()) == spec
    assert spec.dump()["steps"][0]["volumeMounts"] == [
        {"name": "cache", "mountPath": "/c", "readOnly": True}
    ]
