"""`kubectl plan ui` as a person uses it: the real command serving the real test cluster's Plans,
opened in Debian's chromium (headless, driven by Debian's chromium-driver through selenium).

A running plan's graph turns Succeeded in the open page (pushed over the watch stream: the page
is never reloaded), a step's log opens, a step's hostile output is shown as text with no script
run, a waiting ask shows the command that answers it, and a child Plan is linked both ways.
Screenshots go to .artifacts/ui/ (gitignored); their paths are printed.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, Kube
from tests.e2e.conftest import cli, plan, wait_plan
from tests.e2e.own_operator import namespace_with_operator

# pytest -n: one worker runs this module (tests/xdist_groups.py)
pytestmark = [pytest.mark.cluster, pytest.mark.node, pytest.mark.browser]
CHROMIUM, DRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
ARTIFACTS = ROOT / ".artifacts" / "ui"
WAIT = 150  # seconds a plan may take on a loaded test node
UI = [sys.executable, "-m", "planops.cli.main", "ui"]
XSS = "<script>window.__pwned=1</script><img src=x onerror=window.__pwned=2>"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not (CHROMIUM.exists() and DRIVER.exists()):
        why = (
            "Debian's chromium and chromium-driver are not installed "
            "(apt-get install -y chromium chromium-driver)"
        )
        if os.environ.get("CI"):
            pytest.fail(f"{why}: .ci/run installs them", pytrace=False)
        pytest.skip(why)
    from selenium import webdriver  # noqa: PLC0415 - only where chromium is
    from selenium.webdriver.chrome.service import Service  # noqa: PLC0415

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(arg)
    options.add_argument("--window-size=1280,900")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(DRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def ui_ns(
    kube: Kube, kubeconfig: str, crds: None, busybox: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    with namespace_with_operator(
        kube, kubeconfig, busybox, tmp_path_factory.mktemp("ui-operator"), "ui"
    ) as name:
        yield name


def start_ui(kubeconfig: str, *args: str) -> tuple[subprocess.Popen[str], str]:
    """`kubectl-plan ui ARGS --no-open` and the address it printed (with its `?token=`)."""
    proc = subprocess.Popen(
        [*UI, *args, "--no-open", "--kubeconfig", kubeconfig],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    line = proc.stdout.readline()
    found = re.search(r"http://127\.0\.0\.1:\d+/\S*", line)
    if found is None:
        proc.kill()
        raise AssertionError(f"no address printed: {line!r} {proc.stderr.read()}")
    return proc, found.group(0)


def stop(proc: subprocess.Popen[Any]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def address(printed: str) -> tuple[str, str]:
    """The printed address as (its base `http://127.0.0.1:PORT`, its session token)."""
    found = re.fullmatch(r"(http://127\.0\.0\.1:\d+)/(?:[^?]*)\?token=([\w-]+)", printed)
    assert found is not None, f"no token in the address: {printed!r}"
    return found.group(1), found.group(2)


#: the session token of each running UI, by its base address
TOKENS: dict[str, str] = {}


@pytest.fixture(scope="module")
def ui(kubeconfig: str, ui_ns: str, browser: Any) -> Iterator[str]:
    """The UI's base address, opened once in the browser by the printed address (its token
    becomes the page's cookie, so every later page of the test opens by its plain address)."""
    proc, url = start_ui(kubeconfig, "-n", ui_ns)
    try:
        base, TOKENS[base] = address(url)
        browser.get(url)
        assert browser.current_url == base + "/"  # the token dropped from the address
        yield base
    finally:
        stop(proc)


