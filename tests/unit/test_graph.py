"""`kubectl plan graph`: the renderers (text, DOT, Mermaid) from a file and from a status, colour
on and off, escaping of untrusted text, and the verb's file path and --watch loop."""

from __future__ import annotations

import asyncio
import io
import json
import re
import subprocess
import sys
from argparse import Namespace
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import pytest

from planops.api import PlanSpec
from planops.cli import graph
from planops.cli.inputs import load

from .fakekube import FakeKube

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
CAPSULE = str(EXAMPLES / "capsule.yaml")


def spec_of(example: str) -> tuple[str, PlanSpec]:
    ((_, doc),) = load([str(EXAMPLES / f"{example}.yaml")]).plans
    return doc.plan_id, doc.spec


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "planops.cli.main", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


FAN_STATUS: dict[str, Any] = {
    "phase": "Running",
    "progress": "3/5",
    "duration": "4s",
    "report": {
        "steps": [
            {"stepId": "prepare", "status": "success", "attempts": 1},
            {"stepId": "shard-a", "status": "success", "attempts": 2},
            {"stepId": "shard-b", "status": "failed", "attempts": 1, "error": "exit code 1"},
        ]
    },
    "inFlight": [{"stepId": "shard-c", "attempt": 1, "since": "2026-01-01T00:00:00Z"}],
}


# -- from a file -----------------------------------------------------------------------------------


def test_a_file_is_drawn_level_by_level_with_its_edges_and_no_status():
    name, spec = spec_of("fan-out-fan-in")
    out = graph.text(graph.from_spec(name, spec))
    assert out.splitlines()[0] == "plan fan-out-fan-in: 5 steps (as validated)"
    levels = [line for line in out.splitlines() if line.startswith("── level")]
    assert len(levels) == 3
    assert re.search(r"○ shard-b +shell +echo b +← prepare$", out, re.M)
    assert re.search(r"○ collect +tool +echo-input +← shard-a, shard-b, shard-c$", out, re.M)
    assert "\x1b" not in out
    # declared order within a level; each step below the level of its deepest dependency
    assert out.index("shard-a") < out.index("shard-b") < out.index("shard-c") < out.index("collect")


def test_a_control_steps_body_is_folded_with_its_item_count():
    name, spec = spec_of("seed2-triage")
    drawn = graph.from_spec(name, spec)
    probe = next(n for n in drawn.nodes if n.id == "probe")
    assert probe.kind == "map" and probe.body is not None
    assert probe.body.steps == {"do": ("tool echo-input",)}
    out = graph.text(drawn)
    assert "└ do: tool echo-input; ? items" in out  # over {{live.items}}: known only when it runs
    literal = PlanSpec.model_validate(
        {
            "input": {"hosts": ["a", "b", "c"]},
            "steps": [
                {"id": "m", "map": {"over": "{{input.hosts}}", "do": {"shell": "echo x"}}},
                {"id": "n", "map": {"over": [1, 2], "do": [{"id": "a", "shell": "echo"}]}},
                {
                    "id": "d",
                    "decide": {
                        "if": {"value": 1, "op": "eq", "to": 1},
                        "then": {"shell": "echo yes"},
                        "else": [{"id": "p", "shell": "echo"}, {"id": "q", "shell": "echo"}],
                    },
                },
            ],
        }
    )
    out = graph.text(graph.from_spec("x", literal))
    assert "└ do: shell echo x; 3 items" in out
    assert "└ do: a; 2 items" in out
    assert "└ then: shell echo yes; else: p → q" in out


