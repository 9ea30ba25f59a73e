"""Which tests `pytest -n N` (pytest-xdist, .ci/run) keeps together on one worker, and why.

A group's tests run one after another on one worker; every other test is handed out alone.
Groups are handed out first, the largest first, so the long ones start at once. Why each
group exists: docs/test-cluster.md, "Parallel runs".

The groups are named here by where the tests are (a file, a directory, or file::test), not by
xdist's own `xdist_group` marker: `--dist loadgroup` carries the marker to the scheduler by
appending it to each test's node id, which pytest 9.2's structured node ids silently undo
(pytest-dev/pytest-xdist#1386: every test is then handed out alone). This scheduler reads the
node ids as they are, whatever the pytest version; tests/unit/test_parallel_runs.py checks both
that it groups and that every name below still names a test.
"""

from __future__ import annotations

from typing import Any

import pytest
from xdist.scheduler import LoadScopeScheduling

#: where the tests are -> their group
GROUPS = {
    # what acts on the whole cluster at once, kept from overlapping: the chart's release
    # (cluster-wide admission policies and webhook, the CRDs taken over, an operator that acts on
    # every ClusterScheduledPlan) and the ClusterScheduledPlan tests (every operator on the
    # cluster reconciles each one)
    "tests/e2e/test_chart_install.py": "cluster-wide",
    # the operator image built once, by the worker that builds it for the chart install
    "tests/e2e/test_uiserver_chart.py": "cluster-wide",
    "tests/e2e/test_chart_triggers_install.py": "cluster-wide",
    "tests/e2e/test_scheduled.py": "cluster-wide",
    "tests/e2e/test_tenancy.py::test_revoking_use_stops_a_cluster_scheduled_plans_runs_in_that_namespace": (  # noqa: E501
        "cluster-wide"
    ),
    # simulated nodes started once by the module; a second session would take them for the
    # cluster's own (tests/cluster/kwok.py simulated_nodes) and lose them when the first stops
    "tests/e2e/test_kwok.py": "kwok",
    # one Argo CD, and one operator watching gitops-*
    "tests/gitops/": "gitops",
    # an operator of the module's own (and a browser), started once
    "tests/e2e/test_ui_browser.py": "ui-browser",
    "tests/e2e/test_uiserver_browser.py": "uiserver-browser",
    "tests/e2e/test_cli_views.py": "cli-views",
    "tests/e2e/test_cli_follow.py": "cli-follow",
}


def _within(nodeid: str, where: str) -> bool:
    if where.endswith("/"):
        return nodeid.startswith(where)
    return nodeid == where or nodeid.startswith((where + "::", where + "["))


def group_of(nodeid: str, groups: dict[str, str] = GROUPS) -> str | None:
    """The group of the test `nodeid`, or None: that of the longest name in `groups` it is
    within (a directory, a file, a test and its parametrized cases)."""
    found = [where for where in groups if _within(nodeid, where)]
    return groups[max(found, key=len)] if found else None


class GroupScheduling(LoadScopeScheduling):
    """xdist's scope scheduling, whose scopes are the groups above (a test of none: itself)."""

    groups = GROUPS

    def _split_scope(self, nodeid: str) -> str:
        group = group_of(nodeid, self.groups)
        return f"group {group}" if group else nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`pytest -n N` (xdist's `--dist load`, which -n implies) schedules with the groups."""
    return GroupScheduling(config, log) if config.getvalue("dist") == "load" else None
