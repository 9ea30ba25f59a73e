"""The CLI's views of a running Plan on the real test cluster, as a new user meets them:
`graph NAME --watch` follows the Plan to its end and exits with its result; `submit` with a
Capsule file creates the Capsule for an admin and, for a plan author (the chart's plan-author
role, through a ServiceAccount's token: the user's own credentials), refuses up front with the
next step to take and creates nothing; `describe`'s recent events are in time order, as
`trace` shows them; `kubectl plan ui` serves a plan author with their own rights."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, Kube
from tests.e2e.conftest import capsule, cli, plan, wait_plan
from tests.e2e.own_operator import namespace_with_operator
from tests.e2e.test_ui_browser import address, start_ui, stop

# pytest -n: one worker runs this module (tests/xdist_groups.py)
pytestmark = [pytest.mark.cluster, pytest.mark.node]
CHART = ROOT / "charts" / "planops"
RELEASE = "views"
AUTHOR = "author"
ONLY_AUTHOR_ROLE = [
    "--set",
    "rbac.aggregateToDefaultRoles=false",
    "--show-only",
    "templates/rbac-users.yaml",
]


@pytest.fixture(scope="module")
def views_ns(
    kube: Kube, kubeconfig: str, crds: None, busybox: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    with namespace_with_operator(
        kube, kubeconfig, busybox, tmp_path_factory.mktemp("views-operator"), "views"
    ) as name:
        yield name


def frames(stdout: str) -> list[str]:
    """`graph --watch` on a pipe: each changed frame after a blank line, each opening `plan `."""
    return [f for f in re.split(r"\n\n(?=plan )", stdout) if f.strip()]


def test_graph_watch_follows_the_plan_and_exits_with_its_result(
    kube: Kube, kubeconfig: str, views_ns: str
):
    kube.apply(
        plan(
            "drawn",
            {"id": "first", "shell": "sh -c 'sleep 4; echo one'"},
            {"id": "second", "shell": "sh -c 'sleep 2; echo two'", "dependsOn": ["first"]},
        ),
        "-n",
        views_ns,
    )
    r = cli(kubeconfig, "graph", "drawn", "--watch", "-n", views_ns)
    assert r.returncode == 0, r.stderr
    drawn = frames(r.stdout)
    assert len(drawn) >= 2, r.stdout  # it redrew while the plan ran
    assert not drawn[0].startswith("plan drawn: Succeeded")
    last = drawn[-1]
    assert last.startswith("plan drawn: Succeeded, 2/2 steps"), last
    assert re.search(r"✔ first +success", last) and re.search(r"✔ second +success", last)
    assert "\x1b[" not in r.stdout  # no colour on a pipe

    kube.apply(plan("broken", {"id": "only", "shell": "false"}), "-n", views_ns)
    r = cli(kubeconfig, "graph", "broken", "--watch", "-n", views_ns)
    assert r.returncode == 1, r.stdout + r.stderr
    assert frames(r.stdout)[-1].startswith("plan broken: Failed")


def _files(tmp_path: Path, busybox: str, cap: str, name: str) -> tuple[Path, Path]:
    doc = capsule(busybox, name=cap)
    cap_file = tmp_path / f"{cap}.yaml"
    cap_file.write_text(yaml.safe_dump(doc))
    plan_file = tmp_path / f"{name}.yaml"
    plan_file.write_text(
        yaml.safe_dump(plan(name, {"id": "hello", "shell": "echo hi"}, capsule=cap))
    )
    return cap_file, plan_file


def test_submit_applies_the_capsule_it_is_given_for_an_admin(
    kube: Kube, kubeconfig: str, views_ns: str, busybox: str, tmp_path: Path
):
    cap_file, plan_file = _files(tmp_path, busybox, "brought", "with-capsule")
    r = cli(kubeconfig, "submit", str(cap_file), str(plan_file), "--wait", "-n", views_ns)
    assert r.returncode == 0, r.stderr
    assert "capsule.planops.dev/brought created" in r.stdout
    assert "plan.planops.dev/with-capsule created" in r.stdout
    assert kube.get("capsule", "brought", "-n", views_ns)["spec"]["image"] == busybox
    assert kube.get("plan", "with-capsule", "-n", views_ns)["status"]["phase"] == "Succeeded"
    _, second = _files(tmp_path, busybox, "brought", "again")
    again = cli(kubeconfig, "submit", str(cap_file), str(second), "-n", views_ns)
    assert again.returncode == 0, again.stderr
    assert "capsule.planops.dev/brought unchanged" in again.stdout


@pytest.fixture(scope="module")
def author_kubeconfig(
    kube: Kube, kubeconfig: str, views_ns: str, helm: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A kubeconfig of a ServiceAccount bound to the chart's plan-author role in `views_ns`
    (rendered by the real helm): a plan author's own credentials, as `kubectl-plan` reads them."""
    rendered = subprocess.run(
        [helm, "template", RELEASE, str(CHART), *ONLY_AUTHOR_ROLE],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    roles = [d for d in yaml.safe_load_all(rendered) if d]
    text = "\n---\n".join(json.dumps(d) for d in roles)
    kube.run("apply", "-f", "-", input=text)
    kube.run("create", "serviceaccount", AUTHOR, "-n", views_ns)
    kube.apply(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "author-plan-author", "namespace": views_ns},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": f"{RELEASE}-planops-plan-author",
            },
            "subjects": [{"kind": "ServiceAccount", "name": AUTHOR, "namespace": views_ns}],
        }
    )
    token = kube.run("create", "token", AUTHOR, "-n", views_ns, "--duration=1h").stdout.strip()
    admin = yaml.safe_load(Path(kubeconfig).read_text())
    ctx = next(c for c in admin["contexts"] if c["name"] == admin["current-context"])["context"]
    cluster = next(c for c in admin["clusters"] if c["name"] == ctx["cluster"])
    path = tmp_path_factory.mktemp("author") / "author.kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [cluster],
                "users": [{"name": AUTHOR, "user": {"token": token}}],
                "contexts": [
                    {
                        "name": AUTHOR,
                        "context": {
                            "cluster": cluster["name"],
                            "user": AUTHOR,
                            "namespace": views_ns,
                        },
                    }
                ],
                "current-context": AUTHOR,
            }
        )
    )
    try:
        yield str(path)
    finally:
        kube.run("delete", "-f", "-", "--ignore-not-found", input=text, check=False)


