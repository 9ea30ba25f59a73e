"""What a capsule step hands its child plan, and what it takes back: one contract for the local
runner and the cluster, so the two never disagree.

- In: the step's task text (seed 1: a string or `{"objective": "<text>"}`) reaches the child as
  `input.objective`, over the input the Capsule's plan declares itself (the step's text wins).
- Out: the capsule step's output is the child plan's `output` (seed 2's template map, or a fired
  exit's output) as JSON text, when the child plan declares one (so `$child.output` is the text
  and `{{child.json.x}}` reads a field of it); otherwise, as before, the output of the child's
  last settled step.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

OBJECTIVE = "objective"


def objective(step_input: Any) -> str:
    """The task text of a capsule step's (resolved) input; "" when it holds none."""
    if isinstance(step_input, str):
        return step_input
    if isinstance(step_input, Mapping):
        text = step_input.get(OBJECTIVE)
        return text if isinstance(text, str) else ""
    return ""


def child_input(declared: Mapping[str, Any] | None, text: str) -> dict[str, Any]:
    """The child plan's input: what its Capsule's plan declares, with `objective` set to the
    capsule step's task text."""
    return {**(declared or {}), OBJECTIVE: text}


def delegated_output(report: Mapping[str, Any]) -> str | None:
    """A capsule step's output from its child's report (Report.to_json, or the summary a child
    Plan's status holds): the child's `output` as JSON text when it has the key (null stays
    null: the output could not be rendered), else its last record's output. Never raises: a
    status can be edited by hand, and what JSON cannot write reads as no output."""
    if "output" in report:
        value = report["output"]
        try:
            return None if value is None else json.dumps(value)
        except (ValueError, TypeError, RecursionError):
            return None
    steps = report.get("steps")
    if isinstance(steps, list) and steps and isinstance(steps[-1], Mapping):
        last = steps[-1].get("output")
        return last if isinstance(last, str) else None
    return None
