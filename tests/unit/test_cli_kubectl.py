"""The cluster verbs in kubectl's spelling (issue 46): `get -A -l -w -o wide|name|jsonpath=`,
`delete`, `logs --tail --since --since-time --timestamps`, `version`, `completion`, and an
`Examples:` section under every verb's `--help`. On the in-memory API (tests/unit/fakekube.py),
through the real command line; tests/e2e/test_cli_kubectl.py runs them on the real cluster."""

from __future__ import annotations

import asyncio
import io
import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from argcomplete import finders
from argcomplete import io as argcomplete_io

from planops import __version__
from planops.cli import cluster, completion, examples, main, parser
from planops.cli.cluster_args import kube_bools
from planops.cli.exit_codes import EXIT_CLUSTER, EXIT_FAILED, EXIT_INPUT, EXIT_INTERRUPTED, EXIT_OK
from planops.kube.api import LogWindow
from planops.kube.client import ApiError, Kube
from planops.kube.manifests import PlanRef

from .fakekube import STAMP, FakeKube

ROOT = Path(__file__).resolve().parents[2]
#: a kubeconfig whose context's namespace is ns (its server is never asked: the API is a fake)
KUBECONFIG = Path(__file__).parent / "data" / "kubeconfig-ns.yaml"


def plan(name: str, ns: str = "ns", phase: str = "Succeeded", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "planops.dev/v1alpha1",
        "kind": "Plan",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": f"uid-{ns}-{name}",
            "labels": labels,
            "creationTimestamp": "2026-12-05T10:00:00Z",
        },
        "spec": {"capsule": "ci", "steps": [{"id": "a", "shell": "true"}]},
        "status": {"phase": phase, "progress": "1/1", "duration": "3s", "run": {"id": "r1"}},
    }


def cluster_of(*plans: dict[str, Any]) -> FakeKube:
    kube = FakeKube()
    for p in plans:
        kube.put("plan", p)
    return kube


def run(
    kube: FakeKube, capsys: pytest.CaptureFixture[str], *argv: str, ns: str = "ns"
) -> tuple[int, str, str]:
    """A cluster verb as the command line parses it, on `kube`: (exit code, stdout, stderr);
    the checks made before connecting first, as cluster.run makes them."""
    args = parser.build().parse_args(kube_bools(list(argv)))
    check = cluster.CHECKS.get(args.command)
    if check is not None and (problem := check(args)) is not None:
        sys.stderr.write(f"error: {problem}\n")
        code = EXIT_INPUT
    else:
        code = asyncio.run(cluster.VERBS[args.command](kube, args, ns))
    out = capsys.readouterr()
    return code, out.out, out.err


# -- get ------------------------------------------------------------------------------------


def test_get_all_namespaces_lists_every_namespaces_plans_with_a_namespace_column(
    capsys: pytest.CaptureFixture[str],
):
    kube = cluster_of(plan("a", "team-a"), plan("b", "team-b", phase="Failed"))
    code, out, _ = run(kube, capsys, "get", "-A")
    assert code == EXIT_OK
    lines = [line.split() for line in out.splitlines()]
    assert lines[0] == ["NAMESPACE", "NAME", "PHASE", "STEPS", "FAILED", "DURATION", "AGE"]
    assert [line[:3] for line in lines[1:]] == [
        ["team-a", "a", "Succeeded"],
        ["team-b", "b", "Failed"],
    ]
    assert ("list_plans_at", "", "") in kube.calls  # one list of every namespace
    code, out, _ = run(kube, capsys, "get", "--all-namespaces", "-o", "name")
    assert out == "plan.planops.dev/a\nplan.planops.dev/b\n"


def test_get_all_namespaces_refused_says_to_name_a_namespace(capsys: pytest.CaptureFixture[str]):
    kube = cluster_of(plan("a"))
    kube.refuse("list_plans_at", 403, 'plans.planops.dev is forbidden: User "ann" cannot list')
    code, _, err = run(kube, capsys, "get", "-A")
    assert code == EXIT_CLUSTER
    assert "-A: you may not list Plans in every namespace" in err and "-n NAMESPACE" in err