def test_dot_and_mermaid_of_a_file_have_every_step_and_edge():
    name, spec = spec_of("fan-out-fan-in")
    drawn = graph.from_spec(name, spec)
    dot = graph.dot(drawn)
    assert dot.startswith("digraph plan {\n") and dot.endswith("}\n")
    assert dot.count(" -> ") == 6 and "n0 -> n1;" in dot and "n3 -> n4;" in dot
    assert 'n4 [label="collect\\ntool echo-input"];' in dot
    mermaid = graph.mermaid(drawn)
    assert mermaid.startswith("flowchart TD\n")
    assert mermaid.count(" --> ") == 6 and "  n0 --> n1" in mermaid
    assert '  n4["collect<br/>tool echo-input"]' in mermaid
    assert "classDef" not in mermaid  # no status, no colours


# -- from a status ---------------------------------------------------------------------------------


def test_the_status_is_laid_over_the_graph():
    name, spec = spec_of("fan-out-fan-in")
    drawn = graph.with_status(graph.from_spec(name, spec), FAN_STATUS)
    by_id = {n.id: n for n in drawn.nodes}
    assert {k: n.status for k, n in by_id.items()} == {
        "prepare": "success",
        "shard-a": "success",
        "shard-b": "failed",
        "shard-c": "running",
        "collect": "pending",
    }
    out = graph.text(drawn)
    assert out.splitlines()[0] == "plan fan-out-fan-in: Running, 3/5 steps, 4s"
    assert re.search(r"✔ shard-a +success \(2 attempts\) +shell", out)
    assert re.search(r"✘ shard-b +failed +shell +echo b", out)
    assert "      exit code 1" in out  # the error, under its step
    assert re.search(r"◐ shard-c +running +shell", out)
    assert re.search(r"○ collect +pending +tool", out)
    finished = graph.with_status(graph.from_spec(name, spec), {**FAN_STATUS, "phase": "Failed"})
    assert re.search(r"· collect +not run", graph.text(finished))


def test_colour_only_when_asked_and_around_the_status():
    name, spec = spec_of("fan-out-fan-in")
    drawn = graph.with_status(graph.from_spec(name, spec), FAN_STATUS)
    plain, coloured = graph.text(drawn, colour=False), graph.text(drawn, colour=True)
    assert "\x1b" not in plain
    assert "\x1b[32m✔\x1b[0m prepare" in coloured
    assert "\x1b[31m✘\x1b[0m shard-b" in coloured
    assert "\x1b[33m◐\x1b[0m shard-c" in coloured
    assert re.sub(r"\x1b\[[0-9;]*m", "", coloured) == plain
    dot, mermaid = graph.dot(drawn), graph.mermaid(drawn)
    assert 'fillcolor="#ffcdd2"' in dot and "\x1b" not in dot + mermaid
    assert "  class n2 failed" in mermaid and "  classDef running fill:#fff59d" in mermaid


def test_a_waiting_ask_and_a_maps_items_from_the_status():
    name, spec = spec_of("seed2-triage")
    status = {
        "phase": "Running",
        "report": {
            "steps": [
                {"stepId": "live", "status": "success", "attempts": 1},
                {"stepId": "probe.0.call", "status": "success", "attempts": 1},
                {"stepId": "probe.1.call", "status": "failed", "attempts": 3},
            ]
        },
        "inFlight": [{"stepId": "probe.2.call", "attempt": 1}],
    }
    drawn = graph.with_status(graph.from_spec(name, spec), status)
    probe = next(n for n in drawn.nodes if n.id == "probe")
    assert probe.status == "running"  # its bodies run; the map itself has no attempt
    assert probe.body is not None and probe.body.counts == {"success": 1, "failed": 1, "running": 1}
    assert "└ do: tool echo-input; ? items [✔ 1  ✘ 1  ◐ 1]" in graph.text(drawn)
    settled = {
        "phase": "Running",
        "report": {
            "steps": [
                *status["report"]["steps"][:2],
                {"stepId": "probe.1.call", "status": "success", "attempts": 1},
                {"stepId": "probe", "status": "success", "output": '{"count": 2, "results": []}'},
            ]
        },
        "asks": [{"stepId": "confirm", "prompt": "Report 2 hosts?"}],
    }
    drawn = graph.with_status(graph.from_spec(name, spec), settled)
    out = graph.text(drawn)
    assert "└ do: tool echo-input; 2 items [✔ 2]" in out
    assert re.search(r"\? confirm +waiting +ask", out)


