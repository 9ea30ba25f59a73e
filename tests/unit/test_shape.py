"""engine.shape: a spec's derived facts are computed once per spec object, shared by every Run
restored from it, and forgotten with the spec."""

from __future__ import annotations

import gc

import pytest

from planops.api import PlanSpec
from planops.engine import Run, shape
from planops.engine.facts import Facts
from planops.engine.report import StepRecord


def _spec() -> PlanSpec:
    return PlanSpec.model_validate(
        {
            "steps": [
                {"id": "a", "shell": "true"},
                {"id": "t", "tool": "x"},
                {
                    "id": "b",
                    "shell": "true",
                    "dependsOn": ["a"],
                    "if": "$a.status == 'success'",
                },
                {"id": "u", "tool": "x"},
            ]
        }
    )


def test_runs_of_one_spec_derive_its_shape_once(monkeypatch: pytest.MonkeyPatch):
    spec = _spec()
    made = []
    real = shape.Shape.of
    monkeypatch.setattr(shape.Shape, "of", classmethod(lambda cls, s: made.append(s) or real(s)))
    first = Run("p", spec)
    again = Run.restore("p", spec, Facts((StepRecord("a", "success", "", None, 1, 1.0, 2.0),), ()))
    assert made == [spec]
    assert first.graph is again.graph
    other = _spec()
    Run("p", other)
    assert made == [spec, other]  # another object (a new generation): its own


def test_a_shape_is_forgotten_with_its_spec():
    spec = _spec()
    Run("p", spec)
    key = id(spec)
    assert key in shape._shapes
    del spec
    gc.collect()
    assert key not in shape._shapes


def test_the_shape_is_what_the_decider_derived_per_run():
    s = shape.shape_of(_spec())
    assert s.kinds == ("shell", "tool", "shell", "tool")
    assert s.roots_other == (0,) and s.roots_tools == (1, 3)
    assert s.unsettled_deps == (0, 0, 1, 0)
    assert set(s.conditions) == {2}
    assert s.has_templates == (False, False, False, False)


def test_a_fresh_run_starts_its_roots_in_order_tools_one_at_a_time():
    run = Run("p", _spec())
    first = [d.step.id for d in run.decide(0.0).dispatch]
    assert first == ["a", "t"]  # b waits for a; u waits for the tool t
    run.finish_attempt("t", 1, "success", "", None, 1.0)
    assert [d.step.id for d in run.decide(1.0).dispatch] == ["u"]
