"""A terminal gets text, never commands (cli/terminal.py): escape sequences in step output, ask
prompts and messages are shown escaped by every writer of kubectl-plan (describe, the tables,
logs, logs -f, validate's errors) when the stream is a terminal; pipes and files, and `--raw`,
keep the bytes."""

from __future__ import annotations

import argparse
import asyncio
import io
import sys
from pathlib import Path
from typing import Any

import pytest

from planops.cli import follow, get, main, parser, show, terminal
from planops.kube.manifests import PlanRef

from .fakekube import FakeKube

#: OSC 52: write "hi" to the clipboard; a CR and a colour that hide what came before; C1 CSI;
#: a right-to-left override
HOSTILE = "ok\x1b]52;c;aGk=\x07 then\rDENY \x1b[8mhidden\x1b[0m \x9b2J \u202eevil"
SHOWN = "ok\\x1b]52;c;aGk=\\x07 then\\x0dDENY \\x1b[8mhidden\\x1b[0m \\x9b2J \\u202eevil"


class Terminal(io.StringIO):
    """What a terminal's stream looks like to the CLI."""

    def isatty(self) -> bool:
        return True


def test_escape_writes_out_what_a_terminal_would_obey_and_keeps_the_rest():
    assert terminal.escape(HOSTILE) == SHOWN
    kept = "line\n\ttab, CRLF\r\n, é ✔ 日本 😀, a \\ backslash"
    assert terminal.escape(kept) == kept
    assert terminal.escape("\x00\x08\x0b\x0c\x7f\x80\x9f") == "\\x00\\x08\\x0b\\x0c\\x7f\\x80\\x9f"
    assert terminal.escape("\u2066\u2069\u200e\u061c") == "\\u2066\\u2069\\u200e\\u061c"
    assert "\x1b" not in terminal.escape("\x1b" * 3) and "\r" not in terminal.escape("a\rb")


def test_only_a_terminal_is_guarded_and_only_while_the_command_runs(
    monkeypatch: pytest.MonkeyPatch,
):
    tty, pipe = Terminal(), io.StringIO()
    monkeypatch.setattr(sys, "stdout", tty)
    monkeypatch.setattr(sys, "stderr", pipe)
    with terminal.guarded():
        print(HOSTILE)
        sys.stderr.write(HOSTILE)
        assert sys.stdout.isatty()  # the colours still know it is a terminal
        terminal.trusted(sys.stdout).write("\x1b[32m")  # the CLI's own sequence
    assert sys.stdout is tty and sys.stderr is pipe
    assert tty.getvalue() == SHOWN + "\n\x1b[32m"
    assert pipe.getvalue() == HOSTILE  # a pipe gets the bytes
    with terminal.guarded(raw=True):
        print(HOSTILE)
    assert tty.getvalue().endswith(HOSTILE + "\n")


def _plan() -> FakeKube:
    """A Plan whose step printed HOSTILE and whose ask shows HOSTILE as its prompt, on the
    in-memory API, with the step's pod (the Plan's Job's) still there."""
    kube, run = FakeKube(), PlanRef("team", "p", "plan-uid", "r1")
    record = {"stepId": "say", "status": "success", "attempts": 1, "output": HOSTILE + "\n"}
    kube.put(
        "plan",
        {
            "metadata": {"name": "p", "namespace": "team", "uid": "plan-uid"},
            "spec": {"steps": [{"id": "say", "shell": "echo"}, {"id": "ok", "ask": {}}]},
            "status": {
                "phase": "Succeeded",
                "run": {"id": "r1"},
                "progress": "1/2",
                "report": {"steps": [record]},
                "asks": [{"stepId": "ok", "prompt": HOSTILE, "outputSchema": {}}],
                "conditions": [{"reason": "Ran", "message": HOSTILE}],
            },
        },
    )
    owner = {"apiVersion": "planops.dev/v1alpha1", "kind": "Plan", "uid": "plan-uid"}
    job = {"name": "j", "uid": "job-uid", "ownerReferences": [{**owner, "controller": True}]}
    pod_owner = {"apiVersion": "batch/v1", "kind": "Job", "uid": "job-uid", "controller": True}
    pod = {"name": "say-pod", "ownerReferences": [pod_owner]}
    for kind, meta in (("job", job), ("pod", pod)):
        obj = {"metadata": {**meta, "namespace": "team", "labels": run.labels("say", 1)}}
        kube.put(kind, {**obj, "status": {"phase": "Succeeded"}})
    kube.logs["say-pod"] = HOSTILE + "\n"
    return kube