def test_an_invalid_plans_errors_are_shown():
    name, spec = spec_of("hello")
    status = {
        "phase": "Invalid",
        "errors": [{"code": "no-capsule", "path": "capsule", "message": "Capsule 'x' not found"}],
    }
    out = graph.text(graph.with_status(graph.from_spec(name, spec), status))
    assert out.splitlines()[:2] == [
        "plan hello: Invalid",
        "  ✘ [no-capsule] capsule: Capsule 'x' not found",
    ]


def test_a_dependency_cycle_does_not_stop_the_drawing():
    spec = PlanSpec.model_validate(
        {
            "steps": [
                {"id": "a", "shell": "echo", "dependsOn": ["b"]},
                {"id": "b", "shell": "echo", "dependsOn": ["a"]},
                {"id": "c", "shell": "echo"},
            ]
        }
    )
    out = graph.text(graph.from_spec("loop", spec))
    assert "── level 1" in out and "── on or after a dependency cycle" in out
    assert out.index("c ") < out.index("on or after") < out.index("a ")


# -- untrusted text --------------------------------------------------------------------------------

EVIL = [
    'say "hi"; x',
    "a]; n9[evil",
    'x"] --> n0\n  click n0 "javascript:alert(1)"',
    "</text><script>alert(1)</script>",
    "line one\nline two\r\n}",
    "back\\slash \\n \\l \\N {braces} |pipe| <b>",
    "#quot; #35; %% comment",
    "\x1b[2J\x1b]0;title\x07 esc",
]


def evil_graph() -> graph.PlanGraph:
    nodes = tuple(
        graph.Node(
            text,
            "shell",
            text,
            (EVIL[i - 1],) if i else (),
            status="failed",
            detail=text,
            body=graph.Body({"do": (text,)}, 2) if i % 2 else None,
        )
        for i, text in enumerate(EVIL)
    )
    return graph.PlanGraph(EVIL[2], nodes, phase="Failed")


def test_dot_labels_cannot_be_broken_out_of():
    dot = graph.dot(evil_graph()).splitlines()
    assert dot[0] == "digraph plan {" and dot[-1] == "}"
    quoted = r'"(?:[^"\\\n]|\\.)*"'
    node = re.compile(
        rf'^  n\d+ \[label={quoted}, fillcolor="#[0-9a-f]{{6}}"(, peripheries=2)?\];$'
    )
    edge = re.compile(r"^  n\d+ -> n\d+;$")
    nodes = [line for line in dot if node.match(line)]
    edges = [line for line in dot if edge.match(line)]
    assert len(nodes) == len(EVIL) and len(edges) == len(EVIL) - 1
    assert len(dot) == 4 + len(nodes) + len(edges) + 1  # nothing else: no line was injected
    assert re.fullmatch(rf"  graph \[label={quoted}, .*\];", dot[1])
    assert "\x1b" not in "".join(dot)
    # the text is all there, escaped: a quote is \", a backslash \\ (no DOT escape like \l left)
    assert r"say \"hi\"; x" in dot[4]
    assert r"back\\slash \\n \\l \\N" in "".join(dot)