def test_submit_with_a_capsule_as_a_plan_author_is_refused_and_creates_nothing(
    kube: Kube, author_kubeconfig: str, views_ns: str, busybox: str, tmp_path: Path
):
    cap_file, plan_file = _files(tmp_path, busybox, "authored", "by-author")
    r = cli(author_kubeconfig, "submit", str(cap_file), str(plan_file), "-n", views_ns)
    assert r.returncode == 2, r.stdout + r.stderr
    assert "the cluster refused capsule 'authored'" in r.stderr
    assert "you may not create Capsules there; a namespace's admin applies them" in r.stderr
    assert f"kubectl apply -f {cap_file}" in r.stderr and "no plan was submitted" in r.stderr
    assert r.stdout == ""
    names = kube.run("get", "plans,capsules", "-n", views_ns, "-o", "name").stdout.split()
    assert "plan.planops.dev/by-author" not in names
    assert "capsule.planops.dev/authored" not in names


def test_the_ui_serves_a_plan_author_with_their_own_rights(
    kube: Kube, author_kubeconfig: str, views_ns: str
):
    kube.apply(plan("listed", {"id": "a", "shell": "echo"}), "-n", views_ns)
    proc, url = start_ui(author_kubeconfig)  # the namespace: their kubeconfig's context
    try:
        base, token = address(url)
        with urllib.request.urlopen(f"{base}/api/plans?token={token}", timeout=30) as r:
            listed = json.loads(r.read())
    finally:
        stop(proc)
    assert listed["namespace"] == views_ns
    assert "listed" in {p["name"] for p in listed["items"]}


def _step(message: str) -> str | None:
    found = re.match(r"step (\S+?):? ", message or "")
    return found.group(1) if found else None


def test_describe_shows_recent_events_in_time_order_as_trace_does(
    kube: Kube, kubeconfig: str, views_ns: str
):
    kube.apply(
        plan(
            "chain",
            {"id": "a", "shell": "echo a"},
            {"id": "b", "shell": "echo b", "dependsOn": ["a"]},
            {"id": "c", "shell": "echo c", "dependsOn": ["b"]},
        ),
        "-n",
        views_ns,
    )
    assert wait_plan(kube, views_ns, "chain")["status"]["phase"] == "Succeeded"
    traced = json.loads(cli(kubeconfig, "trace", "chain", "-n", views_ns, "-o", "json").stdout)
    described = cli(kubeconfig, "describe", "chain", "-n", views_ns).stdout
    table = described.split("Recent events:\n", 1)[1].strip().splitlines()
    assert table[0].split() == ["TYPE", "REASON", "MESSAGE"]
    reasons = [line.split()[1] for line in table[1:]]
    assert reasons == [e["reason"] for e in traced][-len(reasons) :]
    rows: list[tuple[str, str | None]] = [
        (e["reason"], _step(e["message"])) for e in traced[-len(reasons) :]
    ]
    for dep, step in (("a", "b"), ("b", "c")):
        assert rows.index(("StepSucceeded", dep)) < rows.index(("StepStarted", step)), rows
    assert reasons[-1] == "PlanSucceeded"
