"""A multi-line `shell:` block is one command, its newlines read as spaces: `echo one` and
`echo two` on two lines print `one echo two`. It ran silently; now `validate`, `run --local` and
the admission webhook warn about it (`shell-lines`, never a refusal), pointing at a script step
(or one step per command)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from planops.cli import main as cli
from planops.engine.shell_hints import shell_warnings
from planops.handlers import webhook
from planops.handlers.kopf_adapter import kopf
from planops.reconciler import Reconciler

from .fakekube import FakeKube
from .helpers import EXAMPLE_CAPSULE, plan
from .test_schedule_webhook import webhook_handlers

BLOCK = "echo one\necho two\n"  # what `shell: |` gives YAML's block of two lines


def test_a_block_of_lines_is_warned_about_showing_the_one_command():
    (w,) = shell_warnings(plan({"id": "s", "shell": BLOCK}))
    assert (w.code, w.step, w.path) == ("shell-lines", "s", "steps[0].shell")
    assert w.message.startswith(
        "its 2 lines run as ONE command, the newlines read as spaces (`echo one echo two`)"
    )
    assert "one step per command" in w.message
    assert (
        "Write a script step (script: the lines, run by an interpreter of the Capsule's "
        "scripts.allow)" in w.message
    )


@pytest.mark.parametrize(
    "line",
    [
        "echo hi\n",  # a block of one line: its trailing newline is no second command
        "\n  echo hi  \n\n",
        "python3 -c 'print(1)\nprint(2)'",  # a newline inside quotes is part of an argument
        'echo "a\nb"',
        "echo one two",
    ],
)
def test_one_line_and_newlines_inside_quotes_are_not_warned_about(line: str):
    assert shell_warnings(plan({"id": "s", "shell": line})) == []


def test_a_backslash_at_the_end_of_a_line_continues_nothing_and_says_so():
    (w,) = shell_warnings(plan({"id": "s", "shell": "echo a \\\n  b"}))
    assert w.code == "shell-lines"
    assert w.message.startswith("a `\\` at the end of a line continues nothing")
    assert "(`echo a \\n b`)" in w.message  # the newline the word starts with, shown


def test_body_and_finally_steps_are_warned_about_too():
    spec = plan(
        {"id": "m", "map": {"over": [1], "do": {"shell": BLOCK}}},
        finally_=[{"id": "f", "shell": BLOCK}],
    )
    assert [w.path for w in shell_warnings(spec)] == [
        "steps[0].map.do[call].shell",
        "finally[0].shell",
    ]


def test_validate_and_run_local_warn_and_the_step_still_runs(tmp_path, capsys):
    f = tmp_path / "p.json"
    f.write_text(json.dumps({"id": "p", "steps": [{"id": "c", "shell": BLOCK}]}))
    assert cli.main(["validate", str(f), "--capsule", EXAMPLE_CAPSULE, "-o", "json"]) == 0
    (w,) = json.loads(capsys.readouterr().out)["warnings"]
    assert (w["code"], w["step"], w["path"]) == ("shell-lines", "c", "steps[0].shell")
    assert cli.main(["run", "--local", str(f), "--capsule", EXAMPLE_CAPSULE, "-o", "json"]) == 0
    out, err = capsys.readouterr()
    assert "warning: " in err and "its 2 lines run as ONE command" in err
    (record,) = json.loads(out)["steps"]
    assert record["output"] == "one echo two"  # what the warning says


def _admit(body: dict[str, Any]) -> list[str]:
    """The Plan webhook's handler, registered as main registers it, on a Plan: its warnings."""
    handler = webhook_handlers()[webhook.PATH_ID]
    kube = FakeKube()
    kube.put(
        "capsule",
        {
            "metadata": {"name": "default", "namespace": "ns"},
            "spec": {"shell": {"allow": ["echo"]}},
        },
    )

    warnings: list[str] = []
    memo = kopf.Memo(operator=kopf.Memo(reconciler=Reconciler(kube)))
    asyncio.run(handler.fn(body=body, memo=memo, operation="CREATE", warnings=warnings))
    return warnings


def _plan_object(*steps: dict[str, Any]) -> dict[str, Any]:
    meta = {"name": "p", "namespace": "ns", "uid": "u", "generation": 1}
    return {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": meta,
        "spec": {"steps": list(steps)},
    }


def test_the_admission_webhook_admits_the_plan_with_the_warning():
    (warning,) = _admit(_plan_object({"id": "c", "shell": BLOCK}))
    assert warning.startswith("[shell-lines] step 'c': steps[0].shell: its 2 lines run as ONE")
    assert len(warning) <= webhook.WARNING_CHARS
    assert _admit(_plan_object({"id": "c", "shell": "echo hi"})) == []


def test_the_webhook_sends_a_bounded_number_of_warnings_and_counts_the_rest():
    steps = [{"id": f"s{i}", "shell": "echo a | wc"} for i in range(25)]
    warnings = _admit(_plan_object(*steps))
    assert len(warnings) == webhook.WARNINGS_SHOWN + 1
    assert warnings[-1].startswith("and 15 more warning(s): kubectl plan validate")
    assert sum(map(len, warnings)) < 4096  # what the API server passes on