def test_mermaid_labels_cannot_be_broken_out_of():
    out = graph.mermaid(evil_graph()).splitlines()
    assert out[0] == "flowchart TD"
    label = r'"(?:[A-Za-z0-9 _.,:/=+#;-]|<br/>)*"'
    node = re.compile(rf"^  n\d+(\[{label}\]|\[\[{label}\]\])$")
    edge = re.compile(r"^  n\d+ --> n\d+$")
    style = re.compile(
        r"^  (classDef failed fill:#[0-9a-f]{6},stroke:#455a64|class [n0-9,]+ failed)$"
    )
    assert all(node.match(x) or edge.match(x) or style.match(x) for x in out[1:]), out
    assert sum(bool(node.match(x)) for x in out) == len(EVIL)
    joined = "\n".join(out)
    for bad in ("<script", "</text>", 'javascript:alert(1)"', "%%", "\x1b"):
        assert bad not in joined
    assert "#60;script#62;" in joined  # shown as text
    assert graph.mermaid_text('a"b') == "a#34;b" and graph.mermaid_text("#") == "#35;"


def test_the_terminal_text_drops_control_characters():
    out = graph.text(evil_graph(), colour=False)
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out
    assert "</text><script>alert(1)</script>" in out  # a terminal shows text as text
    assert all(line.startswith(("plan ", "  ", "── ")) for line in out.splitlines())


# -- the verb --------------------------------------------------------------------------------------


def test_graph_of_a_file_is_validated_first_with_validates_errors_and_exit_code(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "id: bad\nsteps:\n- {id: a, shell: rm -rf /}\n- {id: b, shell: echo, dependsOn: [zz]}\n"
    )
    v = cli("validate", str(bad), "--capsule", CAPSULE)
    g = cli("graph", str(bad), "--capsule", CAPSULE)
    assert v.returncode == g.returncode == 1
    assert g.stdout == "" and g.stderr == v.stdout  # the same lines, on stderr
    missing = cli("graph", str(EXAMPLES / "hello.yaml"))  # no Capsule given: as validate
    assert missing.returncode == 5 == cli("validate", str(EXAMPLES / "hello.yaml")).returncode
    assert "[no-capsule]" in missing.stderr
    unreadable = cli("graph", str(tmp_path / "nope.yaml"))
    assert unreadable.returncode == 2 and "cannot read" in unreadable.stderr


def test_graph_of_a_file_prints_each_output():
    f = str(EXAMPLES / "fan-out-fan-in.yaml")
    text = cli("graph", f, "--capsule", CAPSULE, env={"PATH": "/usr/bin", "NO_COLOR": ""})
    assert text.returncode == 0 and text.stdout.startswith("plan fan-out-fan-in: 5 steps")
    assert "\x1b" not in text.stdout  # not a terminal: no colour
    dot = cli("graph", f, "--capsule", CAPSULE, "-o", "dot")
    assert dot.returncode == 0 and dot.stdout.startswith("digraph plan {")
    mermaid = cli("graph", f, "--capsule", CAPSULE, "-o", "mermaid")
    assert mermaid.returncode == 0 and mermaid.stdout.startswith("flowchart TD")
    several = cli("graph", str(EXAMPLES / "scheduled.yaml"), "--capsule", CAPSULE, "-o", "dot")
    assert several.returncode == 2 and "--plan NAME" in several.stderr
    one = cli("graph", str(EXAMPLES / "scheduled.yaml"), "--capsule", CAPSULE, "--plan", "refresh")
    assert one.returncode == 0 and one.stdout.startswith("plan refresh: 2 steps")
    watch = cli("graph", f, "--capsule", CAPSULE, "--watch")
    assert watch.returncode == 2 and "a file does not run" in watch.stderr


