"""`kubectl plan ui`'s pure parts and its guard: the Host check (DNS rebinding), read-only
routes, the security headers, the view model built from a recorded Plan (untrusted text kept as
text, escaped in JSON), the vendored layout library, and the package data that ships the page.
The page against a real cluster and browser: tests/e2e/test_ui_browser.py."""

from __future__ import annotations

import asyncio
import fnmatch
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any, cast

import aiohttp
import pytest
from aiohttp import web

from planops.cli.ui import server, vendor, view
from planops.kube.client import Kube

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
XSS = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">&amp;'
TOKEN = "a-session-token"


def test_only_this_servers_loopback_names_pass_the_host_check():
    assert view.host_allowed("127.0.0.1:8123", 8123)
    assert view.host_allowed("localhost:8123", 8123)
    assert view.host_allowed("LocalHost:8123", 8123)
    for host in (
        None,
        "",
        "127.0.0.1",  # no port: not what a browser sends for this address
        "localhost",
        "127.0.0.1:8124",
        "evil.example:8123",  # a rebound name: the attacker's page sends its own host
        "127.0.0.1:8123.evil.example",
        "127.0.0.1:8123@evil.example",
        "[::1]:8123",  # not where it listens
        "0.0.0.0:8123",
        " 127.0.0.1:8123",
    ):
        assert not view.host_allowed(host, 8123), host


def test_json_escapes_markup_characters_and_keeps_the_text():
    obj = {"output": XSS, "name": "a&b>c"}
    out = view.to_json(obj)
    assert "<" not in out and ">" not in out and "&" not in out
    assert json.loads(out) == obj


def _recorded() -> dict[str, Any]:
    """A Plan as the operator records it, mid-run: one step settled with hostile output, one
    failed and retried, one in flight, an ask waiting, a capsule step with a child Plan."""
    return {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": {
            "name": "web",
            "namespace": "team",
            "creationTimestamp": "2026-01-01T00:00:00Z",
        },
        "spec": {
            "capsule": "default",
            "steps": [
                {"id": "fetch", "shell": "echo hi"},
                {"id": "flaky", "shell": "false", "dependsOn": ["fetch"], "onError": "continue"},
                {"id": "slow", "shell": "sleep 9", "dependsOn": ["fetch"]},
                {
                    "id": "confirm",
                    "ask": {
                        "prompt": "Ship <b>it</b>?",
                        "outputSchema": {
                            "type": "object",
                            "properties": {"ok": {"type": "boolean"}, "why it": {"type": "string"}},
                        },
                    },
                    "dependsOn": ["fetch"],
                },
                {"id": "sub", "capsule": "worker", "input": "go", "dependsOn": ["fetch"]},
            ],
        },
        "status": {
            "phase": "Running",
            "progress": "2/5",
            "duration": "12s",
            "run": {"id": "r1", "generation": 1},
            "conditions": [{"type": "Succeeded", "status": "Unknown", "reason": "Running"}],
            "report": {
                "steps": [
                    {
                        "stepId": "fetch",
                        "status": "success",
                        "attempts": 1,
                        "output": XSS,
                        "error": None,
                    },
                    {
                        "stepId": "flaky",
                        "status": "failed",
                        "attempts": 3,
                        "output": None,
                        "error": "exit code 1 <b>",
                        "stderr": "fatal: <script>no</script>",
                    },
                ]
            },
            "inFlight": [{"stepId": "slow", "attempt": 1}, {"stepId": "sub", "attempt": 1}],
            "asks": [
                {
                    "stepId": "confirm",
                    "attempt": 1,
                    "prompt": "Ship <b>it</b>?",
                    "outputSchema": {
                        "type": "object",
                        "properties": {"ok": {"type": "boolean"}, "why it": {"type": "string"}},
                    },
                    "deadline": "2026-01-01T01:00:00Z",
                    "whenUnanswered": "fail",
                }
            ],
            "refusedAttempts": [{"stepId": "slow", "attempt": 7, "error": ["not", "text"]}],
        },
    }


def _child(parent: str, step: str, name: str) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "annotations": {view.PARENT: parent, view.STEP_ID: step},
        },
        "status": {"phase": "Running", "progress": "0/1"},
    }