def test_get_in_a_namespace_lists_only_its_plans(capsys: pytest.CaptureFixture[str]):
    kube = cluster_of(plan("a", "ns"), plan("b", "other"))
    code, out, _ = run(kube, capsys, "get", "-o", "name")
    assert (code, out) == (EXIT_OK, "plan.planops.dev/a\n")


def test_get_selector_lists_only_the_plans_whose_labels_match(capsys: pytest.CaptureFixture[str]):
    kube = cluster_of(plan("a", team="web"), plan("b", team="db"), plan("c"))
    assert run(kube, capsys, "get", "-l", "team=web", "-o", "name")[1] == "plan.planops.dev/a\n"
    assert run(kube, capsys, "get", "--selector", "team")[1].split()[6:7] == ["a"]
    assert kube.selectors[-2:] == ["team=web", "team"]
    code, out, err = run(kube, capsys, "get", "-l", "team=nobody")
    assert (code, out, err) == (EXIT_OK, "", "No resources found in ns namespace.\n")


def test_a_selector_the_api_server_refuses_is_exit_2_with_how_to_write_one(
    capsys: pytest.CaptureFixture[str],
):
    kube = cluster_of(plan("a"))
    kube.refuse("list_plans_at", 400, "unable to parse requirement", reason="BadRequest")
    code, _, err = run(kube, capsys, "get", "-l", "team in (web")
    assert code == EXIT_INPUT
    assert "unable to parse requirement" in err and "key in (a,b)" in err


def test_get_wide_adds_the_capsule_the_run_and_what_it_waits_for(
    capsys: pytest.CaptureFixture[str],
):
    waiting = plan("w", phase="Pending")
    waiting["status"]["queue"] = {"message": "waiting for a slot of Capsule ci (2/2 running)"}
    out = run(cluster_of(waiting), capsys, "get", "-o", "wide")[1]
    head, row = out.splitlines()
    assert head.split() == [
        *["NAME", "PHASE", "STEPS", "FAILED", "DURATION", "AGE", "CAPSULE", "RUN", "WAITING"]
    ]
    assert row.split()[5:8] == ["ci", "r1", "waiting"]  # (FAILED is empty)
    assert row.endswith("(2/2 running)")


def test_get_jsonpath_prints_kubectls_template_over_the_list_or_the_plan(
    capsys: pytest.CaptureFixture[str],
):
    kube = cluster_of(plan("a"), plan("b", phase="Failed"))
    template = '{range .items[*]}{.metadata.name}{"\\t"}{.status.phase}{"\\n"}{end}'
    code, out, _ = run(kube, capsys, "get", "-o", f"jsonpath={template}")
    assert (code, out) == (EXIT_OK, "a\tSucceeded\nb\tFailed\n")
    assert run(kube, capsys, "get", "-o", "jsonpath={.items[*].metadata.name}")[1] == "a b"
    assert run(kube, capsys, "get", "b", "-o", "jsonpath={.status.phase}")[1] == "Failed"
    filtered = '{.items[?(@.status.phase=="Failed")].metadata.name}'
    assert run(kube, capsys, "get", "-o", f"jsonpath={filtered}")[1] == "b"


def test_a_bad_template_or_output_is_refused_before_the_cluster_is_asked(
    capsys: pytest.CaptureFixture[str],
):
    kube = cluster_of(plan("a"))
    code, _, err = run(kube, capsys, "get", "-o", "jsonpath={range .items[*]}{.x}")
    assert code == EXIT_INPUT and "not closed by {end}" in err and kube.calls == []
    with pytest.raises(SystemExit) as e:
        run(kube, capsys, "get", "-o", "jsonpath")
    assert e.value.code == EXIT_INPUT
    assert "jsonpath needs a template: -o jsonpath='{.items[*].metadata.name}'" in (
        capsys.readouterr().err
    )
    with pytest.raises(SystemExit):
        run(kube, capsys, "get", "-o", "tabel")
    assert "table, wide, name, json, yaml or jsonpath=TEMPLATE" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["get", "a", "-A"], "get a -n NAMESPACE"),
        (["get", "a", "-l", "team=web"], "give NAME or -l SELECTOR, not both"),
        (["get", "a", "--run", "r0", "-w"], "drop --watch"),
        (["get", "--run", "r0"], "get NAME --run ID"),
    ],
)
def test_get_flags_that_do_not_go_together_say_what_to_write(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
):
    kube = cluster_of(plan("a"))
    code, _, err = run(kube, capsys, *argv)
    assert code == EXIT_INPUT and said in err and kube.calls == []


