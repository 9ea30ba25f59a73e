"""The chart's archive values (charts/planops): off by default; on, the operator gets --archive
and its DSN from the named Secret (never as an argument); the schema refuses an archive without
a Secret to read the DSN from. Rendered by the real helm."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from planops.main import _parser
from tests.unit.test_chart import CHART, kinds, render

pytestmark = [pytest.mark.cluster, pytest.mark.helm]


def _container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (deploy,) = kinds(docs, "Deployment")
    return dict(deploy["spec"]["template"]["spec"]["containers"][0])


def test_the_archive_is_off_by_default(helm: str):
    c = _container(render(helm))
    assert not [a for a in c["args"] if a.startswith("--archive")]
    assert "PLANOPS_ARCHIVE_DSN" not in {e["name"] for e in c["env"]}


def test_the_archive_reads_its_dsn_from_the_secret_and_never_from_an_argument(helm: str):
    c = _container(
        render(
            helm,
            "--set",
            "archive.enabled=true",
            "--set",
            "archive.dsnSecret.name=pg",
            "--set",
            "archive.queue=500",
        )
    )
    assert "--archive" in c["args"] and "--archive-queue=500" in c["args"]
    (env,) = [e for e in c["env"] if e["name"] == "PLANOPS_ARCHIVE_DSN"]
    assert env["valueFrom"]["secretKeyRef"] == {"name": "pg", "key": "dsn"}
    assert not [a for a in c["args"] if "dsn" in a.lower()]
    _parser().parse_args(c["args"])  # every flag the chart passes is one the operator takes


@pytest.mark.parametrize(
    "bad",
    [
        ["--set", "archive.enabled=true"],  # no Secret named
        ["--set", "archive.enabled=true", "--set", "archive.dsnSecret.key="],
        ["--set", "archive.queue=0"],
        ["--set", "archive.dsn=postgres://x"],  # a DSN in the values: refused, not ignored
    ],
)
def test_the_schema_refuses_an_archive_it_could_not_run(helm: str, bad: list[str]):
    done = subprocess.run(
        [helm, "template", "po", str(CHART), *bad], capture_output=True, text=True
    )
    assert done.returncode != 0 and "values don't meet the specifications" in done.stderr
