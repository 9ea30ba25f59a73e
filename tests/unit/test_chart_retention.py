"""The chart's retention value (charts/planops): no TTL by default; set, the operator gets
--ttl-seconds-after-finished as a whole number of seconds (a large one too: helm reads numbers
as floats, which it would print as 2.592e+06); the schema refuses a negative one. Rendered by
the real helm."""

from __future__ import annotations

import subprocess
from typing import Any

import pytest

from planops.main import _parser
from tests.unit.test_chart import CHART, kinds, render

pytestmark = [pytest.mark.cluster, pytest.mark.helm]


def _args(docs: list[dict[str, Any]]) -> list[str]:
    (deploy,) = kinds(docs, "Deployment")
    return list(deploy["spec"]["template"]["spec"]["containers"][0]["args"])


def test_finished_plans_are_kept_by_default(helm: str):
    assert not [a for a in _args(render(helm)) if a.startswith("--ttl")]


@pytest.mark.parametrize("seconds", [0, 2592000])
def test_the_default_ttl_reaches_the_operator_as_whole_seconds(helm: str, seconds: int):
    args = _args(render(helm, "--set", f"retention.ttlSecondsAfterFinished={seconds}"))
    assert f"--ttl-seconds-after-finished={seconds}" in args
    assert _parser().parse_args(args).ttl_seconds_after_finished == seconds


def test_a_default_ttl_from_a_values_file_is_not_printed_as_a_float(helm: str, tmp_path):
    values = tmp_path / "v.yaml"
    values.write_text("retention:\n  ttlSecondsAfterFinished: 2592000\n")
    assert "--ttl-seconds-after-finished=2592000" in _args(render(helm, "-f", str(values)))


def test_the_schema_refuses_a_negative_ttl(helm: str):
    done = subprocess.run(
        [helm, "template", "po", str(CHART), "--set", "retention.ttlSecondsAfterFinished=-1"],
        capture_output=True,
        text=True,
    )
    assert done.returncode != 0 and "ttlSecondsAfterFinished" in done.stderr