def test_a_plan_that_is_not_there_says_how_to_find_it(capsys: pytest.CaptureFixture[str]):
    code, _, err = run(cluster_of(), capsys, "get", "nope")
    assert code == EXIT_INPUT and "kubectl plan get -n ns lists its Plans" in err


def test_get_watch_prints_the_list_then_each_change_until_interrupted(
    capsys: pytest.CaptureFixture[str],
):
    kube = cluster_of(plan("a", phase="Running"))
    running = plan("b-with-a-long-name", phase="Running")
    done = plan("b-with-a-long-name")
    kube.watches = [
        [("ADDED", running), ("BOOKMARK", {"metadata": {"resourceVersion": "900"}})],
        [("MODIFIED", done), ("DELETED", plan("a")), KeyboardInterrupt()],
    ]
    args = parser.build().parse_args(["get", "-w"])
    with pytest.raises(KeyboardInterrupt):  # Ctrl-C: cluster.run makes it exit 130
        asyncio.run(cluster.VERBS["get"](kube, args, "ns"))
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[:2] for line in lines] == [
        ["NAME", "PHASE"],
        ["a", "Running"],
        ["b-with-a-long-name", "Running"],
        ["b-with-a-long-name", "Succeeded"],
        ["a", "Succeeded"],
    ]
    assert lines[1].index("Running") == lines[0].index("PHASE")  # the list's columns
    assert lines[4].index("Succeeded") == lines[3].index("Succeeded")  # rows line up
    listed_at = kube.watched_from[0]
    assert kube.watched_from == [listed_at, "900"]  # from the list, then from the bookmark
    assert kube.watches_closed == 2


def test_get_watch_only_and_a_watch_too_old_to_resume_lists_again(
    capsys: pytest.CaptureFixture[str],
):
    kube = cluster_of(plan("a"))
    kube.watches = [[ApiError(410, "Expired", "too old resource version")], [KeyboardInterrupt()]]
    args = parser.build().parse_args(["get", "--watch-only", "-o", "name"])
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(cluster.VERBS["get"](kube, args, "ns"))
    assert capsys.readouterr().out == "plan.planops.dev/a\n"  # once: from the new list only
    assert [m for m in kube.methods() if m.startswith(("list_plans", "watch"))] == [
        "list_plans_at",
        "watch_plans",
        "list_plans_at",
        "watch_plans",
    ]


def test_get_name_watch_follows_that_plan_only(capsys: pytest.CaptureFixture[str]):
    kube = cluster_of(plan("a", phase="Running"))
    kube.watches = [[("MODIFIED", plan("a")), KeyboardInterrupt()]]
    args = parser.build().parse_args(["get", "a", "-w", "-o", "jsonpath={.status.phase}{'\\n'}"])
    with pytest.raises(KeyboardInterrupt):
        asyncio.run(cluster.VERBS["get"](kube, args, "ns"))
    assert "watch_plan" in kube.methods()


def test_ctrl_c_ends_a_cluster_verb_with_130_and_no_traceback(
    capsys: pytest.CaptureFixture[str],
):
    async def interrupted(*_: Any) -> int:
        raise KeyboardInterrupt

    args = parser.build().parse_args(["get", "-w", "--kubeconfig", str(KUBECONFIG)])
    assert cluster.run(args, interrupted) == EXIT_INTERRUPTED
    assert capsys.readouterr().err == ""


# -- delete -----------------------------------------------------------------------------------