def test_graph_of_a_file_does_not_import_the_kubernetes_client():
    code = (
        "import sys; from planops.cli.main import main; "
        f"rc = main(['graph', {str(EXAMPLES / 'hello.yaml')!r}, '--capsule', {CAPSULE!r}]); "
        "print(rc, sorted(m for m in sys.modules if m.split('.')[0] == 'kubernetes'))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip().splitlines()[-1] == "0 []"


def test_colour_follows_the_terminal_and_no_color(monkeypatch):
    from planops.cli import main  # noqa: PLC0415

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.setattr(sys, "stdout", Tty())
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert main.colour_wanted()
    monkeypatch.setenv("NO_COLOR", "1")
    assert not main.colour_wanted()
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    monkeypatch.delenv("NO_COLOR")
    assert not main.colour_wanted()


def test_names_and_files_are_told_apart(tmp_path, monkeypatch):
    from planops.cli.main import is_file  # noqa: PLC0415

    monkeypatch.chdir(tmp_path)
    assert not is_file("fan-out-fan-in")
    assert is_file("-") and is_file("x/y") and is_file("plan.yaml") and is_file("p.json")
    (tmp_path / "plain").write_text("id: x\nsteps: []\n")
    assert is_file("plain")


# -- --watch against a fake API --------------------------------------------------------------------


def plan_obj(version: str, status: dict[str, Any] | None) -> dict[str, Any]:
    _, spec = spec_of("hello")
    return {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": {"name": "hello", "namespace": "ns", "resourceVersion": version},
        "spec": spec.dump(),
        **({"status": status} if status is not None else {}),
    }


def api(plan: dict[str, Any] | None, *watches: list[Any]) -> FakeKube:
    """The API server holding `plan` (None: no Plan), whose watches of it yield `watches` in
    turn (an exception in one is raised at that point)."""
    kube = FakeKube(watches=list(watches))
    if plan is not None:
        plan["metadata"]["namespace"] = "ns"
        kube.objects[("plan", "ns", "hello")] = plan  # its resourceVersion as written
    return kube


def run_graph(kube: FakeKube, watch: bool = True, output: str = "text") -> tuple[int, str, str]:
    from planops.cli.live_graph import cmd_graph  # noqa: PLC0415

    out, err = io.StringIO(), io.StringIO()
    args = Namespace(target="hello", watch=watch, output=output)
    with redirect_stdout(out), redirect_stderr(err):
        rc = asyncio.run(cmd_graph(kube, args, "ns"))
    return rc, out.getvalue(), err.getvalue()


def test_watch_redraws_on_each_change_until_the_plan_finishes():
    from planops.kube.client import ApiError  # noqa: PLC0415

    running = {"phase": "Running", "progress": "0/1", "inFlight": [{"stepId": "greet"}]}
    done = {
        "phase": "Succeeded",
        "progress": "1/1",
        "duration": "2s",
        "report": {"steps": [{"stepId": "greet", "status": "success", "attempts": 1}]},
    }
    kube = api(
        plan_obj("1", None),
        [("BOOKMARK", {"metadata": {}}), ("MODIFIED", plan_obj("2", running))],
        [("BOOKMARK", {"metadata": {"resourceVersion": "5"}})],  # the server ends the watch
    )

    def changed_unseen() -> None:  # the Plan moves on while no watch shows it
        kube.objects[("plan", "ns", "hello")] = {**plan_obj("6", running), "metadata": meta6}

    meta6 = {**plan_obj("6", running)["metadata"], "namespace": "ns"}
    kube.watches += [
        [changed_unseen, ApiError(410, "Expired", "too old")],  # then a fresh read: version 6
        [("MODIFIED", plan_obj("7", running))],  # the same picture: not drawn again
        [("MODIFIED", plan_obj("8", done))],
    ]
    rc, out, err = run_graph(kube)
    assert (rc, err) == (0, "")
    frames = out.split("\n\n")  # not a terminal: each changed frame after a blank line
    assert [f.splitlines()[0] for f in frames] == [
        "plan hello: Pending",
        "plan hello: Running, 0/1 steps",
        "plan hello: Succeeded, 1/1 steps, 2s",
    ]
    # resumed from the last version seen; after 410 Gone, from a fresh read
    assert kube.watched_from == ["1", "2", "5", "6", "7"]
    assert kube.watches_closed == 5  # each watch closed, also those left at their first change


def test_watch_ends_with_the_plans_verdict_or_its_deletion():
    failed = {"phase": "Failed", "report": {"steps": [{"stepId": "greet", "status": "failed"}]}}
    assert run_graph(api(plan_obj("1", failed)))[0] == 1
    assert run_graph(api(plan_obj("1", {"phase": "Invalid"})))[0] == 2
    gone = api(plan_obj("1", {"phase": "Running"}), [("DELETED", plan_obj("2", None))])
    rc, _, err = run_graph(gone)
    assert rc == 1 and err == "plan hello: deleted\n"
    rc, _, err = run_graph(api(None))
    assert rc == 2 and "not found" in err
    once = api(plan_obj("1", {"phase": "Running"}))
    rc, out, _ = run_graph(once, watch=False, output="mermaid")
    assert rc == 0 and out.startswith("flowchart TD") and once.watched_from == []


def test_watch_on_a_terminal_replaces_the_frame(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    from planops.cli import live_graph  # noqa: PLC0415

    screen = live_graph.Screen(Tty(), "text")
    _, spec = spec_of("hello")
    monkeypatch.delenv("NO_COLOR", raising=False)
    screen.show(graph.from_spec("a", spec))
    screen.show(graph.from_spec("a", spec))  # unchanged: not drawn again
    screen.show(graph.from_spec("b", spec))
    written = screen.out.getvalue()  # type: ignore[attr-defined]
    assert written.count("\x1b[H\x1b[2J") == 1 and written.count("plan ") == 2


@pytest.mark.parametrize("example", ["hello", "fan-out-fan-in", "retries", "seed2-triage"])
def test_every_example_draws_in_every_output(example):
    name, spec = spec_of(example)
    for output in ("text", "dot", "mermaid"):
        assert graph.render(graph.from_spec(name, spec), output)
    json.dumps(graph.with_status(graph.from_spec(name, spec), {}).phase)


def test_finally_steps_are_drawn_after_the_main_steps_in_every_renderer():
    name, spec = spec_of("release-finally")
    g = graph.from_spec(name, spec)
    assert [(n.id, n.final) for n in g.nodes][-2:] == [("notify", True), ("cleanup", True)]
    assert graph.runs_after(g) == {"notify": ("smoke",), "cleanup": ("smoke",)}
    rows, stuck = graph.levels(g)
    assert [[n.id for n in row] for row in rows] == [
        ["build"],
        ["deploy"],
        ["smoke"],
        ["notify", "cleanup"],
    ] and stuck == []
    text = graph.text(g)
    assert text.index("── finally 1") > text.index("smoke")
    assert "level 4" not in text
    dot = graph.dot(g)
    assert 'subgraph cluster_finally { label="finally"; style=dashed; n3; n4; }' in dot
    assert "n2 -> n3 [style=dashed];" in dot and "n2 -> n4 [style=dashed];" in dot
    mermaid = graph.mermaid(g)
    assert "  subgraph finally\n    n3\n    n4\n  end" in mermaid and "n2 -.-> n3" in mermaid
    status = {
        "phase": "Failed",
        "report": {"steps": [{"stepId": "notify", "status": "success", "attempts": 1}]},
    }
    drawn = graph.with_status(g, status)
    assert [(n.id, n.status, n.final) for n in drawn.nodes][3] == ("notify", "success", True)


def test_a_finally_step_depending_on_another_waits_in_a_later_finally_level():
    spec = PlanSpec.model_validate(
        {
            "steps": [{"id": "a", "shell": "true"}, {"id": "b", "shell": "true"}],
            "finally": [
                {"id": "clean", "shell": "true", "dependsOn": ["a"]},  # a: always true
                {"id": "tell", "shell": "true", "dependsOn": ["clean"]},
            ],
        }
    )
    g = graph.from_spec("p", spec)
    assert [n.deps for n in g.nodes if n.final] == [(), ("clean",)]
    assert graph.runs_after(g) == {"clean": ("a", "b")}
    assert "── finally 2" in graph.text(g)
