"""The chart's UI server (planops.uiserver) as its users meet it: the real server (out of the
cluster, as the e2e operator runs, with a ServiceAccount identity holding exactly the chart's UI
ClusterRole: TokenReview and impersonation), the real cluster, Debian's chromium. Its users are
ServiceAccounts with tokens from the TokenRequest API: `alice`, bound to the chart's plan-author
ClusterRole in one namespace, and `mallory`, bound to nothing.

alice logs in on the page, sees her namespace's Plans and answers one in the page, and is
refused another namespace's; mallory is refused, and a token the cluster does not accept cannot
log in; an action reaches the API server as alice (an admission policy of the test's namespace
names the user it saw), and the server's own identity could not have made it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT, Kube
from tests.e2e.conftest import free_port, namespace_policy, plan, start_healthy, wait_plan
from tests.e2e.own_operator import namespace_with_operator
from tests.e2e.test_ui_browser import WAIT, browser, click, shot, stop, until

pytestmark = [pytest.mark.cluster, pytest.mark.node, pytest.mark.browser, pytest.mark.uiserver]
__all__ = ["browser"]  # the module's chromium (a fixture of test_ui_browser)
CHART = ROOT / "charts" / "planops"
#: cluster-wide names (the ClusterRoles) of this session only
RELEASE = f"uis-{uuid.uuid4().hex[:6]}"
ASK = {
    "prompt": "Ship it?",
    "outputSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
}


@dataclass
class Server:
    base: str
    team: str  # alice's namespace (an operator runs it)
    other: str  # a namespace alice has no rights in
    tokens: dict[str, str]  # user -> token
    ui_user: str  # the server's own ServiceAccount, as the API server names it


def _kubeconfig(kubeconfig: str, token: str, path: Path) -> str:
    """A kubeconfig of the admin's cluster with only `token` (the server's own identity)."""
    admin = yaml.safe_load(Path(kubeconfig).read_text())
    ctx = next(c for c in admin["contexts"] if c["name"] == admin["current-context"])["context"]
    cluster = next(c for c in admin["clusters"] if c["name"] == ctx["cluster"])
    cfg = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": "ui", "user": {"token": token}}],
        "contexts": [{"name": "ui", "context": {"cluster": cluster["name"], "user": "ui"}}],
        "current-context": "ui",
    }
    path.write_text(yaml.safe_dump(cfg))
    path.chmod(0o600)
    return str(path)


def chart_ui(helm: str, release: str, namespace: str) -> list[dict[str, Any]]:
    """The chart's plan-author ClusterRole and everything of `ui.enabled` (the UI's
    ServiceAccount, ClusterRole, binding, Deployment and Service), rendered by the real helm."""
    rendered = subprocess.run(
        [
            helm,
            "template",
            release,
            str(CHART),
            "--namespace",
            namespace,
            "--set",
            "ui.enabled=true",
            "--set",
            "rbac.aggregateToDefaultRoles=false",
            "--show-only",
            "templates/rbac-users.yaml",
            "--show-only",
            "templates/ui.yaml",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [d for d in yaml.safe_load_all(rendered) if d]


def _chart_rbac(helm: str, namespace: str) -> list[dict[str, Any]]:
    """chart_ui without the Deployment and Service: the server runs here."""
    docs = chart_ui(helm, RELEASE, namespace)
    return [d for d in docs if d["kind"] not in ("Deployment", "Service")]


def _who_policy(team: str) -> list[dict[str, Any]]:
    """An admission policy of `team` only: a cancel is refused with the name of the user the API
    server saw asking (what its audit log records too)."""
    added = (
        "has(object.metadata.annotations) && 'planops.dev/cancel' in object.metadata.annotations"
        " && !(has(oldObject.metadata.annotations)"
        " && 'planops.dev/cancel' in oldObject.metadata.annotations)"
    )
    rule = {
        "apiGroups": ["planops.dev"],
        "apiVersions": ["*"],
        "operations": ["UPDATE"],
        "resources": ["plans"],
    }
    validation = {
        "expression": f"!({added})",
        "messageExpression": "'cancel asked by ' + request.userInfo.username",
    }
    return namespace_policy(f"{RELEASE}-who", team, rule, validation)


def _apply_all(kube: Kube, docs: list[dict[str, Any]]) -> str:
    text = "\n---\n".join(json.dumps(d) for d in docs)
    kube.run("apply", "-f", "-", input=text)
    return text


def _capsule_use(namespace: str, user: str) -> str:
    """A Role and RoleBinding: `use` on every Capsule of the namespace, for one ServiceAccount."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": f"{user}-capsule-use", "namespace": namespace},
        "rules": [{"apiGroups": ["planops.dev"], "resources": ["capsules"], "verbs": ["use"]}],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": f"{user}-capsule-use", "namespace": namespace},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": f"{user}-capsule-use",
        },
        "subjects": [{"kind": "ServiceAccount", "name": user, "namespace": namespace}],
    }
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": [role, binding]})