def test_delete_says_what_it_deleted_in_kubectls_words(capsys: pytest.CaptureFixture[str]):
    kube = cluster_of(plan("a"), plan("b"), plan("c"))
    code, out, err = run(kube, capsys, "delete", "a", "nope", "b")
    assert out == 'plan.planops.dev "a" deleted\nplan.planops.dev "b" deleted\n'
    assert code == EXIT_INPUT  # one was not there: the others are deleted all the same
    assert 'plan.planops.dev "nope" not found in namespace ns' in err
    assert [p["metadata"]["name"] for p in kube.of("plan")] == ["c"]
    code, out, err = run(kube, capsys, "delete", "nope", "--ignore-not-found")
    assert (code, out, err) == (EXIT_OK, "", "")


def test_delete_by_selector_or_all(capsys: pytest.CaptureFixture[str]):
    kube = cluster_of(plan("a", team="web"), plan("b", team="db"), plan("c", "other"))
    assert run(kube, capsys, "delete", "-l", "team=web")[1] == 'plan.planops.dev "a" deleted\n'
    assert run(kube, capsys, "delete", "--all")[1] == 'plan.planops.dev "b" deleted\n'
    assert kube.of("plan", "other")  # another namespace's Plan is left
    code, _, err = run(kube, capsys, "delete", "--all")
    assert (code, err) == (EXIT_OK, "No resources found in ns namespace.\n")


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["delete"], "NAME..., -l SELECTOR or --all"),
        (["delete", "a", "--all"], "only one of them"),
        (["delete", "-l", "x=y", "--all"], "only one of them"),
        (["delete", "a", "--timeout", "soon"], "--timeout 'soon': a duration"),
    ],
)
def test_delete_without_a_clear_set_of_plans_deletes_nothing(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
):
    kube = cluster_of(plan("a"))
    code, _, err = run(kube, capsys, *argv)
    assert code == EXIT_INPUT and said in err and kube.calls == []


def test_delete_waits_until_the_plan_is_gone_unless_told_not_to(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
):
    kube = cluster_of(plan("a"))
    held = plan("a")  # a finalizer of another controller keeps it a while
    held["metadata"]["finalizers"] = ["example.com/cleanup"]
    original = kube.delete_plan_found

    async def keeps_it(namespace: str, name: str) -> bool:
        found = await original(namespace, name)
        kube.put("plan", held)
        return found

    monkeypatch.setattr(kube, "delete_plan_found", keeps_it)
    kube.watches = [[("MODIFIED", held), ("DELETED", held)]]
    code, out, _ = run(kube, capsys, "delete", "a")
    assert (code, out) == (EXIT_OK, 'plan.planops.dev "a" deleted\n')
    assert kube.watches == [] and "watch_plan" in kube.methods()

    kube.put("plan", plan("a"))
    kube.calls.clear()
    code, out, _ = run(kube, capsys, "delete", "a", "--wait=false")
    assert code == EXIT_OK and "watch_plan" not in kube.methods()

    code, _, err = run(kube, capsys, "delete", "a", "--timeout", "1s")  # never gone
    assert code == EXIT_FAILED and "timed out after 1s" in err and "--wait=false" in err


def test_kubectls_boolean_flags_take_their_value_after_an_equals_sign():
    assert kube_bools(["delete", "--wait=false", "a"]) == ["delete", "--no-wait", "a"]
    assert kube_bools(["logs", "--timestamps=true"]) == ["logs", "--timestamps"]
    args = parser.build().parse_args(kube_bools(["delete", "--wait", "a", "b"]))
    assert args.wait and args.names == ["a", "b"]  # --wait takes no name as its value


# -- logs ------------------------------------------------------------------------------------


def step_pod(kube: FakeKube, log: str, stderr: str = "") -> None:
    """Plan p's step `say`, its pod (the Plan's Job's) still there."""
    kube.put("plan", plan("p"))
    ref = PlanRef("ns", "p", "uid-ns-p", "r1")
    owner = {"apiVersion": "planops.dev/v1alpha1", "kind": "Plan", "uid": "uid-ns-p"}
    job = {"name": "j", "uid": "job-uid", "ownerReferences": [{**owner, "controller": True}]}
    pod_owner = {"apiVersion": "batch/v1", "kind": "Job", "uid": "job-uid", "controller": True}
    for kind, meta in (("job", job), ("pod", {"name": "say-pod", "ownerReferences": [pod_owner]})):
        kube.put(kind, {"metadata": {**meta, "labels": ref.labels("say", 1)}})
    kube.logs["say-pod"], kube.stderr["say-pod"] = log, stderr


