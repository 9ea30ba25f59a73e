"""`pytest -n N` on one cluster, as .ci/run runs the cluster layers side by side: each group of
tests/xdist_groups.py stays on one worker and every name there still names a test; the workers
never start a cluster each; what they change cluster-wide is changed one at a time."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import cluster_lock, no_cluster_of_our_own
from tests.xdist_groups import GROUPS, group_of

from .helpers import run_pytest

ROOT = Path(__file__).resolve().parents[2]


def test_every_group_names_tests_that_exist():
    for where in GROUPS:
        path, _, test = where.partition("::")
        assert (ROOT / path).exists(), where
        if test:
            assert f"def {test}(" in (ROOT / path).read_text(), where


def test_a_test_is_in_the_group_of_the_longest_name_it_is_within():
    assert group_of("tests/e2e/test_kwok.py::test_x[spec4-spec.nodeSelector.zone]") == "kwok"
    assert group_of("tests/gitops/test_argocd.py::test_y") == "gitops"
    assert group_of("tests/e2e/test_chart_install.py::test_z") == "cluster-wide"
    csp = "tests/e2e/test_tenancy.py::test_revoking_use_stops_a_cluster_scheduled_plans_runs_in_that_namespace"  # noqa: E501
    assert group_of(csp) == "cluster-wide"
    assert group_of("tests/e2e/test_tenancy.py::test_an_author_runs_a_plan") is None
    assert group_of("tests/e2e/test_kwok.py" + "c::t") is None  # not the module itself
    assert group_of("tests/e2e/test_operator.py::test_a") is None
    groups = {"a.py": "file", "a.py::test_one": "one"}
    assert group_of("a.py::test_one[1]", groups) == "one"
    assert group_of("a.py::test_two", groups) == "file"


#: the real hook and scheduler, with a group of the temporary directory's tests
CONFTEST = """
from tests import xdist_groups
from tests.xdist_groups import pytest_xdist_make_scheduler

xdist_groups.GroupScheduling.groups = {"test_grouped.py": "g"}
"""
TESTS = """
import os, pathlib

def _ran(name):
    out = pathlib.Path(os.environ["RAN"]) / name
    out.write_text(os.environ["PYTEST_XDIST_WORKER"])
"""


def test_pytest_n_runs_a_group_on_one_worker_and_spreads_the_rest(tmp_path: Path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text(CONFTEST)
    for module in ("grouped", "loose"):
        cases = "".join(f"\ndef test_{i}():\n    _ran('{module}-{i}')\n" for i in range(6))
        (tmp_path / f"test_{module}.py").write_text(TESTS + cases)
    ran = tmp_path / "ran"
    ran.mkdir()
    done = run_pytest(tmp_path, "-n", "2", RAN=str(ran))
    assert done.returncode == 0, done.stdout + done.stderr
    workers = {f.name: f.read_text() for f in ran.iterdir()}
    grouped = Counter(w for name, w in workers.items() if name.startswith("grouped-"))
    assert sum(grouped.values()) == 6 and len(grouped) == 1, workers
    assert len(workers) == 12 and set(workers.values()) == {"gw0", "gw1"}, workers


def test_the_suite_schedules_with_the_groups():
    from tests import conftest, xdist_groups  # noqa: PLC0415

    assert conftest.pytest_xdist_make_scheduler is xdist_groups.pytest_xdist_make_scheduler


def test_a_pytest_n_worker_never_starts_a_cluster_of_its_own(monkeypatch: pytest.MonkeyPatch):
    """Each worker would start one, and only one kubelet node runs here: the `kubeconfig`
    fixture fails with this instead, unless PLANOPS_TEST_KUBECONFIG names a running cluster."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)
    assert no_cluster_of_our_own() is None
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw1")
    refused = no_cluster_of_our_own()
    assert refused is not None and "set PLANOPS_TEST_KUBECONFIG" in refused


def test_the_cluster_lock_is_held_by_one_process_at_a_time(tmp_path: Path):
    kubeconfig = str(tmp_path / "admin.kubeconfig")
    probe = (
        "import fcntl, sys\n"
        "sys.path.insert(0, sys.argv[1])\n"
        "from tests.conftest import cluster_lock_file\n"
        "f = cluster_lock_file(sys.argv[2], 'crds').open('a')\n"
        "try:\n    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB); print('free')\n"
        "except OSError:\n    print('held')\n"
    )

    def other() -> str:
        args = [sys.executable, "-c", probe, str(ROOT), kubeconfig]
        return subprocess.run(args, capture_output=True, text=True, check=True).stdout.strip()

    with cluster_lock(kubeconfig, "crds"):
        assert other() == "held"
        with cluster_lock(str(tmp_path / "another.kubeconfig"), "crds"):
            pass  # another cluster's lock is another lock
    assert other() == "free"