@pytest.fixture(scope="module")
def server(
    kube: Kube,
    kubeconfig: str,
    crds: None,
    busybox: str,
    helm: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Server]:
    tmp = tmp_path_factory.mktemp("uiserver")
    with namespace_with_operator(kube, kubeconfig, busybox, tmp, "uis") as team:
        other = f"uis-other-{uuid.uuid4().hex[:8]}"
        kube.run("create", "namespace", other)
        kube.apply(plan("theirs", {"id": "a", "shell": "true"}), "-n", other)
        rbac = _apply_all(kube, _chart_rbac(helm, team))
        policy = _apply_all(kube, _who_policy(team))
        for user in ("alice", "mallory"):
            kube.run("create", "serviceaccount", user, "-n", team)
        kube.run(
            "create",
            "rolebinding",
            "alice-plan-author",
            f"--clusterrole={RELEASE}-planops-plan-author",
            f"--serviceaccount={team}:alice",
            "-n",
            team,
        )
        # and `use` on the namespace's Capsules, as every real author has: where the chart's
        # admission policies are installed (CI installs them beside this test), an answer is an
        # author's act and is refused without it
        kube.run("apply", "-n", team, "-f", "-", input=_capsule_use(team, "alice"))
        ui_sa = f"{RELEASE}-planops-ui"
        token = {
            sa: kube.run("create", "token", sa, "-n", team, "--duration=1h").stdout.strip()
            for sa in ("alice", "mallory", ui_sa)
        }
        port = free_port()
        args = [sys.executable, "-m", "planops.uiserver", "--address", "127.0.0.1"]
        args += ["--port", str(port), "--default-namespace", team]
        args += ["--kubeconfig", _kubeconfig(kubeconfig, token.pop(ui_sa), tmp / "ui.kubeconfig")]
        log = tmp / "uiserver.log"
        proc = start_healthy(args, log, f"http://127.0.0.1:{port}/healthz", "the UI server")
        try:
            ui_user = f"system:serviceaccount:{team}:{ui_sa}"
            yield Server(f"http://127.0.0.1:{port}", team, other, token, ui_user)
        finally:
            stop(proc)
            print(f"--- UI server log ---\n{log.read_text()[-4000:]}")
            for text in (policy, rbac):
                kube.run("delete", "-f", "-", "--ignore-not-found", input=text, check=False)
            kube.run("delete", "namespace", other, "--wait=false", check=False)


def login(driver: Any, server: Server, token: str, path: str) -> None:
    """Open `path` logged out: the login page; log in with `token`: back on `path`."""
    driver.delete_all_cookies()
    driver.get(server.base + path)
    until(driver, "location.pathname === '/login' && document.getElementById('token')")
    driver.find_element("id", "token").send_keys(token)
    driver.find_element("id", "login").click()