def test_logs_tail_since_and_timestamps_go_to_the_pod_log_api(capsys: pytest.CaptureFixture[str]):
    kube = FakeKube()
    step_pod(kube, "one\ntwo\nthree\n", "warn1\nwarn2\n")
    code, out, err = run(
        kube, capsys, "logs", "p", "say", "--tail", "2", "--since", "1h30m", "--timestamps"
    )
    assert code == EXIT_OK
    assert out == f"{STAMP}two\n{STAMP}three\n" and err == f"{STAMP}warn1\n{STAMP}warn2\n"
    window = LogWindow(tail_lines=2, since_seconds=5400, timestamps=True)
    assert kube.windows == [window, window]  # stdout's and stderr's streams
    assert window.query() == {
        "tailLines": 2,
        "sinceSeconds": 5400,
        "sinceTime": None,
        "timestamps": True,
    }
    kube.windows.clear()
    run(kube, capsys, "logs", "p", "say", "--tail=0", "--since-time", "2026-12-05T10:00:00Z")
    assert kube.windows[0] == LogWindow(tail_lines=0, since_time="2026-12-05T10:00:00Z")
    kube.windows.clear()
    assert run(kube, capsys, "logs", "p", "say")[1] == "one\ntwo\nthree\n"
    assert kube.windows[0] == LogWindow()  # the whole log: no window in the query
    assert LogWindow().query() == {
        "tailLines": None,
        "sinceSeconds": None,
        "sinceTime": None,
        "timestamps": None,
    }


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--since", "2026-12-05T10:00:00Z"], "for a time: --since-time"),
        (["--since", "0s"], "a duration such as 5s"),
        (["--since-time", "yesterday"], "an RFC 3339 time"),
        (["--since", "1h", "--since-time", "2026-12-05T10:00:00Z"], "not both"),
    ],
)
def test_a_window_that_cannot_be_used_is_refused_before_the_cluster_is_asked(
    capsys: pytest.CaptureFixture[str], argv: list[str], said: str
):
    kube = FakeKube()
    code, _, err = run(kube, capsys, "logs", "p", "say", *argv)
    assert code == EXIT_INPUT and said in err and kube.calls == []
    with pytest.raises(SystemExit):
        run(kube, capsys, "logs", "p", "say", "--tail", "-5")


def test_a_gone_pods_record_is_windowed_as_far_as_a_record_can_be(
    capsys: pytest.CaptureFixture[str],
):
    p = plan("p")
    record = {
        "stepId": "say",
        "status": "success",
        "output": "one\ntwo\nthree",
        "stderr": "warn1\nwarn2",
        "finishedAt": "2026-12-05T10:00:00Z",
    }
    p["status"]["report"] = {"steps": [record]}
    kube = cluster_of(p)
    code, out, err = run(kube, capsys, "logs", "p", "say", "--tail", "1", "--timestamps")
    assert (code, out) == (EXIT_OK, "three\n")
    assert err.endswith("warn2\n") and "a record keeps no time per line" in err
    code, out, err = run(kube, capsys, "logs", "p", "say", "--since", "5m")  # finished before
    assert (code, out) == (EXIT_OK, "") and "warn" not in err
    code, out, _ = run(kube, capsys, "logs", "p", "say", "--since-time", "2026-12-05T09:00:00Z")
    assert out == "one\ntwo\nthree\n"


def test_logs_follow_passes_the_window_to_each_followed_pod(capsys: pytest.CaptureFixture[str]):
    kube = FakeKube()
    step_pod(kube, "one\ntwo\n")
    kube.objects[("pod", "ns", "say-pod")]["status"] = {"phase": "Succeeded"}
    code, out, _ = run(kube, capsys, "logs", "-f", "p", "--tail", "1")
    assert (code, out) == (EXIT_OK, "[say] two\n")
    assert kube.windows == [LogWindow(tail_lines=1)]