def _on_a_terminal(monkeypatch: pytest.MonkeyPatch, verb: Any, args: argparse.Namespace) -> str:
    tty = Terminal()
    monkeypatch.setattr(sys, "stdout", tty)
    monkeypatch.setattr(sys, "stderr", Terminal())
    with terminal.guarded(getattr(args, "raw", False)):
        asyncio.run(verb(_plan(), args, "team"))
    return tty.getvalue()


def test_describe_shows_a_hostile_prompt_output_and_message_escaped(
    monkeypatch: pytest.MonkeyPatch,
):
    args = argparse.Namespace(name="p", run=None)
    out = _on_a_terminal(monkeypatch, show.cmd_describe, args)
    assert "\x1b" not in out and "\x07" not in out and "\r" not in out and "\u202e" not in out
    assert f"step ok: {SHOWN}" in out  # the ask an approver reads, as asked
    assert "ok\\x1b]52;c;aGk=" in out.split("Steps")[1]  # the table's DETAIL


def test_logs_and_logs_f_show_the_steps_output_escaped_and_raw_keeps_it(
    monkeypatch: pytest.MonkeyPatch,
):
    logs = argparse.Namespace(name="p", step="say", attempt=None, follow=False)
    assert _on_a_terminal(monkeypatch, show.cmd_logs, logs) == SHOWN + "\n"
    followed = argparse.Namespace(name="p", step=None)
    assert _on_a_terminal(monkeypatch, follow.cmd_follow, followed) == f"[say] {SHOWN}\n"
    raw = argparse.Namespace(name="p", step="say", attempt=None, follow=False, raw=True)
    assert _on_a_terminal(monkeypatch, show.cmd_logs, raw) == HOSTILE + "\n"


def test_get_and_trace_tables_are_escaped(monkeypatch: pytest.MonkeyPatch):
    args = argparse.Namespace(
        name=None,
        run=None,
        output="table",
        all_namespaces=False,
        selector=None,
        watch=False,
        watch_only=False,
    )
    out = _on_a_terminal(monkeypatch, get.cmd_get, args)
    assert "p" in out and "\x1b" not in out


def test_every_verb_takes_raw_and_the_command_line_escapes_on_a_terminal(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
):
    """Through kubectl-plan's own entry: `run --local`'s summary shows the step's output."""
    plan = tmp_path / "p.yaml"
    plan.write_text('id: p\nsteps:\n- {id: a, shell: "echo \\e]52;c;aGk=\\a hi"}\n')
    capsule = Path(__file__).resolve().parents[2] / "examples" / "capsule.yaml"
    for raw, want, unwanted in ((False, "\\x1b]52", "\x1b"), (True, "\x1b]52", "\\x1b")):
        out, err = Terminal(), Terminal()
        monkeypatch.setattr(sys, "stdout", out)
        monkeypatch.setattr(sys, "stderr", err)
        argv = ["run", "--local", str(plan), "--capsule", str(capsule), *(["--raw"] * raw)]
        assert main.main(argv) == 0
        assert want in out.getvalue() and unwanted not in out.getvalue(), out.getvalue()
        assert "\x1b" not in err.getvalue() or raw
    verbs = parser.build()._subparsers._group_actions[0].choices  # type: ignore[union-attr]
    assert all(any("--raw" in a.option_strings for a in p._actions) for p in verbs.values())
