"""`-o jsonpath=TEMPLATE` speaks kubectl's template dialect (cli/jsonpath.py): the same
template prints the same bytes as `kubectl ... -o jsonpath=` does. The last test asks the real
kubectl (offline: `kubectl label --local -f FILE -o jsonpath=...` prints any object through its
own template code) for every template here."""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from planops.cli import jsonpath
from tests.conftest import KUBECTL

PLAN: dict[str, Any] = {
    "apiVersion": "planops.dev/v1alpha1",
    "kind": "Plan",
    "metadata": {
        "name": "deploy",
        "namespace": "team-a",
        "labels": {"team": "a", "app.kubernetes.io/name": "web"},  # printed sorted
    },
    "spec": {
        "capsule": "ci",
        "steps": [
            {"id": "build", "retries": 3, "shell": "make"},
            {"id": "test", "dependsOn": ["build"], "ok": True, "weight": 1.5},
            {"id": "ship", "dependsOn": ["test"], "note": None},
        ],
    },
    "status": {"phase": "Failed", "failedStep": "test", "progress": "2/3"},
}

#: (template, what kubectl prints for PLAN)
CASES = [
    ("{.metadata.name}", "deploy"),
    ("name: {.metadata.name}, phase: {.status.phase}", "name: deploy, phase: Failed"),
    ("{$.status.phase}", "Failed"),
    ("{.spec.steps[*].id}", "build test ship"),
    ("{.spec.steps[0].id} {.spec.steps[-1].id} {.spec.steps[0:2].id}", "build ship build test"),
    ("{.metadata.labels.app\\.kubernetes\\.io/name}", "web"),
    ('{.spec.steps[?(@.id=="test")].dependsOn[0]}', "build"),
    ("{.spec.steps[?(@.ok==true)].id}", "test"),
    ("{.spec.steps[1].weight}|{.spec.steps[0].retries}|{.spec.steps[1].ok}", "1.5|3|true"),
    ("{.spec.steps[2].note}", "null"),
    ("{.spec.steps[1].dependsOn}", '["build"]'),
    ("{.metadata.labels}", '{"app.kubernetes.io/name":"web","team":"a"}'),
    ("{.status.missing}|{.nope.deeper}", "|"),
    ('{range .spec.steps[*]}{.id}{"\\t"}{.retries}{"\\n"}{end}', "build\t3\ntest\t\nship\t\n"),
    ("{range .spec.steps[*]}[{.id}]{end}", "[build][test][ship]"),
    ("{..id}", "build test ship"),
    ("{.metadata.name}{'\\n'}{'a\"b'}{\"c'd\"}{\"\\u00e9\\x41\"}", "deploy\na\"bc'déA"),
]


@pytest.mark.parametrize(("template", "printed"), CASES)
def test_a_template_prints_what_kubectl_prints(template: str, printed: str):
    assert jsonpath.render(template, PLAN) == printed


@pytest.mark.parametrize(
    ("template", "said"),
    [
        ("{.metadata.name", "unclosed action"),
        ("{range .spec.steps[*]}{.id}", "not closed by {end}"),
        ("{.id}{end}", "{end} without a {range"),
        ("{}", "an empty expression"),
        ("{.spec.steps[*]['id', 'retries']}", "unions of several keys"),
        ("{.spec.steps[?(@.id==}", "unclosed [ in"),
        ("{.spec.steps[?(@.id=)].x}", "{.spec.steps[?(@.id=)].x}"),
        ("{'\\q'}", "not a string literal"),
    ],
)
def test_a_template_that_cannot_be_read_says_why(template: str, said: str):
    with pytest.raises(jsonpath.TemplateError) as e:
        jsonpath.compile_template(template)
    assert said in str(e.value)


@pytest.mark.cluster  # the kubectl binary built from Go (tests/cluster/build)
def test_kubectl_prints_the_same(tmp_path: Path):
    if not KUBECTL.is_file():
        pytest.skip(f"no kubectl at {KUBECTL} (tests/cluster/build)")
    f = tmp_path / "plan.json"
    f.write_text(json.dumps(PLAN))
    labelled = copy.deepcopy(PLAN)  # what kubectl prints: the object with the label it adds
    labelled["metadata"]["labels"]["checked"] = "yes"
    for template, _ in CASES:
        r = subprocess.run(
            [
                str(KUBECTL),
                "label",
                "--local",
                "-f",
                str(f),
                "checked=yes",
                "-o",
                f"jsonpath={template}",
            ],
            capture_output=True,
            text=True,
            env={"KUBECONFIG": "/dev/null", "PATH": "/usr/bin:/bin"},
            check=False,
        )
        assert r.returncode == 0, (template, r.stderr)
        assert jsonpath.render(template, labelled) == r.stdout, template
