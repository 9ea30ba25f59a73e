"""`kubectl plan` in kubectl's spelling against the running operator (issue 46): `delete`, `get
-A -l -o wide|name|jsonpath=`, `get --watch` (ended with Ctrl-C), `logs --tail --since
--since-time --timestamps` (from the pod, and from the record once the pod is gone), `version`,
and Plan names completed from the cluster by the bash script and by kubectl's own completion
(through kubectl_complete-plan)."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import KUBECTL, Kube
from tests.e2e.conftest import NS_PREFIX, capsule, cli, plan, wait_plan

pytestmark = [pytest.mark.cluster, pytest.mark.node]

STAMPED = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z line\d$")


@pytest.fixture
def ns2(kube: Kube, ns: str, busybox: str) -> Iterator[str]:
    """A second namespace of the session operator (with its Capsule), for `get -A`."""
    name = f"{NS_PREFIX}{uuid.uuid4().hex[:10]}"
    kube.run("create", "namespace", name)
    kube.apply(capsule(busybox), "-n", name)
    try:
        yield name
    finally:
        kube.run("delete", "namespace", name, "--wait=false", check=False)


def labelled(name: str, run: str, step: str = "echo hi") -> dict:
    p = plan(name, {"id": "a", "shell": step})
    p["metadata"]["labels"] = {"e2e-run": run}
    return p


def test_get_all_namespaces_selector_wide_name_jsonpath(
    kube: Kube, kubeconfig: str, ns: str, ns2: str
):
    run = uuid.uuid4().hex[:8]
    kube.apply(labelled("one", run), "-n", ns)
    kube.apply(labelled("two", run), "-n", ns2)
    kube.apply(plan("unlabelled", {"id": "a", "shell": "echo hi"}), "-n", ns)
    for n, name in ((ns, "one"), (ns2, "two"), (ns, "unlabelled")):
        wait_plan(kube, n, name, phases=("Succeeded",))

    r = cli(kubeconfig, "get", "-A", "-l", f"e2e-run={run}")
    assert r.returncode == 0, r.stderr
    rows = [line.split() for line in r.stdout.splitlines()]
    assert rows[0] == ["NAMESPACE", "NAME", "PHASE", "STEPS", "FAILED", "DURATION", "AGE"]
    assert sorted(row[:3] for row in rows[1:]) == sorted(
        [[ns, "one", "Succeeded"], [ns2, "two", "Succeeded"]]
    )

    r = cli(kubeconfig, "get", "-n", ns, "-o", "name")
    assert sorted(r.stdout.split()) == ["plan.planops.dev/one", "plan.planops.dev/unlabelled"]
    r = cli(kubeconfig, "get", "-n", ns, "-l", f"e2e-run={run}", "-o", "wide")
    head, row = r.stdout.splitlines()
    assert head.split()[6:] == ["CAPSULE", "RUN", "WAITING"] and row.split()[:2] == [
        "one",
        "Succeeded",
    ]
    assert row.split()[5] == "default"

    template = '{range .items[*]}{.metadata.namespace}/{.metadata.name}={.status.phase}{"\\n"}{end}'
    r = cli(kubeconfig, "get", "-A", "-l", f"e2e-run={run}", "-o", f"jsonpath={template}")
    assert sorted(r.stdout.splitlines()) == sorted([f"{ns}/one=Succeeded", f"{ns2}/two=Succeeded"])
    r = cli(kubeconfig, "get", "one", "-n", ns, "-o", "jsonpath={.status.report.steps[0].output}")
    assert r.stdout == "hi"

    r = cli(kubeconfig, "get", "-n", ns, "-l", "e2e-run in (x")
    assert r.returncode == 2 and "the API server refused the selector" in r.stderr


def test_delete_by_name_and_selector(kube: Kube, kubeconfig: str, ns: str):
    run = uuid.uuid4().hex[:8]
    for name in ("a", "b", "c"):
        kube.apply(labelled(name, run), "-n", ns)
    wait_plan(kube, ns, "a", phases=("Succeeded",))
    jobs = kube.get("jobs", "-n", ns, "-l", "planops.dev/plan=a")["items"]
    assert jobs  # the run's Job, which goes with its Plan

    r = cli(kubeconfig, "delete", "a", "-n", ns)
    assert (r.returncode, r.stdout) == (0, 'plan.planops.dev "a" deleted\n'), r.stderr
    gone = kube.run("get", "plan", "a", "-n", ns, check=False)
    assert "NotFound" in gone.stderr  # --wait (the default): gone when delete returns

    r = cli(kubeconfig, "delete", "a", "-n", ns)
    assert r.returncode == 2 and 'plan.planops.dev "a" not found' in r.stderr
    r = cli(kubeconfig, "delete", "-l", f"e2e-run={run}", "-n", ns, "--wait=false")
    assert r.returncode == 0 and sorted(r.stdout.splitlines()) == [
        'plan.planops.dev "b" deleted',
        'plan.planops.dev "c" deleted',
    ]
    deadline = time.monotonic() + 60  # the garbage collector removes the owned Jobs
    while kube.get("jobs", "-n", ns, "-l", "planops.dev/plan=a")["items"]:
        assert time.monotonic() < deadline, "the deleted Plan's Job is still there"
        time.sleep(1)
    r = cli(kubeconfig, "delete", "--all", "-n", ns)
    assert (r.returncode, r.stderr) == (0, f"No resources found in {ns} namespace.\n")


def _read_until(proc: subprocess.Popen[str], done: re.Pattern[str], timeout: float) -> str:
    """What `proc` printed until a line matches `done` (or the time is up)."""
    assert proc.stdout is not None
    seen, deadline = "", time.monotonic() + timeout
    while time.monotonic() < deadline and not done.search(seen):
        ready, _, _ = select.select([proc.stdout], [], [], 0.5)
        if ready:
            line = proc.stdout.readline()
            if not line:
                break
            seen += line
    return seen


def test_get_watch_prints_each_change_until_ctrl_c(kube: Kube, kubeconfig: str, ns: str):
    kube.apply(plan("first", {"id": "a", "shell": "echo hi"}), "-n", ns)
    wait_plan(kube, ns, "first", phases=("Succeeded",))
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "planops.cli.main",
            "get",
            "-w",
            "-n",
            ns,
            "--kubeconfig",
            kubeconfig,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        # as a terminal's foreground job: a test run started in the background by a
        # non-interactive shell (CI scripts do) inherits SIGINT ignored, and Python keeps an
        # ignored SIGINT ignored, so Ctrl-C would never reach the CLI
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # noqa: PLW1509
    )
    try:
        seen = _read_until(proc, re.compile(r"^first\s+Succeeded", re.M), 30)
        assert seen.splitlines()[0].split()[:2] == ["NAME", "PHASE"]
        kube.apply(plan("later", {"id": "a", "shell": "sh -c 'sleep 2; echo done'"}), "-n", ns)
        seen += _read_until(proc, re.compile(r"^later\s+Succeeded", re.M), 90)
        phases = [line.split()[1] for line in seen.splitlines() if line.startswith("later ")]
        assert phases[-1] == "Succeeded" and len(phases) >= 2, seen  # each change, in order
        assert "Running" in phases or "Pending" in phases, seen
        proc.send_signal(signal.SIGINT)  # Ctrl-C
        _, err = proc.communicate(timeout=15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130 and "Traceback" not in err, err


def test_logs_tail_since_timestamps_from_the_pod_and_from_the_record(
    kube: Kube, kubeconfig: str, ns: str
):
    step = "sh -c 'for i in 1 2 3 4 5; do echo line$i; done'"
    kube.apply(plan("five", {"id": "say", "shell": step}), "-n", ns)
    wait_plan(kube, ns, "five", phases=("Succeeded",))

    r = cli(kubeconfig, "logs", "five", "say", "-n", ns, "--tail", "2")
    assert (r.returncode, r.stdout) == (0, "line4\nline5\n"), r.stderr
    r = cli(kubeconfig, "logs", "five", "say", "-n", ns, "--timestamps", "--tail=1")
    assert STAMPED.match(r.stdout.strip()) and r.stdout.endswith(" line5\n"), r.stdout
    r = cli(kubeconfig, "logs", "five", "say", "-n", ns, "--since", "1h")
    assert r.stdout == "".join(f"line{i}\n" for i in range(1, 6))
    r = cli(kubeconfig, "logs", "five", "say", "-n", ns, "--since-time", "2099-01-01T00:00:00Z")
    assert (r.returncode, r.stdout) == (0, "")  # nothing written after then

    kube.run("delete", "pods", "-n", ns, "-l", "planops.dev/plan=five", "--wait=true")
    r = cli(kubeconfig, "logs", "five", "say", "-n", ns, "--tail", "2", "--timestamps")
    assert (r.returncode, r.stdout) == (0, "line4\nline5\n"), r.stderr
    assert "the step's pod is gone" in r.stderr and "a record keeps no time per line" in r.stderr
    r = cli(kubeconfig, "logs", "five", "say", "-n", ns, "--since-time", "2099-01-01T00:00:00Z")
    assert (r.returncode, r.stdout) == (0, "")  # the step finished before the window


def test_version_and_bash_completion_of_plan_names(
    kube: Kube, kubeconfig: str, ns: str, tmp_path: Path
):
    r = cli(kubeconfig, "version")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].startswith("Client Version: ") and re.match(
        r"Server Version: v1\.\d+", lines[1]
    )
    assert lines[2].startswith("Operator Version: ")  # the suite applies the CRDs by hand

    for name in ("deploy-a", "deploy-b", "build"):
        kube.apply(plan(name, {"id": "a", "shell": "echo hi"}), "-n", ns)
    script = tmp_path / "c.bash"
    made = subprocess.run(
        [sys.executable, "-m", "planops.cli.main", "completion", "bash"],
        capture_output=True,
        text=True,
        check=True,
    )
    script.write_text(made.stdout)
    line = f"kubectl-plan logs --kubeconfig {kubeconfig} -n {ns} dep"
    words = line.split()
    probe = (
        f"source {script}; COMP_LINE='{line}'; COMP_POINT={len(line)}; "
        f"COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; "
        f"_python_argcomplete kubectl-plan dep {words[-2]}; printf '%s\\n' \"${{COMPREPLY[@]}}\""
    )
    path = f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    r = subprocess.run(
        ["bash", "-c", probe],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": path},
        check=False,
    )
    assert sorted(r.stdout.split()) == ["deploy-a", "deploy-b"], r.stderr

    # `kubectl plan logs -n NS dep<TAB>`: kubectl's own completion asks kubectl_complete-plan
    r = subprocess.run(
        [str(KUBECTL), "__complete", "plan", "logs", "-n", ns, "dep"],
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": path, "KUBECONFIG": kubeconfig},
        check=False,
    )
    assert r.stdout.split() == ["deploy-a", "deploy-b", ":4"], r.stderr