# -- version -------------------------------------------------------------------------------


def test_version_says_the_clients_the_servers_and_the_operators(capsys: pytest.CaptureFixture[str]):
    kube = FakeKube()
    kube.put(
        "crd",
        {
            "metadata": {
                "name": "plans.planops.dev",
                "labels": {"app.kubernetes.io/version": "0.1.0"},
            }
        },
    )
    code, out, _ = run(kube, capsys, "version")
    assert (code, out) == (EXIT_OK, "Server Version: v1.36.3\nOperator Version: 0.1.0\n")
    found = json.loads(run(kube, capsys, "version", "-o", "json")[1])
    assert found["clientVersion"] == __version__ and found["operatorVersion"] == "0.1.0"
    assert found["serverVersion"]["gitVersion"] == "v1.36.3"


def test_an_operator_version_that_cannot_be_read_says_why(capsys: pytest.CaptureFixture[str]):
    kube = FakeKube()
    assert "planops is not installed" in run(kube, capsys, "version")[1]
    kube.put("crd", {"metadata": {"name": "plans.planops.dev", "labels": {}}})
    assert "applied by hand, not by the planops chart" in run(kube, capsys, "version")[1]
    kube.refuse("get_crd", 403, "forbidden")
    code, out, _ = run(kube, capsys, "version")
    assert code == EXIT_OK and "Operator Version: unknown (you may not read" in out


