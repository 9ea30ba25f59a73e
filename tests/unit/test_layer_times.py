""".ci/run's closing table: each test layer's tests, span and summed time (tests/layer_times.py),
recorded once per run, also when `pytest -n` workers run the tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.layer_times import layer_of, table

from .helpers import run_pytest

ROOT = Path(__file__).resolve().parents[2]


def test_a_test_is_in_the_layer_of_its_directory_and_kwok_is_its_own():
    assert layer_of("tests/e2e/test_operator.py::test_a") == "e2e"
    assert layer_of("tests/e2e/test_kwok.py::test_b[spec4-x]") == "kwok"
    assert layer_of("tests/gitops/test_argocd.py::test_c") == "gitops"
    assert layer_of("tests/unit/test_chart.py::test_d") == "unit"
    assert layer_of("elsewhere.py::test_e") == "other"


@pytest.mark.parametrize("workers", [[], ["-n", "2"]])
def test_each_layer_is_recorded_once_with_its_tests(tmp_path: Path, workers: list[str]):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text(
        "from tests.layer_times import pytest_runtest_logreport, pytest_sessionfinish\n"
    )
    for path, count in [("tests/e2e/" + "test_a.py", 3), ("tests/e2e/test_kwok.py", 2)]:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        tests = "".join(f"def test_{i}():\n    pass\n\n\n" for i in range(count))
        (tmp_path / path).write_text(tests)
    out = tmp_path / "times.jsonl"
    done = run_pytest(tmp_path, *workers, PLANOPS_LAYER_TIMES=str(out), PLANOPS_LAYER_PHASE="try")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted((r["phase"], r["layer"], r["tests"]) for r in rows) == [
        ("try", "e2e", 3),
        ("try", "kwok", 2),
    ]
    assert all(r["span_s"] >= 0 and r["busy_s"] >= 0 for r in rows)
    printed = table(out.read_text().splitlines()).splitlines()
    assert printed[0].split()[:3] == ["phase", "layer", "tests"] and len(printed) == 3