def api(server: Server, path: str, token: str, body: Any = None) -> tuple[int, Any]:
    """The server's API as an API client (the token in the Authorization header)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(server.base + path, data=data)
    request.add_header("Authorization", f"Bearer {token}")
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=30) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


def test_a_plan_author_sees_and_answers_their_namespaces_plans_and_no_others(
    kube: Kube, server: Server, browser: Any, capsys: pytest.CaptureFixture[str]
):
    team = server.team
    gated = plan(
        "gated",
        {"id": "confirm", "ask": ASK},
        {"id": "after", "shell": "echo shipped", "dependsOn": ["confirm"]},
    )
    kube.apply(gated, "-n", team)
    login(browser, server, server.tokens["alice"], f"/namespaces/{team}/plans/gated")
    until(browser, f"location.pathname === '/namespaces/{team}/plans/gated'")
    assert until(browser, "document.getElementById('user')?.textContent") == (
        f"system:serviceaccount:{team}:alice"
    )
    until(browser, "document.querySelector(\".ask input[data-field='ok']\")")
    browser.find_element("css selector", ".ask input[data-field='ok']").send_keys("true")
    shot(browser, "uiserver-ask.png", capsys)
    click(browser, ".ask button.answer")
    ended = "document.querySelector('#action-result.done, #action-result.error')"
    result = until(browser, f"{ended} && [{ended}.className, {ended}.textContent]")
    assert result == ["done", "plan gated: step confirm answered"]
    until(browser, "document.body.dataset.phase === 'Succeeded'")
    # a step's own address opens the Plan with that step shown
    browser.get(f"{server.base}/namespaces/{team}/plans/gated/steps/after")
    until(browser, "document.querySelector('#detail h2')?.textContent === 'Step after'")
    browser.find_element("css selector", "button.log").click()
    assert "shipped" in until(browser, "document.querySelector('#log')?.textContent")
    # the list: her namespace's Plans
    browser.get(f"{server.base}/")
    until(browser, "document.querySelector(\"tr[data-plan='gated']\")")
    # another namespace: the cluster refuses her, and the page says so, showing none
    browser.get(f"{server.base}/namespaces/{server.other}/")
    error = until(browser, "document.querySelector('#app p.error')?.textContent")
    assert "403" in error and "alice" in error and "forbidden" in error.lower()
    assert browser.find_elements("css selector", "tr[data-plan]") == []
    status, body = api(
        server, f"/namespaces/{server.other}/api/plans/theirs", server.tokens["alice"]
    )
    assert status == 403, body
    status, body = api(
        server, f"/namespaces/{server.other}/api/plans/theirs/rerun", server.tokens["alice"], {}
    )
    assert status == 403, body
    theirs = kube.get("plan", "theirs", "-n", server.other)
    assert "planops.dev/rerun" not in (theirs["metadata"].get("annotations") or {})


def test_a_user_without_rights_is_refused_and_a_token_the_cluster_rejects_cannot_log_in(
    kube: Kube, server: Server, browser: Any
):
    team = server.team
    kube.apply(plan("solo", {"id": "a", "shell": "true"}), "-n", team)
    login(browser, server, "not-a-token", f"/namespaces/{team}/")
    problem = until(browser, "document.getElementById('problem')?.textContent")
    assert "the cluster did not accept it" in problem
    assert browser.get_cookies() == []
    login(browser, server, server.tokens["mallory"], f"/namespaces/{team}/")
    error = until(browser, "document.querySelector('#app p.error')?.textContent")
    assert "403" in error and "mallory" in error
    assert browser.find_elements("css selector", "tr[data-plan]") == []
    (cookie,) = browser.get_cookies()
    assert (cookie["httpOnly"], cookie["sameSite"]) == (True, "Strict")
    assert browser.execute_script("return document.cookie") == ""  # no script reads it
    for path, body in (
        (f"/namespaces/{team}/api/plans/solo", None),
        (f"/namespaces/{team}/api/plans/solo/rerun", {}),
        (f"/namespaces/{team}/api/plans/solo/log?step=a", None),
    ):
        status, answer = api(server, path, server.tokens["mallory"], body)
        assert status == 403, (path, answer)
    solo = kube.get("plan", "solo", "-n", team)
    assert "planops.dev/rerun" not in (solo["metadata"].get("annotations") or {})
    status, _ = api(server, f"/namespaces/{team}/api/plans", "not-a-token")
    assert status == 401


def test_an_action_reaches_the_cluster_as_the_user_and_never_as_the_ui(
    kube: Kube, server: Server, browser: Any, capsys: pytest.CaptureFixture[str]
):
    team = server.team
    kube.apply(plan("long", {"id": "wait", "shell": "sleep 40"}), "-n", team)
    wait_plan(kube, team, "long", ("Running",), WAIT)
    login(browser, server, server.tokens["alice"], f"/namespaces/{team}/plans/long")
    until(browser, "document.body.dataset.phase === 'Running'")
    click(browser, "#actions button.cancel")
    refused = until(browser, "document.querySelector('#action-result.error')?.textContent")
    shot(browser, "uiserver-cancel-refused.png", capsys)
    # the admission policy of the namespace names the user the API server saw asking
    assert f"cancel asked by system:serviceaccount:{team}:alice" in refused, refused
    assert server.ui_user not in refused
    # and the server's own identity may not so much as read a Plan: every read and action is
    # the user's
    for verb in ("get", "list", "patch"):
        can = kube.run(
            "auth",
            "can-i",
            verb,
            "plans.planops.dev",
            "-n",
            team,
            "--as",
            server.ui_user,
            check=False,
        )
        assert can.stdout.strip() == "no", (verb, can.stdout)
    click(browser, "#actions button.rerun")
    done = until(browser, "document.querySelector('#action-result.done')?.textContent")
    assert done.startswith("plan long: re-run ")
    ann = kube.get("plan", "long", "-n", team)["metadata"]["annotations"]
    assert ann["planops.dev/rerun"] in done
    assert "planops.dev/cancel" not in ann