def shot(driver: Any, name: str, capsys: pytest.CaptureFixture[str]) -> Path:
    """A screenshot in .artifacts/ui/ (gitignored), its path printed past pytest's capture."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    driver.save_screenshot(str(path))
    with capsys.disabled():
        print(f"\nscreenshot: {path}")
    return path


def until(driver: Any, script: str, timeout: float = WAIT) -> Any:
    """Wait for a JavaScript expression of the page to be truthy; its value."""
    from selenium.webdriver.support.ui import WebDriverWait  # noqa: PLC0415

    return WebDriverWait(driver, timeout, poll_frequency=0.2).until(
        lambda d: d.execute_script(f"return {script}")
    )


def statuses(driver: Any) -> dict[str, str]:
    return dict(  # type: ignore[no-any-return]
        driver.execute_script(
            "return [...document.querySelectorAll('svg g.node')]"
            ".map(g => [g.dataset.step, g.dataset.status])"
        )
    )


def click_step(driver: Any, step: str) -> None:
    driver.execute_script(
        "document.querySelector(`g.node[data-step='${arguments[0]}']`)"
        ".dispatchEvent(new MouseEvent('click', {bubbles: true}))",
        step,
    )


def click(driver: Any, selector: str) -> None:
    """Click the first element matching `selector`, found afresh at each try.

    A live page may redraw between finding a button and clicking it; a WebDriver element
    found before the redraw is then stale.
    """
    found = f"document.querySelector({json.dumps(selector)})"
    until(driver, f"(b => b ? (b.click(), true) : false)({found})")


def test_a_running_plans_graph_turns_succeeded_live_and_a_steps_log_opens(
    kube: Kube, ui_ns: str, ui: str, browser: Any, capsys: pytest.CaptureFixture[str]
):
    kube.apply(
        plan(
            "fan",
            {"id": "prepare", "shell": "sh -c 'sleep 8; echo ready'"},
            {"id": "left", "shell": "sh -c 'sleep 3; echo left side'", "dependsOn": ["prepare"]},
            {"id": "right", "shell": "sh -c 'sleep 2; echo right side'", "dependsOn": ["prepare"]},
            {"id": "join", "shell": "sh -c 'echo joined'", "dependsOn": ["left", "right"]},
        ),
        "-n",
        ui_ns,
    )
    browser.get(f"{ui}/plans/fan")
    until(browser, "document.body.dataset.phase")
    first = browser.execute_script("return document.body.dataset.phase")
    assert first in ("Pending", "Running"), first  # opened before it finished
    assert set(statuses(browser)) == {"prepare", "left", "right", "join"}
    until(browser, "document.body.dataset.phase === 'Succeeded'")
    assert statuses(browser) == dict.fromkeys(("prepare", "left", "right", "join"), "success")
    # no reload: the page that was opened got the changes from the stream
    assert int(browser.execute_script("return document.body.dataset.updates")) >= 2
    assert browser.execute_script("return performance.getEntriesByType('navigation').length") == 1
    edges = browser.execute_script("return document.querySelectorAll('svg path.edge').length")
    assert edges == 4
    click_step(browser, "left")
    click(browser, "button.log")
    assert "left side" in until(browser, "document.querySelector('#log')?.textContent")
    pod = browser.execute_script("return document.querySelector('#detail p.muted:last-of-type')")
    assert pod is not None
    shot(browser, "plan.png", capsys)
    browser.get(ui)
    until(browser, "document.querySelector(\"tr[data-plan='fan']\")")
    row = browser.find_element("css selector", "tr[data-plan='fan']").text
    assert "Succeeded" in row and "4/4" in row
    shot(browser, "plans.png", capsys)


def test_a_steps_output_with_markup_is_shown_as_text_and_runs_nothing(
    kube: Kube, ui_ns: str, ui: str, browser: Any
):
    kube.apply(plan("hostile", {"id": "say", "shell": f"echo '{XSS}'"}), "-n", ui_ns)
    assert wait_plan(kube, ui_ns, "hostile", timeout=WAIT)["status"]["phase"] == "Succeeded"
    browser.get(f"{ui}/plans/hostile")
    until(browser, "document.body.dataset.phase === 'Succeeded'")
    click_step(browser, "say")
    assert until(browser, "document.querySelector('#output')?.textContent") == XSS  # its value
    click(browser, "button.log")
    assert until(browser, "document.querySelector('#log')?.textContent") == XSS + "\n"
    node_text = browser.execute_script(
        "return document.querySelector(\"g.node[data-step='say']\").textContent"
    )
    assert "<script>" in node_text  # the command, drawn in the graph as text too
    assert browser.execute_script("return window.__pwned") is None
    made = "return document.querySelectorAll('#app script, #app img').length"
    assert browser.execute_script(made) == 0
    severe = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == []
    # once the step's pod is gone, its log is the output the report recorded
    kube.run("delete", "pods", "-n", ui_ns, "-l", "planops.dev/plan=hostile", "--wait=true")
    log = f"{ui}/api/plans/hostile/log?step=say&token={TOKENS[ui]}"
    with urllib.request.urlopen(log, timeout=30) as r:
        after = json.loads(r.read())
    assert (after["source"], after["text"]) == ("report", XSS)


def test_a_waiting_ask_shows_its_answer_command_and_a_child_plan_is_linked(
    kube: Kube,
    kubeconfig: str,
    ui_ns: str,
    ui: str,
    browser: Any,
    capsys: pytest.CaptureFixture[str],
):
    ask = {
        "prompt": "Ship <it>?",
        "outputSchema": {"type": "object", "properties": {"ok": {"type": "boolean"}}},
    }
    kube.apply(
        plan(
            "gated",
            {"id": "sub", "capsule": "worker", "input": "do the work"},
            {"id": "confirm", "ask": ask, "dependsOn": ["sub"]},
        ),
        "-n",
        ui_ns,
    )
    browser.get(f"{ui}/plans/gated")
    command = until(browser, "document.querySelector('.ask code.answer')?.textContent")
    assert command == f"kubectl plan answer gated confirm -n {ui_ns} --set ok=VALUE"
    prompt = browser.find_element("css selector", ".ask p").text
    assert prompt == "Ship <it>?"
    assert statuses(browser)["confirm"] == "waiting"
    click_step(browser, "sub")
    child = until(browser, "document.querySelector('a.child')?.textContent")
    shot(browser, "ask.png", capsys)
    click(browser, "a.child")
    until(browser, "document.body.dataset.phase === 'Succeeded'")
    assert browser.find_element("css selector", "#parent").text == "gated"
    assert child in browser.title
    answered = cli(kubeconfig, "answer", "gated", "confirm", "--set", "ok=true", "-n", ui_ns)
    assert answered.returncode == 0, answered.stderr
    browser.get(f"{ui}/plans/gated")
    until(browser, "document.body.dataset.phase === 'Succeeded'")
    assert not browser.find_elements("css selector", ".ask")


def test_what_the_server_refuses_on_the_real_cluster(kubeconfig: str, ui_ns: str, ui: str):
    port, token = int(ui.rsplit(":", 1)[1]), TOKENS[ui]
    # a page of another site that rebinds its name to 127.0.0.1 sends its own name as Host;
    # another user of the machine reaches the port but has no token
    for host, query, want in (
        (f"127.0.0.1:{port}", f"?token={token}", 200),
        ("rebound.example", f"?token={token}", 403),
        (f"127.0.0.1:{port}", "", 403),
        (f"127.0.0.1:{port}", f"?token={token[::-1]}", 403),
    ):
        with socket.create_connection(("127.0.0.1", port)) as s:
            request = f"GET /api/plans{query} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"
            s.sendall(request.encode())
            answer = b""
            while chunk := s.recv(65536):
                answer += chunk
        assert answer.split(b" ", 2)[1] == str(want).encode(), answer[:200]
        if want == 200:
            body = json.loads(answer.split(b"\r\n\r\n", 1)[1])
            assert body["namespace"] == ui_ns
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    try:
        port_taken = str(taken.getsockname()[1])
        r = cli(kubeconfig, "ui", "-n", ui_ns, "--no-open", "--port", port_taken, timeout=60)
    finally:
        taken.close()
    assert r.returncode == 2 and "cannot listen on 127.0.0.1" in r.stderr
    missing = cli(kubeconfig, "ui", "nope", "-n", ui_ns, "--no-open", timeout=60)
    assert missing.returncode == 2 and "plan 'nope' not found" in missing.stderr


def test_a_plans_runs_are_listed_and_an_earlier_failed_run_opens_with_its_records(
    kube: Kube,
    kubeconfig: str,
    ui_ns: str,
    ui: str,
    browser: Any,
    capsys: pytest.CaptureFixture[str],
):
    failing = {"id": "deploy", "shell": "sh -c 'echo disk full; exit 3'"}
    kube.apply(plan("again", failing), "-n", ui_ns)
    first = wait_plan(kube, ui_ns, "again", ("Failed",), WAIT)["status"]["run"]["id"]
    done = cli(kubeconfig, "rerun", "again", "-n", ui_ns)
    assert done.returncode == 0, done.stderr
    wait_plan(
        kube, ui_ns, "again", ("Failed",), WAIT, until=lambda o: o["status"]["run"]["id"] != first
    )
    browser.get(f"{ui}/plans/again")
    until(browser, "document.querySelector(\"#runs a[data-run='" + first + "']\")")
    assert browser.execute_script("return document.querySelectorAll('#runs a.run').length") == 2
    click(browser, f"#runs a[data-run='{first}']")
    until(browser, "document.getElementById('live')?.textContent === 'an earlier run'")
    assert browser.execute_script("return location.pathname") == f"/plans/again/runs/{first}"
    assert browser.execute_script("return document.body.dataset.phase") == "Failed"
    assert (
        browser.execute_script("return document.querySelector('#runs a.shown').dataset.run")
        == first
    )
    click_step(browser, "deploy")
    assert "disk full" in until(browser, "document.querySelector('#output')?.textContent")
    assert "3" in browser.execute_script("return document.querySelector('#error').textContent")
    assert browser.execute_script("return document.querySelector('button.log')") is None
    shot(browser, "earlier-run.png", capsys)