def test_the_view_of_a_recorded_plan():
    children = [_child("web", "sub", "web-sub-1"), _child("other", "sub", "other-sub-1")]
    v = view.plan_view("team", _recorded(), children)
    status = {n["id"]: n["status"] for n in v["nodes"]}
    assert status == {
        "fetch": "success",
        "flaky": "failed",
        "slow": "running",
        "confirm": "waiting",
        "sub": "running",
    }
    assert {n["id"]: n["deps"] for n in v["nodes"]}["flaky"] == ["fetch"]
    assert [n["attempts"] for n in v["nodes"] if n["id"] == "flaky"] == [3]
    records = {r["stepId"]: r for r in v["records"]}
    assert records["fetch"]["output"] == XSS  # kept as it is: the page shows it as text
    assert records["flaky"]["error"] == "exit code 1 <b>"
    assert records["flaky"]["stderr"] == "fatal: <script>no</script>"  # its own, as text
    assert v["stderrInOutput"] is False  # the cluster read the streams apart
    assert records["flaky"]["attempts"] == 3
    assert v["refused"] == [{"stepId": "slow", "attempt": "7", "error": '["not", "text"]'}]
    assert [c["name"] for c in v["children"]] == ["web-sub-1"]  # only this Plan's children
    assert v["children"][0]["step"] == "sub"
    (ask,) = v["asks"]
    assert ask["answer"] == (
        "kubectl plan answer web confirm -n team --set ok=VALUE --set 'why it=VALUE'"
    )
    assert ask["decline"] == "kubectl plan answer web confirm -n team --decline"
    assert ask["fields"] == ["ok", "why it"] and ask["prompt"] == "Ship <b>it</b>?"
    assert (v["phase"], v["progress"], v["run"], v["reason"]) == ("Running", "2/5", "r1", "Running")
    out = view.to_json(v)
    assert "<" not in out and json.loads(out) == v


def test_anything_the_status_holds_becomes_text_or_nothing():
    plan = _recorded()
    plan["status"] = {
        "phase": 7,
        "progress": ["x"],
        "report": {"steps": [{"stepId": "fetch", "status": {"a": 1}, "attempts": "many"}, 3]},
        "asks": "not a list of asks",
        "inFlight": [None, {"stepId": 5}],
        "conditions": "none",
    }
    v = view.plan_view("team", plan, [])
    assert v["phase"] == "7" and v["progress"] == '["x"]'
    assert v["records"] == [
        {
            "stepId": "fetch",
            "status": '{"a": 1}',
            "startedAt": None,
            "finishedAt": None,
            "attempts": 0,
            "output": None,
            "error": None,
            "stderr": None,
        }
    ]
    assert v["inFlight"] == [{"stepId": "5", "attempt": None}]
    assert v["asks"] == [] and v["reason"] is None


def test_a_plan_whose_spec_cannot_be_read_says_why_and_draws_nothing():
    plan = {"metadata": {"name": "bad"}, "spec": {"steps": "nope"}, "status": {}}
    v = view.plan_view("team", plan, [])
    assert v["nodes"] == [] and v["unreadable"] and "steps" in v["unreadable"]


def test_the_list_is_newest_first_with_parents():
    older = {"metadata": {"name": "a", "creationTimestamp": "2026-01-01T00:00:00Z"}}
    newer = {
        **_child("a", "s", "a-s-1"),
        "metadata": {
            **_child("a", "s", "a-s-1")["metadata"],
            "creationTimestamp": "2026-01-02T00:00:00Z",
        },
    }
    rows = view.plan_list("team", [older, newer])
    assert [r["name"] for r in rows["items"]] == ["a-s-1", "a"]
    assert rows["items"][0]["parent"] == {"name": "a", "step": "s"}
    assert rows["items"][1]["phase"] == "Pending" and rows["items"][1]["parent"] is None


async def _serve(requests: list[tuple[str, str, dict[str, str]]]) -> list[tuple[int, Any, str]]:
    """The real app on a real loopback socket; no request here reaches a handler that needs the
    cluster (a None client would fail loudly if one did)."""
    sock = server.listen(0)
    port = int(sock.getsockname()[1])
    app = server.make_app(cast(Kube, None), "team", port, TOKEN)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    out = []
    try:
        async with aiohttp.ClientSession() as session:
            for method, path, headers in requests:
                hdrs = {
                    "Host": f"127.0.0.1:{port}",
                    "Cookie": f"{server.cookie_name(port)}={TOKEN}",
                    **headers,
                }
                async with session.request(
                    method, f"http://127.0.0.1:{port}{path}", headers=hdrs
                ) as r:
                    out.append((r.status, r.headers, await r.text()))
    finally:
        await runner.cleanup()
    return out