def test_version_client_needs_no_cluster(tmp_path: Path):
    env = {"PATH": "/usr/bin:/bin", "KUBECONFIG": str(tmp_path / "none"), "HOME": str(tmp_path)}
    r = subprocess.run(
        [sys.executable, "-m", "planops.cli.main", "version", "--client"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert (r.returncode, r.stdout) == (EXIT_OK, f"Client Version: {__version__}\n")
    r = subprocess.run(
        [sys.executable, "-m", "planops.cli.main", "version"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    assert r.returncode == EXIT_CLUSTER  # no cluster: said after the client's version
    assert r.stdout == f"Client Version: {__version__}\n" and "error:" in r.stderr


# -- completion -------------------------------------------------------------------------------


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_completion_prints_a_script_for_each_shell(capsys: pytest.CaptureFixture[str], shell: str):
    assert main.main(["completion", shell]) == EXIT_OK
    out = capsys.readouterr().out
    assert "kubectl-plan" in out and "_ARGCOMPLETE" in out
    marks = {
        "bash": "complete -o nospace",
        "zsh": "#compdef kubectl-plan",
        "fish": "complete --command kubectl-plan",
    }
    assert marks[shell] in out


def completing(monkeypatch: pytest.MonkeyPatch, line: str, kube: FakeKube | None) -> None:
    """The environment a shell's completion script gives kubectl-plan for `line` (restored
    after the test), and the cluster `kube` (when given) behind the client."""
    monkeypatch.setenv("_ARGCOMPLETE", "1")
    monkeypatch.setenv("_ARGCOMPLETE_IFS", "\n")
    monkeypatch.setenv("COMP_LINE", line)
    monkeypatch.setenv("COMP_POINT", str(len(line)))
    monkeypatch.setenv("KUBECONFIG", str(KUBECONFIG))
    # argcomplete's debug stream on fd 9 would close one of pytest's
    monkeypatch.setattr(finders.CompletionFinder, "_init_debug_stream", lambda _self: None)
    monkeypatch.setattr(argcomplete_io, "debug_stream", io.StringIO())
    if kube is not None:

        async def connect(*_: Any) -> FakeKube:
            return kube

        monkeypatch.setattr(Kube, "connect", connect)


def completed(
    line: str, monkeypatch: pytest.MonkeyPatch, kube: FakeKube | None = None
) -> list[str]:
    """What kubectl-plan answers a shell's TAB at the end of `line` (as the scripts ask it)."""
    completing(monkeypatch, line, kube)
    out = io.StringIO()
    completion.complete(parser.build(), output_stream=out, exit_method=lambda _code: None)
    return sorted(c.strip() for c in out.getvalue().split("\n"))


def names(completions: list[str]) -> list[str]:
    return [c for c in completions if not c.startswith("-")]  # the flags are offered too


def test_completion_completes_verbs_flags_and_plan_names(monkeypatch: pytest.MonkeyPatch):
    assert completed("kubectl-plan de", monkeypatch) == ["delete", "describe"]
    assert "--all-namespaces" in completed("kubectl-plan get --", monkeypatch)
    assert completed("kubectl-plan completion b", monkeypatch) == ["bash"]
    kube = cluster_of(plan("deploy"), plan("delta"), plan("build"), plan("other-ns", "x"))
    assert completed("kubectl-plan logs de", monkeypatch, kube) == ["delta", "deploy"]
    assert names(completed("kubectl-plan delete deploy ", monkeypatch, kube)) == [
        "build",
        "delta",
        "deploy",
    ]
    assert names(completed("kubectl-plan get -n x ", monkeypatch, kube)) == ["other-ns"]


def test_a_cluster_that_cannot_answer_completes_no_name(monkeypatch: pytest.MonkeyPatch):
    kube = cluster_of(plan("deploy"))
    kube.fail("list_plans_at", ConnectionRefusedError())
    assert completed("kubectl-plan get d", monkeypatch, kube) == [""]


def test_the_bash_script_completes_in_bash(tmp_path: Path):
    """The real script in a real bash: the verbs after `kubectl-plan g`."""
    script = tmp_path / "c.bash"
    script.write_text(completion.script("bash"))
    line = "kubectl-plan g"
    probe = (
        f"source {script}; COMP_LINE='{line}'; COMP_POINT={len(line)}; "
        "COMP_WORDS=(kubectl-plan g); COMP_CWORD=1; "
        "_python_argcomplete kubectl-plan g kubectl-plan; printf '%s\\n' \"${COMPREPLY[@]}\""
    )
    bin_dir = Path(sys.executable).parent
    r = subprocess.run(
        ["bash", "-c", probe],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert sorted(r.stdout.split()) == ["get", "graph"], r.stderr


def test_kubectls_plugin_completion_gets_cobras_answer(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
):
    """`kubectl plan de<TAB>`: kubectl runs `kubectl_complete-plan __complete de` and reads one
    candidate a line, then `:DIRECTIVE` (4: no file names)."""
    completing(monkeypatch, "", cluster_of(plan("deploy"), plan("build")))
    assert completion.kubectl_complete(["__complete", "de"]) == 0
    assert capsys.readouterr().out == "delete\ndescribe\n:4\n"
    completion.kubectl_complete(["logs", "-n", "ns", "dep"])
    assert capsys.readouterr().out == "deploy\n:4\n"


@pytest.mark.skipif(shutil.which("fish") is None, reason="no fish here (apt-get install fish)")
def test_the_fish_script_completes_in_fish(tmp_path: Path):
    script = tmp_path / "c.fish"
    script.write_text(completion.script("fish"))
    bin_dir = Path(sys.executable).parent
    r = subprocess.run(
        ["fish", "--no-config", "-c", f"source {script}; complete -C 'kubectl-plan get --all'"],
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp_path)},
    )
    assert r.stdout.split("\t")[0] == "--all-namespaces", r.stderr  # with its help after a tab
    assert "list the Plans of every namespace" in r.stdout


# -- help ------------------------------------------------------------------------------------


def test_every_verbs_help_has_examples_and_every_example_parses(capsys: pytest.CaptureFixture[str]):
    verbs_parser = parser.build()
    verbs = next(a for a in verbs_parser._actions if a.dest == "command").choices
    assert set(examples.EXAMPLES) == set(verbs)
    for verb, sub in verbs.items():
        assert "Examples:\n  # " in sub.format_help(), verb
        for _, command in examples.EXAMPLES[verb]:
            words = shlex.split(command.replace("source <(", "").rstrip(")"))
            words = words[2:] if words[:2] == ["kubectl", "plan"] else words[1:]
            words = words[: words.index(">")] if ">" in words else words
            assert verbs_parser.parse_args(kube_bools(words)).command == verb, command