def test_only_gets_from_this_servers_own_name_are_served():
    methods = ["POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
    asked = [(m, "/api/plans", {}) for m in methods]
    asked += [
        ("GET", "/", {"Host": "evil.example"}),
        ("GET", "/api/plans", {"Host": "rebound.example:80"}),
        ("GET", "/", {}),
        ("GET", "/", {"Host": "localhost:{port}"}),
        ("GET", "/static/app.js", {}),
        ("GET", "/static/vendor/dagre/dagre.min.js", {}),
        ("GET", "/static/../server.py", {}),
        ("GET", "/static/%2e%2e/server.py", {}),
    ]
    got = asyncio.run(_serve(asked))
    for (status, headers, _), method in zip(got[: len(methods)], methods, strict=True):
        assert status == 405, method
        assert headers["Allow"] == "GET, HEAD"
    assert [s for s, _, _ in got[len(methods) : len(methods) + 2]] == [403, 403]
    page, _local, js, dagre, *escapes = got[len(methods) + 2 :]
    assert page[0] == 200 and '<script src="/static/app.js"' in page[2]
    csp = page[1]["Content-Security-Policy"]
    assert "script-src 'self'" in csp and "unsafe" not in csp and "default-src 'none'" in csp
    assert page[1]["X-Content-Type-Options"] == "nosniff"
    assert page[1]["X-Frame-Options"] == "DENY"
    assert "Access-Control-Allow-Origin" not in page[1]
    assert js[0] == 200 and "textContent" in js[2]
    assert dagre[0] == 200 and "dagre" in dagre[2]
    for status, _, body in escapes:
        assert status in (403, 404) and "aiohttp" not in body


def test_a_localhost_host_of_the_right_port_is_served():
    async def go() -> int:
        sock = server.listen(0)
        port = int(sock.getsockname()[1])
        runner = web.AppRunner(server.make_app(cast(Kube, None), "team", port, TOKEN))
        await runner.setup()
        await web.SockSite(runner, sock).start()
        try:
            hdrs = {"Host": f"localhost:{port}", "Cookie": f"{server.cookie_name(port)}={TOKEN}"}
            async with (
                aiohttp.ClientSession() as s,
                s.get(f"http://127.0.0.1:{port}/", headers=hdrs) as r,
            ):
                return r.status
        finally:
            await runner.cleanup()

    assert asyncio.run(go()) == 200


def test_it_listens_on_loopback_only():
    sock = server.listen(0)
    try:
        assert sock.getsockname()[0] == "127.0.0.1"
    finally:
        sock.close()


def test_the_page_builds_no_markup_from_data():
    js = (Path(server.STATIC) / "app.js").read_text()
    for sink in (
        "innerHTML",
        "outerHTML",
        "insertAdjacentHTML",
        "document.write",
        "eval(",
        "Function(",
    ):
        assert sink not in js, sink
    html = (Path(server.STATIC) / "index.html").read_text()
    tags = re.findall(r"<script\b([^>]*)>", html)
    assert tags and all('src="/static/' in t for t in tags)  # no inline script
    assert not re.search(r"\son[a-z]+\s*=", html)  # no inline event handler


def test_the_vendored_layout_library_matches_its_record():
    assert vendor.problems() == []
    rec = vendor.record()
    assert rec["package"] == "@dagrejs/dagre" and rec["license"] == "MIT"
    assert "Permission is hereby granted" in (vendor.HERE / "LICENSE").read_text()


def test_a_changed_vendored_file_is_found(tmp_path):
    for name in vendor.record()["files"]:
        (tmp_path / name).write_bytes((vendor.HERE / name).read_bytes())
    assert vendor.problems(tmp_path) == []
    (tmp_path / "dagre.min.js").write_text("alert(1)")
    assert vendor.problems(tmp_path) == [
        f"{tmp_path / 'dagre.min.js'}: sha256 differs from VENDOR.json"
    ]


def test_every_file_of_the_page_is_package_data():
    globs = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-data"
    ]["planops.cli.ui"]
    files = [p.relative_to(server.STATIC.parent).as_posix() for p in server.STATIC.rglob("*")]
    missing = [f for f in files if Path(f).suffix and not any(fnmatch.fnmatch(f, g) for g in globs)]
    assert files and missing == []


def test_validate_does_not_import_the_web_server():
    code = (
        "import sys; from planops.cli.main import main; "
        f"rc = main(['validate', {str(EXAMPLES / 'hello.yaml')!r}, '--capsule', "
        f"{str(EXAMPLES / 'capsule.yaml')!r}]); "
        "print(rc, sorted(m for m in sys.modules if m.startswith(('planops.cli.ui', 'aiohttp'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "0 []"


@pytest.mark.parametrize("port", ["-1", "65536"])
def test_ui_refuses_a_port_out_of_range_before_anything_else(port, capsys):
    from planops.cli.main import main  # noqa: PLC0415

    assert main(["ui", "--port", port, "--no-open", "--kubeconfig", "/nonexistent"]) == 2
    assert f"--port {port}: a port is 0 (any free one) to 65535" in capsys.readouterr().err


def test_finally_steps_are_marked_and_drawn_after_the_last_main_steps():
    plan = {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": {"name": "rel", "namespace": "team"},
        "spec": {
            "steps": [{"id": "build", "shell": "true"}, {"id": "deploy", "shell": "true"}],
            "finally": [{"id": "notify", "shell": "true"}],
        },
        "status": {"phase": "Running", "inFlight": [{"stepId": "notify", "attempt": 1}]},
    }
    v = view.plan_view("team", plan, [])
    nodes = {n["id"]: n for n in v["nodes"]}
    assert (nodes["notify"]["final"], nodes["notify"]["after"]) == (True, ["build", "deploy"])
    assert nodes["notify"]["status"] == "running" and nodes["notify"]["deps"] == []
    assert (nodes["deploy"]["final"], nodes["deploy"]["after"]) == (False, [])
    page = (Path(view.__file__).parent / "static" / "app.js").read_text()
    assert "n.after" in page and 'n.final ? "final"' in page  # the page draws them
